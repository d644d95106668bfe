package decide

import (
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

func TestDecideFitsGraceToTheTimeLeft(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}, Soft: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "10s"}})
	const memCap = 4096 * mi
	tests := []struct {
		name      string
		hard      bool
		avail     int64
		rate      float64
		fit       bool
		wantGrace int64 // 0: no override
	}{
		{"not falling: the pod's own (capped) grace", true, 250 * mi, 0, true, 0},
		{"slow fall, room for the hard cap", true, 250 * mi, 1 * mi, true, 0},
		// 250Mi at 200Mi/s: 1.25s left, minus the 2s margin: the 1s floor.
		{"fast fall: floored", true, 250 * mi, 200 * mi, true, 1},
		// Soft (cap 30s): 900Mi at 50Mi/s is 18s left, minus 2s: 16s.
		{"soft eviction shortened to what fits", false, 900 * mi, 50 * mi, true, 16},
		{"fitting switched off", true, 250 * mi, 200 * mi, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			opts.FitGrace = tc.fit
			th := find(t, ths, thresholds.MemoryAvailable, tc.hard)
			in := Input{
				Now:          t0,
				Status:       thresholds.Status{Active: []thresholds.ActiveThreshold{active(th, tc.avail, memCap, false)}},
				Observations: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: tc.avail, Capacity: memCap, Time: t0}},
				Rates:        map[thresholds.Signal]float64{thresholds.MemoryAvailable: tc.rate},
				Rank:         func(thresholds.Signal) []rank.Candidate { return []rank.Candidate{cand("a", 400*mi, 0, true)} },
			}
			d := Decide(opts, in)
			if d.Action != Evict {
				t.Fatalf("action = %s (%s)", d.Action, d.Reason)
			}
			switch {
			case tc.wantGrace == 0 && d.GraceOverride != nil:
				t.Errorf("grace override %d (%s), want none", *d.GraceOverride, d.GraceReason)
			case tc.wantGrace != 0 && (d.GraceOverride == nil || *d.GraceOverride != tc.wantGrace):
				t.Errorf("grace override %v, want %d", d.GraceOverride, tc.wantGrace)
			case tc.wantGrace != 0 && !strings.Contains(d.GraceReason, "grace shortened"):
				t.Errorf("grace reason %q does not say it was shortened", d.GraceReason)
			}
		})
	}
}
