// SPDX-License-Identifier: Apache-2.0

// Package leadtime keeps the time from an accepted eviction to the victim's
// memory being back on this node: how early act-early acts on a predicted
// crossing (package decide), and the evidence of what an eviction takes
// here now (package outrun).
package leadtime

import (
	"sync"
	"time"
)

// Bounds of the average: one odd sample must make act-early neither
// reckless (acting half a minute ahead) nor useless (a lead near zero).
const (
	Min = 500 * time.Millisecond
	Max = 30 * time.Second
)

// Lead is the measured lead time. The loop reads it while deciding and
// folds in samples as victims' memory comes back; both may come from
// different goroutines.
type Lead struct {
	mu    sync.Mutex
	value time.Duration
	// last is the last sample as measured, 0 until one is: the evidence of
	// what an eviction takes on this node now, which the average, starting
	// from an assumed value, is not.
	last time.Duration
}

// New starts from an assumed lead time (agent.DefaultLead, or the
// configured one), until evictions are measured.
func New(assumed time.Duration) *Lead { return &Lead{value: assumed} }

// Get is the lead time to act with: the moving average.
func (t *Lead) Get() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// LastTook is the last eviction's lead time as measured, 0 before one was.
func (t *Lead) LastTook() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Sample folds one measured eviction-to-memory-back time into the moving
// average (seven parts the old value, three the sample), kept within
// [Min, Max], and returns the new average.
func (t *Lead) Sample(took time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = took
	t.value = min(max((7*t.value+3*took)/10, Min), Max)
	return t.value
}
