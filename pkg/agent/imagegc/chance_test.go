// SPDX-License-Identifier: Apache-2.0

package imagegc

import (
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/thresholds"
)

func TestChance(t *testing.T) {
	c := NewChance()
	s := thresholds.NodeFsAvailable
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	active := thresholds.Status{Active: []thresholds.ActiveThreshold{{Threshold: thresholds.Threshold{Signal: s}}}}
	step := func(at time.Duration, wantCount int64, wantEnded bool) {
		t.Helper()
		count, ended, _ := c.Count(s, 100, t0.Add(at))
		if count != wantCount || ended != wantEnded {
			t.Errorf("at %s: count %d, ended %v; want %d, %v", at, count, ended, wantCount, wantEnded)
		}
	}
	step(0, 100, false)
	c.Forget(active)
	step(Patience-time.Second, 100, false)
	step(Patience, 0, true)
	step(Patience+time.Second, 0, false)
	if n, _, _ := c.Count(s, 0, t0.Add(Patience)); n != 0 {
		t.Errorf("no unused images counted %d", n)
	}
	// The threshold clears: the next holding waits afresh.
	c.Forget(thresholds.Status{})
	step(2*Patience, 100, false)
	step(3*Patience-time.Second, 100, false)
	step(3*Patience, 0, true)
}

// Counts says what Count would, and starts no wait: the explanation's
// plans ask it.
func TestChanceCountsReadsOnly(t *testing.T) {
	c := NewChance()
	s := thresholds.NodeFsAvailable
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, at := range []time.Duration{0, Patience, 2 * Patience} {
		if n := c.Counts(s, 100, t0.Add(at)); n != 100 {
			t.Errorf("at %s with no wait started: Counts %d, want 100", at, n)
		}
	}
	c.Count(s, 100, t0.Add(2*Patience)) // a decision starts the wait
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{{2 * Patience, 100}, {3*Patience - time.Second, 100}, {3 * Patience, 0}} {
		if n := c.Counts(s, 100, t0.Add(tc.at)); n != tc.want {
			t.Errorf("at %s: Counts %d, want %d", tc.at, n, tc.want)
		}
	}
	if n, ended, _ := c.Count(s, 100, t0.Add(3*Patience)); n != 0 || !ended {
		t.Errorf("Count at the patience's end: %d, ended %v; want 0, ended (Counts ended nothing)", n, ended)
	}
}
