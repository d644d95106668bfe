// SPDX-License-Identifier: Apache-2.0

package backoff

import (
	"testing"
	"time"
)

// The steps double from Initial to Max; the jitter keeps each wait within
// the upper half of its step, at both ends of the draw.
func TestNextDoublesToMax(t *testing.T) {
	steps := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		30 * time.Second, 30 * time.Second, 30 * time.Second}
	for _, tc := range []struct {
		name string
		draw func(int64) int64
		want func(step time.Duration) time.Duration
	}{
		{"lowest draw", func(int64) int64 { return 0 }, func(s time.Duration) time.Duration { return s / 2 }},
		{"highest draw", func(n int64) int64 { return n - 1 }, func(s time.Duration) time.Duration { return s }},
	} {
		b := Backoff{Initial: time.Second, Max: 30 * time.Second, Rand: tc.draw}
		for i, step := range steps {
			if got := b.Next(); got != tc.want(step) {
				t.Errorf("%s: wait %d = %v, want %v (step %v)", tc.name, i+1, got, tc.want(step), step)
			}
		}
		if b.Failures() != len(steps) {
			t.Errorf("%s: Failures() = %d, want %d", tc.name, b.Failures(), len(steps))
		}
	}
}

// Reset starts again from Initial.
func TestReset(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute, Rand: func(n int64) int64 { return n - 1 }}
	for range 10 {
		b.Next()
	}
	b.Reset()
	if got := b.Next(); got != time.Second || b.Failures() != 1 {
		t.Errorf("after Reset: wait %v, %d failures; want 1s, 1", got, b.Failures())
	}
}

// Agents that failed together spread out: a thousand back-offs with the
// real draw, at the cap, wait anywhere in [Max/2, Max], not all alike.
func TestJitterSpreads(t *testing.T) {
	const agents = 1000
	lo, hi := time.Duration(1<<62), time.Duration(0)
	distinct := map[time.Duration]bool{}
	for range agents {
		b := Backoff{Initial: time.Second, Max: 30 * time.Second}
		var w time.Duration
		for range 8 {
			w = b.Next()
		}
		lo, hi = min(lo, w), max(hi, w)
		distinct[w] = true
	}
	if lo < 15*time.Second || hi > 30*time.Second {
		t.Errorf("waits at the cap range over [%v, %v], want within [15s, 30s]", lo, hi)
	}
	if hi-lo < 10*time.Second || len(distinct) < agents/2 {
		t.Errorf("%d agents' waits at the cap range over [%v, %v] with %d distinct values: they would retry together", agents, lo, hi, len(distinct))
	}
}
