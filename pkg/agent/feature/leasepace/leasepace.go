// SPDX-License-Identifier: Apache-2.0

// Package leasepace is the node lease's side of the pass (feature.Feature):
// it tells the lease (pkg/nodelease) whether pressure is near, so that the
// lease is held at its short, active pace only then and at its long, idle
// pace otherwise; and it holds an eviction call until the lease is at the
// active pace, so that an agent taking over a vanished holder's lease one
// active duration after its last renewal never meets a call of the old
// holder's.
package leasepace

import (
	"context"
	"time"

	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Lease is the node lease's runner (*nodelease.Runner).
type Lease interface {
	SetNear(near bool)
	// WaitActive waits until the lease is held at the active pace, at
	// most until ctx ends.
	WaitActive(ctx context.Context) bool
}

// Band is how far above a threshold a signal counts as near it: within
// Band times the threshold's amount. Twice the threshold leaves, at the
// default memory.available<300Mi, 300 MiB of room: the lease is at the
// active pace well before the threshold is met.
const Band = 2

// Feature follows the pass for a Lease.
type Feature struct {
	feature.Nop
	lease Lease
	// horizon: a signal whose fill rate reaches a threshold within it is
	// near too, however far it is now.
	horizon time.Duration
	// wait bounds an eviction call's wait for the active pace.
	wait time.Duration
	// near is what the last Assessed found.
	near bool
}

// New is the lease's feature. A signal falling fast enough to meet a
// threshold within horizon (the active lease's duration) is near; a call
// waits at most wait for the lease's renewal.
func New(l Lease, horizon, wait time.Duration) *Feature {
	return &Feature{lease: l, horizon: horizon, wait: wait}
}

// Assessed notes whether a signal is near one of its thresholds.
func (f *Feature) Assessed(a feature.Assessment) {
	f.near = Near(a.Thresholds, a.Signals, a.Rates, f.horizon)
}

// Episodes tells the lease whether pressure is near: a signal near its
// threshold, or an episode open.
func (f *Feature) Episodes(e feature.Episodes) {
	f.lease.SetNear(f.near || len(e.Open) > 0)
}

// BeforeCall holds an eviction call until the lease is at the active pace,
// within the feature's bound. Pressure near, that renewal was made as the
// pressure came, so the call does not wait; a threshold met with no warning
// waits for one lease write. Past the bound the call goes out: the agent
// still holds the lease (the loop checked it this pass), and an API server
// that does not answer a lease write will not answer the call either.
func (f *Feature) BeforeCall(ctx context.Context, _ string) {
	ctx, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	f.lease.WaitActive(ctx)
}

// Near reports whether any signal is within Band times one of its
// thresholds, or falls at a rate (bytes a second, positive while falling)
// that meets one within horizon. Thresholds switched off (an amount of 0)
// and signals not observed count for nothing.
func Near(ths []thresholds.Threshold, signals map[thresholds.Signal]thresholds.Observation, rates map[thresholds.Signal]float64, horizon time.Duration) bool {
	for _, th := range ths {
		o, ok := signals[th.Signal]
		if !ok {
			continue
		}
		amount := th.Value.Amount(o.Capacity)
		if amount <= 0 {
			continue
		}
		if o.Available/Band < amount {
			return true
		}
		if rate := rates[th.Signal]; rate > 0 && float64(o.Available-amount) < rate*horizon.Seconds() {
			return true
		}
	}
	return false
}
