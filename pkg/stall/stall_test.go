// SPDX-License-Identifier: Apache-2.0

package stall

import (
	"math"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/thresholds"
)

func psi(some, full uint64) *statsapi.PSIStats {
	return &statsapi.PSIStats{Some: statsapi.PSIData{Total: some}, Full: statsapi.PSIData{Total: full}}
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestShare(t *testing.T) {
	cases := []struct {
		name     string
		readings [][3]float64 // seconds, some µs, full µs
		ok       bool
		some     float64
		full     float64
	}{
		{"one reading is no share", [][3]float64{{0, 5e6, 1e6}}, false, 0, 0},
		{"history shorter than the window counts no stall before it",
			[][3]float64{{0, 0, 0}, {2, 1e6, 0}}, true, 0.1, 0},
		{"whole window", [][3]float64{{0, 0, 0}, {10, 4e6, 1e6}}, true, 0.4, 0.1},
		{"interpolated at the window's start", [][3]float64{{0, 0, 0}, {10, 10e6, 0}, {15, 10e6, 0}}, true, 0.5, 0},
		{"older readings pruned", [][3]float64{{0, 0, 0}, {5, 5e6, 0}, {10, 5e6, 0}, {20, 5e6, 0}}, true, 0, 0},
		{"stall that ended a window ago", [][3]float64{{0, 0, 0}, {10, 10e6, 10e6}, {21, 10e6, 10e6}}, true, 0, 0},
		{"a total that went down starts afresh", [][3]float64{{0, 0, 0}, {5, 9e6, 0}, {6, 1e6, 0}, {8, 2e6, 0}}, true, 0.1, 0},
		{"a reading out of order is ignored", [][3]float64{{0, 0, 0}, {10, 5e6, 0}, {9, 0, 0}}, true, 0.5, 0},
		{"clamped to the window", [][3]float64{{0, 0, 0}, {1, 30e6, 0}}, true, 1, 0},
		// All 30 s could have been before the window's start at 50 s.
		{"a gap longer than the window counts the least stall in it", [][3]float64{{0, 0, 0}, {60, 30e6, 0}}, true, 0, 0},
		// Only 10 s of the gap lie before the window's start: at least 8 s
		// of the 18 s are inside it.
		{"a gap longer than the window counts the stall that must be in it", [][3]float64{{0, 0, 0}, {20, 18e6, 15e6}}, true, 0.8, 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := New(10 * time.Second)
			for _, r := range c.readings {
				tr.Add(Node, at(r[0]), psi(uint64(r[1]), uint64(r[2])))
			}
			sh, ok := tr.Share(Node)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if math.Abs(sh.Some-c.some) > 1e-9 || math.Abs(sh.Full-c.full) > 1e-9 {
				t.Errorf("shares some %v full %v, want %v %v", sh.Some, sh.Full, c.some, c.full)
			}
		})
	}
}

// Readings a second apart, as passes come, are interpolated at the
// window's start as they always were: bounding a long gap changes none of
// them. The stall grows as t², so a wrong point in the second around the
// start shows.
func TestShareEverySecond(t *testing.T) {
	tr := New(10 * time.Second)
	add := func(s float64) { tr.Add(Node, at(s), psi(uint64(0.05e6*s*s), uint64(0.02e6*s*s))) }
	for s := 0; s <= 12; s++ {
		add(float64(s))
	}
	add(12.5)
	sh, ok := tr.Share(Node)
	// At 2.5 s, halfway from 0.2e6 to 0.45e6 (some) and 0.08e6 to 0.18e6
	// (full); at 12.5 s, 7.8125e6 and 3.125e6.
	if !ok || sh.SomeStalled != 7_487_500 || sh.FullStalled != 2_995_000 {
		t.Errorf("stalled some %d full %d (%v), want 7487500 2995000", sh.SomeStalled, sh.FullStalled, ok)
	}
}

func TestHistoryStaysBounded(t *testing.T) {
	tr := New(10 * time.Second)
	for i := 0; i < 5000; i++ {
		tr.Add(Node, at(float64(i)*0.001), psi(uint64(i)*500, 0))
	}
	if n := len(tr.groups[Node]); n > maxSamples {
		t.Fatalf("%d readings kept, want at most %d", n, maxSamples)
	}
	sh, _ := tr.Share(Node)
	// Half of every millisecond stalled, over the 5 s seen of a 10 s window.
	if math.Abs(sh.Some-0.25) > 0.01 {
		t.Errorf("some share %v after thinning, want 0.25", sh.Some)
	}
}

func TestObservationsMeetStallThresholds(t *testing.T) {
	tr := New(10 * time.Second)
	tr.Add(Node, at(0), psi(0, 0))
	tr.Add(Node, at(10), psi(4_500_000, 500_000))
	tr.Add(Kubepods, at(0), psi(0, 0))
	tr.Add(Kubepods, at(10), psi(1_000_000, 0))
	tr.Add(PodGroup("u1"), at(0), psi(0, 0))
	obs := tr.Observations()
	for _, c := range []struct {
		s     thresholds.Signal
		share float64
		met   bool
	}{
		{thresholds.MemoryPressureSome, 0.4, true},
		{thresholds.MemoryPressureSome, 0.45, false},
		{thresholds.MemoryPressureFull, 0.04, true},
		{thresholds.MemoryPressureFull, 0.05, false},
		{thresholds.AllocatableMemoryPressureSome, 0.05, true},
		{thresholds.AllocatableMemoryPressureFull, 0.01, false},
	} {
		o, ok := obs[c.s]
		if !ok {
			t.Fatalf("no observation of %s", c.s)
		}
		v := thresholds.StallValue(c.share)
		if met := v.Amount(o.Capacity) > o.Available; met != c.met {
			t.Errorf("%s>%v%%: met %v, want %v (available %d of %d)", c.s, c.share*100, met, c.met, o.Available, o.Capacity)
		}
	}
	tr.Retain(func(g string) bool { return g == Node })
	if _, ok := tr.Share(Kubepods); ok {
		t.Error("kubepods kept after Retain dropped it")
	}
	if GroupOf(thresholds.AllocatableMemoryPressureFull) != Kubepods || GroupOf(thresholds.MemoryPressureSome) != Node {
		t.Error("GroupOf mixes up node and kubepods")
	}
}
