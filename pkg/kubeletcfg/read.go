// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

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
}

// NotVisibleError is a file or directory the kubelet reads that does not
// exist under the host root: on a node it usually means the directory is
// not mounted into evictd's pod.
type NotVisibleError struct {
	// Path is the host path; Via says who named it.
	Path, Via, HostRoot string
}

func (e *NotVisibleError) Error() string {
	return fmt.Sprintf("kubelet config %s (%s) is not visible under host root %s: mount its directory read-only at %s (the chart's kubeletConfig.hostPath, or the manifest's commented kubelet-config volume), or give --kubelet-config",
		e.Path, e.Via, e.HostRoot, filepath.Join(e.HostRoot, path.Dir(e.Path)))
}

// ErrNotFound: neither a kubelet process nor kubeadm's files on the host.
var ErrNotFound = errors.New("no kubelet found")

// Read finds the kubelet's eviction settings under o.HostRoot: the kubelet
// process's flags (its cmdline in HOST/proc), else kubeadm's flags file,
// and the config file --config names (or o.ConfigPath), else kubeadm's
// /var/lib/kubelet/config.yaml, with the --config-dir drop-ins. Every error
// names the file and the value.
func Read(o Options) (*Result, error) {
	var (
		args Args
		from []string
		err  error
	)
	pid, argv, scanErr := FindProcess(filepath.Join(o.HostRoot, "proc"))
	configVia := ""
	switch {
	case argv != nil:
		if args, err = ParseArgs(argv[1:]); err != nil {
			return nil, fmt.Errorf("kubelet pid %d command line: %w", pid, err)
		}
		from = append(from, fmt.Sprintf("kubelet pid %d", pid))
		configVia = fmt.Sprintf("--config of kubelet pid %d", pid)
	default:
		env := filepath.Join(o.HostRoot, KubeadmFlagsEnv)
		data, rerr := os.ReadFile(env)
		switch {
		case rerr == nil:
			fl, perr := ParseKubeadmEnv(data)
			if perr == nil {
				args, perr = ParseArgs(fl)
			}
			if perr != nil {
				return nil, fmt.Errorf("%s: %w", KubeadmFlagsEnv, perr)
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

	var file File
	if args.Config != "" {
		p := args.Config
		if !path.IsAbs(p) {
			// The kubelet reads it relative to its working directory;
			// systemd starts it in /.
			p = "/" + p
		}
		data, rerr := os.ReadFile(filepath.Join(o.HostRoot, p))
		switch {
		case errors.Is(rerr, fs.ErrNotExist) && argv == nil && o.ConfigPath == "" && len(from) == 0:
			return nil, fmt.Errorf("%w under host root %s: no kubelet process in %s, no %s, no %s", ErrNotFound,
				o.HostRoot, filepath.Join(o.HostRoot, "proc"), KubeadmFlagsEnv, KubeadmConfig)
		case errors.Is(rerr, fs.ErrNotExist):
			return nil, &NotVisibleError{Path: p, Via: configVia, HostRoot: o.HostRoot}
		case rerr != nil:
			return nil, fmt.Errorf("kubelet config %s: %w", p, rerr)
		}
		if file, err = ParseFile(data); err != nil {
			return nil, fmt.Errorf("kubelet config %s: %w", p, err)
		}
		from = append(from, "config "+p)
	}
	if args.ConfigDir != "" {
		dropins, names, err := readDropins(o.HostRoot, args.ConfigDir, pid)
		if err != nil {
			return nil, err
		}
		file = Merge(file, dropins...)
		if len(names) > 0 {
			from = append(from, fmt.Sprintf("drop-ins %s in %s", strings.Join(names, ","), args.ConfigDir))
		}
	}
	if args.Hard != nil {
		from = append(from, "flag --"+flagHard)
	}
	raw := EffectiveHard(file, args)
	switch {
	case file.Hard == nil && args.Hard == nil:
		from = append(from, "no evictionHard: the kubelet's defaults")
	case file.MergeDefaults != nil && *file.MergeDefaults:
		from = append(from, "mergeDefaultEvictionSettings: defaults fill the rest")
	}
	hard, ignored, err := ParseHard(raw)
	if err != nil {
		return nil, fmt.Errorf("kubelet evictionHard from %s: %w", strings.Join(from, ", "), err)
	}
	gc, err := EffectiveImageGC(file, args)
	if err != nil {
		return nil, fmt.Errorf("kubelet image garbage collection from %s: %w", strings.Join(from, ", "), err)
	}
	return &Result{Hard: hard, Raw: raw, From: strings.Join(from, ", "), Ignored: ignored, ImageGC: gc}, nil
}

// readDropins reads dir's *.conf files, in file-name order, as the
// kubelet's --config-dir does.
func readDropins(hostRoot, dir string, pid int) ([]File, []string, error) {
	if !path.IsAbs(dir) {
		dir = "/" + dir
	}
	entries, err := os.ReadDir(filepath.Join(hostRoot, dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &NotVisibleError{Path: dir, Via: fmt.Sprintf("--config-dir of kubelet pid %d", pid), HostRoot: hostRoot}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet config dir %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".conf") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	files := make([]File, 0, len(names))
	for _, n := range names {
		p := path.Join(dir, n)
		data, err := os.ReadFile(filepath.Join(hostRoot, p))
		if err != nil {
			return nil, nil, fmt.Errorf("kubelet config drop-in %s: %w", p, err)
		}
		f, err := ParseFile(data)
		if err != nil {
			return nil, nil, fmt.Errorf("kubelet config drop-in %s: %w", p, err)
		}
		files = append(files, f)
	}
	return files, names, nil
}

// FindProcess returns the lowest PID under procDir whose command line is a
// kubelet's, and that command line; argv is nil when there is none. err
// says why procDir could not be listed (a missing mount).
func FindProcess(procDir string) (pid int, argv []string, err error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return 0, nil, fmt.Errorf("list %s: %w", procDir, err)
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	sort.Ints(pids)
	for _, p := range pids {
		// A process that exits meanwhile, or a kernel thread's empty
		// cmdline, is no kubelet: skipped.
		data, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(p), "cmdline"))
		if err != nil {
			continue
		}
		if a := SplitCmdline(data); IsKubelet(a) {
			return p, a, nil
		}
	}
	return 0, nil, nil
}
