// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

const mi = 1 << 20

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func parse(t *testing.T, spec thresholds.Spec) []thresholds.Threshold {
	t.Helper()
	ths, err := thresholds.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ths
}

func find(t *testing.T, ths []thresholds.Threshold, s thresholds.Signal, hard bool) thresholds.Threshold {
	t.Helper()
	for _, th := range ths {
		if th.Signal == s && th.Hard() == hard {
			return th
		}
	}
	t.Fatalf("no %s threshold (hard=%v) in %v", s, hard, ths)
	return thresholds.Threshold{}
}

// active builds the ActiveThreshold the tracker would report for th at the
// given available amount.
func active(th thresholds.Threshold, available, capacity int64, held bool) thresholds.ActiveThreshold {
	target := th.Value.Amount(capacity)
	if th.MinReclaim != nil {
		target += th.MinReclaim.Amount(capacity)
	}
	return thresholds.ActiveThreshold{
		Threshold:        th,
		Observation:      thresholds.Observation{Available: available, Capacity: capacity, Time: t0},
		Since:            t0.Add(-time.Second),
		HeldByMinReclaim: held,
		Reclaim:          target - available,
	}
}

func pod(name string, grace int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
}

func cand(name string, usage, request int64, eligible bool) rank.Candidate {
	return rank.Candidate{
		Namespace: "ns", Name: name, UID: "uid-" + name, Eligible: eligible,
		Usage: usage, Request: request, HasUsage: usage >= 0, ExceedsRequest: usage > request,
		Pod: pod(name, 30),
	}
}

// terminatingCand is a candidate whose deletion was requested, its grace
// ending in left.
func terminatingCand(name string, usage int64, left time.Duration) rank.Candidate {
	c := cand(name, usage, 0, false)
	c.SkipReason = rank.CheckTerminating + ": deletion requested"
	ts := metav1.NewTime(t0.Add(left))
	c.Pod.DeletionTimestamp = &ts
	return c
}

// noStats is a candidate whose cgroup is gone (or was never read).
func noStats(name string, eligible bool) rank.Candidate {
	c := cand(name, 0, 0, eligible)
	c.HasUsage = false
	return c
}

func entry(name string, origin inflight.Origin, reclaimBy time.Duration, last map[thresholds.Signal]int64) inflight.Entry {
	if last == nil {
		last = map[thresholds.Signal]int64{}
	}
	return inflight.Entry{UID: types.UID("uid-" + name), Pod: "ns/" + name, Origin: origin, Start: t0.Add(-time.Second),
		ReclaimBy: t0.Add(reclaimBy), Expires: t0.Add(reclaimBy + 30*time.Second), LastUsage: last}
}

func uids(names ...string) map[types.UID]bool {
	m := map[types.UID]bool{}
	for _, n := range names {
		m[types.UID("uid-"+n)] = true
	}
	return m
}

func baseOptions() Options {
	o := Options{Evict: evict.Defaults(), HardHorizon: 7 * time.Second, Lead: 2 * time.Second, Grace: predict.DefaultGracePolicy()}
	return o
}

func TestDecide(t *testing.T) {
	ths := parse(t, thresholds.Spec{
		Hard:           map[string]string{"memory.available": "300Mi", "nodefs.available": "1Gi", "pid.available": "100"},
		Soft:           map[string]string{"memory.available": "500Mi"},
		GracePeriod:    map[string]string{"memory.available": "30s"},
		MinimumReclaim: map[string]string{"memory.available": "100Mi"},
	})
	memHard := find(t, ths, thresholds.MemoryAvailable, true)
	memSoft := find(t, ths, thresholds.MemoryAvailable, false)
	diskHard := find(t, ths, thresholds.NodeFsAvailable, true)
	pidHard := find(t, ths, thresholds.PIDAvailable, true)
	const memCap = 4096 * mi

	// Memory ranking: a (400Mi over request), b (200Mi), c (not eligible,
	// terminating, 150Mi), d (gone: no stats).
	memRank := []rank.Candidate{cand("a", 400*mi, 100*mi, true), cand("b", 200*mi, 100*mi, true), cand("c", 150*mi, 0, false), noStats("d", false)}
	diskRank := []rank.Candidate{cand("a", 2048*mi, 0, true), cand("b", 100*mi, 0, true), noStats("d", false)}
	pidRank := []rank.Candidate{cand("b", 500, 0, true), cand("a", 20, 0, true)}
	ranker := func(s thresholds.Signal) []rank.Candidate {
		switch s {
		case thresholds.NodeFsAvailable:
			return diskRank
		case thresholds.PIDAvailable:
			return pidRank
		}
		return memRank
	}
	hardAt := func(avail int64) thresholds.Status { // need = 400Mi − avail
		return thresholds.Status{Active: []thresholds.ActiveThreshold{active(memHard, avail, memCap, false)}}
	}
	softAt := func(avail int64) thresholds.Status {
		return thresholds.Status{Active: []thresholds.ActiveThreshold{active(memSoft, avail, memCap, false)}}
	}
	bestEffort := baseOptions()
	bestEffort.Evict.PDBPolicy = evict.PDBBestEffort

	tests := []struct {
		name   string
		opts   Options
		in     Input
		action Action
		victim string // "" for None
		rank   int
		reason string // substring of Decision.Reason
		need   int64  // Target.Remaining() of the decision's target, when not 0
	}{
		{name: "nothing active", in: Input{}, action: None, reason: ReasonNoThreshold},
		{name: "stale observation is not acted on twice",
			in: Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{func() thresholds.ActiveThreshold {
				a := active(memHard, 250*mi, memCap, false)
				a.Stale = true
				return a
			}()}}},
			action: None, reason: ReasonNoThreshold},
		{name: "hard threshold evicts the first ranked pod",
			in:     Input{Status: hardAt(250 * mi)},
			action: Evict, victim: "a", rank: 1, reason: "usage 400Mi exceeds request 100Mi", need: 150 * mi},
		{name: "reclaim in flight that covers the need: nothing more",
			in:     Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{entry("a", inflight.Evicted, 5*time.Second, nil)}},
			action: None, reason: ReasonCovered},
		{name: "need exactly equal to reclaim in flight: nothing more (never more than needed)",
			in:     Input{Status: hardAt(0), InFlight: []inflight.Entry{entry("a", inflight.Evicted, time.Second, nil)}},
			action: None, reason: ReasonCovered},
		{name: "pressure rising past what is in flight: next pod",
			in:     Input{Status: hardAt(-1), InFlight: []inflight.Entry{entry("a", inflight.Evicted, time.Second, nil)}},
			action: Evict, victim: "b", rank: 2, need: 1},
		{name: "terminating pod found on the node counts as in flight",
			in:     Input{Status: hardAt(300 * mi), InFlight: []inflight.Entry{entry("c", inflight.Terminating, time.Second, nil)}},
			action: None, reason: ReasonCovered},
		{name: "in-flight pod whose cgroup is gone gave its memory back already",
			in:     Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{entry("d", inflight.Evicted, time.Second, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 900 * mi})}},
			action: Evict, victim: "a", need: 150 * mi},
		{name: "memory a victim gave back since the last observation still counts for this one (the node was read before it left)",
			in: Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{func() inflight.Entry {
				e := entry("d", inflight.Evicted, time.Second, nil)
				e.MemoryReleased = 900 * mi
				return e
			}()}},
			action: None, reason: ReasonCovered},
		{name: "memory given back counts on top of what the victim still holds, and not for disk",
			in: Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{active(memHard, 100*mi, memCap, false), active(diskHard, 512*mi, 10240*mi, false)}},
				InFlight: []inflight.Entry{func() inflight.Entry {
					e := entry("c", inflight.Evicted, time.Second, map[thresholds.Signal]int64{})
					e.MemoryReleased = 150 * mi
					return e
				}()}},
			action: Evict, victim: "a", need: 512 * mi},
		{name: "memory given back counts for a hard threshold even when the victim's grace is long",
			in: Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{func() inflight.Entry {
				e := entry("a", inflight.Evicted, 25*time.Second, nil)
				e.MemoryReleased = 150 * mi
				return e
			}()}},
			action: None, reason: ReasonCovered},
		{name: "a victim whose object is gone counts what its cgroup still holds",
			in: Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{func() inflight.Entry {
				e := entry("gone", inflight.Evicted, time.Second, nil)
				e.ObjectGone, e.MemorySeen = true, 150*mi
				return e
			}()}},
			action: None, reason: ReasonCovered},
		{name: "and only that",
			in: Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{func() inflight.Entry {
				e := entry("gone", inflight.Evicted, time.Second, nil)
				e.ObjectGone, e.MemorySeen = true, 100*mi
				return e
			}()}},
			action: Evict, victim: "a", need: 50 * mi},
		{name: "escalation: a soft eviction's long grace does not hold back a hard threshold",
			in:     Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{entry("a", inflight.Evicted, 25*time.Second, nil)}},
			action: Evict, victim: "b", rank: 2, need: 150 * mi},
		{name: "the same long grace does hold back a soft threshold",
			in:     Input{Status: softAt(450 * mi), InFlight: []inflight.Entry{entry("a", inflight.Evicted, 25*time.Second, nil)}},
			action: None, reason: ReasonCovered},
		{name: "minimum reclaim keeps evicting above the threshold",
			in:     Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{active(memHard, 350*mi, memCap, true)}}},
			action: Evict, victim: "a", rank: 1, need: 50 * mi},
		{name: "PDB-blocked pod: the next one",
			in:     Input{Status: hardAt(250 * mi), Blocked: uids("a")},
			action: Evict, victim: "b", rank: 2},
		{name: "pod tried in this pass: the next one",
			in:     Input{Status: hardAt(250 * mi), Tried: uids("a")},
			action: Evict, victim: "b", rank: 2},
		{name: "every eligible pod blocked, strict policy: nothing",
			in:     Input{Status: hardAt(250 * mi), Blocked: uids("a", "b")},
			action: None, reason: ReasonAllBlocked},
		{name: "every eligible pod blocked, best effort, hard threshold met: forced delete of the first",
			opts: bestEffort, in: Input{Status: hardAt(250 * mi), Blocked: uids("a", "b")},
			action: ForceDelete, victim: "a", rank: 1, reason: ReasonAllBlocked},
		{name: "best effort skips a forced delete already tried",
			opts: bestEffort, in: Input{Status: hardAt(250 * mi), Blocked: uids("a", "b"), Tried: uids("a")},
			action: ForceDelete, victim: "b", rank: 2},
		{name: "best effort, but only minimum reclaim holds the hard threshold: nothing",
			opts: bestEffort, in: Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{active(memHard, 350*mi, memCap, true)}}, Blocked: uids("a", "b")},
			action: None, reason: ReasonAllBlocked},
		{name: "best effort, soft threshold: nothing",
			opts: bestEffort, in: Input{Status: softAt(450 * mi), Blocked: uids("a", "b")},
			action: None, reason: ReasonAllBlocked},
		{name: "best effort, one eligible pod not blocked yet: evict it, no forced delete",
			opts: bestEffort, in: Input{Status: hardAt(250 * mi), Blocked: uids("a")},
			action: Evict, victim: "b"},
		{name: "hard threshold: a pod terminating on a long grace goes again first",
			in: Input{Status: hardAt(250 * mi), Rank: func(thresholds.Signal) []rank.Candidate {
				return append([]rank.Candidate{cand("a", 400*mi, 0, true)}, terminatingCand("slow", 500*mi, 600*time.Second))
			}},
			action: Evict, victim: "slow", reason: "evicted again with the hard grace"},
		{name: "a terminating pod already evicted again (its entry within the horizon) is not picked while its object is stale",
			in: Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{entry("slow", inflight.Evicted, 5*time.Second, nil)}, Rank: func(thresholds.Signal) []rank.Candidate {
				return append([]rank.Candidate{cand("a", 400*mi, 0, true)}, terminatingCand("slow", 100*mi, 600*time.Second))
			}},
			action: Evict, victim: "a", need: 50 * mi},
		{name: "refused pod (an admission policy denied it): the next one",
			in:     Input{Status: hardAt(250 * mi), Refused: uids("a")},
			action: Evict, victim: "b", rank: 2},
		{name: "every eligible pod refused: nothing, and says so",
			in:     Input{Status: hardAt(250 * mi), Refused: uids("a", "b")},
			action: None, reason: ReasonAllRefused},
		{name: "best effort never deletes past a refusal: the blocked one goes, not the refused one",
			opts: bestEffort, in: Input{Status: hardAt(250 * mi), Refused: uids("a"), Blocked: uids("b")},
			action: ForceDelete, victim: "b", rank: 2},
		{name: "best effort, every eligible pod refused: no forced delete",
			opts: bestEffort, in: Input{Status: hardAt(250 * mi), Refused: uids("a", "b")},
			action: None, reason: ReasonAllRefused},
		{name: "no eligible pod left",
			in: Input{Status: hardAt(250 * mi), InFlight: []inflight.Entry{entry("a", inflight.Evicted, time.Second, map[thresholds.Signal]int64{}), entry("b", inflight.Evicted, time.Second, nil)}, Rank: func(thresholds.Signal) []rank.Candidate {
				return []rank.Candidate{noStats("a", true), noStats("b", true)}
			}},
			action: None, reason: ReasonNoCandidate},
		{name: "memory before disk before pid",
			in: Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{
				active(pidHard, 50, 1000, false), active(diskHard, 512*mi, 10240*mi, false), active(memHard, 250*mi, memCap, false)}}},
			action: Evict, victim: "a", need: 150 * mi},
		{name: "memory covered by reclaim in flight: disk is acted on",
			in: Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{active(memHard, 250*mi, memCap, false), active(diskHard, 512*mi, 10240*mi, false)}},
				InFlight: []inflight.Entry{entry("c", inflight.Terminating, time.Second, nil)}},
			action: Evict, victim: "a", need: 512 * mi},
		{name: "disk: an in-flight pod's last usage still counts after its cgroup is gone",
			in: Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{active(diskHard, 512*mi, 10240*mi, false)}},
				InFlight: []inflight.Entry{entry("d", inflight.Evicted, time.Second, map[thresholds.Signal]int64{thresholds.NodeFsAvailable: 600 * mi})}},
			action: None, reason: ReasonCovered},
		{name: "pid: the pod with most processes",
			in:     Input{Status: thresholds.Status{Active: []thresholds.ActiveThreshold{active(pidHard, 50, 1000, false)}}},
			action: Evict, victim: "b", need: 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts.HardHorizon == 0 {
				opts = baseOptions()
			}
			in := tc.in
			in.Now = t0
			if in.Rank == nil {
				in.Rank = ranker
			}
			d := Decide(opts, in)
			if d.Action != tc.action {
				t.Fatalf("action = %s (%s), want %s; targets %+v", d.Action, d.Reason, tc.action, d.Targets)
			}
			if tc.victim != "" && d.Candidate.Name != tc.victim {
				t.Errorf("victim = %q, want %q", d.Candidate.Name, tc.victim)
			}
			if tc.rank != 0 && d.Rank != tc.rank {
				t.Errorf("rank = %d, want %d", d.Rank, tc.rank)
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to contain %q", d.Reason, tc.reason)
			}
			if tc.need != 0 && d.Target.Remaining() != tc.need {
				t.Errorf("remaining need = %d (need %d − in flight %d), want %d", d.Target.Remaining(), d.Target.Need, d.Target.InFlight, tc.need)
			}
			if d.Action == None && d.Candidate.Name != "" {
				t.Errorf("no action but a candidate %q", d.Candidate.Name)
			}
		})
	}
}

func TestDecideActsEarlyOnAPredictedCrossing(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	const memCap = 4096 * mi
	ranking := []rank.Candidate{cand("a", 400*mi, 100*mi, true), cand("b", 200*mi, 100*mi, true)}
	tests := []struct {
		name      string
		actEarly  bool
		avail     int64
		rate      float64
		sustained bool
		action    Action
		need      int64
	}{
		// 400Mi − 100Mi/s × 2s lead = 200Mi predicted: 100Mi short.
		{"crossing within the lead", true, 400 * mi, 100 * mi, true, Evict, 100 * mi},
		{"crossing later than the lead", true, 400 * mi, 10 * mi, true, None, 0},
		{"not falling", true, 400 * mi, -50 * mi, true, None, 0},
		{"acting early switched off", false, 400 * mi, 100 * mi, true, None, 0},
		// The same rate from a single step is not extrapolated.
		{"one-off step, not a sustained fall", true, 400 * mi, 100 * mi, false, None, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			opts.ActEarly = tc.actEarly
			in := Input{
				Now: t0, Thresholds: ths,
				Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: tc.avail, Capacity: memCap, Time: t0}},
				Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: tc.rate},
				Sustained:    map[thresholds.Signal]bool{thresholds.MemoryAvailable: tc.sustained},
				Rank:         func(thresholds.Signal) []rank.Candidate { return ranking },
			}
			d := Decide(opts, in)
			if d.Action != tc.action {
				t.Fatalf("action = %s (%s), want %s", d.Action, d.Reason, tc.action)
			}
			if tc.action == None {
				return
			}
			if !d.Target.Early || d.Candidate.Name != "a" || d.Target.Remaining() != tc.need {
				t.Errorf("decision %+v: want an early eviction of a needing %d", d.Target, tc.need)
			}
			if !strings.Contains(d.Reason, "predicted below 300Mi") {
				t.Errorf("reason %q does not say it was predicted", d.Reason)
			}
		})
	}

	// A predicted crossing is never a reason to delete past a PDB.
	opts := baseOptions()
	opts.ActEarly = true
	opts.Evict.PDBPolicy = evict.PDBBestEffort
	d := Decide(opts, Input{
		Now: t0, Thresholds: ths,
		Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: 400 * mi, Capacity: memCap, Time: t0}},
		Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: 100 * mi},
		Sustained:    map[thresholds.Signal]bool{thresholds.MemoryAvailable: true},
		Rank:         func(thresholds.Signal) []rank.Candidate { return ranking },
		Blocked:      uids("a", "b"),
	})
	if d.Action != None || d.Reason != ReasonAllBlocked {
		t.Errorf("predicted crossing, all blocked, best effort: %s (%s), want none", d.Action, d.Reason)
	}
}

// TestDecideOneEarlyBetAtATime: a predicted crossing whose need the victim
// in flight does not cover (the trend, extrapolated, asks for more) gets no
// second early eviction while that victim still holds memory; the first
// bet's effect on the trend shows first. Seen on the real node twice: a fill
// that stopped (a load coming up, a leaker's first allocation) read as a
// fall that went on, and two pods evicted for a crossing that never came.
// A met threshold is not a bet: it evicts past the victim in flight as ever.
func TestDecideOneEarlyBetAtATime(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	const memCap = 4096 * mi
	ranking := []rank.Candidate{cand("a", 150*mi, 100*mi, true), cand("b", 200*mi, 100*mi, true), cand("c", 200*mi, 100*mi, true)}
	// a was evicted early and still holds 150Mi. Falling 250Mi/s, over the
	// 2 s lead: from 700Mi the prediction is 200Mi, 100Mi short, which a
	// covers; from 400Mi it is −100Mi, 400Mi short, which a does not (and
	// before this rule b went at once).
	for _, tc := range []struct {
		name   string
		avail  int64
		hard   bool // the threshold is met now
		action Action
	}{
		{"predicted, the victim in flight covers it", 700 * mi, false, None},
		{"predicted past what the victim in flight covers", 400 * mi, false, None},
		{"met past what the victim in flight covers", 100 * mi, true, Evict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			opts.ActEarly = true
			obs := thresholds.Observation{Available: tc.avail, Capacity: memCap, Time: t0}
			in := Input{
				Now: t0, Thresholds: ths,
				Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: obs},
				Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: 250 * mi},
				Sustained:    map[thresholds.Signal]bool{thresholds.MemoryAvailable: true},
				Rank:         func(thresholds.Signal) []rank.Candidate { return ranking },
				InFlight:     []inflight.Entry{entry("a", inflight.Evicted, 5*time.Second, nil)},
			}
			if tc.hard {
				in.Status = thresholds.Status{Active: []thresholds.ActiveThreshold{active(find(t, ths, thresholds.MemoryAvailable, true), tc.avail, memCap, false)}}
			}
			d := Decide(opts, in)
			if d.Action != tc.action {
				t.Fatalf("action = %s on %s (%s), want %s", d.Action, d.Candidate.Name, d.Reason, tc.action)
			}
			if d.Action == Evict && d.Candidate.Name != "b" {
				t.Errorf("victim %s, want b", d.Candidate.Name)
			}
		})
	}
}

// TestDecideEarlyBetBounded holds EarlyMargin and the cap on an early
// need. Before them, every case below but the last made an early target:
// the crossing within the 2s lead was enough.
func TestDecideEarlyBetBounded(t *testing.T) {
	ths := parse(t, thresholds.Spec{
		Hard:           map[string]string{"memory.available": "300Mi"},
		MinimumReclaim: map[string]string{"memory.available": "500Mi"},
	})
	const memCap = 4096 * mi
	for _, tc := range []struct {
		name     string
		avail    int64
		rate     float64 // Mi/s
		wantNeed int64   // 0: no early target
	}{
		// 75Mi/s falls 150Mi over the lead: the crossing keeps available
		// above 150Mi on its own.
		{"a fall the threshold holds", 320 * mi, 75, 0},
		// 1Gi/s predicts the crossing within the lead from 2.3Gi, but
		// 460Mi is more than half the threshold above it.
		{"outside the band", 460 * mi, 1024, 0},
		// 400Mi/s from 440Mi: 800Mi falls over the lead, 660Mi below
		// the threshold predicted; minimum reclaim (500Mi) would make it
		// 1160Mi, more than the trend takes in the lead.
		{"inside the band, fast: the need is the predicted shortfall", 440 * mi, 400, 660 * mi},
		// 1Gi/s from 301Mi: the shortfall predicted (2047Mi) is the
		// whole fall over the lead (2048Mi) less the 1Mi still above.
		{"just above the threshold", 301 * mi, 1024, 2047 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			opts.ActEarly = true
			in := Input{
				Now: t0, Thresholds: ths,
				Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: tc.avail, Capacity: memCap, Time: t0}},
				Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: tc.rate * mi},
				Sustained:    map[thresholds.Signal]bool{thresholds.MemoryAvailable: true},
			}
			targets := Targets(opts, in)
			if tc.wantNeed == 0 {
				if len(targets) != 0 {
					t.Fatalf("targets %+v, want none: no bet", targets)
				}
				return
			}
			if len(targets) != 1 || !targets[0].Early {
				t.Fatalf("targets %+v, want one early target", targets)
			}
			if got := targets[0].Need; got != tc.wantNeed {
				t.Errorf("need %dMi, want %dMi", got/mi, tc.wantNeed/mi)
			}
		})
	}
}

func TestDecideFitsGraceToTheTimeLeft(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}, Soft: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "10s"}})
	const memCap = 4096 * mi
	tests := []struct {
		name      string
		hard      bool
		avail     int64
		rate      float64
		sustained bool
		fit       bool
		podGrace  int64 // 0: 30
		softCap   int64 // --eviction-max-pod-grace-period; 0: the default 30
		hardCap   int64 // --eviction-hard-grace-period; 0: the default 5
		wantGrace int64 // 0: no override
	}{
		{name: "not falling: the pod's own (capped) grace", hard: true, avail: 250 * mi, sustained: true, fit: true},
		{name: "slow fall, room for the hard cap", hard: true, avail: 250 * mi, rate: 1 * mi, sustained: true, fit: true},
		// 250Mi at 200Mi/s: 1.25s left, minus the 2s margin: the 1s floor.
		{name: "fast fall: floored", hard: true, avail: 250 * mi, rate: 200 * mi, sustained: true, fit: true, wantGrace: 1},
		{name: "fast fall, not sustained: hard grace kept", hard: true, avail: 250 * mi, rate: 200 * mi, fit: true},
		// Soft (cap 30s): 900Mi at 50Mi/s is 18s left, minus 2s: 16s.
		{name: "soft eviction shortened to what fits", avail: 900 * mi, rate: 50 * mi, sustained: true, fit: true, wantGrace: 16},
		{name: "fitting switched off", hard: true, avail: 250 * mi, rate: 200 * mi, sustained: true, wantGrace: 0},
		// The defect this guards against: one noisy sample makes a rate of GiB/s
		// and used to cut a soft eviction's minutes of grace to 1s.
		{name: "one noisy sample must not cut a 300s soft grace", avail: 900 * mi, rate: 2000 * mi, fit: true,
			podGrace: 300, softCap: 300},
		// Sustained: 900Mi at 50Mi/s is 18s, minus the margin: 16s of 300.
		{name: "sustained fall cuts a 300s soft grace to what fits", avail: 900 * mi, rate: 50 * mi, sustained: true, fit: true,
			podGrace: 300, softCap: 300, wantGrace: 16},
		// Sustained but memory lasts 180s: a 30s soft grace ends first.
		{name: "soft grace that ends before memory runs out is kept", avail: 900 * mi, rate: 5 * mi, sustained: true, fit: true},
		// 900Mi at 900Mi/s: 1s left; a soft eviction still gets 5s.
		{name: "soft never below MinSoftGrace", avail: 900 * mi, rate: 900 * mi, sustained: true, fit: true,
			podGrace: 300, softCap: 300, wantGrace: 5},
		{name: "soft never below the hard cap", avail: 900 * mi, rate: 900 * mi, sustained: true, fit: true,
			podGrace: 300, softCap: 300, hardCap: 12, wantGrace: 12},
		{name: "hard cap of 1s does not lower the soft floor", avail: 900 * mi, rate: 900 * mi, sustained: true, fit: true,
			hardCap: 1, wantGrace: 5},
		{name: "soft: a pod's own grace under the floor is left alone", avail: 900 * mi, rate: 900 * mi, sustained: true, fit: true,
			podGrace: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			opts.FitGrace = tc.fit
			if tc.softCap != 0 {
				opts.Evict.MaxPodGracePeriod = tc.softCap
			}
			if tc.hardCap != 0 {
				opts.Evict.HardGracePeriod = tc.hardCap
			}
			th := find(t, ths, thresholds.MemoryAvailable, tc.hard)
			c := cand("a", 400*mi, 0, true)
			if tc.podGrace != 0 {
				c.Pod = pod("a", tc.podGrace)
			}
			in := Input{
				Now:          t0,
				Status:       thresholds.Status{Active: []thresholds.ActiveThreshold{active(th, tc.avail, memCap, false)}},
				Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: tc.avail, Capacity: memCap, Time: t0}},
				Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: tc.rate},
				Sustained:    map[thresholds.Signal]bool{thresholds.MemoryAvailable: tc.sustained},
				Rank:         func(thresholds.Signal) []rank.Candidate { return []rank.Candidate{c} },
			}
			d := Decide(opts, in)
			if d.Action != Evict || d.Target.Hard() != tc.hard {
				t.Fatalf("action = %s (%s) for a hard=%v target, want an eviction for a hard=%v one", d.Action, d.Reason, d.Target.Hard(), tc.hard)
			}
			switch {
			case tc.wantGrace == 0 && d.GraceOverride != nil:
				t.Errorf("grace override %d (%s), want none", *d.GraceOverride, d.GraceReason)
			case tc.wantGrace != 0 && (d.GraceOverride == nil || *d.GraceOverride != tc.wantGrace):
				t.Errorf("grace override %s (%s), want %d", graceString(d.GraceOverride), d.GraceReason, tc.wantGrace)
			case tc.wantGrace != 0 && !strings.Contains(d.GraceReason, "grace shortened"):
				t.Errorf("grace reason %q does not say it was shortened", d.GraceReason)
			}
		})
	}
}

func graceString(g *int64) string {
	if g == nil {
		return "none"
	}
	return fmt.Sprintf("%ds", *g)
}

// TestFitGraceNeverBelowTheSoftFloor sweeps fill rates and available
// amounts: a soft eviction is never fitted below max(MinSoftGrace, the hard
// cap), an unsustained rate never shortens anything, and a faster sustained
// fill never lengthens a grace.
func TestFitGraceNeverBelowTheSoftFloor(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}, Soft: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "10s"}})
	soft := find(t, ths, thresholds.MemoryAvailable, false)
	const memCap = 4096 * mi
	opts := baseOptions()
	opts.FitGrace = true
	opts.Evict.MaxPodGracePeriod = 600
	c := cand("a", 400*mi, 0, true)
	c.Pod = pod("a", 600)
	floor := max(int64(predict.MinSoftGrace/time.Second), opts.Evict.HardGracePeriod)
	for _, avail := range []int64{301 * mi, 500 * mi, 1000 * mi} {
		prev := int64(600)
		for _, rate := range []float64{1 * mi, 10 * mi, 100 * mi, 1000 * mi, 1e6 * mi} {
			for _, sustained := range []bool{false, true} {
				d := Decide(opts, Input{
					Now:          t0,
					Status:       thresholds.Status{Active: []thresholds.ActiveThreshold{active(soft, avail, memCap, false)}},
					Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: avail, Capacity: memCap, Time: t0}},
					Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: rate},
					Sustained:    map[thresholds.Signal]bool{thresholds.MemoryAvailable: sustained},
					Rank:         func(thresholds.Signal) []rank.Candidate { return []rank.Candidate{c} },
				})
				g := int64(600)
				if d.GraceOverride != nil {
					g = *d.GraceOverride
				}
				switch {
				case d.Action != Evict:
					t.Fatalf("%dMi at %.0fMi/s: %s (%s)", avail/mi, rate/mi, d.Action, d.Reason)
				case !sustained && d.GraceOverride != nil:
					t.Errorf("%dMi at %.0fMi/s, not sustained: grace cut to %ds (%s)", avail/mi, rate/mi, g, d.GraceReason)
				case g < floor:
					t.Errorf("%dMi at %.0fMi/s: soft grace %ds, below the floor %ds", avail/mi, rate/mi, g, floor)
				case sustained && g > prev:
					t.Errorf("%dMi at %.0fMi/s: grace %ds, longer than %ds at a slower fill", avail/mi, rate/mi, g, prev)
				}
				if sustained {
					prev = g
				}
			}
		}
		if prev != floor {
			t.Errorf("%dMi at the fastest fill: grace %ds, want the floor %ds", avail/mi, prev, floor)
		}
	}
}

// TestActEarlyFromEstimatorSeries runs the act-early rule on what the
// estimator makes of two series sampled at the 100 ms fast poll, on a 1 GiB
// node with a 300Mi hard threshold and a 2 s lead. Bursts that bring
// memory.available to 400Mi and stop must never be extrapolated (an early
// version did: two falls over a 2 s fit were enough); a steady leak must be, before the
// crossing.
func TestActEarlyFromEstimatorSeries(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	const (
		memCap = 1024 * mi
		step   = 100 * time.Millisecond
	)
	bursts := func(at time.Duration) int64 {
		v := int64(850 * mi)
		for _, b := range []time.Duration{5 * time.Second, 5300 * time.Millisecond, 5600 * time.Millisecond} {
			switch {
			case at >= b+step:
				v -= 150 * mi
			case at > b:
				v -= int64(150 * mi * float64(at-b) / float64(step))
			}
		}
		return v
	}
	leak := func(rate float64) func(time.Duration) int64 {
		return func(at time.Duration) int64 {
			if at < 2*time.Second {
				return 850 * mi
			}
			return 850*mi - int64(rate*mi*(at-2*time.Second).Seconds())
		}
	}
	// ramp is a load coming up: 250Mi/s for 2.4s, then holding at 250Mi
	// above the threshold (a JVM starting, a cache loading).
	ramp := func(at time.Duration) int64 {
		d := min(max(at-2*time.Second, 0), 2400*time.Millisecond)
		return 1150*mi - int64(250*mi*d.Seconds())
	}
	tests := []struct {
		name  string
		curve func(time.Duration) int64
		early bool
		// crosses: the series may cross the threshold, which then acts
		// on its own (no bet was needed).
		crosses bool
	}{
		{"three 150Mi bursts, then holding at 400Mi", bursts, false, false},
		{"steady 100Mi/s leak", leak(100), true, false},
		// 40Mi/s falls 80Mi over the 2s lead: the crossing itself keeps
		// available above 220Mi, no bet needed (EarlyMargin).
		{"steady 40Mi/s leak", leak(40), false, true},
		// Before EarlyMargin: acted early at 6.2s with 609Mi available.
		{"250Mi/s ramp stopping 250Mi above the threshold", ramp, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := predict.NewEstimator(predict.Options{})
			if err != nil {
				t.Fatal(err)
			}
			opts := baseOptions()
			opts.ActEarly = true
			opts.FitGrace = true
			ranking := []rank.Candidate{cand("a", 400*mi, 0, true)}
			// Jitter of up to ±2Mi, as cgroup readings have, the same on
			// every run.
			x := uint32(7)
			for i := 0; i*int(step) <= int(25*time.Second); i++ {
				at := time.Duration(i) * step
				x = x*1664525 + 1013904223
				avail := tc.curve(at) + int64(x>>8)%(4*mi+1) - 2*mi
				if avail < 300*mi {
					if tc.crosses {
						return
					}
					if tc.early {
						t.Fatalf("memory.available crossed the threshold at %s without an early eviction (rate %.0fMi/s, sustained %v)", at, e.Rate()/mi, e.Sustained())
					}
					t.Fatalf("fixture: the series crossed the threshold at %s", at)
				}
				now := t0.Add(at)
				e.Push(now, avail)
				d := Decide(opts, Input{
					Now: now, Thresholds: ths,
					Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: avail, Capacity: memCap, Time: now}},
					Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: e.Rate()},
					Sustained:    map[thresholds.Signal]bool{thresholds.MemoryAvailable: e.Sustained()},
					Rank:         func(thresholds.Signal) []rank.Candidate { return ranking },
				})
				if d.Action == None {
					continue
				}
				if !tc.early {
					t.Fatalf("at %s (%dMi available, rate %.0fMi/s) acted early: %s (%s)", at, avail/mi, e.Rate()/mi, d.Action, d.Reason)
				}
				if !d.Target.Early || d.Action != Evict {
					t.Fatalf("at %s: %s for %+v, want an early eviction", at, d.Action, d.Target)
				}
				// Time left to 0 is about 4.4s: the 5s hard cap does not
				// fit, and the grace is cut to end before it.
				if left := float64(avail) / e.Rate(); d.GraceOverride == nil || float64(*d.GraceOverride) >= left {
					t.Errorf("at %s: grace override %v (%s), want one under the %.1fs left before memory runs out", at, d.GraceOverride, d.GraceReason, left)
				}
				t.Logf("acted early at %s with %dMi available: %s", at, avail/mi, d.Reason)
				return
			}
			if tc.early || tc.crosses {
				t.Fatalf("never acted early on a steady leak, nor crossed (rate %.0fMi/s, sustained %v)", e.Rate()/mi, e.Sustained())
			}
		})
	}
}

// TestInFlightDiskCreditHoldsWhileTheVictimGoes: a disk victim's files are
// freed only when the kubelet removes its volumes, which for many small
// files takes tens of seconds; meanwhile a walk of the pod's directories may
// count less (cut short by the budget, or racing the removal). Its credit
// stays what it was counted at its eviction until it is gone, so the need
// it covers does not evict a second pod (found on the real node: 19970
// inodes counted, a later figure below the need, a pod of 522 files
// evicted as well).
func TestInFlightDiskCreditHoldsWhileTheVictimGoes(t *testing.T) {
	sig := thresholds.NodeFsInodesFree
	e := entry("many", inflight.Evicted, -10*time.Second, map[thresholds.Signal]int64{sig: 19970})
	tg := Target{Threshold: thresholds.Threshold{Signal: sig}, Need: 11119}
	for _, tc := range []struct {
		name  string
		cands []rank.Candidate
		want  int64
	}{
		{"no figure now", []rank.Candidate{noStats("many", false)}, 19970},
		{"a smaller figure now", []rank.Candidate{cand("many", 4000, 0, false)}, 19970},
		{"a larger figure now", []rank.Candidate{cand("many", 25000, 0, false)}, 25000},
	} {
		got := InFlightReclaim(baseOptions(), t0, tg, tc.cands, []inflight.Entry{e})
		if got != tc.want {
			t.Errorf("%s: in-flight credit %d; want %d", tc.name, got, tc.want)
		}
	}
	// Memory is different: a victim's working set shrinking is memory back.
	mem := entry("m", inflight.Evicted, -10*time.Second, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 900 * mi})
	if got := InFlightReclaim(baseOptions(), t0, Target{Threshold: thresholds.Threshold{Signal: thresholds.MemoryAvailable}}, []rank.Candidate{cand("m", 100*mi, 0, false)}, []inflight.Entry{mem}); got != 100*mi {
		t.Errorf("memory: in-flight credit %d; want the current working set %d", got, 100*mi)
	}
}
