// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"slices"
	"testing"
)

// TestKubeletResource: what the kubelet evicted for is read from the
// messages its eviction manager writes (pkg/kubelet/eviction of 1.37), into
// a closed set whatever the message says.
func TestKubeletResource(t *testing.T) {
	for msg, want := range map[string]string{
		"The node was low on resource: memory. Threshold quantity: 100Mi, available: 90112Ki. Container hog was using 1201348Ki, request is 128Mi, has larger consumption of memory. ": KubeletMemory,
		"The node was low on resource: memory. ": KubeletMemory,
		"The node was low on resource: ephemeral-storage. Threshold quantity: 10%, available: 1Gi. Container logs was using 5Gi, request is 0, has larger consumption of ephemeral-storage. ": KubeletEphemeralStorage,
		"The node was low on resource: inodes. Threshold quantity: 5%, available: 100. ":                                                                                                      KubeletInodes,
		"The node was low on resource: pids. Threshold quantity: 1000, available: 800. ":                                                                                                      KubeletPIDs,
		"The node was low on resource: pids.":                                           KubeletPIDs,
		`Container app exceeded its local ephemeral storage limit "1Gi". `:              KubeletStorageLimit,
		"Pod ephemeral local storage usage exceeds the total limit of containers 2Gi. ": KubeletStorageLimit,
		`Usage of EmptyDir volume "scratch" exceeds the limit "500Mi". `:                KubeletStorageLimit,
		// A resource name this version does not know must not become a
		// label value of its own.
		"The node was low on resource: gpu-memory-of-pod-x7k2p. ": KubeletOther,
		"Container app was using 1Gi, request is 0. ":             KubeletOther,
		"": KubeletOther,
		"Preempted in order to admit critical pod": KubeletOther,
	} {
		got := KubeletResource(msg)
		if got != want {
			t.Errorf("KubeletResource(%q) = %q, want %q", msg, got, want)
		}
		if !slices.Contains(KubeletResources, got) {
			t.Errorf("KubeletResource(%q) = %q, not in KubeletResources %v", msg, got, KubeletResources)
		}
	}
}

// kubeletAct is one of the kubelet's evictions for resource (its message).
func kubeletAct(pod string, s float64, resource string) Action {
	a := act(pod, s)
	a.Why = "The node was low on resource: " + resource + ". "
	return a
}

// TestFirst: who acted first in an episode is the earliest of evictd's
// first would-be eviction, the kubelet's first eviction for the episode's
// resource, and in a memory episode the first pass that saw an OOM kill;
// the OOM killer wins a tie (the kill came at or before the pass that saw
// it), evictd a tie with the kubelet (the report's lead of 0).
func TestFirst(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		would    []Action
		kubelet  []Action
		oomAt    float64 // 0: none
		want     string
	}{
		{name: "nobody", resource: "memory", want: FirstNone},
		{name: "evictd alone", resource: "memory", would: []Action{act("a", 3)}, want: FirstEvictd},
		{name: "evictd before the kubelet", resource: "memory", would: []Action{act("a", 3)},
			kubelet: []Action{kubeletAct("b", 12, "memory")}, want: FirstEvictd},
		{name: "the kubelet before evictd", resource: "memory", would: []Action{act("a", 13)},
			kubelet: []Action{kubeletAct("b", 12, "memory")}, want: FirstKubelet},
		{name: "the same second: evictd", resource: "memory", would: []Action{act("a", 12)},
			kubelet: []Action{kubeletAct("b", 12, "memory")}, want: FirstEvictd},
		{name: "the kubelet's earliest, out of order", resource: "memory", would: []Action{act("a", 10)},
			kubelet: []Action{kubeletAct("b", 30, "memory"), kubeletAct("c", 5, "memory")}, want: FirstKubelet},
		{name: "the OOM killer before both", resource: "memory", would: []Action{act("a", 3)},
			kubelet: []Action{kubeletAct("b", 12, "memory")}, oomAt: 2, want: FirstOOMKiller},
		{name: "the OOM killer seen at evictd's pass", resource: "memory", would: []Action{act("a", 3)}, oomAt: 3, want: FirstOOMKiller},
		{name: "the OOM killer after evictd", resource: "memory", would: []Action{act("a", 3)}, oomAt: 4, want: FirstEvictd},
		{name: "the OOM killer alone, in a stall episode", resource: "memory-stall", oomAt: 4, want: FirstOOMKiller},
		{name: "the kubelet's disk eviction is not a memory one", resource: "memory", would: []Action{act("a", 13)},
			kubelet: []Action{kubeletAct("b", 12, "ephemeral-storage")}, want: FirstEvictd},
		{name: "a pod over its own storage limit is no pressure's", resource: "nodefs",
			kubelet: []Action{{Pod: "b", UID: "uid-b", At: at(12), Why: `Usage of EmptyDir volume "x" exceeds the limit "1Gi". `}}, want: FirstNone},
		{name: "the kubelet's inodes eviction for nodefs", resource: "nodefs", would: []Action{act("a", 20)},
			kubelet: []Action{kubeletAct("b", 12, "inodes")}, want: FirstKubelet},
		{name: "an OOM kill during a disk episode is not the disk's", resource: "nodefs", would: []Action{act("a", 20)}, oomAt: 1, want: FirstEvictd},
		{name: "pids", resource: "pids", kubelet: []Action{kubeletAct("b", 12, "pids")}, want: FirstKubelet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := Episode{Resource: tc.resource, Start: at(0), End: at(60), WouldEvict: tc.would}
			if tc.oomAt != 0 {
				ep.FirstOOMKill = at(tc.oomAt)
			}
			if got := Compare(ep, tc.kubelet, 1).First; got != tc.want {
				t.Errorf("first %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFirstOOMKillerSummary: the summary says when the kernel struck before
// anyone evicted.
func TestFirstOOMKillerSummary(t *testing.T) {
	r := Compare(Episode{Resource: "memory", Start: at(0), End: at(9), WouldEvict: []Action{act("a", 3)}, FirstOOMKill: at(1)}, nil, 1)
	want := "memory pressure for 9s: evictd would have evicted a; the kubelet evicted nothing; the kernel OOM-killed 1 process(es) on the node, the first before anyone evicted"
	if r.First != FirstOOMKiller || r.Summary != want {
		t.Errorf("first %q, summary\n%q; want %q,\n%q", r.First, r.Summary, FirstOOMKiller, want)
	}
}

// TestKubeletResourcesFor: every resource of the loop's episodes maps to
// the kubelet's resources that relieve it.
func TestKubeletResourcesFor(t *testing.T) {
	for _, r := range []string{"memory", "memory-stall", "memory-high", "nodefs", "imagefs", "pids"} {
		ks := KubeletResourcesFor(r)
		if len(ks) == 0 {
			t.Errorf("%s: no kubelet resource", r)
		}
		for _, k := range ks {
			if !slices.Contains(KubeletResources, k) || k == KubeletOther || k == KubeletStorageLimit {
				t.Errorf("%s: kubelet resource %q", r, k)
			}
		}
	}
	if KubeletResourcesFor("swap") != nil {
		t.Error("an unknown resource maps to a kubelet resource")
	}
}
