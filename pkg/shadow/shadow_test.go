// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func act(pod string, s float64) Action { return Action{Pod: pod, UID: "uid-" + pod, At: at(s)} }

func TestCompare(t *testing.T) {
	ep := Episode{Resource: "memory", Start: at(0), End: at(60)}
	for _, tc := range []struct {
		name                    string
		would, kubelet          []Action
		oom                     int64
		both, evictdOnly, kOnly []string
		sameOrder, hasLead      bool
		lead                    time.Duration
		summary                 string
	}{
		{name: "agree, evictd first", would: []Action{act("shop/a", 2), act("shop/b", 5)},
			kubelet: []Action{act("shop/a", 12), act("shop/b", 30)}, both: []string{"shop/a", "shop/b"},
			sameOrder: true, hasLead: true, lead: 10 * time.Second,
			summary: "memory pressure for 1m0s: evictd would have evicted 2 pod(s), the kubelet evicted 2; both chose shop/a, shop/b; evictd first, by 10s; no OOM kill"},
		{name: "the kubelet picks another pod, and the kernel kills", would: []Action{act("shop/a", 20)},
			kubelet: []Action{act("shop/small", 12), act("old/x", -5), act("late/y", 61)}, oom: 2,
			evictdOnly: []string{"shop/a"}, kOnly: []string{"shop/small"}, sameOrder: true, hasLead: true, lead: -8 * time.Second,
			summary: "memory pressure for 1m0s: evictd would have evicted 1 pod(s), the kubelet evicted 1; both chose none of the same pods; only evictd shop/a; only the kubelet shop/small; the kubelet first, by 8s; the kernel OOM-killed 2 process(es) on the node"},
		{name: "another order", would: []Action{act("a", 1), act("b", 2), act("a", 3)}, kubelet: []Action{act("b", 4), act("a", 9)},
			both: []string{"a", "b"}, hasLead: true, lead: 3 * time.Second,
			summary: "memory pressure for 1m0s: evictd would have evicted 2 pod(s), the kubelet evicted 2; both chose a, b (in another order); evictd first, by 3s; no OOM kill"},
		{name: "only evictd", would: []Action{act("a", 1)}, oom: -1, evictdOnly: []string{"a"}, sameOrder: true,
			summary: "memory pressure for 1m0s: evictd would have evicted a; the kubelet evicted nothing; OOM kills unknown"},
		{name: "only the kubelet", kubelet: []Action{act("a", 1)}, kOnly: []string{"a"}, sameOrder: true,
			summary: "memory pressure for 1m0s: the kubelet evicted a; evictd would have evicted nothing; no OOM kill"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ep
			e.WouldEvict = tc.would
			r := Compare(e, tc.kubelet, tc.oom)
			if !slices.Equal(r.Both, tc.both) || !slices.Equal(r.EvictdOnly, tc.evictdOnly) || !slices.Equal(r.KubeletOnly, tc.kOnly) {
				t.Errorf("both %v evictd-only %v kubelet-only %v, want %v %v %v", r.Both, r.EvictdOnly, r.KubeletOnly, tc.both, tc.evictdOnly, tc.kOnly)
			}
			if r.SameOrder != tc.sameOrder || r.HasLead != tc.hasLead || r.Lead != tc.lead {
				t.Errorf("same order %v lead %v (%v), want %v %v (%v)", r.SameOrder, r.Lead, r.HasLead, tc.sameOrder, tc.lead, tc.hasLead)
			}
			if r.Summary != tc.summary {
				t.Errorf("summary\n%q, want\n%q", r.Summary, tc.summary)
			}
		})
	}
}

// The pod says the second of the kubelet's eviction, truncated (its
// condition's lastTransitionTime): one in the episode's first second reads
// as before its start and still counts.
func TestCompareWholeSecondTimes(t *testing.T) {
	ep := Episode{Resource: "memory", Start: t0.Add(400 * time.Millisecond), End: at(60)}
	r := Compare(ep, []Action{{Pod: "ns/b", UID: "u", At: t0}}, 0)
	if !slices.Equal(r.KubeletOnly, []string{"ns/b"}) || len(r.KubeletEvicted) != 1 {
		t.Errorf("kubelet evicted %v, only the kubelet %v; want ns/b", r.KubeletEvicted, r.KubeletOnly)
	}
	// A sub-second time (when evictd saw the pod evicted) is exact.
	if r := Compare(ep, []Action{{Pod: "ns/b", UID: "u", At: at(0.3)}}, 0); len(r.KubeletEvicted) != 0 {
		t.Errorf("kubelet evicted %v, want none: ns/b went before the episode began", r.KubeletEvicted)
	}
	// The end is not widened: an eviction of the second after it is after it.
	ep.End = at(59.6)
	if r := Compare(ep, []Action{{Pod: "ns/c", UID: "v", At: at(60)}}, 0); len(r.KubeletEvicted) != 0 {
		t.Errorf("kubelet evicted %v, want none: ns/c went after the episode ended", r.KubeletEvicted)
	}
}
