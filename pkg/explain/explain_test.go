// SPDX-License-Identifier: Apache-2.0

package explain

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

const mi = 1 << 20

func cand(name string, usage, request int64, prio int32, skip string) rank.Candidate {
	return rank.Candidate{Namespace: "shop", Name: name, UID: "uid-" + name, Eligible: skip == "", SkipReason: skip,
		Usage: usage, Request: request, HasUsage: true, ExceedsRequest: usage > request, Priority: prio, EffectivePriority: prio}
}

func parse(t *testing.T, spec thresholds.Spec) []thresholds.Threshold {
	t.Helper()
	ths, err := thresholds.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ths
}

func names(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name)
	}
	return out
}

func TestExplain(t *testing.T) {
	ths := parse(t, thresholds.Spec{
		Hard:           map[string]string{"memory.available": "300Mi", "nodefs.available": "10%", "pid.available": "100"},
		Soft:           map[string]string{"memory.available": "500Mi"},
		GracePeriod:    map[string]string{"memory.available": "30s"},
		MinimumReclaim: map[string]string{"memory.available": "100Mi"},
	})
	memRank := []rank.Candidate{
		cand("cart", 300*mi, 100*mi, 0, ""),
		cand("search", 120*mi, 200*mi, 0, ""),
		cand("etcd", 900*mi, 0, 2000001000, "critical: priority 2000001000 is system-critical"),
	}
	diskRank := []rank.Candidate{cand("search", 5*mi, 0, 0, "")}
	ranker := func(s thresholds.Signal) []rank.Candidate {
		if s == thresholds.NodeFsAvailable {
			return diskRank
		}
		return memRank
	}
	for _, tc := range []struct {
		name       string
		memAvail   int64
		need       int64
		next       []string
		short      int64
		hardMet    bool
		softMet    bool
		afterLast  int64
		afterGrace bool
	}{
		{name: "hard met: the first pod covers the need and the minimum reclaim", memAvail: 250 * mi, need: 150 * mi,
			next: []string{"cart"}, hardMet: true, softMet: true, afterLast: 550 * mi},
		{name: "hard met: the eligible pods fall short; the critical one is never counted", memAvail: 0, need: 400 * mi,
			next: []string{"cart", "search"}, short: 0, hardMet: true, softMet: true, afterLast: 420 * mi},
		{name: "only the soft threshold met: its need, after its grace", memAvail: 450 * mi, need: 150 * mi, afterGrace: true,
			next: []string{"cart"}, softMet: true, afterLast: 750 * mi},
		{name: "nothing met: who would go first", memAvail: 2048 * mi, next: []string{"cart"}, afterLast: 2348 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Explain(Input{Thresholds: ths, Rank: ranker, Signals: map[thresholds.Signal]thresholds.Observation{
				thresholds.MemoryAvailable: {Available: tc.memAvail, Capacity: 4096 * mi},
				thresholds.NodeFsAvailable: {Available: 50 * 1024 * mi, Capacity: 100 * 1024 * mi},
			}})
			var got []thresholds.Signal
			for _, s := range r.Signals {
				got = append(got, s.Signal)
			}
			if want := []thresholds.Signal{thresholds.MemoryAvailable, thresholds.NodeFsAvailable, thresholds.PIDAvailable}; !slices.Equal(got, want) {
				t.Fatalf("signals %v, want %v", got, want)
			}
			mem := r.Signals[0]
			if len(mem.Thresholds) != 2 || mem.Thresholds[0].Met != tc.hardMet || mem.Thresholds[1].Met != tc.softMet {
				t.Errorf("thresholds %+v, want hard met %v, soft met %v", mem.Thresholds, tc.hardMet, tc.softMet)
			}
			if mem.Thresholds[0].Amount != 300*mi || mem.Thresholds[0].Reclaim != 100*mi || !mem.Thresholds[0].Hard {
				t.Errorf("hard threshold %+v, want 300Mi with 100Mi reclaim", mem.Thresholds[0])
			}
			if mem.Need != tc.need || mem.NeedAfterGrace != tc.afterGrace {
				t.Errorf("need %d MiB (after grace %v), want %d MiB (%v)", mem.Need/mi, mem.NeedAfterGrace, tc.need/mi, tc.afterGrace)
			}
			if !slices.Equal(names(mem.Next), tc.next) || mem.Short != tc.short {
				t.Errorf("next %v short %d, want %v short %d", names(mem.Next), mem.Short, tc.next, tc.short)
			}
			if last := mem.Next[len(mem.Next)-1]; last.AvailableAfter != tc.afterLast {
				t.Errorf("available after %s: %d MiB, want %d MiB", last.Name, last.AvailableAfter/mi, tc.afterLast/mi)
			}
			if p := mem.Pods[0]; p.Rank != 1 || p.Why != "usage 300Mi exceeds request 100Mi, priority 0" {
				t.Errorf("first pod %+v, want rank 1, over its request", p)
			}
			if p := mem.Pods[1]; p.Rank != 2 || p.Why != "usage 120Mi within request 200Mi, priority 0" {
				t.Errorf("second pod %+v, want rank 2, within its request", p)
			}
			if p := mem.Pods[2]; p.Rank != 0 || p.Eligible || !strings.HasPrefix(p.Why, "critical:") {
				t.Errorf("critical pod %+v, want no rank and its skip reason", p)
			}
			if pid := r.Signals[2]; pid.Measured || len(pid.Pods) != 0 || pid.Thresholds[0].Met {
				t.Errorf("pid.available unmeasured in this observation, yet %+v", pid)
			}
		})
	}
}

// A running agent's held pods keep their place but are passed over: the
// next to go is the first pod free to go.
func TestExplainHeldPods(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	cands := []rank.Candidate{cand("cart", 300*mi, 100*mi, 0, ""), cand("search", 120*mi, 200*mi, 0, ""),
		cand("etcd", 900*mi, 0, 2000001000, "critical: priority 2000001000 is system-critical")}
	r := Explain(Input{Thresholds: ths,
		Rank: func(thresholds.Signal) []rank.Candidate { return cands },
		Held: map[types.UID]string{"uid-cart": "in flight: evicted at 12:00:01, its grace period ends by 12:00:31"},
		Signals: map[thresholds.Signal]thresholds.Observation{
			thresholds.MemoryAvailable: {Available: 250 * mi, Capacity: 4096 * mi}}})
	mem := r.Signals[0]
	if p := mem.Pods[0]; p.Rank != 1 || p.Eligible || !p.Held || !strings.HasPrefix(p.Why, "in flight:") {
		t.Errorf("held pod %+v, want rank 1 kept, not eligible, held with its reason", p)
	}
	if p := mem.Pods[1]; p.Rank != 2 || !p.Eligible {
		t.Errorf("free pod %+v, want rank 2, eligible", p)
	}
	if got := names(mem.Next); !slices.Equal(got, []string{"search"}) {
		t.Errorf("next %v, want [search]: the held pod is passed over", got)
	}
}

// The agent's decision leads: the pod it names goes first, whatever the
// ranking's first (a terminating pod evicted again, one past its
// PodDisruptionBudget), and what comes back from pods in flight and the
// image collection is not asked of more evictions.
func TestExplainFollowsTheAgentsDecision(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	memRank := []rank.Candidate{cand("cart", 300*mi, 100*mi, 0, ""), cand("search", 120*mi, 200*mi, 0, ""), cand("web", 200*mi, 0, 0, "")}
	in := Input{
		Thresholds: ths,
		Signals:    map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: 100 * mi, Capacity: 4096 * mi}},
		Rank:       func(thresholds.Signal) []rank.Candidate { return memRank },
	}
	for _, tc := range []struct {
		name     string
		decision Decision
		next     []string
		need     int64
	}{
		{"the agent's pick first", Decision{Action: ActionEvict, Pod: "shop/search", Need: 200 * mi}, []string{"search", "cart"}, 200 * mi},
		{"reclaim in flight covers it", Decision{Action: ActionWait, Need: 200 * mi, InFlight: 250 * mi}, []string{"cart"}, 200 * mi},
		{"in flight covers part", Decision{Action: ActionEvict, Pod: "shop/cart", Need: 600 * mi, InFlight: 250 * mi}, []string{"cart", "search"}, 600 * mi},
		{"held by its minimum reclaim", Decision{Action: ActionEvict, Pod: "shop/cart", Need: 500 * mi, HeldByMinReclaim: true}, []string{"cart", "search", "web"}, 500 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in.Decisions = map[thresholds.Signal]Decision{thresholds.MemoryAvailable: tc.decision}
			s := Explain(in).Signals[0]
			if got := names(s.Next); !slices.Equal(got, tc.next) || s.Need != tc.need || s.Decision == nil || s.Decision.Action != tc.decision.Action {
				t.Errorf("need %d, next %v, decision %+v; want need %d, next %v, the agent's decision", s.Need, got, s.Decision, tc.need, tc.next)
			}
		})
	}
}

// TestOnly: a report narrowed to one signal keeps that signal's entry
// whole and drops the others; a signal evictd has no threshold for leaves
// an empty list (not nil: the JSON says "signals": []).
func TestOnly(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi", "nodefs.available": "10%", "pid.available": "100"}})
	obs := map[thresholds.Signal]thresholds.Observation{
		thresholds.MemoryAvailable: {Available: 200 * mi, Capacity: 8192 * mi},
		thresholds.NodeFsAvailable: {Available: 50 * mi, Capacity: 1000 * mi},
	}
	rep := Explain(Input{Thresholds: ths, Signals: obs, Rank: func(thresholds.Signal) []rank.Candidate {
		return []rank.Candidate{cand("cart", 300*mi, 100*mi, 0, "")}
	}})
	if len(rep.Signals) != 3 {
		t.Fatalf("report of %d signals; want memory, nodefs and pid", len(rep.Signals))
	}
	disk := rep.Only(thresholds.NodeFsAvailable)
	if len(disk.Signals) != 1 || disk.Signals[0].Signal != thresholds.NodeFsAvailable {
		t.Fatalf("Only(nodefs.available) = %+v; want its entry alone", disk.Signals)
	}
	if d := disk.Signals[0]; d.Need != 50*mi || len(d.Next) != 1 || d.Next[0].Name != "cart" || len(d.Pods) != 1 {
		t.Errorf("nodefs.available's entry changed by Only: %+v", d)
	}
	if len(rep.Signals) != 3 {
		t.Errorf("Only changed the report it narrowed: %d signals left", len(rep.Signals))
	}
	none := rep.Only(thresholds.SwapAvailable)
	if none.Signals == nil || len(none.Signals) != 0 {
		t.Errorf("Only(swap.available), no threshold for it: %#v; want an empty, non-nil list", none.Signals)
	}
}
