// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

func mustParse(t *testing.T, spec Spec) []Threshold {
	t.Helper()
	ths, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ths
}

// step is one tick of a time series: advance the clock, observe, expect.
type step struct {
	after time.Duration
	obs   map[Signal]Observation
	// Thresholds are named "signal/hard" or "signal/soft".
	met, pending, active, held []string
	reclaim                    map[string]int64
	pressure                   []v1.NodeConditionType
	stale                      []string
}

func name(th Threshold) string {
	if th.Hard() {
		return string(th.Signal) + "/hard"
	}
	return string(th.Signal) + "/soft"
}

func runSeries(t *testing.T, tr *Tracker, clk *testclock.FakePassiveClock, steps []step) {
	t.Helper()
	for i, st := range steps {
		clk.SetTime(clk.Now().Add(st.after))
		got := tr.Update(st.obs)
		var met, pending, active, held, stale []string
		for _, th := range got.Met {
			met = append(met, name(th))
		}
		for _, p := range got.Pending {
			pending = append(pending, name(p.Threshold))
		}
		for _, a := range got.Active {
			active = append(active, name(a.Threshold))
			if a.Stale {
				stale = append(stale, name(a.Threshold))
			}
			if want, ok := st.reclaim[name(a.Threshold)]; ok && a.Reclaim != want {
				t.Errorf("step %d: reclaim for %s = %d, want %d", i, name(a.Threshold), a.Reclaim, want)
			}
		}
		for _, h := range got.Held() {
			held = append(held, name(h.Threshold))
		}
		var pressure []v1.NodeConditionType
		for _, c := range Conditions() {
			if got.Pressure[c] {
				pressure = append(pressure, c)
			}
		}
		check := func(what string, got, want any) {
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("step %d (t+%s): %s = %v, want %v", i, clk.Now().Sub(t0), what, got, want)
			}
		}
		check("met", met, orNil(st.met))
		check("pending", pending, orNil(st.pending))
		check("active", active, orNil(st.active))
		check("held", held, orNil(st.held))
		check("stale", stale, orNil(st.stale))
		check("pressure", pressure, st.pressure)
		if !got.Time.Equal(clk.Now()) {
			t.Errorf("step %d: Status.Time = %v, want %v", i, got.Time, clk.Now())
		}
	}
}

func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestTrackerHardSoftGraceTransition(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	tr := NewTracker(mustParse(t, Spec{
		Hard:        map[string]string{"memory.available": "500Mi"},
		Soft:        map[string]string{"memory.available": "1Gi"},
		GracePeriod: map[string]string{"memory.available": "1m"},
	}), 5*time.Minute, clk)
	mem := memPressure
	steps := []step{
		{after: 0, obs: memObsAt(t0, 2*gi)},
		// Below the soft threshold: pressure at once, but the grace runs.
		{after: 10 * time.Second, obs: memObsAt(t0.Add(10*time.Second), 900*mi), met: []string{"memory.available/soft"}, pending: []string{"memory.available/soft"}, pressure: mem},
		{after: 49 * time.Second, obs: memObsAt(t0.Add(59*time.Second), 900*mi), met: []string{"memory.available/soft"}, pending: []string{"memory.available/soft"}, pressure: mem},
		// Grace over (60 s after first met at t+10 s).
		{after: 11 * time.Second, obs: memObsAt(t0.Add(70*time.Second), 900*mi), met: []string{"memory.available/soft"}, active: []string{"memory.available/soft"}, reclaim: map[string]int64{"memory.available/soft": gi - 900*mi}, pressure: mem},
		// The hard one too: it acts at once, listed before the soft one.
		{after: time.Second, obs: memObsAt(t0.Add(71*time.Second), 400*mi), met: []string{"memory.available/hard", "memory.available/soft"}, active: []string{"memory.available/hard", "memory.available/soft"}, reclaim: map[string]int64{"memory.available/hard": 100 * mi, "memory.available/soft": 624 * mi}, pressure: mem},
		// Same reading again: still active, but stale.
		{after: time.Second, obs: memObsAt(t0.Add(71*time.Second), 400*mi), met: []string{"memory.available/hard", "memory.available/soft"}, active: []string{"memory.available/hard", "memory.available/soft"}, stale: []string{"memory.available/hard", "memory.available/soft"}, pressure: mem},
		// Recovered: nothing met, but the condition, last seen at t+72s,
		// stays for 5 minutes.
		{after: time.Second, obs: memObsAt(t0.Add(73*time.Second), 3*gi), pressure: mem},
		{after: 4*time.Minute + 58*time.Second, obs: memObsAt(t0.Add(6*time.Minute), 3*gi), pressure: mem},
		{after: time.Second, obs: memObsAt(t0.Add(7*time.Minute), 3*gi)},
		// Soft met again: its grace starts over.
		{after: time.Second, obs: memObsAt(t0.Add(8*time.Minute), 900*mi), met: []string{"memory.available/soft"}, pending: []string{"memory.available/soft"}, pressure: mem},
		// A brief recovery inside the grace resets the episode...
		{after: 30 * time.Second, obs: memObsAt(t0.Add(9*time.Minute), 2*gi), pressure: mem},
		// ...so 40 s later it is pending again, not active.
		{after: 40 * time.Second, obs: memObsAt(t0.Add(10*time.Minute), 900*mi), met: []string{"memory.available/soft"}, pending: []string{"memory.available/soft"}, pressure: mem},
	}
	runSeries(t, tr, clk, steps)
}

var memPressure = []v1.NodeConditionType{v1.NodeMemoryPressure}

func memObsAt(at time.Time, available int64) map[Signal]Observation {
	return map[Signal]Observation{MemoryAvailable: {Available: available, Capacity: 8 * gi, Time: at}}
}

// The kubelet docs' minimum-reclaim example: nodefs.available<1Gi with a
// 500Mi minimum reclaim keeps reclaiming until 1.5Gi are available.
func TestTrackerMinimumReclaim(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	tr := NewTracker(mustParse(t, Spec{
		Hard:           map[string]string{"nodefs.available": "1Gi", "imagefs.available": "100Gi"},
		MinimumReclaim: map[string]string{"nodefs.available": "500Mi", "imagefs.available": "2Gi"},
	}), 0, clk)
	disk := []v1.NodeConditionType{v1.NodeDiskPressure}
	fs := func(sec int, nodefs int64) map[Signal]Observation {
		at := t0.Add(time.Duration(sec) * time.Second)
		return map[Signal]Observation{
			NodeFsAvailable:  {Available: nodefs, Capacity: 50 * gi, Time: at},
			ImageFsAvailable: {Available: 500 * gi, Capacity: 1000 * gi, Time: at},
		}
	}
	steps := []step{
		// 1.2Gi available: above the threshold, and never acted on: clear.
		{after: time.Second, obs: fs(1, 1229*mi)},
		{after: time.Second, obs: fs(2, 900*mi), met: []string{"nodefs.available/hard"}, active: []string{"nodefs.available/hard"}, reclaim: map[string]int64{"nodefs.available/hard": 1024*mi + 500*mi - 900*mi}, pressure: disk},
		// Above 1Gi but below 1.5Gi: held by minimum reclaim.
		{after: time.Second, obs: fs(3, 1229*mi), active: []string{"nodefs.available/hard"}, held: []string{"nodefs.available/hard"}, reclaim: map[string]int64{"nodefs.available/hard": 1524*mi - 1229*mi}, pressure: disk},
		// Exactly 1.5Gi: cleared. With a zero transition period the
		// condition drops at once.
		{after: time.Second, obs: fs(4, 1536*mi)},
		// Back to 1.2Gi: not met and no longer held (the episode ended).
		{after: time.Second, obs: fs(5, 1229*mi)},
	}
	runSeries(t, tr, clk, steps)
}

func TestTrackerPercentagesAndConditions(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	tr := NewTracker(mustParse(t, Spec{
		Hard: map[string]string{"pid.available": "10%", "nodefs.inodesFree": "5%", "allocatableMemory.available": "100Mi"},
	}), time.Minute, clk)
	obs := func(sec int, pids, inodes, alloc int64) map[Signal]Observation {
		at := t0.Add(time.Duration(sec) * time.Second)
		return map[Signal]Observation{
			PIDAvailable:               {Available: pids, Capacity: 1000, Time: at},
			NodeFsInodesFree:           {Available: inodes, Capacity: 1000, Time: at},
			AllocatableMemoryAvailable: {Available: alloc, Capacity: 4 * gi, Time: at},
		}
	}
	all := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
	steps := []step{
		// Exactly at the threshold is not below it (strict, like the kubelet).
		{after: time.Second, obs: obs(1, 100, 50, 100*mi)},
		{after: time.Second, obs: obs(2, 99, 49, 99*mi),
			met:    []string{"allocatableMemory.available/hard", "nodefs.inodesFree/hard", "pid.available/hard"},
			active: []string{"allocatableMemory.available/hard", "nodefs.inodesFree/hard", "pid.available/hard"},
			reclaim: map[string]int64{
				"allocatableMemory.available/hard": mi, "nodefs.inodesFree/hard": 1, "pid.available/hard": 1,
			},
			pressure: all},
		// A signal that disappears ends its episode but its condition is
		// still inside the transition period.
		{after: 30 * time.Second, obs: map[Signal]Observation{}, pressure: all},
		{after: 31 * time.Second, obs: map[Signal]Observation{}},
	}
	runSeries(t, tr, clk, steps)
}

func TestTrackerFirst(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	tr := NewTracker(mustParse(t, Spec{Hard: map[string]string{"memory.available": "1Gi", "pid.available": "10%"}}), 0, clk)
	o := map[Signal]Observation{
		MemoryAvailable: {Available: 0, Capacity: 8 * gi, Time: t0},
		PIDAvailable:    {Available: 0, Capacity: 100, Time: t0},
	}
	st := tr.Update(o)
	first, ok := st.First()
	if !ok || first.Signal != MemoryAvailable {
		t.Fatalf("First = %v, %v; want memory.available", first.Signal, ok)
	}
	// The memory reading is stale now, the PID one fresh: act on PIDs.
	o[PIDAvailable] = Observation{Available: 0, Capacity: 100, Time: t0.Add(time.Second)}
	st = tr.Update(o)
	first, ok = st.First()
	if !ok || first.Signal != PIDAvailable {
		t.Fatalf("First = %v, %v; want pid.available", first.Signal, ok)
	}
	st = tr.Update(o)
	if _, ok := st.First(); ok {
		t.Fatal("First found a threshold although every reading is stale")
	}
	if got := tr.Thresholds(); len(got) != 2 || got[0].Signal != MemoryAvailable {
		t.Errorf("Thresholds() = %v", got)
	}
	if !slices.ContainsFunc(st.Active, func(a ActiveThreshold) bool { return strings.HasPrefix(a.String(), "pid.available<10%") }) {
		t.Errorf("Active = %v, want pid.available", st.Active)
	}
}

// TestTrackerSetThresholds: thresholds moved mid-episode (evictd's placed
// again after a kubelet restart) keep their state: an acted-on hard
// threshold stays held by minimum reclaim against its new value, a soft
// one keeps its grace period's start; a new signal starts unmet.
func TestTrackerSetThresholds(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	tr := NewTracker(mustParse(t, Spec{
		Hard:           map[string]string{"memory.available": "500Mi"},
		MinimumReclaim: map[string]string{"memory.available": "100Mi"},
		Soft:           map[string]string{"nodefs.available": "20%"},
		GracePeriod:    map[string]string{"nodefs.available": "1m"},
	}), 0, clk)
	at := func(sec int, mem, nodefs int64) map[Signal]Observation {
		when := t0.Add(time.Duration(sec) * time.Second)
		return map[Signal]Observation{
			MemoryAvailable: {Available: mem, Capacity: 8 * gi, Time: when},
			NodeFsAvailable: {Available: nodefs, Capacity: 100 * gi, Time: when},
		}
	}
	clk.SetTime(t0.Add(time.Second))
	st := tr.Update(at(1, 400*mi, 10*gi))
	if len(st.Active) != 1 || len(st.Pending) != 1 {
		t.Fatalf("before: active %v, pending %v", st.Active, st.Pending)
	}
	tr.SetThresholds(mustParse(t, Spec{
		Hard:           map[string]string{"memory.available": "700Mi", "pid.available": "10%"},
		MinimumReclaim: map[string]string{"memory.available": "100Mi"},
		Soft:           map[string]string{"nodefs.available": "20%"},
		GracePeriod:    map[string]string{"nodefs.available": "1m"},
	}))
	if got := fmt.Sprint(tr.Thresholds()); got != "[memory.available<700Mi (min-reclaim 100Mi) nodefs.available<20% (soft, grace 1m0s) pid.available<10%]" {
		t.Errorf("thresholds after: %s", got)
	}
	// 750Mi: above the new 700Mi, below 700Mi + 100Mi: still held, as
	// acted on before the move. The soft threshold's grace runs from 1 s.
	clk.SetTime(t0.Add(61 * time.Second))
	st = tr.Update(at(61, 750*mi, 10*gi))
	if len(st.Active) != 2 || !st.Active[0].HeldByMinReclaim || st.Active[0].Reclaim != 50*mi || st.Active[1].Signal != NodeFsAvailable || !st.Active[1].Since.Equal(t0.Add(time.Second)) {
		t.Errorf("after: active %+v, want memory.available held for 50Mi and nodefs.available active since 1 s", st.Active)
	}
}
