// SPDX-License-Identifier: Apache-2.0

// Package benchcpu measures the process's CPU time (user + system) over a
// benchmark loop. Reported as cpu-ns/op beside the wall-clock ns/op, it is
// what the code measured costs the node, and it barely moves when other
// processes compete for the CPU, which wall-clock time does a lot on a
// 2-core machine.
package benchcpu

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Clock is the process's CPU time at the start of a benchmark loop.
type Clock struct{ start time.Duration }

func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Start resets b's timer and starts the CPU clock.
func Start(b *testing.B) Clock {
	b.ResetTimer()
	return Clock{processCPU(b)}
}

// Report reports the CPU time used since Start, per op, as cpu-ns/op.
func (c Clock) Report(b *testing.B) {
	used := processCPU(b) - c.start
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
