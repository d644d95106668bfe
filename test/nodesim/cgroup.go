// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// cgroups is where a node's cgroups live: the v1 memory and pids
// hierarchies (cgroupV1) or the v2 unified hierarchy (cgroupV2), chosen by
// what the host mounts (newCgroups). Every path handed to it is relative to
// the hierarchy roots ("/evictd-test-123-0a1b2c3d/node-a/kubepods"), as
// evictd's --cgroup-root and --node-cgroup are.
//
// The names are the kubelet's cgroupfs-driver layout (layout.go), chosen
// here, not by the library, which makes whatever path it is given; the
// systemd driver's kubepods.slice names are not simulated.
type cgroups interface {
	// version is "v1" or "v2", for messages.
	version() string
	// create makes rel (and its parents) like mkdir -p: a cgroup that
	// exists already is accepted.
	create(rel string) (cgroup, error)
	// load finds a cgroup that exists already (one a killed run left), so
	// that it can be removed; ok is false when it is not there.
	load(rel string) (cg cgroup, ok bool, err error)
	// remove kills what is left in the cgroup and below it and removes the
	// tree, retrying until timeout.
	remove(cg cgroup, timeout time.Duration) error
	// procsFiles are the files a process writes its pid into to join rel.
	procsFiles(rel string) []string
	// oomKills is the kernel's count of OOM kills of processes in rel
	// itself (not its children).
	oomKills(rel string) (uint64, error)
	// memoryDir and pidsDir are rel's directories where its memory and
	// pids interface files are; one directory on v2.
	memoryDir(rel string) string
	pidsDir(rel string) string
	// roots are the hierarchy roots, where stale node cgroups are swept.
	roots() []string
}

// newCgroups picks the backend for the host's cgroup mount at fsRoot: v2
// when fsRoot is the unified hierarchy (it has cgroup.controllers), v1
// otherwise. Either must offer the memory and pids controllers.
func newCgroups(fsRoot string) (cgroups, error) {
	if isUnified(fsRoot) {
		return newCgroupV2(fsRoot)
	}
	return newCgroupV1(fsRoot)
}

// cgroup is one cgroup the node made: its path and the library's handle,
// whose update sets limits and whose delete removes it.
type cgroup struct {
	rel    string // e.g. /evictd-test-123-0a1b2c3d/node-a/kubepods
	update func(*specs.LinuxResources) error
	delete func() error
}

// cgroupV1 makes the node's cgroups in the v1 memory and pids hierarchies
// with containerd/cgroups' cgroup1 package. The same relative path names a
// cgroup in both.
type cgroupV1 struct {
	fsRoot string // e.g. /sys/fs/cgroup
	memory string // e.g. /sys/fs/cgroup/memory
	pids   string // e.g. /sys/fs/cgroup/pids
}

func newCgroupV1(fsRoot string) (cgroupV1, error) {
	c := cgroupV1{fsRoot: fsRoot, memory: filepath.Join(fsRoot, "memory"), pids: filepath.Join(fsRoot, "pids")}
	for _, f := range []string{filepath.Join(c.memory, "memory.limit_in_bytes"), filepath.Join(c.memory, "memory.oom_control"), filepath.Join(c.pids, "cgroup.procs")} {
		if _, err := os.Stat(f); err != nil {
			return c, fmt.Errorf("cgroup v1 memory and pids controllers needed under %s: %w", fsRoot, err)
		}
	}
	return c, nil
}

// hierarchy tells the library which controllers the node's cgroups live in:
// memory and pids under fsRoot, and no others (its default takes every
// mounted controller from /proc/self/mountinfo, and the real root).
func (c cgroupV1) hierarchy() cgroup1.InitOpts {
	return cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(c.fsRoot), cgroup1.NewPids(c.fsRoot)}, nil
	})
}

func (c cgroupV1) dirs(rel string) []string {
	return []string{filepath.Join(c.memory, rel), filepath.Join(c.pids, rel)}
}

// create makes rel in both hierarchies with cgroup1.New. Like mkdir -p it
// accepts a cgroup that exists already.
func (c cgroupV1) create(rel string) (cgroup, error) {
	lib, err := cgroup1.New(cgroup1.StaticPath(rel), &specs.LinuxResources{}, c.hierarchy())
	if err != nil {
		return cgroup{}, fmt.Errorf("create cgroup %s under %s: %w", rel, c.fsRoot, err)
	}
	return cgroup{rel: rel, update: lib.Update, delete: lib.Delete}, nil
}

// load finds a cgroup that exists already (one a killed run left), so that
// it can be removed through the library; ok is false when it is in neither
// hierarchy.
func (c cgroupV1) load(rel string) (cg cgroup, ok bool, err error) {
	lib, err := cgroup1.Load(cgroup1.StaticPath(rel), c.hierarchy())
	if errors.Is(err, cgroup1.ErrCgroupDeleted) {
		return cgroup{}, false, nil
	}
	if err != nil {
		return cgroup{}, false, fmt.Errorf("load cgroup %s under %s: %w", rel, c.fsRoot, err)
	}
	return cgroup{rel: rel, update: lib.Update, delete: lib.Delete}, true, nil
}

// setLimits sets the memory limit (v1 memory.limit_in_bytes, v2
// memory.max) and pids.max through the library's Update. A negative memory limit leaves the cgroup unlimited, as does a
// pids limit of zero or less.
func (cg cgroup) setLimits(memoryBytes, maxPIDs int64) error {
	var r specs.LinuxResources
	if memoryBytes >= 0 {
		r.Memory = &specs.LinuxMemory{Limit: &memoryBytes}
	}
	if maxPIDs > 0 {
		r.Pids = &specs.LinuxPids{Limit: &maxPIDs}
	}
	if r.Memory == nil && r.Pids == nil {
		return nil
	}
	if err := cg.update(&r); err != nil {
		return fmt.Errorf("limit cgroup %s (memory %d bytes, pids %d): %w", cg.rel, memoryBytes, maxPIDs, err)
	}
	return nil
}

// remove kills every process left in the cgroup and below it, in both
// hierarchies, removes the cgroups below it deepest first and then the
// cgroup itself with the library's Delete. Freshly killed processes linger
// a moment, so it retries until timeout. All but the final Delete is
// cgrouptest.RemoveTree's own code: Delete refuses a cgroup with processes,
// cannot remove child cgroups (pods' container cgroups, pods left when a
// pod's own removal failed) and retries for 150 ms only.
func (c cgroupV1) remove(cg cgroup, timeout time.Duration) error {
	if cg.delete == nil {
		return nil
	}
	return cgrouptest.RemoveTree(c.dirs(cg.rel), cg.delete, timeout)
}

func (c cgroupV1) version() string { return "v1" }

func (c cgroupV1) memoryDir(rel string) string { return filepath.Join(c.memory, rel) }

func (c cgroupV1) pidsDir(rel string) string { return filepath.Join(c.pids, rel) }

func (c cgroupV1) roots() []string { return []string{c.memory, c.pids} }

// procsFiles: the library's Add moves a process that already runs; a
// container must be in its cgroups before exec, so its wrapper writes these
// itself (see joinCgroups).
func (c cgroupV1) procsFiles(rel string) []string {
	return []string{filepath.Join(c.memory, rel, "cgroup.procs"), filepath.Join(c.pids, rel, "cgroup.procs")}
}

// oomKills reads the kernel's OOM-kill counter of one memory cgroup. On v1
// it counts the kills of processes in that very cgroup (not its children).
// The library's Stat has the counter too, but reads a dozen more files with
// it, for every container and pod each OOMPollInterval; BenchmarkOOMKillRead
// measures both.
func (c cgroupV1) oomKills(rel string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(c.memory, rel, "memory.oom_control"))
	if err != nil {
		return 0, err
	}
	st, err := parseOOMControl(b)
	return st.kills, err
}

type oomControl struct {
	underOOM bool
	kills    uint64
}

// parseOOMControl parses a v1 memory.oom_control file:
//
//	oom_kill_disable 0
//	under_oom 0
//	oom_kill 3
//
// Kernels before 4.13 have no oom_kill line; it then reads as zero.
func parseOOMControl(b []byte) (oomControl, error) {
	var st oomControl
	var sawUnder bool
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(s.Text()), " ")
		if !ok {
			return st, fmt.Errorf("memory.oom_control: malformed line %q", s.Text())
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return st, fmt.Errorf("memory.oom_control: %s: bad value %q", key, val)
		}
		switch key {
		case "under_oom":
			st.underOOM, sawUnder = n != 0, true
		case "oom_kill":
			st.kills = n
		}
	}
	if !sawUnder {
		return st, errors.New("memory.oom_control: no under_oom line")
	}
	return st, nil
}
