// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/pkg/pressure"
)

// cgroupV2 makes the node's cgroups in the v2 unified hierarchy with
// containerd/cgroups' cgroup2 package: one directory per cgroup holds both
// its memory and its pids files.
//
// v2 differs from v1 in what the node must take care of:
//   - a controller is usable in a cgroup only when its parent lists it in
//     cgroup.subtree_control; cgroup2.NewManager writes +memory +pids into
//     every ancestor's file (the hierarchy root's included) for each cgroup
//     made, as the kubelet's cgroupCommon.Create does through
//     opencontainers/cgroups' fs2.CreateCgroupPath (Manager.Apply);
//   - a cgroup with controllers enabled for its children may hold no
//     processes ("no internal processes"): the node, kubepods, the QoS and
//     the pod cgroups stay empty and every container process joins its own
//     leaf cgroup, as with a real runtime;
//   - OOM kills are counted in memory.events (oom_kill), not
//     memory.oom_control.
//
// memory.oom.group, which the kubelet asks the runtime for on v2 containers
// (kubeGenericRuntimeManager.calculateLinuxResources, unless
// singleProcessOOMKill), is not set: on any OOM kill the stand-in kills the
// pod's other processes itself.
type cgroupV2 struct {
	fsRoot string // the unified hierarchy's mount, e.g. /sys/fs/cgroup
}

// isUnified reports whether fsRoot is a cgroup v2 mount: only the unified
// hierarchy's root has cgroup.controllers.
func isUnified(fsRoot string) bool {
	_, err := os.Stat(filepath.Join(fsRoot, "cgroup.controllers"))
	return err == nil
}

// v2Controllers are the controllers a node's cgroups need.
var v2Controllers = []string{"memory", "pids"}

func newCgroupV2(fsRoot string) (cgroupV2, error) {
	c := cgroupV2{fsRoot: fsRoot}
	f := filepath.Join(fsRoot, "cgroup.controllers")
	b, err := os.ReadFile(f)
	if err != nil {
		return c, fmt.Errorf("cgroup v2 at %s: %w", fsRoot, err)
	}
	have := strings.Fields(string(b))
	for _, want := range v2Controllers {
		if !slices.Contains(have, want) {
			return c, fmt.Errorf("cgroup v2 at %s has no %s controller (%s lists %q); nodesim needs memory and pids", fsRoot, want, f, strings.TrimSpace(string(b)))
		}
	}
	return c, nil
}

func (c cgroupV2) version() string { return "v2" }

func (c cgroupV2) dir(rel string) string { return filepath.Join(c.fsRoot, rel) }

func (c cgroupV2) memoryDir(rel string) string { return c.dir(rel) }

func (c cgroupV2) pidsDir(rel string) string { return c.dir(rel) }

func (c cgroupV2) roots() []string { return []string{c.fsRoot} }

// enabled asks the library to turn on memory and pids in the parents'
// cgroup.subtree_control; the empty values write no limit.
func enabled() *cgroup2.Resources {
	return &cgroup2.Resources{Memory: &cgroup2.Memory{}, Pids: &cgroup2.Pids{}}
}

func (c cgroupV2) handle(rel string, m *cgroup2.Manager) cgroup {
	return cgroup{
		rel:    rel,
		update: func(r *specs.LinuxResources) error { return m.Update(cgroup2.ToResources(r)) },
		delete: m.Delete,
	}
}

// create makes rel with cgroup2.NewManager, which enables memory and pids
// in every ancestor's cgroup.subtree_control. Like mkdir -p it accepts a
// cgroup that exists already.
func (c cgroupV2) create(rel string) (cgroup, error) {
	m, err := cgroup2.NewManager(c.fsRoot, rel, enabled())
	if err != nil {
		return cgroup{}, fmt.Errorf("create cgroup %s under %s (cgroup v2): %w", rel, c.fsRoot, err)
	}
	return c.handle(rel, m), nil
}

func (c cgroupV2) load(rel string) (cgroup, bool, error) {
	if _, err := os.Stat(c.dir(rel)); errors.Is(err, fs.ErrNotExist) {
		return cgroup{}, false, nil
	}
	m, err := cgroup2.Load(rel, cgroup2.WithMountpoint(c.fsRoot))
	if err != nil {
		return cgroup{}, false, fmt.Errorf("load cgroup %s under %s (cgroup v2): %w", rel, c.fsRoot, err)
	}
	return c.handle(rel, m), true, nil
}

// remove is cgroupV1.remove's on the one v2 directory: the library's
// Delete refuses a cgroup with processes below it and cannot remove child
// cgroups, so cgrouptest.RemoveTree kills and removes those first.
func (c cgroupV2) remove(cg cgroup, timeout time.Duration) error {
	if cg.delete == nil {
		return nil
	}
	return cgrouptest.RemoveTree([]string{c.dir(cg.rel)}, cg.delete, timeout)
}

// procsFiles: one cgroup.procs joins both controllers on v2.
func (c cgroupV2) procsFiles(rel string) []string {
	return []string{filepath.Join(c.dir(rel), "cgroup.procs")}
}

// oomKills reads oom_kill of rel's memory.events.local: the kills of
// processes in rel itself. memory.events counts those of every descendant
// too (unless the hierarchy is mounted with memory_localevents), so the
// pod's file would count its containers' kills a second time. Kernels
// before 5.2 have no memory.events.local; memory.events is then read, and
// a pod cgroup, which holds no processes, reports its containers' kills.
func (c cgroupV2) oomKills(rel string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(c.dir(rel), "memory.events.local"))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = os.ReadFile(filepath.Join(c.dir(rel), "memory.events"))
	}
	if err != nil {
		return 0, err
	}
	ev, err := pressure.ParseMemoryEvents(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", rel, err)
	}
	return ev.OOMKill, nil
}
