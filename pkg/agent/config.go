// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// The loop's fixed timings.
const (
	// eventFillRate is the fill rate the adaptive poll must catch by itself
	// for a signal whose hard threshold an event source already watches:
	// the event catches a faster fill at the crossing.
	eventFillRate = 100 << 20
	// burst is how long the loop polls fast after an event wake-up.
	burst = 2 * time.Second
	// pdbRecheck is how long a PodDisruptionBudget refusal is trusted.
	pdbRecheck = 30 * time.Second
	// hardSlack is added to the hard grace cap to get the horizon within
	// which reclaim in flight counts toward a hard threshold.
	hardSlack = 2 * time.Second
)

// ConfigFor is the loop's configuration from `evictd run`'s options, with
// the thresholds ths (placed above the kubelet's) and the ranking options.
func ConfigFor(o *options.Options, ths []thresholds.Threshold, rankOpts rank.Options) LoopConfig {
	grace := predict.DefaultGracePolicy()
	grace.Margin = o.GraceMargin
	if rankOpts.Node.Name == "" {
		// A mirror pod's owner must be this node; its UID comes from the
		// Node the informer holds, on each pass (rankNode).
		rankOpts.Node.Name = o.NodeName
	}
	return LoopConfig{
		Thresholds:       ths,
		TransitionPeriod: o.Config.TransitionPeriod(),
		StallWindow:      o.Config.StallWindow(),
		MemoryHigh:       o.Config.MemoryHighThresholds(),
		Rank:             rankOpts,
		Decide: decide.Options{
			Evict:       o.Evict,
			HardHorizon: time.Duration(o.Evict.HardGracePeriod)*time.Second + hardSlack,
			ActEarly:    o.ActEarly,
			Lead:        DefaultLead,
			FitGrace:    o.FitGrace,
			Grace:       grace,
		},
		Housekeeping:   o.Housekeeping,
		Adaptive:       o.Adaptive,
		Poll:           wakeup.PollPolicy{Min: o.PollMin, Max: o.Housekeeping},
		EventFillRate:  eventFillRate,
		Burst:          burst,
		InFlight:       inflight.DefaultOptions(),
		MaxAttempts:    DefaultMaxAttempts,
		PDBRecheck:     pdbRecheck,
		RefusedRecheck: DefaultRefusedRecheck,
		ExpectImageGC:  o.ExpectImageGC,
	}
}
