// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestPeerFateOf(t *testing.T) {
	term := func(code int32, reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{term(137, "Error"), ByDaemon},   // systemd-oomd's SIGKILL
		{term(0, "Completed"), ByDaemon}, // earlyoom's SIGTERM: the workload exits 0
		{term(137, "OOMKilled"), ByOOM},  // the kernel, in the container's limit
		{&corev1.Pod{}, ""},              // running
		{&corev1.Pod{Status: corev1.PodStatus{Reason: "Evicted"}}, ByKubelet},
	} {
		if got := PeerFateOf(tc.pod); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.pod.Status, got, tc.want)
		}
	}
}

func TestPeersTable(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	s := func(sec float64, mib int64) MemorySample {
		return MemorySample{At: t0.Add(time.Duration(sec * float64(time.Second))), Available: mib << 20}
	}
	runs := []PeerRun{
		{Config: "evictd", Scenario: "leak", Want: "leaker", Critical: []string{"critical"},
			Ends:    []PodFate{{Pod: "leaker", By: ByEvictd}},
			Samples: []MemorySample{s(0, 900), s(1, 290), s(2, 250), s(3.5, 700)}},
		{Config: "earlyoom", Scenario: "leak", Want: "leaker", Critical: []string{"critical"}, Guarded: []string{"replica-0"}, OOMKills: 1,
			Ends:    []PodFate{{Pod: "besteffort", By: ByDaemon}, {Pod: "replica-0", By: ByDaemon}, {Pod: "leaker", By: ByOOM}},
			Samples: []MemorySample{s(0, 900), s(1, 200), s(2, 40)}},
		{Config: "kubelet", Scenario: "leak", Want: "leaker", Unresponsive: 90 * time.Second, Samples: []MemorySample{s(0, 900)}},
	}
	if d, ok := runs[0].Relief(300 << 20); !ok || d != 2500*time.Millisecond {
		t.Errorf("relief %v %v, want 2.5s", d, ok)
	}
	if w := runs[1].Wrong(); strings.Join(w, ",") != "besteffort,replica-0" {
		t.Errorf("wrong victims %v", w)
	}
	table := PeersTable(runs, 300<<20)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 4 {
		t.Fatalf("table:\n%s", table)
	}
	for i, want := range [][]string{
		{"leak", "evictd", "leaker (evictd)", "none", "2.5s", "250 MiB"},
		{"earlyoom", "besteffort (daemon), replica-0 (daemon), leaker (oom)", "besteffort, replica-0", "  1  ", "not relieved", "40 MiB"},
		{"kubelet", "unknown (livelocked 1m30s+)", "not crossed", "900 MiB"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("row %d %q lacks %q", i+1, lines[i+1], w)
			}
		}
	}
}

func TestOOMKilledPods(t *testing.T) {
	dmesg := `[  812.113] workload invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=994
[  812.120] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=cri-containerd-5b1e.scope,mems_allowed=0,global_oom,task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod4f0c2a1e_9b2d_4c1e_8f3a_0123456789ab.slice/cri-containerd-5b1e.scope,task=workload,pid=2345,uid=0
[  812.121] Out of memory: Killed process 2345 (workload) total-vm:812345kB, anon-rss:700000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1500kB oom_score_adj:994
[  900.5] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=/kubepods/burstable/pod11111111-2222-3333-4444-555555555555,task_memcg=/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/abc,task=workload,pid=9,uid=0`
	got := OOMKilledPods(dmesg)
	if len(got) != 2 || !got["4f0c2a1e-9b2d-4c1e-8f3a-0123456789ab"] || !got["11111111-2222-3333-4444-555555555555"] {
		t.Errorf("OOMKilledPods = %v", got)
	}
}
