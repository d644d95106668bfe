// SPDX-License-Identifier: Apache-2.0

// Package backoff spaces the tries of a retry loop: exponential, capped,
// and with jitter. Every node runs an agent, so a failure one agent meets
// (an API server restarting or shedding load) thousands meet at the same
// moment: without jitter they would retry in lock-step for ever, and
// without the doubling a failure that lasts would cost the API server a
// request per agent per second.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is the wait before each try of a call that keeps failing. The
// first failure waits about Initial, each further one about twice the
// last, never more than Max. Each wait is drawn at random from the upper
// half of its step, [step/2, step], so that agents that failed together
// drift apart with every try, and Max stays the longest wait (what an
// alert or a reader may count on). Not safe for concurrent use: each loop
// keeps its own.
type Backoff struct {
	Initial, Max time.Duration
	// Rand draws from [0, n); nil: math/rand/v2. Tests set it to pin the
	// jitter.
	Rand func(n int64) int64

	step     time.Duration
	failures int
}

// Next records one more failure and returns the wait before the next try.
func (b *Backoff) Next() time.Duration {
	if b.step == 0 {
		b.step = b.Initial
	} else {
		b.step = min(2*b.step, max(b.Max, b.Initial))
	}
	b.failures++
	half := b.step / 2
	if half <= 0 {
		return b.step
	}
	draw := rand.Int64N
	if b.Rand != nil {
		draw = b.Rand
	}
	return b.step - half + time.Duration(draw(int64(half)+1))
}

// Reset starts again from Initial: call it when a try succeeds.
func (b *Backoff) Reset() {
	b.step, b.failures = 0, 0
}

// Failures counts the failures since the last Reset.
func (b *Backoff) Failures() int { return b.failures }
