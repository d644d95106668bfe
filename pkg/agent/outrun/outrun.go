// SPDX-License-Identifier: Apache-2.0

// Package outrun tells when memory falls faster than a hard threshold can
// absorb on this node. Between evictd's call and the victim's memory being
// back lies the lead (the kubelet's stop, the runtime's, the kernel freeing
// the pages), which evictd measures from its own victims. The threshold,
// with act-early's band above it, is the room the node has to spend in that
// time. A fall that empties the room before the lead is over leaves the
// kernel's OOM killer to strike first, however right evictd's call: on a
// loaded node the race's leaker was killed 4.5 s after evictd had evicted it
// (docs/node.md, "A loaded host"). No choice of victim helps then; a larger
// threshold or the actuator does, and the operator must hear of it.
package outrun

import (
	"time"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Fall is one memory signal's fall, as a pass sees it.
type Fall struct {
	// Amount is the hard threshold in bytes; ActEarly whether evictd may act
	// within decide.EarlyMargin above it.
	Amount   int64
	ActEarly bool
	// Available is the signal's last figure, Rate its fill rate in bytes per
	// second (positive while available falls), Sustained whether the fall
	// is a trend and not a one-off step.
	Available int64
	Rate      float64
	Sustained bool
	// Lead is the last measured time from an accepted eviction to the
	// victim's memory being back; 0 until one is measured. An assumed lead
	// is no evidence: the 2 s act-early starts from would cry wolf at every
	// fast fill on a node that stops pods sooner (on the quiet VM node the
	// 400 MiB/s leak's growth stopped about half a second after evictd's call).
	Lead time.Duration
}

// Room is what the node has to spend from the moment evictd may act to
// nothing left: the threshold, and act-early's band above it when on.
func (f Fall) Room() int64 {
	if f.ActEarly {
		return f.Amount + decide.EarlyMargin(f.Amount)
	}
	return f.Amount
}

// Cover is how long Room lasts at Rate (predict.Never when not falling).
func (f Fall) Cover() time.Duration { return predict.TimeLeft(f.Room(), 0, f.Rate) }

// Outrun reports whether the fall, sustained and already where evictd acts,
// empties the room before an eviction's memory is back. A fast fall far
// above the room says nothing yet: most stop short of any threshold.
func (f Fall) Outrun() bool {
	return f.Sustained && f.Amount > 0 && f.Lead > 0 && f.Available <= f.Room() && f.Cover() < f.Lead
}

// Tracker remembers which signals are outrun, so that a fall is counted and
// told once, when it begins, and not at every pass it lasts. A fall lasts
// until the signal is back above its room: within it, a pass whose trend
// reads as a step, or whose rate dips, is the same fall (the sustained
// trend is judged over a short window, and an eviction's pause in the fill
// is not the node's relief).
type Tracker struct {
	on map[thresholds.Signal]bool
}

// Update records s's fall in this pass and reports whether an outrun began
// now.
func (t *Tracker) Update(s thresholds.Signal, f Fall) (began bool) {
	if t.on == nil {
		t.on = map[thresholds.Signal]bool{}
	}
	switch {
	case t.on[s]:
		t.on[s] = f.Available <= f.Room()
		return false
	case f.Outrun():
		t.on[s] = true
		return true
	}
	return false
}
