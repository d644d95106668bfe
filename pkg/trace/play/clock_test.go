// SPDX-License-Identifier: Apache-2.0

package play

import (
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/trace"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestPlayedClock: a replayed pass's clock hands back the pass's readings
// in order; past them it is the pass's own clock, never behind the last
// time it gave, and the pass is reported as having diverged, as is one
// that took fewer; a trace without readings (before format 4) is the
// pass's clock throughout, and never diverges.
func TestPlayedClock(t *testing.T) {
	at := t0.Add(time.Second)
	pass := &trace.Pass{N: 7, At: at, Readings: []int64{int64(5 * time.Millisecond), int64(40 * time.Millisecond)}}
	own := testclock.NewFakeClock(at.Add(2 * time.Millisecond)) // the pass's observation, say
	c := playedClock{pass: own}
	stamp := func(ts ...time.Time) string {
		var out []string
		for _, x := range ts {
			out = append(out, x.Sub(at).String())
		}
		return strings.Join(out, " ")
	}

	c.begin(pass, true)
	if got, want := stamp(c.Now(), c.Now()), "5ms 45ms"; got != want || c.diverged() {
		t.Fatalf("the recorded readings: %s (diverged %v), want %s", got, c.diverged(), want)
	}
	if got, want := stamp(c.Now()), "45ms"; got != want || !c.diverged() {
		t.Errorf("a third reading of two recorded: %s (diverged %v), want the last one given, %s, and diverged", got, c.diverged(), want)
	}
	own.SetTime(at.Add(time.Second))
	if got, want := stamp(c.Now()), "1s"; got != want {
		t.Errorf("past the readings, with the pass's clock ahead: %s, want %s", got, want)
	}

	c.begin(pass, true)
	c.Now()
	if !c.diverged() {
		t.Error("a pass that took one reading of two recorded did not diverge")
	}

	c.begin(pass, false)
	own.SetTime(at.Add(3 * time.Millisecond))
	if got, want := stamp(c.Now(), c.Now(), c.Now()), "3ms 3ms 3ms"; got != want || c.diverged() {
		t.Errorf("a trace without readings: %s (diverged %v), want the pass's clock, %s", got, c.diverged(), want)
	}
}
