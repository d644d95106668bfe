// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// kubeletRootHost is a host root whose kubelet runs with a kind-style
// --cgroup-root=/kubelet: kubepods is /kubelet/kubepods, and /kubelet's
// working set differs from the root cgroup's.
type kubeletRootHost struct {
	root string
	// memoryMount is the memory hierarchy's root, relative to root.
	memoryMount string
	// kubeletWS and kubeletCapacity are /kubelet's own working set and
	// min(MemTotal, its limit): what evictd took for the node before it
	// read the root cgroup.
	kubeletWS, kubeletCapacity uint64
}

// v1KubeletRoot moves a v1 or hybrid fixture's kubepods under /kubelet in
// every hierarchy, and gives /kubelet v1 memory files: 1Gi usage, 128Mi
// inactive_file, no limit. The root keeps the fixture's 3Gi usage and 1Gi
// inactive_file.
func v1KubeletRoot(t *testing.T, fixture string) kubeletRootHost {
	t.Helper()
	root := copyTree(t, filepath.Join("testdata", fixture))
	for _, h := range []string{"memory", "pids", "unified"} {
		moveUnder(t, filepath.Join(root, "sys/fs/cgroup", h), "kubepods", "kubelet")
	}
	w := treeWriter{t, root}
	mem := "sys/fs/cgroup/memory/kubelet/"
	w.file(mem+"memory.usage_in_bytes", fmt.Sprint(gi, "\n"))
	w.file(mem+"memory.limit_in_bytes", fmt.Sprint(v1Unlimited, "\n"))
	w.file(mem+"memory.stat", v1StatContent(512*mi, 512*mi, 128*mi, 88000, 12, false))
	return kubeletRootHost{root: root, memoryMount: "sys/fs/cgroup/memory", kubeletWS: gi - 128*mi, kubeletCapacity: 8 * gi}
}

// v2KubeletRoot renames the v2-cgroupfs fixture's /node-a to /kubelet: it
// has memory.current 3Gi, inactive_file 512Mi and memory.max 4Gi. The v2
// root has no memory.current: its usage is anon + file of its memory.stat
// (3Gi), with 1Gi inactive_file.
func v2KubeletRoot(t *testing.T) kubeletRootHost {
	t.Helper()
	root := copyTree(t, "testdata/v2-cgroupfs")
	cg := filepath.Join(root, "sys/fs/cgroup")
	if err := os.Rename(filepath.Join(cg, "node-a"), filepath.Join(cg, "kubelet")); err != nil {
		t.Fatal(err)
	}
	return kubeletRootHost{root: root, memoryMount: "sys/fs/cgroup", kubeletWS: 3*gi - 512*mi, kubeletCapacity: 4 * gi}
}

// moveUnder moves dir/name to dir/parent/name, when dir/name exists.
func moveUnder(t *testing.T, dir, name, parent string) {
	t.Helper()
	if !isDir(filepath.Join(dir, name)) {
		return
	}
	if err := os.MkdirAll(filepath.Join(dir, parent), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, parent, name)); err != nil {
		t.Fatal(err)
	}
}

var kubeletRootHosts = []struct {
	name string
	make func(t *testing.T) kubeletRootHost
}{
	{"v1", func(t *testing.T) kubeletRootHost { return v1KubeletRoot(t, "v1-cgroupfs") }},
	{"hybrid", func(t *testing.T) kubeletRootHost { return v1KubeletRoot(t, "hybrid") }},
	{"v2", v2KubeletRoot},
}

// observeKubeletRoot observes h with --cgroup-root=/kubelet and the given
// node cgroup ("" for the default), and checks that kubepods was found
// under /kubelet with all three pods.
func observeKubeletRoot(t *testing.T, h kubeletRootHost, nodeCgroup string) *Observation {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	o := newTestObserver(t, Options{HostRoot: h.root, CgroupRoot: "/kubelet", NodeCgroup: nodeCgroup}, zap.New(core))
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if obs.Layout.KubepodsCgroup != "/kubelet/kubepods" || len(obs.Summary.Pods) != 3 {
		t.Fatalf("kubepods %q with %d pods; want /kubelet/kubepods with the fixture's 3", obs.Layout.KubepodsCgroup, len(obs.Summary.Pods))
	}
	if obs.SkippedFiles != 0 || len(obs.SignalErrors) != 0 || logs.Len() != 0 {
		t.Errorf("skipped %d files, signal errors %v, warnings %v; want none", obs.SkippedFiles, obs.SignalErrors, logs.All())
	}
	return obs
}

// TestNodeMemoryIsTheRootCgroupWhateverTheCgroupRoot: the kubelet's
// memory.available is MemTotal minus the working set of the root cgroup
// "/" (summaryProviderImpl.Get reads GetCgroupStats("/"); the eviction
// manager's makeSignalObservations takes Node.Memory.AvailableBytes), even
// when its --cgroup-root is /kubelet, which only places kubepods. evictd
// must see the same, or it acts after the kubelet.
func TestNodeMemoryIsTheRootCgroupWhateverTheCgroupRoot(t *testing.T) {
	const rootWS, memTotal = 2 * gi, 8 * gi // every fixture's root: 3Gi usage, 1Gi inactive_file
	for _, host := range kubeletRootHosts {
		t.Run(host.name, func(t *testing.T) {
			h := host.make(t)
			if h.kubeletWS == rootWS {
				t.Fatalf("fixture: /kubelet's working set equals the root's %d; the test could not tell them apart", rootWS)
			}
			obs := observeKubeletRoot(t, h, "")
			m := obs.Summary.Node.Memory
			if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil {
				t.Fatalf("node memory %+v lacks available or working set", m)
			}
			if *m.WorkingSetBytes != rootWS || *m.AvailableBytes != memTotal-rootWS {
				t.Errorf("node working set %d, available %d with --cgroup-root=/kubelet; want the root cgroup's %d and MemTotal − that, %d (not /kubelet's working set %d, available %d)",
					*m.WorkingSetBytes, *m.AvailableBytes, rootWS, memTotal-rootWS, h.kubeletWS, h.kubeletCapacity-h.kubeletWS)
			}
			if obs.Node.MemoryCapacityBytes != memTotal || obs.Node.NodeCgroupLimitBytes != 0 {
				t.Errorf("capacity %d, node cgroup limit %d; want MemTotal %d and no limit", obs.Node.MemoryCapacityBytes, obs.Node.NodeCgroupLimitBytes, memTotal)
			}
			l := obs.Layout
			if l.NodeCgroup != "/" || l.NodeMemoryDir != filepath.Join(h.root, h.memoryMount) || l.CgroupRoot != "/kubelet" {
				t.Errorf("layout node cgroup %q, memory dir %q, cgroup root %q; want /, %s, /kubelet", l.NodeCgroup, l.NodeMemoryDir, l.CgroupRoot, h.memoryMount)
			}
			// allocatableMemory.available stays with kubepods under --cgroup-root.
			pm := obs.Summary.Node.SystemContainers[0].Memory
			if pm == nil || *pm.WorkingSetBytes != 700*mi || *pm.AvailableBytes != 7*gi-700*mi {
				t.Errorf("pods container memory %+v; want kubepods' working set 700Mi against its 7Gi limit", pm)
			}
		})
	}
}

// TestNodeCgroupStandsForANode: naming a cgroup as the node cgroup makes its
// working set and limit the node's, as the test harnesses do with a
// cgroup per simulated node.
func TestNodeCgroupStandsForANode(t *testing.T) {
	for _, host := range kubeletRootHosts {
		t.Run(host.name, func(t *testing.T) {
			h := host.make(t)
			obs := observeKubeletRoot(t, h, "/kubelet")
			m := obs.Summary.Node.Memory
			if m == nil || *m.WorkingSetBytes != h.kubeletWS || *m.AvailableBytes+*m.WorkingSetBytes != h.kubeletCapacity {
				t.Errorf("node memory %+v; want /kubelet's working set %d against %d", m, h.kubeletWS, h.kubeletCapacity)
			}
			if l := obs.Layout; l.NodeCgroup != "/kubelet" || l.NodeMemoryDir != filepath.Join(h.root, h.memoryMount, "kubelet") {
				t.Errorf("layout node cgroup %q, memory dir %q; want /kubelet under %s", l.NodeCgroup, l.NodeMemoryDir, h.memoryMount)
			}
		})
	}
}

// TestNodeCgroupErrors: a node cgroup that cannot be one fails NewObserver
// with the value named; one missing from the host says so.
func TestNodeCgroupErrors(t *testing.T) {
	tests := []struct {
		name, nodeCgroup string
		want             error
		mention          []string
	}{
		{"relative", "kubelet", ErrInvalidOptions, []string{`node cgroup "kubelet"`, "absolute"}},
		{"dotdot", "/kubelet/../../etc", ErrInvalidOptions, []string{`node cgroup "/kubelet/../../etc"`, `".."`}},
		{"NUL", "/kube\x00let", ErrInvalidOptions, []string{`node cgroup "/kube\x00let"`}},
		{"missing", "/no-such-node", ErrHostRoot, []string{`node cgroup "/no-such-node"`, "sys/fs/cgroup/memory/no-such-node is not a directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := NewObserver(Options{HostRoot: "testdata/v1-cgroupfs", NodeCgroup: tc.nodeCgroup}, nil)
			if err == nil {
				o.Close()
				t.Fatal("NewObserver succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %q; want %v", err, tc.want)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestCheckAbsPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"/": true, "/kubelet": true, "/a/b.slice/": true, "/a/./b": true,
		"": false, "kubelet": false, "./kubelet": false, "/a/../b": false, "/..": false, "/a\x00b": false,
	} {
		if err := CheckAbsPath(p); (err == nil) != ok {
			t.Errorf("CheckAbsPath(%q) = %v; want ok %v", p, err, ok)
		}
	}
}
