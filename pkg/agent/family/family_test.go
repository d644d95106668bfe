// SPDX-License-Identifier: Apache-2.0

package family

import (
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

func TestLost(t *testing.T) {
	named := []pressure.SignalError{{Signal: "memory.pressureFull", Path: "/proc/pressure/memory", Err: errors.New("gone")}}
	for _, tc := range []struct {
		err        error
		why, first string
	}{
		{&Unreadable{Why: "cannot", Signals: named}, "cannot", "signal memory.pressureFull unknown: /proc/pressure/memory: gone"},
		{fmt.Errorf("wrapped: %w", &Unreadable{Why: "cannot", Signals: named}), "cannot", "signal memory.pressureFull unknown: /proc/pressure/memory: gone"},
		// An Unreadable naming no signal still says the family is blind.
		{&Unreadable{Why: "cannot"}, "a signal family cannot be evaluated: cannot", "signal x unknown: (family x): cannot"},
		{errors.New("boom"), "a signal family cannot be evaluated: boom", "signal x unknown: (family x): boom"},
	} {
		why, lost := Lost("x", tc.err)
		if why != tc.why || len(lost) == 0 || lost[0].Error() != tc.first {
			t.Errorf("Lost(%v) = %q, %v; want %q, first %q", tc.err, why, lost, tc.why, tc.first)
		}
	}
}

func stallThresholds(t *testing.T, hard map[string]string) []thresholds.Threshold {
	t.Helper()
	ths, err := thresholds.Parse(thresholds.Spec{Hard: hard})
	if err != nil {
		t.Fatal(err)
	}
	return ths
}

func TestConfigured(t *testing.T) {
	if got := Configured(Config{Thresholds: stallThresholds(t, map[string]string{"memory.available": "100Mi"})}); len(got) != 0 {
		t.Errorf("without a stall threshold: %d families, want none", len(got))
	}
	got := Configured(Config{Thresholds: stallThresholds(t, map[string]string{"allocatableMemory.pressureSome": "20%"})})
	if len(got) != 1 || got[0].Name() != "stall" {
		t.Errorf("with a stall threshold: %v, want the stall family", got)
	}
}

// A summary with PSI for the node only: the kubepods stall signal is
// unreadable, the node's is not; once two readings span time, the node's
// signals are assessed.
func TestStallObserveAssess(t *testing.T) {
	f := NewStall(stallThresholds(t, map[string]string{
		"memory.pressureSome": "40%", "allocatableMemory.pressureFull": "10%", "memory.available": "100Mi",
	}), 10*time.Second)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	summary := func(at time.Time, someUs uint64) *pressure.Observation {
		ts := metav1.NewTime(at)
		return &pressure.Observation{Summary: &statsapi.Summary{Node: statsapi.NodeStats{
			Memory: &statsapi.MemoryStats{Time: ts, PSI: &statsapi.PSIStats{Some: statsapi.PSIData{Total: someUs}}},
			SystemContainers: []statsapi.ContainerStats{{Name: statsapi.SystemContainerPods,
				Memory: &statsapi.MemoryStats{Time: ts}}},
		}}}
	}
	err := f.Observe(summary(t0, 0), t0)
	why, lost := Lost(f.Name(), err)
	if len(lost) != 1 || lost[0].Signal != "allocatableMemory.pressureFull" || lost[0].Path != "kubepods/memory.pressure" {
		t.Fatalf("Observe = %v (%q), want allocatableMemory.pressureFull unreadable at kubepods/memory.pressure", lost, why)
	}
	_ = f.Observe(summary(t0.Add(10*time.Second), 5_000_000), t0.Add(10*time.Second))
	signals := map[thresholds.Signal]thresholds.Observation{}
	f.Assess(signals)
	o, ok := signals[thresholds.MemoryPressureSome]
	if !ok || o.Capacity != 10_000_000 || o.Available != 5_000_000 {
		t.Errorf("memory.pressureSome = %+v (%v), want 5 s of the 10 s window free of stall", o, ok)
	}
	if _, ok := signals[thresholds.AllocatableMemoryPressureSome]; ok {
		t.Errorf("kubepods' stall assessed without a figure: %v", signals)
	}
	if _, ok := f.Targets(thresholds.MemoryAvailable, nil, nil, rank.Options{}); ok {
		t.Error("the stall family ranked memory.available")
	}
}

// A share read before the node's PSI went blind is not assessed while it
// is blind: it would keep the threshold met, and its episode on, for as
// long as evictd cannot see. Once the PSI reads again, so is the share.
func TestStallBlindDropsLastShare(t *testing.T) {
	f := NewStall(stallThresholds(t, map[string]string{"memory.pressureSome": "40%"}), 10*time.Second)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	observe := func(s float64, psi *statsapi.PSIStats) map[thresholds.Signal]thresholds.Observation {
		at := t0.Add(time.Duration(s * float64(time.Second)))
		_ = f.Observe(&pressure.Observation{Summary: &statsapi.Summary{Node: statsapi.NodeStats{
			Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), PSI: psi},
		}}}, at)
		signals := map[thresholds.Signal]thresholds.Observation{}
		f.Assess(signals)
		return signals
	}
	some := func(us uint64) *statsapi.PSIStats { return &statsapi.PSIStats{Some: statsapi.PSIData{Total: us}} }
	observe(0, some(0))
	if _, ok := observe(10, some(6_000_000))[thresholds.MemoryPressureSome]; !ok {
		t.Fatal("memory.pressureSome not assessed from two readings a window apart")
	}
	if o, ok := observe(11, nil)[thresholds.MemoryPressureSome]; ok {
		t.Errorf("memory.pressureSome assessed while the node's PSI is unreadable: %+v", o)
	}
	o, ok := observe(12, some(6_500_000))[thresholds.MemoryPressureSome]
	// 1.2 s stalled by the window's start at 2 s, 6.5 s by 12 s.
	if !ok || o.Available != 4_700_000 {
		t.Errorf("memory.pressureSome = %+v (%v) once the PSI reads again, want 4.7 s of the 10 s window free of stall", o, ok)
	}
}

// Settling only reads. The explanation plans every resource after the
// pass's calls went out, so it settles with a memory eviction under way
// that may yet be refused: planned any number of times, that must not
// move the window. Only a decision's Note does.
func TestStallSettleMovesNoWindow(t *testing.T) {
	f := NewStall(stallThresholds(t, map[string]string{"memory.pressureSome": "40%"}), 10*time.Second)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	underWay := inflight.Entry{Signal: thresholds.MemoryAvailable, Origin: inflight.Pending, Hard: true}
	for i := range 5 {
		in := decide.Input{Now: t0.Add(time.Duration(i) * time.Millisecond), InFlight: []inflight.Entry{underWay}}
		f.Settle(&in)
		if !in.StallSettling {
			t.Fatalf("plan %d: a memory call under way does not settle the stall", i+1)
		}
	}
	// The call was refused: nothing in flight.
	in := decide.Input{Now: t0.Add(time.Second)}
	f.Settle(&in)
	if in.StallSettling || in.StallGoneRecently {
		t.Errorf("after 5 plans saw a call under way and no decision did, the stall settles at t0+1s (settling %v, gone %v): planning moved the window",
			in.StallSettling, in.StallGoneRecently)
	}
	// A decision that saw it: a whole window from then.
	f.Note(decide.Input{Now: t0, InFlight: []inflight.Entry{underWay}})
	in = decide.Input{Now: t0.Add(time.Second)}
	f.Settle(&in)
	if !in.StallSettling {
		t.Error("a decision saw the memory call under way, yet the stall does not settle a second later")
	}
}

// A memory or stall victim settles the stall for a window after it was last
// seen in flight, or after it went; a dry-run one does not.
func TestStallSettle(t *testing.T) {
	f := NewStall(stallThresholds(t, map[string]string{"memory.pressureSome": "40%"}), 10*time.Second)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// A decision settles, then notes what it saw.
	settling := func(now time.Time, inFlight ...inflight.Entry) bool {
		in := decide.Input{Now: now, InFlight: inFlight}
		f.Settle(&in)
		f.Note(in)
		return in.StallSettling
	}
	dry := inflight.Entry{Signal: thresholds.MemoryAvailable, Origin: inflight.DryRun}
	if settling(t0, dry) {
		t.Error("a dry-run victim settles the stall")
	}
	if !settling(t0, inflight.Entry{Signal: thresholds.MemoryPressureSome, Origin: inflight.Evicted}) {
		t.Error("a stall victim in flight does not settle the stall")
	}
	if !settling(t0.Add(9*time.Second)) || settling(t0.Add(10*time.Second)) {
		t.Error("want settling for the 10 s window after the victim was last seen, not after")
	}
	goneRecently := func(now time.Time) bool {
		in := decide.Input{Now: now}
		f.Settle(&in)
		return in.StallGoneRecently
	}
	if goneRecently(t0.Add(9 * time.Second)) {
		t.Error("a victim only in flight reads as gone: a hard stall threshold would wait on a soft victim's grace")
	}
	f.Gone(inflight.Entry{Signal: thresholds.MemoryAvailable, Origin: inflight.Evicted}, t0.Add(20*time.Second))
	if !settling(t0.Add(29*time.Second)) || settling(t0.Add(30*time.Second)) {
		t.Error("want settling for the 10 s window after a memory victim went, not after")
	}
	if !goneRecently(t0.Add(29*time.Second)) || goneRecently(t0.Add(30*time.Second)) {
		t.Error("want gone-recently for the 10 s window after a memory victim went, not after")
	}
}
