// SPDX-License-Identifier: Apache-2.0

package outrun

import (
	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Feature tells the operator, once a fall, when memory falls faster than
// the hard threshold's room lasts for an eviction on this node
// (feature.Feature, on every agent). It changes no decision: evictd acts as
// it would; what it cannot do is make the node stop a pod sooner.
type Feature struct {
	feature.Nop
	tracker Tracker
	// began is told each signal an outrun began on (the metric).
	began func(thresholds.Signal)
	log   *zap.Logger
}

// NewFeature is the outrun warning; began counts each outrun that begins
// (metrics.ThresholdOutrun).
func NewFeature(began func(thresholds.Signal), log *zap.Logger) *Feature {
	return &Feature{began: began, log: log}
}

// Assessed checks each memory signal's fall against its hard threshold's
// room.
func (f *Feature) Assessed(a feature.Assessment) {
	room := map[thresholds.Signal]Fall{}
	for _, th := range a.Thresholds {
		if !th.Hard() || (th.Signal != thresholds.MemoryAvailable && th.Signal != thresholds.AllocatableMemoryAvailable) {
			continue
		}
		o, ok := a.Signals[th.Signal]
		if !ok {
			continue
		}
		fall := Fall{
			Amount: th.Value.Amount(o.Capacity), ActEarly: a.ActEarly, Available: o.Available,
			Rate: a.Rates[th.Signal], Sustained: a.Trends[th.Signal], Lead: a.LastLead,
		}
		// Of two hard thresholds on one signal, the larger is where evictd
		// acts first.
		if prev, seen := room[th.Signal]; !seen || fall.Amount > prev.Amount {
			room[th.Signal] = fall
		}
	}
	for s, fall := range room {
		if !f.tracker.Update(s, fall) {
			continue
		}
		f.began(s)
		f.log.Warn("memory falls faster than the threshold covers: at this rate its room is gone before an eviction on this node gives memory back, and the kernel's OOM killer may strike before the victim is gone; raise the threshold, or run with --actuator",
			zap.String("signal", string(s)), zap.Float64("fillMiBps", fall.Rate/(1<<20)),
			zap.Int64("thresholdBytes", fall.Amount), zap.Int64("roomBytes", fall.Room()), zap.Int64("availableBytes", fall.Available),
			zap.Duration("roomLasts", fall.Cover()), zap.Duration("lastEvictionTook", fall.Lead))
	}
}
