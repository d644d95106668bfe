// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The root's cgroup.controllers of a v2 host with every controller the
// Debian 6.1 kernel offers (the VM guest's).
const v2AllControllers = "cpuset cpu io memory hugetlb pids rdma misc\n"

// fakeUnified makes dir look like a cgroup v2 mount: the root's
// cgroup.controllers and cgroup.subtree_control.
func fakeUnified(t *testing.T, controllers string) string {
	t.Helper()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "cgroup.controllers"), controllers)
	writeFile(t, filepath.Join(root, "cgroup.subtree_control"), "")
	return root
}

// kernelMkdir plays the kernel's part of a mkdir in a cgroup2 mount: the new
// directory comes with its (empty) interface files, into which the library
// then writes. rels are relative to root.
func kernelMkdir(t *testing.T, root string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		d := filepath.Join(root, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cgroup.subtree_control", "cgroup.procs", "cgroup.controllers"} {
			writeFile(t, filepath.Join(d, f), "")
		}
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNewCgroupsPicksTheHostsVersion: a unified mount gets the v2 backend,
// v1 hierarchies the v1 one; a v2 host without memory or pids is refused
// with the version and the missing controller named.
func TestNewCgroupsPicksTheHostsVersion(t *testing.T) {
	v1 := t.TempDir()
	for _, f := range []string{"memory/memory.limit_in_bytes", "memory/memory.oom_control", "pids/cgroup.procs"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(v1, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(v1, f), "0\n")
	}
	tests := []struct {
		name, root, wantVersion string
		wantErr                 []string
	}{
		{name: "v2", root: fakeUnified(t, v2AllControllers), wantVersion: "v2"},
		{name: "v1", root: v1, wantVersion: "v1"},
		{name: "v2 without memory", root: fakeUnified(t, "cpuset cpu io pids\n"), wantErr: []string{"cgroup v2", "no memory controller"}},
		{name: "v2 without pids", root: fakeUnified(t, "cpu io memory\n"), wantErr: []string{"cgroup v2", "no pids controller"}},
		{name: "neither", root: t.TempDir(), wantErr: []string{"cgroup v1 memory and pids controllers needed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cg, err := newCgroups(tt.root)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("newCgroups(%s) = %s backend, want an error", tt.root, cg.version())
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cg.version() != tt.wantVersion {
				t.Errorf("backend %s, want %s", cg.version(), tt.wantVersion)
			}
		})
	}
}

// TestCgroupV2Layout: on v2 the node makes the kubelet's cgroupfs layout in
// the one unified hierarchy, enables memory and pids in every parent's
// cgroup.subtree_control, and writes the kubelet's limits to memory.max
// (node, kubepods = allocatable, pod = sum of its containers', container)
// and pids.max; the QoS cgroups get none.
func TestCgroupV2Layout(t *testing.T) {
	const memory, reserved, maxPIDs = 1 << 30, 100 << 20, 500
	root := fakeUnified(t, v2AllControllers)
	cg, err := newCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: "node-a", CgroupRoot: "/evictd-test-1-00000000/node-a", cg: cg,
		opts: Options{MemoryBytes: memory, ReservedMemoryBytes: reserved, MaxPIDs: maxPIDs}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "1234"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}},
		{Name: "b", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}},
	}}}
	podRel := path.Join(n.CgroupRoot, PodCgroup(pod))
	kubepods := path.Join(n.CgroupRoot, "kubepods")
	containerRel := path.Join(podRel, "0123abcd")
	kernelMkdir(t, root, "/evictd-test-1-00000000", n.CgroupRoot, kubepods,
		path.Join(kubepods, "burstable"), path.Join(kubepods, "besteffort"), podRel, containerRel)

	if err := n.createCgroups("evictd-test-1-00000000"); err != nil {
		t.Fatal(err)
	}
	podCg, err := cg.create(podRel)
	if err != nil {
		t.Fatal(err)
	}
	if err := podCg.setLimits(podMemoryLimit(pod), 0); err != nil {
		t.Fatal(err)
	}
	c, err := cg.create(containerRel)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.setLimits(containerMemoryLimit(&pod.Spec.Containers[0]), 0); err != nil {
		t.Fatal(err)
	}

	if want := "/evictd-test-1-00000000/node-a/kubepods/burstable/pod1234"; podRel != want {
		t.Errorf("pod cgroup %s, want %s", podRel, want)
	}
	want := map[string]string{
		n.CgroupRoot + "/memory.max": strconv.Itoa(memory),
		n.CgroupRoot + "/pids.max":   strconv.Itoa(maxPIDs),
		kubepods + "/memory.max":     strconv.Itoa(memory - reserved),
		podRel + "/memory.max":       strconv.Itoa(96 << 20),
		containerRel + "/memory.max": strconv.Itoa(64 << 20),
	}
	// Every cgroup with a child the node made must hand memory and pids down.
	for _, parent := range []string{"/", "/evictd-test-1-00000000", n.CgroupRoot, kubepods, path.Join(kubepods, "burstable"), podRel} {
		want[path.Join(parent, "cgroup.subtree_control")] = "+memory +pids"
	}
	for f, w := range want {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || string(b) != w {
			t.Errorf("%s = %q, %v; want %q", f, b, err, w)
		}
	}
	for _, f := range []string{"kubepods/burstable/memory.max", "kubepods/besteffort/memory.max", "kubepods/pids.max", "kubepods/burstable/pod1234/0123abcd/cgroup.subtree_control"} {
		b, err := os.ReadFile(filepath.Join(root, n.CgroupRoot, f))
		if err == nil && len(b) > 0 {
			t.Errorf("%s = %q; want it left alone", f, b)
		}
	}
	if got, want := cg.procsFiles(containerRel), []string{filepath.Join(root, containerRel, "cgroup.procs")}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("procsFiles = %q, want %q: one file joins both controllers", got, want)
	}
	if n.MemoryCgroupDir() != filepath.Join(root, n.CgroupRoot) || n.PidsCgroupDir() != n.MemoryCgroupDir() {
		t.Errorf("memory dir %s, pids dir %s; want both %s", n.MemoryCgroupDir(), n.PidsCgroupDir(), filepath.Join(root, n.CgroupRoot))
	}
	if n.CgroupVersion() != "v2" {
		t.Errorf("CgroupVersion %q, want v2", n.CgroupVersion())
	}
}

// A v2 container cgroup's memory.events after one OOM kill, and the same
// cgroup's parent, which counts it too (memory.events is hierarchical).
const (
	memoryEventsKilled = "low 0\nhigh 0\nmax 35\noom 1\noom_kill 1\noom_group_kill 0\n"
	memoryEventsParent = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\noom_group_kill 0\n"
	memoryEventsLocal0 = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
)

// TestCgroupV2OOMKillsAreLocal: a pod cgroup's kills are read from
// memory.events.local, so a kill in its container is counted once, not a
// second time through the pod's hierarchical memory.events; without the
// .local file (kernels before 5.2) memory.events is read.
func TestCgroupV2OOMKillsAreLocal(t *testing.T) {
	root := fakeUnified(t, v2AllControllers)
	cg, err := newCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	kernelMkdir(t, root, "/pod", "/pod/c", "/old")
	writeFile(t, filepath.Join(root, "pod/memory.events"), memoryEventsParent)
	writeFile(t, filepath.Join(root, "pod/memory.events.local"), memoryEventsLocal0)
	writeFile(t, filepath.Join(root, "pod/c/memory.events"), memoryEventsKilled)
	writeFile(t, filepath.Join(root, "pod/c/memory.events.local"), memoryEventsKilled)
	writeFile(t, filepath.Join(root, "old/memory.events"), memoryEventsKilled)
	for rel, want := range map[string]uint64{"/pod": 0, "/pod/c": 1, "/old": 1} {
		if got, err := cg.oomKills(rel); err != nil || got != want {
			t.Errorf("oomKills(%s) = %d, %v; want %d", rel, got, err, want)
		}
	}
	if _, err := cg.oomKills("/gone"); err == nil {
		t.Error("oomKills of a missing cgroup succeeded")
	}
}

// TestJoinArgs: the wrapper writes its pid into every cgroup.procs given
// (two on v1, one on v2) and then execs the command with its arguments.
func TestJoinArgs(t *testing.T) {
	for _, files := range [][]string{{"memory.procs", "pids.procs"}, {"cgroup.procs"}} {
		t.Run(strconv.Itoa(len(files)), func(t *testing.T) {
			dir := t.TempDir()
			var paths []string
			for _, f := range files {
				paths = append(paths, filepath.Join(dir, f))
				writeFile(t, paths[len(paths)-1], "")
			}
			out := filepath.Join(dir, "out")
			cmd := exec.Command("/bin/sh", JoinArgs(paths, "/bin/sh", "-c", `echo "$$ $1" > "$0"`, out, "arg -- x")...)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			pid := strconv.Itoa(cmd.Process.Pid)
			for _, p := range paths {
				if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != pid {
					t.Errorf("%s = %q, want the pid %s", p, b, pid)
				}
			}
			if b, _ := os.ReadFile(out); string(b) != pid+" arg -- x\n" {
				t.Errorf("the command wrote %q; want %q (same process, args intact)", b, pid+" arg -- x\n")
			}
		})
	}
}
