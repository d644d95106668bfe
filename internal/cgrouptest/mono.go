// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"time"

	"golang.org/x/sys/unix"
)

// Mono is a CLOCK_MONOTONIC reading in nanoseconds. Unlike the monotonic
// reading hidden in time.Time, it compares across processes, so a child's
// timestamps can be set against the test's own.
type Mono int64

// Now reads CLOCK_MONOTONIC.
func Now() Mono {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail on Linux; a zero reading would only make a
	// latency absurd, which the caller's bounds catch.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return Mono(ts.Nano())
}

// Sub returns m-o.
func (m Mono) Sub(o Mono) time.Duration { return time.Duration(m - o) }
