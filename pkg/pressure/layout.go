// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// Mode is how the host's cgroups are mounted.
type Mode string

const (
	// ModeV1: only cgroup v1 hierarchies; no PSI files per cgroup.
	ModeV1 Mode = "v1"
	// ModeV2: the unified hierarchy with the memory controller.
	ModeV2 Mode = "v2"
	// ModeHybrid: the v1 memory controller plus a cgroup2 mount (usually
	// /sys/fs/cgroup/unified) that has no controllers but does have
	// per-cgroup *.pressure files.
	ModeHybrid Mode = "hybrid"
)

// Driver is how the kubelet names its cgroups.
type Driver string

const (
	// DriverNone: no kubepods cgroup was found under the cgroup root (yet).
	DriverNone Driver = ""
	// DriverCgroupfs: kubepods/burstable/pod<uid>.
	DriverCgroupfs Driver = "cgroupfs"
	// DriverSystemd: kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice.
	DriverSystemd Driver = "systemd"
)

// Layout is where the observer finds things on the host. The directories
// are absolute on-disk paths (the host root already prepended), so the
// wake-up sources can arm eventfds and PSI triggers on them.
type Layout struct {
	Mode   Mode   `json:"mode"`
	Driver Driver `json:"driver"`
	// CgroupRoot is the cgroup root option, cleaned: where kubepods is.
	CgroupRoot string `json:"cgroupRoot"`
	// NodeCgroup is the node cgroup option, cleaned: whose memory is the node's.
	NodeCgroup string `json:"nodeCgroup"`
	// KubepodsCgroup is the kubepods cgroup relative to the hierarchy roots,
	// e.g. "/kubepods.slice"; "" while there is none.
	KubepodsCgroup string `json:"kubepodsCgroup"`

	// MemoryMount is the root of the memory controller's hierarchy:
	// <root>/sys/fs/cgroup/memory on v1 and hybrid, <root>/sys/fs/cgroup on v2.
	MemoryMount string `json:"memoryMount"`
	// UnifiedMount is the cgroup2 hierarchy, "" on pure v1.
	UnifiedMount string `json:"unifiedMount,omitempty"`
	// PidsMount is the root of the pids controller's hierarchy, "" when none.
	PidsMount string `json:"pidsMount,omitempty"`

	// NodeMemoryDir is the memory cgroup of NodeCgroup (the "node").
	NodeMemoryDir string `json:"nodeMemoryDir"`
	// KubepodsMemoryDir is the memory cgroup of kubepods, "" while there is none.
	KubepodsMemoryDir string `json:"kubepodsMemoryDir,omitempty"`
	// NodePressureDir and KubepodsPressureDir are the cgroup2 directories of
	// the same cgroups, which hold memory.pressure (and, on v2,
	// memory.events); "" when there is no such directory or the kernel has no PSI.
	NodePressureDir     string `json:"nodePressureDir,omitempty"`
	KubepodsPressureDir string `json:"kubepodsPressureDir,omitempty"`
	// ProcPressureDir is <root>/proc/pressure, "" when the kernel has no PSI.
	ProcPressureDir string `json:"procPressureDir,omitempty"`
}

// hierarchies is what detectHierarchies finds under <root>/sys/fs/cgroup.
type hierarchies struct {
	mode    Mode
	memory  string
	unified string
	pids    string
}

// detectHierarchies finds the cgroup hierarchies under the host root.
//
// The rule for the mode: containerd/cgroups' Mode() is used only when the
// host root is "/" itself. It statfs(2)s this process's own /sys/fs/cgroup
// (and caches the answer for the life of the process), so it describes the
// host only when evictd runs in the host's mount namespace. Under any other
// host root (a container with the host at /host, whose own /sys/fs/cgroup is
// the container's view; a fixture tree in tests, made of plain files) the
// mode is told from the files under the host root, never from
// /proc/self/mountinfo, which describes the container's mounts.
func detectHierarchies(hostRoot string) (hierarchies, error) {
	if isThisRoot(hostRoot) {
		return hierarchiesOfMode(hostRoot, processCgroupMode())
	}
	return hierarchiesFromFiles(hostRoot)
}

// processCgroupMode is cgroups.Mode; tests replace it to exercise modes this
// machine does not have.
var processCgroupMode = cgroups.Mode

// isThisRoot reports whether hostRoot is this process's "/": the same path
// once cleaned, or the same directory reached another way (a symlink, a bind
// mount of /).
func isThisRoot(hostRoot string) bool {
	if filepath.Clean(hostRoot) == "/" {
		return true
	}
	var a, b unix.Stat_t
	if unix.Stat(hostRoot, &a) != nil || unix.Stat("/", &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// hierarchiesOfMode lays out the hierarchies of a mode the library found,
// and checks that the memory controller is where that mode puts it: a
// unified hierarchy can be mounted without the memory controller enabled.
func hierarchiesOfMode(hostRoot string, mode cgroups.CGMode) (hierarchies, error) {
	cg := filepath.Join(hostRoot, "sys/fs/cgroup")
	switch mode {
	case cgroups.Unified:
		ctl, err := os.ReadFile(filepath.Join(cg, "cgroup.controllers"))
		if err != nil || !hasController(ctl, "memory") {
			return hierarchies{}, fmt.Errorf("%w: %s is a cgroup2 mount without the memory controller (cgroup.controllers: %q)", ErrHostRoot, cg, bytes.TrimSpace(ctl))
		}
		h := hierarchies{mode: ModeV2, memory: cg, unified: cg}
		if hasController(ctl, "pids") {
			h.pids = cg
		}
		return h, nil
	case cgroups.Legacy, cgroups.Hybrid:
		mem := filepath.Join(cg, "memory")
		if _, err := os.Stat(filepath.Join(mem, "memory.stat")); err != nil {
			return hierarchies{}, fmt.Errorf("%w: no cgroup v1 memory controller at %s: %w", ErrHostRoot, mem, err)
		}
		h := hierarchies{mode: ModeV1, memory: mem}
		if isDir(filepath.Join(cg, "pids")) {
			h.pids = filepath.Join(cg, "pids")
		}
		if mode == cgroups.Hybrid {
			h.mode, h.unified = ModeHybrid, filepath.Join(cg, "unified")
		}
		return h, nil
	default:
		return hierarchies{}, fmt.Errorf("%w: no cgroup filesystem mounted at %s (cgroups mode %d)", ErrHostRoot, cg, mode)
	}
}

// hierarchiesFromFiles tells the mode from the interface files each mode
// has: cgroup.controllers listing memory at the top (v2), or memory/memory.stat
// (v1), with unified/cgroup.controllers beside it (hybrid).
func hierarchiesFromFiles(hostRoot string) (hierarchies, error) {
	cg := filepath.Join(hostRoot, "sys/fs/cgroup")
	if ctl, err := os.ReadFile(filepath.Join(cg, "cgroup.controllers")); err == nil && hasController(ctl, "memory") {
		h := hierarchies{mode: ModeV2, memory: cg, unified: cg}
		if hasController(ctl, "pids") {
			h.pids = cg
		}
		return h, nil
	}
	mem := filepath.Join(cg, "memory")
	if _, err := os.Stat(filepath.Join(mem, "memory.stat")); err != nil {
		return hierarchies{}, fmt.Errorf("%w: no cgroup memory controller under %s: neither cgroup.controllers listing memory (v2) nor memory/memory.stat (v1)", ErrHostRoot, cg)
	}
	h := hierarchies{mode: ModeV1, memory: mem}
	if isDir(filepath.Join(cg, "pids")) {
		h.pids = filepath.Join(cg, "pids")
	}
	if _, err := os.Stat(filepath.Join(cg, "unified", "cgroup.controllers")); err == nil {
		h.mode = ModeHybrid
		h.unified = filepath.Join(cg, "unified")
	}
	return h, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// The names of the kubepods cgroup: the systemd driver's may carry the
// cgroup root's slice as a prefix ("<x>-kubepods.slice").
const (
	kubepodsCgroupfs = "kubepods"
	kubepodsSystemd  = "kubepods.slice"
)

// findKubepods looks in the node's memory cgroup for the kubepods cgroup:
// "kubepods" (cgroupfs driver) or "kubepods.slice" (systemd; "<x>-kubepods.slice"
// when the cgroup root is itself a slice). It returns the directory name and
// the driver, or "" and DriverNone.
func findKubepods(nodeDir string) (string, Driver, error) {
	entries, err := os.ReadDir(nodeDir)
	if err != nil {
		return "", DriverNone, err
	}
	var name string
	driver := DriverNone
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		switch n := e.Name(); {
		case n == kubepodsSystemd || strings.HasSuffix(n, "-"+kubepodsSystemd):
			// The systemd name wins if, oddly, both exist: a kubelet on systemd
			// never creates plain "kubepods".
			return n, DriverSystemd, nil
		case n == kubepodsCgroupfs:
			name, driver = n, DriverCgroupfs
		}
	}
	return name, driver, nil
}

// systemdPrefix is the prefix systemd-driver children of a kubepods slice
// carry: "kubepods" for kubepods.slice.
func systemdPrefix(kubepodsName string) []byte {
	return bytes.TrimSuffix([]byte(kubepodsName), []byte(".slice"))
}
