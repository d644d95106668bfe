// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindProcessTellsOfImpostors: the processes named kubelet in a pod's
// cgroup (testdata/impostor, TestReadPassesOverImpostors) are each told,
// with their name, the cgroup line that puts them among the pods, and why.
func TestFindProcessTellsOfImpostors(t *testing.T) {
	var refused []Refused
	p, err := FindProcess(filepath.Join("testdata", "impostor", "proc"), func(x Refused) { refused = append(refused, x) })
	if err != nil || p.PID != 640 || !p.Unit || p.Cgroup != "/system.slice/kubelet.service" {
		t.Errorf("FindProcess = %+v, %v: want pid 640 in kubelet.service", p, err)
	}
	if len(refused) != 2 || refused[0].PID != 212 || refused[1].PID != 390 {
		t.Fatalf("refused %+v: want pids 212 and 390", refused)
	}
	if refused[0].Name != "kubelet" || !strings.Contains(refused[0].Cgroup, "kubepods-besteffort-pod5b0e4c7a") ||
		!strings.Contains(refused[0].Why, "pod's cgroup") {
		t.Errorf("refused %+v: want its name, its pod cgroup and why", refused[0])
	}
	if !strings.HasPrefix(refused[1].Cgroup, "12:pids:/kubepods/besteffort/") {
		t.Errorf("refused %+v: want the first v1 line that puts it in a pod", refused[1])
	}
}

// TestFindProcessNeedsItsCgroup: a process named kubelet whose cgroup file
// is missing or out of shape cannot be told from a pod's: it is passed
// over, and said why.
func TestFindProcessNeedsItsCgroup(t *testing.T) {
	root := t.TempDir()
	for pid, cg := range map[string]string{"5": "", "6": "garbage\n"} {
		dir := filepath.Join(root, pid)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte("kubelet\x00"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cg), 0o644))
	}
	var why []string
	p, err := FindProcess(root, func(r Refused) { why = append(why, r.Why) })
	if err != nil || p.Argv != nil {
		t.Errorf("FindProcess = %+v, %v: want none", p, err)
	}
	if len(why) != 2 || !strings.Contains(why[0], "cgroup file is empty") || !strings.Contains(why[1], `cgroup line "garbage"`) {
		t.Errorf("why %q", why)
	}
}

func TestParseCgroup(t *testing.T) {
	for _, c := range []struct {
		in           string
		path         string
		inPods, unit bool
	}{
		{"0::/system.slice/kubelet.service\n", "/system.slice/kubelet.service", false, true},
		{"0::/\n", "/", false, false},
		// RKE2: the kubelet is a child of rke2's own unit.
		{"0::/system.slice/rke2-server.service\n", "/system.slice/rke2-server.service", false, false},
		{"0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-a.scope\n", "/kubepods.slice/kubepods-pod1.slice/cri-containerd-a.scope", true, false},
		// Under another --cgroup-root, and seen from another cgroup
		// namespace.
		{"0::/custom/kubepods/burstable/pod1/ctr\n", "/custom/kubepods/burstable/pod1/ctr", true, false},
		{"0::/../../kubepods-burstable-pod1.slice/cri-containerd-a.scope\n", "/kubepods-burstable-pod1.slice/cri-containerd-a.scope", true, false},
		// v1: one line under kubepods is enough.
		{"4:memory:/kubepods/pod1/c\n1:name=systemd:/\n", "/kubepods/pod1/c", true, false},
		// A name that merely starts so is not the pods' cgroup.
		{"0::/system.slice/kubepods-helper.service\n", "/system.slice/kubepods-helper.service", false, false},
		// The systemd driver under a slice cgroup root (kind's
		// cgroupRoot /kubelet): every name carries the root's prefix.
		{"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod1.slice/cri-containerd-a.scope\n",
			"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod1.slice/cri-containerd-a.scope", true, false},
		{"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod1.slice/cri-containerd-a.scope\n",
			"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod1.slice/cri-containerd-a.scope", true, false},
		// The cgroup root's own slice, where kind's kubelet is not, is no
		// pods' cgroup; nor a unit whose name holds the word.
		{"0::/kubelet.slice\n", "/kubelet.slice", false, false},
		{"0::/system.slice/my-kubepods.service\n", "/system.slice/my-kubepods.service", false, false},
	} {
		got, err := ParseCgroup([]byte(c.in))
		if err != nil || got.Path != c.path || got.InPods != c.inPods || got.Unit != c.unit {
			t.Errorf("ParseCgroup(%q) = %+v, %v; want path %s, in pods %v, unit %v", c.in, got, err, c.path, c.inPods, c.unit)
		}
	}
}

// TestReadEmbeddedKubelet: on k3s and MicroK8s the kubelet has no process
// of its own. A process named kubelet in a pod is passed over there too,
// and evictd says the thresholds are unknown, naming the distribution's
// process (outside the pods' tree) and where it keeps the kubelet's
// arguments; a k3s process inside a pod is no k3s.
func TestReadEmbeddedKubelet(t *testing.T) {
	impostor := "kubelet\x00--eviction-hard=memory.available<1Ti\x00"
	podCgroup := "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-a.scope\n"
	for _, c := range []struct {
		name  string
		procs map[string][2]string // pid: cmdline, cgroup
		want  string
	}{
		{"k3s", map[string][2]string{
			"212": {impostor, podCgroup},
			"512": {"/usr/local/bin/k3s\x00server\x00--kubelet-arg=eviction-hard=memory.available<500Mi\x00", "0::/system.slice/k3s.service\n"},
		}, "the kubelet is embedded in k3s (k3s pid 512, cgroup /system.slice/k3s.service), which keeps its arguments in its --kubelet-arg flags"},
		// k3s rewrites its title into argv[0].
		{"k3s-agent-title", map[string][2]string{
			"600": {"/usr/local/bin/k3s agent\x00\x00\x00", "0::/system.slice/k3s-agent.service\n"},
		}, "the kubelet is embedded in k3s (k3s pid 600"},
		{"microk8s", map[string][2]string{
			"212": {impostor, podCgroup},
			"700": {"/snap/microk8s/7394/kubelite\x00--kubelet-args-file=/var/snap/microk8s/7394/args/kubelet\x00", "0::/system.slice/snap.microk8s.daemon-kubelite.service\n"},
		}, "the kubelet is embedded in MicroK8s (kubelite pid 700, cgroup /system.slice/snap.microk8s.daemon-kubelite.service), which keeps its arguments in /var/snap/microk8s/current/args/kubelet"},
		{"k3s-in-a-pod", map[string][2]string{
			"212": {"/usr/local/bin/k3s\x00server\x00", podCgroup},
		}, "no kubelet found under host root"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for pid, f := range c.procs {
				dir := filepath.Join(root, "proc", pid)
				must(t, os.MkdirAll(dir, 0o755))
				must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(f[0]), 0o644))
				must(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(f[1]), 0o644))
			}
			_, err := Read(Options{HostRoot: root})
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Read: %v\nwant ErrNotFound saying %q", err, c.want)
			}
		})
	}
}
