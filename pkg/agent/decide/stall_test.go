// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// One stall victim per window: while the last one settles, the stall's
// need is covered; afterwards the first stalling pod goes. The quiet pod
// is never the victim, however much it uses.
func TestDecideStall(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.pressureSome": "40%"}})
	th := find(t, ths, thresholds.MemoryPressureSome, true)
	const window = 10_000_000 // µs
	// 70 % of the window stalled.
	a := active(th, window*3/10, window, false)
	thrasher := cand("thrasher", 60*mi, 64*mi, true)
	thrasher.Stall, thrasher.Stalling = 0.8, true
	thrasher.Swap = 4 * mi
	quiet := cand("quiet", 900*mi, 10*mi, false)
	quiet.SkipReason = rank.CheckNotStalling + ": its own memory stall 0.0% is under 5.0%"
	in := Input{
		Now: t0, Status: thresholds.Status{Time: t0, Active: []thresholds.ActiveThreshold{a}},
		Rank: func(thresholds.Signal) []rank.Candidate { return []rank.Candidate{thrasher, quiet} },
	}
	d := Decide(baseOptions(), in)
	if d.Action != Evict || d.Candidate.Name != "thrasher" {
		t.Fatalf("decision %s %q (%s); want the thrasher evicted", d.Action, d.Candidate.Name, d.Reason)
	}
	if want := "own memory stall 80.0% over the window; usage 60Mi within request 64Mi (4Mi of it in swap)"; !strings.HasPrefix(d.Reason, want) {
		t.Errorf("reason %q, want it to start %q", d.Reason, want)
	}
	if d.GraceOverride != nil {
		t.Errorf("a stall eviction's grace was fitted (%d s): there is no memory running out to fit it to", *d.GraceOverride)
	}
	in.StallSettling = true
	d = Decide(baseOptions(), in)
	if d.Action != None || d.Reason != ReasonCovered {
		t.Errorf("while the last victim settles: %s (%s); want none, %q", d.Action, d.Reason, ReasonCovered)
	}
	// The one settling is a soft victim with a 600 s grace: no cover for a
	// hard threshold, whose victim must not wait ten minutes.
	soft := entry("drainer", inflight.Evicted, 600*time.Second, nil)
	soft.Signal = thresholds.MemoryPressureSome
	in.InFlight = []inflight.Entry{soft}
	d = Decide(baseOptions(), in)
	if d.Action != Evict || d.Candidate.Name != "thrasher" {
		t.Errorf("settling on a soft victim with a 600 s grace: %s %q (%s); want the thrasher evicted for the hard threshold", d.Action, d.Candidate.Name, d.Reason)
	}
	soft.ReclaimBy = t0.Add(2 * time.Second) // within the hard horizon: it covers
	in.InFlight = []inflight.Entry{soft}
	if d = Decide(baseOptions(), in); d.Action != None || d.Reason != ReasonCovered {
		t.Errorf("settling on a victim gone within the hard horizon: %s (%s); want none, %q", d.Action, d.Reason, ReasonCovered)
	}
	in.InFlight = nil
	in.StallSettling = false
	in.Rank = func(thresholds.Signal) []rank.Candidate { return []rank.Candidate{quiet} }
	d = Decide(baseOptions(), in)
	if d.Action != None || d.Reason != ReasonNoCandidate {
		t.Errorf("nobody stalling: %s (%s); want none, %q", d.Action, d.Reason, ReasonNoCandidate)
	}
}

// A memory victim's swap comes back as swap, not as available memory.
func TestInFlightMemoryLeavesSwapOut(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	th := find(t, ths, thresholds.MemoryAvailable, true)
	c := cand("swapper", 250*mi, 0, false)
	c.Swap = 100 * mi
	tg := Target{Threshold: th, Need: 200 * mi}
	got := InFlightReclaim(baseOptions(), t0, tg, []rank.Candidate{c}, []inflight.Entry{entry("swapper", "evicted", 0, nil)})
	if got != 150*mi {
		t.Errorf("in flight %d MiB, want 150 (the working set, not the swap)", got/mi)
	}
}

// Only disk signals keep a victim's last usage past its cgroup: a
// swap.available victim counts the swap it holds now, not a figure noted
// for another signal.
func TestInFlightLastUsageIsForDiskOnly(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"swap.available": "10%"}})
	th := find(t, ths, thresholds.SwapAvailable, true)
	c := cand("swapper", 100*mi, 0, false)
	e := entry("swapper", "evicted", 0, map[thresholds.Signal]int64{thresholds.SwapAvailable: 500 * mi})
	got := InFlightReclaim(baseOptions(), t0, Target{Threshold: th, Need: 200 * mi}, []rank.Candidate{c}, []inflight.Entry{e})
	if got != 100*mi {
		t.Errorf("in flight %d MiB, want 100 (its swap now)", got/mi)
	}
}

// A soft memory victim draining for ten minutes settles the stall for soft
// thresholds, never for a hard one: whichever signal the victim went for,
// a hard stall threshold waits only for victims within HardHorizon, or for
// the effect of one that went.
func TestHardStallNotHeldBySoftMemoryVictim(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.pressureSome": "40%"}})
	th := find(t, ths, thresholds.MemoryPressureSome, true)
	const window = 10_000_000 // µs
	thrasher := cand("thrasher", 60*mi, 64*mi, true)
	thrasher.Stall, thrasher.Stalling = 0.8, true
	drainer := entry("drainer", inflight.Evicted, 600*time.Second, nil)
	drainer.Signal = thresholds.MemoryAvailable
	in := Input{
		Now: t0, Status: thresholds.Status{Time: t0, Active: []thresholds.ActiveThreshold{active(th, window*3/10, window, false)}},
		Rank:          func(thresholds.Signal) []rank.Candidate { return []rank.Candidate{thrasher} },
		InFlight:      []inflight.Entry{drainer},
		StallSettling: true, // the family settles on every memory victim in flight
	}
	if d := Decide(baseOptions(), in); d.Action != Evict || d.Candidate.Name != "thrasher" {
		t.Errorf("settling on a soft memory.available victim with a 600 s grace: %s %q (%s); want the thrasher evicted for the hard stall threshold", d.Action, d.Candidate.Name, d.Reason)
	}
	pending := entry("asked", inflight.Pending, 2*time.Second, nil)
	pending.Signal = thresholds.MemoryPressureSome
	in.InFlight = []inflight.Entry{drainer, pending}
	if d := Decide(baseOptions(), in); d.Action != Evict {
		t.Errorf("settling on a call still under way: %s (%s); want an eviction (a waiting call covers no hard target)", d.Action, d.Reason)
	}
	in.InFlight = []inflight.Entry{drainer}
	in.StallGoneRecently = true
	if d := Decide(baseOptions(), in); d.Action != None || d.Reason != ReasonCovered {
		t.Errorf("a victim went less than a window ago: %s (%s); want none, %q", d.Action, d.Reason, ReasonCovered)
	}
	soft := parse(t, thresholds.Spec{Soft: map[string]string{"memory.pressureSome": "40%"}, GracePeriod: map[string]string{"memory.pressureSome": "10s"}})
	in.StallGoneRecently = false
	in.Status.Active = []thresholds.ActiveThreshold{active(find(t, soft, thresholds.MemoryPressureSome, false), window*3/10, window, false)}
	if d := Decide(baseOptions(), in); d.Action != None || d.Reason != ReasonCovered {
		t.Errorf("soft stall threshold while the memory victim drains: %s (%s); want none, %q", d.Action, d.Reason, ReasonCovered)
	}
}

// A call under way covers soft targets (no second pod for the same need);
// a soft one never covers a hard target: an EvictionRequest waiting for its
// responders, with a pod whose grace would end within the horizon, has
// evicted nothing.
func TestPendingCallCoversNoHardTarget(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	hard := find(t, ths, thresholds.MemoryAvailable, true)
	asked := cand("asked", 400*mi, 0, true)
	pending := entry("asked", inflight.Pending, 5*time.Second, nil)
	pending.Signal = thresholds.MemoryAvailable
	tg := Target{Threshold: hard, Need: 200 * mi}
	if got := InFlightReclaim(baseOptions(), t0, tg, []rank.Candidate{asked}, []inflight.Entry{pending}); got != 0 {
		t.Errorf("hard target: a pending call counts %d MiB; want 0", got/mi)
	}
	accepted := pending
	accepted.Origin = inflight.Evicted
	if got := InFlightReclaim(baseOptions(), t0, tg, []rank.Candidate{asked}, []inflight.Entry{accepted}); got != 400*mi {
		t.Errorf("hard target: an accepted eviction within the horizon counts %d MiB; want 400", got/mi)
	}
	hardCall := pending
	hardCall.Hard = true // an Eviction API call, answered within a round trip
	if got := InFlightReclaim(baseOptions(), t0, tg, []rank.Candidate{asked}, []inflight.Entry{hardCall}); got != 400*mi {
		t.Errorf("hard target: a hard call under way counts %d MiB; want 400", got/mi)
	}
	soft := parse(t, thresholds.Spec{Soft: map[string]string{"memory.available": "300Mi"}, GracePeriod: map[string]string{"memory.available": "10s"}})
	tg.Threshold = find(t, soft, thresholds.MemoryAvailable, false)
	if got := InFlightReclaim(baseOptions(), t0, tg, []rank.Candidate{asked}, []inflight.Entry{pending}); got != 400*mi {
		t.Errorf("soft target: a pending call counts %d MiB; want 400", got/mi)
	}
}
