// SPDX-License-Identifier: Apache-2.0

package predict

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

func TestGraceFit(t *testing.T) {
	def := DefaultGracePolicy()
	cross := func(left time.Duration) Crossing {
		return Crossing{Signal: "memory.available", Threshold: 300 * mi, TimeLeft: left}
	}
	tests := []struct {
		name      string
		policy    GracePolicy
		podGrace  int64
		crossing  Crossing
		want      int64
		shortened bool
		floored   bool
		reason    string // exact when shortened
	}{
		{name: "not falling: the pod's own grace", policy: def, podGrace: 30, crossing: cross(Never), want: 30},
		{name: "plenty of time", policy: def, podGrace: 30, crossing: cross(5 * time.Minute), want: 30},
		{name: "own grace plus margin fits exactly", policy: def, podGrace: 30, crossing: cross(32 * time.Second), want: 30},
		{name: "just short of fitting", policy: def, podGrace: 30, crossing: cross(31900 * time.Millisecond),
			want: 29, shortened: true,
			reason: "grace shortened from 30s to 29s: memory.available predicted to cross 300Mi in 31.9s"},
		{name: "shortened to what fits", policy: def, podGrace: 30, crossing: cross(6200 * time.Millisecond),
			want: 4, shortened: true,
			reason: "grace shortened from 30s to 4s: memory.available predicted to cross 300Mi in 6.2s"},
		{name: "the fill rate enriches the reason", policy: def, podGrace: 30,
			crossing: Crossing{Signal: "allocatableMemory.available", Threshold: 1 << 30, TimeLeft: 6200 * time.Millisecond, Rate: 120 * mi},
			want:     4, shortened: true,
			reason: "grace shortened from 30s to 4s: allocatableMemory.available predicted to cross 1Gi in 6.2s (falling 120Mi/s)"},
		{name: "less than the margin left: the floor", policy: def, podGrace: 30, crossing: cross(1500 * time.Millisecond),
			want: 1, shortened: true, floored: true,
			reason: "grace shortened from 30s to 1s (the floor): memory.available predicted to cross 300Mi in 1.5s"},
		{name: "already crossed: the floor", policy: def, podGrace: 30, crossing: cross(0),
			want: 1, shortened: true, floored: true,
			reason: "grace shortened from 30s to 1s (the floor): memory.available is already below 300Mi"},
		{name: "sub-second time left is printed finer", policy: GracePolicy{Floor: 2 * time.Second}, podGrace: 10, crossing: cross(350 * time.Millisecond),
			want: 2, shortened: true, floored: true,
			reason: "grace shortened from 10s to 2s (the floor): memory.available predicted to cross 300Mi in 0.35s"},
		{name: "zero margin", policy: GracePolicy{Floor: time.Second}, podGrace: 30, crossing: cross(6200 * time.Millisecond),
			want: 6, shortened: true,
			reason: "grace shortened from 30s to 6s: memory.available predicted to cross 300Mi in 6.2s"},
		{name: "pod's own grace at the floor is kept", policy: def, podGrace: 1, crossing: cross(0), want: 1},
		{name: "pod's own zero grace is kept, never lengthened", policy: def, podGrace: 0, crossing: cross(0), want: 0},
		{name: "unnamed signal defaults to memory.available", policy: def, podGrace: 30,
			crossing: Crossing{Threshold: 100 * mi, TimeLeft: 5 * time.Second}, want: 3, shortened: true,
			reason: "grace shortened from 30s to 3s: memory.available predicted to cross 100Mi in 5.0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.policy.Fit(tc.podGrace, tc.crossing)
			if err != nil {
				t.Fatal(err)
			}
			if g.Seconds != tc.want || g.Shortened != tc.shortened || g.Floored != tc.floored {
				t.Errorf("Fit(%d, %+v) = %+v; want %ds shortened=%v floored=%v",
					tc.podGrace, tc.crossing, g, tc.want, tc.shortened, tc.floored)
			}
			if g.Reason != tc.reason {
				t.Errorf("reason = %q\n          want %q", g.Reason, tc.reason)
			}
		})
	}
}

func TestGraceFitRejectsBadInput(t *testing.T) {
	tests := []struct {
		name     string
		policy   GracePolicy
		podGrace int64
		left     time.Duration
		mention  string
	}{
		{"negative pod grace", DefaultGracePolicy(), -1, time.Second, "-1s"},
		{"negative time left", DefaultGracePolicy(), 30, -time.Second, "-1s"},
		{"zero floor would force-delete", GracePolicy{}, 30, time.Second, "floor 0s"},
		{"fractional floor", GracePolicy{Floor: 1500 * time.Millisecond}, 30, time.Second, "1.5s"},
		{"negative margin", GracePolicy{Margin: -time.Second, Floor: time.Second}, 30, time.Second, "margin -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.policy.Fit(tc.podGrace, Crossing{TimeLeft: tc.left})
			if err == nil {
				t.Fatalf("Fit succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not name the bad value %q", err, tc.mention)
			}
		})
	}
}

// TestFasterFillNeverLengthensGrace is the monotonicity property, checked end
// to end through the estimator: of two nodes at the same level, the one
// filling faster never gets a longer grace.
func TestFasterFillNeverLengthensGrace(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	policy := DefaultGracePolicy()
	grace := func(rate float64, avail, threshold, pod int64) int64 {
		e, _ := NewEstimator(Options{Window: 2 * time.Second})
		// Ten samples ending at avail, falling at rate.
		for i := 9; i >= 0; i-- {
			at := t0.Add(time.Duration(9-i) * 100 * time.Millisecond)
			e.Push(at, avail+int64(rate*float64(i)/10))
		}
		g, err := policy.Fit(pod, Crossing{Threshold: threshold, TimeLeft: e.TimeLeft(threshold), Rate: e.Rate()})
		if err != nil {
			t.Fatal(err)
		}
		return g.Seconds
	}
	for i := 0; i < 2000; i++ {
		avail := rng.Int63n(8 << 30)
		threshold := rng.Int63n(1 << 30)
		pod := rng.Int63n(120)
		slow := rng.Float64() * 600 * mi
		fast := slow + rng.Float64()*600*mi
		gs, gf := grace(slow, avail, threshold, pod), grace(fast, avail, threshold, pod)
		if gf > gs {
			t.Fatalf("avail %d threshold %d pod grace %ds: %.0f Mi/s gives %ds but the faster %.0f Mi/s gives %ds",
				avail, threshold, pod, slow/mi, gs, fast/mi, gf)
		}
	}
}

// TestGraceMonotonicInTimeLeft checks the property on Fit alone over a dense
// range of time left, including around whole seconds and the margin.
func TestGraceMonotonicInTimeLeft(t *testing.T) {
	for _, p := range []GracePolicy{DefaultGracePolicy(), {Floor: time.Second}, {Margin: 700 * time.Millisecond, Floor: 3 * time.Second}} {
		for _, pod := range []int64{0, 1, 2, 5, 30, 3600} {
			prev := int64(-1)
			for left := time.Duration(0); left < 40*time.Second; left += 37 * time.Millisecond {
				g, err := p.Fit(pod, Crossing{Threshold: mi, TimeLeft: left})
				if err != nil {
					t.Fatal(err)
				}
				if g.Seconds < prev {
					t.Fatalf("policy %+v pod %ds: grace fell from %ds to %ds as time left grew to %s", p, pod, prev, g.Seconds, left)
				}
				if g.Seconds > pod || (g.Shortened && g.Seconds < int64(p.Floor/time.Second)) {
					t.Fatalf("policy %+v pod %ds time left %s: grace %ds outside [floor, pod]", p, pod, left, g.Seconds)
				}
				prev = g.Seconds
			}
		}
	}
}
