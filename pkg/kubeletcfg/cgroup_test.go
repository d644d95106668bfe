// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
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
	} {
		got, err := ParseCgroup([]byte(c.in))
		if err != nil || got.Path != c.path || got.InPods != c.inPods || got.Unit != c.unit {
			t.Errorf("ParseCgroup(%q) = %+v, %v; want path %s, in pods %v, unit %v", c.in, got, err, c.path, c.inPods, c.unit)
		}
	}
}
