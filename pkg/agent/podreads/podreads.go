// SPDX-License-Identifier: Apache-2.0

// Package podreads decides, pass by pass, whether the agent reads every
// pod's cgroup or reuses the last pass's figures.
//
// A pass reads the node's few files and then, at a hundred pods, a few
// hundred pod files: most of an idle agent's CPU. Yet away from every
// threshold nothing ranks the pods. So a pass reads the node first, and
// the pods only when one of these holds:
//
//   - Due: the last read is MaxAge old (the kubelet's housekeeping, 10 s:
//     the pods' figures, in /explain and the trace, are never older than
//     the kubelet's own);
//   - Near: a signal of this pass is within Margin of one of its
//     thresholds, or past it. Act-early bets only inside half a threshold
//     above it (decide.EarlyMargin), so every pass that may evict ranks on
//     pods read in that same pass, however fast the node fell to it;
//   - Busy: the loop follows pods through their cgroups (an episode is
//     open, a victim is in flight), or a configured signal family reads
//     each pod every pass (memory.high, stall).
//
// The pods' ephemeral-storage walks and names wait for a pass that reads
// them (pressure.Observer.ObserveWith).
package podreads

import (
	"time"

	"github.com/evictd/evictd/pkg/thresholds"
)

// DefaultMaxAge is the kubelet's housekeeping interval, how old its own
// pod figures may be.
const DefaultMaxAge = 10 * time.Second

// Reason is why a pass reads the pods; Reuse when it does not.
type Reason string

const (
	Reuse Reason = "reuse"
	Due   Reason = "due"
	Near  Reason = "near"
	Busy  Reason = "busy"
	// Forced: the observer read the pods without asking (its first pass,
	// after the pods could not be listed, while kubepods cannot be read).
	// Decide never returns it.
	Forced Reason = "forced"
)

// Reasons are every Reason, for metrics.
func Reasons() []Reason { return []Reason{Reuse, Due, Near, Busy, Forced} }

// Input is what one pass knows after reading the node.
type Input struct {
	Now time.Time
	// Last is when the pods were last read (zero: never).
	Last time.Time
	// MaxAge is the longest the pods go unread (0: DefaultMaxAge).
	MaxAge time.Duration
	// Signals are the node's signals in this pass, Thresholds the agent's.
	Signals    map[thresholds.Signal]thresholds.Observation
	Thresholds []thresholds.Threshold
	// Busy: something needs the pods read every pass (see the package).
	Busy bool
}

// Decide says whether this pass reads the pods, and why.
func Decide(in Input) Reason {
	maxAge := in.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	switch {
	case in.Busy:
		return Busy
	case in.Last.IsZero() || in.Now.Sub(in.Last) >= maxAge:
		return Due
	}
	for _, th := range in.Thresholds {
		o, ok := in.Signals[th.Signal]
		if !ok {
			// Not measured in this pass: nothing can act on it either, and
			// the loop says so (SignalErrors).
			continue
		}
		amount := th.Value.Amount(o.Capacity)
		// Subtracting only once Available is above amount: both may be
		// near the ends of int64 (a negative available, an unlimited amount).
		if o.Available <= amount || o.Available-amount <= Margin(amount, o.Capacity) {
			return Near
		}
	}
	return Reuse
}

// Margin is the band above a threshold of amount (out of capacity) inside
// which the pods are read every pass: the threshold itself, and at least
// a twentieth of the capacity. It holds act-early's band (half the
// threshold) with room to spare, and a small threshold's band stays wide
// enough for the passes before a crossing to see the pods that fill.
func Margin(amount, capacity int64) int64 {
	return max(amount, capacity/20)
}
