// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/evictd/evictd/pkg/hostpaths/hostfile"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Host paths kubeadm writes (and most distributions built on it keep).
const (
	KubeadmConfig   = "/var/lib/kubelet/config.yaml"
	KubeadmFlagsEnv = "/var/lib/kubelet/kubeadm-flags.env"
)

// Result is what the kubelet's eviction settings came to.
type Result struct {
	// Hard is the kubelet's effective hard thresholds by signal; a signal
	// missing has no kubelet threshold.
	Hard map[thresholds.Signal]thresholds.Value
	// Raw is the same, as the kubelet's map spells it.
	Raw map[string]string
	// From says where they came from, for the log: the process or file,
	// the config file and drop-ins read, the flags that overrode them.
	From string
	// Ignored lists the signals the kubelet has that evictd does not watch.
	Ignored []string
	// HardFrom says where each of Raw's entries came from: a config file,
	// a drop-in, the flag, or the kubelet's defaults.
	HardFrom map[string]string
	// ImageGC is the kubelet's image garbage collection thresholds.
	ImageGC ImageGC
}

// Options says where to look.
type Options struct {
	// HostRoot is the directory the host's / is mounted at.
	HostRoot string
	// ConfigPath, when set, is the kubelet's config file (a host path,
	// read under HostRoot) in place of the one its --config names.
	ConfigPath string
	// Refused hears of each process named kubelet that FindProcess passes
	// over (nil: none is told).
	Refused func(Refused)
}

// ErrNotFound: neither a kubelet process nor kubeadm's files on the host.
var ErrNotFound = errors.New("no kubelet found")

// Read finds the kubelet's eviction settings under o.HostRoot: the kubelet
// process's flags (its cmdline in HOST/proc; a process outside the pods'
// cgroups, FindProcess), else, on k3s or MicroK8s, an ErrNotFound naming
// where they keep them (FindEmbedded), else kubeadm's flags file,
// and the config file --config names (or o.ConfigPath), else kubeadm's
// /var/lib/kubelet/config.yaml, with the --config-dir drop-ins. Every file
// is read as a regular file of bounded size (hostfile). Every error names
// the file and the value, and ReasonOf says why in one word. What cannot be
// known is an error, never a guess: a relative path whose base, the
// kubelet's working directory, cannot be read (RelativePathError), or a
// /proc that hides the kubelet process (HiddenError).
func Read(o Options) (*Result, error) {
	var (
		args Args
		from []string
		err  error
	)
	procDir := filepath.Join(o.HostRoot, "proc")
	proc, scanErr := FindProcess(procDir, o.Refused)
	pid, argv := proc.PID, proc.Argv
	configVia := ""
	var hidden *HiddenError
	switch {
	case argv != nil:
		if args, err = ParseArgs(argv[1:]); err != nil {
			return nil, invalid(fmt.Errorf("kubelet pid %d command line: %w", pid, err))
		}
		from = append(from, proc.Describe())
		configVia = fmt.Sprintf("--config of kubelet pid %d", pid)
	case errors.As(scanErr, &hidden) && o.ConfigPath == "":
		// kubeadm's files would be read for a kubelet that may well run
		// with other flags and another config, unseen.
		return nil, fmt.Errorf("%w: kubeadm's files in its place would be a guess", scanErr)
	case o.ConfigPath == "":
		// k3s and MicroK8s run the kubelet inside a process of their
		// own and keep its arguments elsewhere: kubeadm's paths would
		// be stale or missing there.
		emb, err := FindEmbedded(procDir, o.Refused)
		if err == nil && emb != nil {
			return nil, fmt.Errorf("%w: %w in %s (%s pid %d, cgroup %s), which keeps its arguments in %s; evictd does not read them: give --kubelet-config=PATH, a KubeletConfiguration with the node's thresholds, or --kubelet-thresholds=ignore",
				ErrNotFound, ErrEmbedded, emb.Distribution, path.Base(strings.Fields(emb.Process.Argv[0])[0]), emb.Process.PID, emb.Process.Cgroup, emb.Keeps)
		}
		fallthrough
	default:
		env := filepath.Join(o.HostRoot, KubeadmFlagsEnv)
		data, rerr := hostfile.Read(env, hostfile.ConfigLimit)
		switch {
		case rerr == nil:
			fl, perr := ParseKubeadmEnv(data)
			if perr == nil {
				args, perr = ParseArgs(fl)
			}
			if perr != nil {
				return nil, invalid(fmt.Errorf("%s: %w", KubeadmFlagsEnv, perr))
			}
			from = append(from, KubeadmFlagsEnv)
		case !errors.Is(rerr, fs.ErrNotExist):
			return nil, fmt.Errorf("%s: %w", KubeadmFlagsEnv, rerr)
		}
		if args.Config == "" {
			// kubeadm passes --config in its systemd drop-in, not the env
			// file; this is its path.
			args.Config = KubeadmConfig
			configVia = "kubeadm's default path, no kubelet process found"
			if scanErr != nil {
				configVia += " (" + scanErr.Error() + ")"
			}
		}
	}
	if o.ConfigPath != "" {
		args.Config, configVia = o.ConfigPath, "--kubelet-config"
	}

	c := NoFile()
	if args.Config != "" {
		p, err := kubeletPath(o.HostRoot, pid, "--config", args.Config)
		if err != nil {
			return nil, err
		}
		data, rerr := readHost(o.HostRoot, p)
		switch {
		case errors.Is(rerr, fs.ErrNotExist) && argv == nil && o.ConfigPath == "" && len(from) == 0:
			return nil, fmt.Errorf("%w under host root %s: no kubelet process in %s, no %s, no %s", ErrNotFound,
				o.HostRoot, procDir, KubeadmFlagsEnv, KubeadmConfig)
		case errors.Is(rerr, fs.ErrNotExist):
			return nil, notVisible(o.HostRoot, p, configVia)
		case rerr != nil:
			return nil, fmt.Errorf("kubelet config %s: %w", p, rerr)
		}
		f, err := ParseFile(data)
		if err != nil {
			return nil, invalid(fmt.Errorf("kubelet config %s: %w", p, err))
		}
		c = LoadFile(f, p)
		from = append(from, "config "+p)
	} else {
		from = append(from, "no --config")
	}
	if args.ConfigDir != "" {
		dir, err := kubeletPath(o.HostRoot, pid, "--config-dir", args.ConfigDir)
		if err != nil {
			return nil, err
		}
		dropins, err := readDropins(o.HostRoot, dir, pid)
		if err != nil {
			return nil, err
		}
		if c, err = MergeDropins(c, dropins); err != nil {
			return nil, invalid(fmt.Errorf("kubelet config dir %s: %w", dir, err))
		}
		if len(dropins) > 0 {
			names := make([]string, len(dropins))
			for i, d := range dropins {
				names[i] = strings.TrimPrefix(d.Path, dir+"/")
			}
			from = append(from, fmt.Sprintf("drop-ins %s in %s", strings.Join(names, ","), dir))
		}
	}
	if args.Hard != nil {
		from = append(from, "flag --"+flagHard)
	}
	c = ApplyFlags(c, args)
	notes := map[string]bool{}
	for _, f := range c.HardFrom {
		notes[f] = true
	}
	switch {
	case len(c.Hard) == 0 && args.Config == "":
		from = append(from, "no evictionHard: without --config the kubelet has no hard thresholds")
	case len(c.Hard) == 0:
		from = append(from, "an empty evictionHard: the kubelet has no hard thresholds")
	case notes[fromDefault]:
		from = append(from, "no evictionHard: the kubelet's defaults")
	case notes[fromMergeDefault]:
		from = append(from, "mergeDefaultEvictionSettings: defaults fill the rest")
	}
	raw := c.Hard
	if raw == nil {
		raw = map[string]string{}
	}
	// The kubelet copies memory.available to allocatableMemory.available
	// when it enforces allocatable for pods and is not told to leave
	// eviction out of it.
	allocatable := slices.Contains(c.EnforceNodeAllocatable, "pods") && !args.AllocatableIgnoresEviction
	hard, ignored, err := ParseHardFor(raw, allocatable)
	if err != nil {
		return nil, invalid(fmt.Errorf("kubelet evictionHard from %s: %w", strings.Join(from, ", "), err))
	}
	gc, err := c.ImageGC()
	if err != nil {
		return nil, invalid(fmt.Errorf("kubelet image garbage collection from %s: %w", strings.Join(from, ", "), err))
	}
	hardFrom := c.HardFrom
	if hardFrom == nil {
		hardFrom = map[string]string{}
	}
	return &Result{Hard: hard, Raw: raw, HardFrom: hardFrom, From: strings.Join(from, ", "), Ignored: ignored, ImageGC: gc}, nil
}

// kubeletPath makes the path p that the kubelet pid was given with flag
// absolute, as the kubelet reads it: a relative one from its working
// directory, /proc/PID/cwd. That link can be read only with ptrace access
// to the kubelet (CAP_SYS_PTRACE, which evictd is not granted, or its
// user and capabilities); when it cannot, or there is no process (pid 0),
// p is unknown, a RelativePathError, never read from / in its place.
func kubeletPath(hostRoot string, pid int, flag, p string) (string, error) {
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	if pid == 0 {
		return "", &RelativePathError{Flag: flag, Path: p}
	}
	cwd := filepath.Join(hostRoot, "proc", strconv.Itoa(pid), "cwd")
	d, err := os.Readlink(cwd)
	switch {
	case err != nil:
		return "", &RelativePathError{Flag: flag, Path: p, PID: pid, Err: err}
	case strings.HasSuffix(d, " (deleted)"):
		return "", &RelativePathError{Flag: flag, Path: p, PID: pid, Err: fmt.Errorf("%s: the directory %s was deleted", cwd, strings.TrimSuffix(d, " (deleted)"))}
	case !path.IsAbs(d):
		return "", &RelativePathError{Flag: flag, Path: p, PID: pid, Err: fmt.Errorf("%s reads %q, not a path", cwd, d)}
	}
	return path.Join(d, p), nil
}

// readDropins reads the drop-ins of dir (a host path) as the kubelet's
// mergeKubeletConfigurations finds them: filepath.WalkDir, so in lexical
// order of the names in each directory, subdirectories walked where their
// names fall; every file whose extension is .conf, the others skipped; a
// symbolic link read as the file it points to but never walked as a
// directory (nor dir itself, when it is one: the kubelet then reads no
// drop-in).
func readDropins(hostRoot, dir string, pid int) ([]Dropin, error) {
	// dir's parents are followed as the kubelet's open would, within the
	// host root; dir itself is not (WalkDir does not).
	parent, err := resolveHost(hostRoot, path.Dir(dir))
	if err == nil {
		_, err = os.Lstat(filepath.Join(hostRoot, parent, path.Base(dir)))
	}
	if errors.Is(err, fs.ErrNotExist) {
		via := fmt.Sprintf("--config-dir of kubelet pid %d", pid)
		if pid == 0 {
			via = "--config-dir in " + KubeadmFlagsEnv
		}
		return nil, notVisible(hostRoot, dir, via)
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet config dir %s: %w", dir, err)
	}
	root := filepath.Join(hostRoot, parent, path.Base(dir))
	var out []Dropin
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(d.Name()) != ".conf" {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		hp := path.Join(dir, filepath.ToSlash(rel))
		if rel == "." {
			hp = dir
		}
		data, err := readHost(hostRoot, hp)
		if err != nil {
			return fmt.Errorf("kubelet config drop-in %s: %w", hp, err)
		}
		js, err := ParseDropin(data)
		if err != nil {
			return invalid(fmt.Errorf("kubelet config drop-in %s: %w", hp, err))
		}
		out = append(out, Dropin{Path: hp, JSON: js})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kubelet config dir %s: %w", dir, err)
	}
	return out, nil
}

// readHost reads the host's file p under hostRoot, following symbolic
// links as the host would: an absolute target from the host's /. It must be
// a regular file of at most hostfile.ConfigLimit bytes.
func readHost(hostRoot, p string) ([]byte, error) {
	r, err := resolveHost(hostRoot, p)
	if err != nil {
		return nil, err
	}
	return hostfile.Read(filepath.Join(hostRoot, r), hostfile.ConfigLimit)
}

// resolveHost resolves the symbolic links of the host path p, component by
// component, each absolute target taken from the host root, not evictd's
// own /; the result is a host path free of links, "..", or ".".
func resolveHost(hostRoot, p string) (string, error) {
	const maxLinks = 40 // the kernel's MAXSYMLINKS
	links := 0
	done := "/"
	todo := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, name)
		fi, err := os.Lstat(filepath.Join(hostRoot, next))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			// A missing component is the caller's error to report.
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(filepath.Join(hostRoot, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return done, nil
}
