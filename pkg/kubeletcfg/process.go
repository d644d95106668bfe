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
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/pkg/hostpaths/hostfile"
)

// Process is the kubelet process found under the host's /proc.
type Process struct {
	// PID is 0, and Argv nil, when there is none.
	PID  int
	Argv []string
	// Cgroup is its cgroup (CgroupPlace.Path); Unit says that it names
	// kubelet.service, the confirmation a systemd node gives.
	Cgroup string
	Unit   bool
}

// Describe names the process for the log: "kubelet pid 640 (cgroup
// /system.slice/kubelet.service)".
func (p Process) Describe() string {
	return fmt.Sprintf("kubelet pid %d (cgroup %s)", p.PID, p.Cgroup)
}

// Refused is a process that calls itself a kubelet and is not taken for
// one: it runs in a pod's cgroup (an impostor a pod's author started with
// `exec -a kubelet`), or its cgroup cannot be told.
type Refused struct {
	PID int
	// Name is its argv[0]; Cgroup its /proc/PID/cgroup line that put it
	// among the pods (or its path), Why what was wrong.
	Name, Cgroup, Why string
}

// FindProcess returns the lowest PID under procDir whose command line is a
// kubelet's and which runs outside the pods' cgroup tree (ParseCgroup):
// the kubelet's own host would not start it in a pod, and a pod's process
// can take any name. Every process named kubelet that is passed over is
// handed to refused (nil: not told). The zero Process says there is none;
// err says why procDir could not be listed (a missing mount), or, a
// *HiddenError, that it hides processes from evictd (hidepid), so that none
// found says nothing. Each file is read as a regular file of bounded size
// (hostfile).
func FindProcess(procDir string, refused func(Refused)) (Process, error) {
	return findProcess(procDir, IsKubelet, refused)
}

// findProcess is FindProcess for the processes whose command line is
// match's.
func findProcess(procDir string, match func([]string) bool, refused func(Refused)) (Process, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return Process{}, fmt.Errorf("list %s: %w", procDir, err)
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	sort.Ints(pids)
	denied, firstDenied := 0, error(nil)
	for _, p := range pids {
		// A process that exits meanwhile, or a kernel thread's empty
		// cmdline, is no kubelet: skipped. One whose cmdline is refused
		// (hidepid=noaccess) may be the kubelet: counted.
		dir := filepath.Join(procDir, strconv.Itoa(p))
		data, err := hostfile.Read(filepath.Join(dir, "cmdline"), hostfile.ProcLimit)
		if isPermission(err) {
			if denied++; firstDenied == nil {
				firstDenied = err
			}
		}
		if err != nil {
			continue
		}
		argv := SplitCmdline(data)
		if !match(argv) {
			continue
		}
		place, why := cgroupOf(dir)
		switch {
		case why == "" && !place.InPods:
			return Process{PID: p, Argv: argv, Cgroup: place.Path, Unit: place.Unit}, nil
		case why == "gone":
			continue
		case why == "":
			why = "it runs in a pod's cgroup, under the kubelet's pods tree: a pod's process, not the kubelet"
		}
		if refused != nil {
			cg := place.PodsLine
			if cg == "" {
				cg = place.Path
			}
			refused(Refused{PID: p, Name: argv[0], Cgroup: cg, Why: why})
		}
	}
	switch {
	case denied > 0:
		return Process{}, &HiddenError{Proc: procDir, Why: fmt.Sprintf("the command lines of %d of its %d processes are refused: %v", denied, len(pids), firstDenied)}
	case !slices.Contains(pids, 1):
		// PID 1 is on every host; a /proc without it hides the
		// processes of others from evictd, when it is mounted so.
		if opt := hidepidOf(procDir); opt != "" {
			return Process{}, &HiddenError{Proc: procDir, Why: "mounted with " + opt + ", it does not list PID 1"}
		}
	}
	return Process{}, nil
}

// cgroupOf reads dir/cgroup; why is "gone" for a process that exited
// (ENOENT, or ESRCH from a read), else
// what kept its place from being told ("" when it was).
func cgroupOf(dir string) (CgroupPlace, string) {
	data, err := hostfile.Read(filepath.Join(dir, "cgroup"), hostfile.ProcLimit)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return CgroupPlace{}, "gone"
	}
	if err != nil {
		return CgroupPlace{}, "its cgroup cannot be read, so it cannot be told from a pod's process: " + err.Error()
	}
	place, err := ParseCgroup(data)
	if err != nil {
		return CgroupPlace{}, "its cgroup cannot be told from a pod's: " + path.Join(dir, "cgroup") + ": " + err.Error()
	}
	return place, ""
}

// Embedded is a distribution whose kubelet runs inside another process,
// with no process of its own: its thresholds are kept where that
// distribution keeps them, which evictd does not read.
type Embedded struct {
	// Distribution is "k3s" or "MicroK8s"; Process the process found
	// outside the pods' tree; Keeps where the distribution keeps the
	// kubelet's arguments.
	Distribution, Keeps string
	Process             Process
}

// embeddedIn names the distribution whose process argv is, "" for none:
// k3s's `k3s server` or `k3s agent` (which may rewrite its title into
// argv[0]), MicroK8s's kubelite.
func embeddedIn(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	first := strings.Fields(argv[0])
	if len(first) == 0 {
		return ""
	}
	switch path.Base(first[0]) {
	case "k3s":
		sub := ""
		if len(first) > 1 {
			sub = first[1]
		} else if len(argv) > 1 {
			sub = argv[1]
		}
		if sub == "server" || sub == "agent" {
			return "k3s"
		}
	case "kubelite":
		return "MicroK8s"
	}
	return ""
}

// FindEmbedded looks under procDir for a k3s or MicroK8s process, outside
// the pods' cgroup tree as FindProcess requires of the kubelet; nil when
// there is none.
func FindEmbedded(procDir string, refused func(Refused)) (*Embedded, error) {
	p, err := findProcess(procDir, func(argv []string) bool { return embeddedIn(argv) != "" }, refused)
	if err != nil || p.Argv == nil {
		return nil, err
	}
	e := &Embedded{Distribution: embeddedIn(p.Argv), Process: p}
	switch e.Distribution {
	case "k3s":
		e.Keeps = "its --kubelet-arg flags and the kubelet-arg entries of /etc/rancher/k3s/config.yaml and config.yaml.d"
	default:
		e.Keeps = "/var/snap/microk8s/current/args/kubelet"
	}
	return e, nil
}
