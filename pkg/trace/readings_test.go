// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"testing"
	"time"
)

// TestReadings: the clock readings a pass took come back from the trace as
// the times they were, to the nanosecond, in order, with a monotonic
// reading on the clock (the JSON keeps the wall clock) and one that steps
// back; a reading outside a pass is nobody's; a pass that took none has
// none.
func TestReadings(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	r.Reading(t0.Add(-time.Second)) // before any pass: dropped
	at := time.Now()                // with a monotonic reading
	took := []time.Time{at.Add(3 * time.Millisecond), at.Add(3*time.Millisecond + 417), at.Add(2 * time.Millisecond), at.Add(31*time.Millisecond + 9)}
	r.Begin(1, 0, at, Wakeup{Source: "poll"})
	for _, x := range took {
		r.Reading(x)
	}
	r.End()
	r.Reading(at.Add(time.Hour)) // between passes: dropped
	r.Begin(2, 0, at.Add(time.Second), Wakeup{Source: "poll"})
	r.End()

	tr, _ := export(t, r)
	if tr.Header.Format != Format || len(tr.Passes) != 2 {
		t.Fatalf("format %d, %d passes; want %d, 2", tr.Header.Format, len(tr.Passes), Format)
	}
	got := tr.Passes[0].ReadingTimes()
	if len(got) != len(took) {
		t.Fatalf("pass 1 has %d readings %v, want %d", len(got), got, len(took))
	}
	for i := range took {
		if !got[i].Equal(took[i]) {
			t.Errorf("reading %d: %s, want %s", i, got[i].Format(time.RFC3339Nano), took[i].Format(time.RFC3339Nano))
		}
	}
	if n := len(tr.Passes[1].ReadingTimes()); n != 0 {
		t.Errorf("pass 2 took no reading and has %d", n)
	}
}
