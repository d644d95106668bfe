// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"sync"
	"time"
)

// leadTime is the time from an accepted eviction to the victim's memory
// being back: how early to act on a predicted crossing.
type leadTime struct {
	mu    sync.Mutex
	value time.Duration
	// last is the last sample as measured, 0 until one is: the evidence of
	// what an eviction takes on this node now (package outrun), which the
	// average, starting from an assumed 2 s, is not.
	last time.Duration
}

func (t *leadTime) lastTook() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *leadTime) get() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// sample folds one measured eviction-to-memory-back time into a moving
// average, kept within bounds so one odd sample cannot make act-early
// reckless or useless.
func (t *leadTime) sample(took time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = took
	t.value = min(max((7*t.value+3*took)/10, 500*time.Millisecond), 30*time.Second)
	return t.value
}
