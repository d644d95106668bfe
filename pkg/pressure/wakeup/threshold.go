// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"fmt"
	"math"
)

// DefaultRearmTolerance is how far the wanted threshold usage may drift from
// the armed one before re-arming. A threshold armed too high fires late by the
// drift: 8 MiB is 8 ms at a 1 GiB/s fill, well inside the detection budget,
// while inactive_file on a busy node moves by more than that only every few
// seconds, so re-arms stay rare.
const DefaultRearmTolerance = 8 << 20

// ThresholdUsage returns the memory.usage_in_bytes value at which a cgroup v1
// memcg threshold notification must be armed so that it fires when an
// eviction threshold on capacity is crossed: the kubelet's signal is
// available = capacity − working set, and working set = usage − inactive_file,
// so available reaches thresholdBytes when
//
//	usage = capacity − thresholdBytes + inactive_file
//
// (the kubelet arms its own notifier at the same value). capacity is the
// node's memory capacity for memory.available, or the kubepods limit for
// allocatableMemory.available; thresholdBytes is the resolved threshold (a
// percentage already applied to capacity).
func ThresholdUsage(capacity, thresholdBytes, inactiveFile int64) (int64, error) {
	switch {
	case capacity <= 0:
		return 0, fmt.Errorf("wakeup: memory capacity %d bytes must be positive", capacity)
	case thresholdBytes < 0:
		return 0, fmt.Errorf("wakeup: threshold %d bytes must not be negative", thresholdBytes)
	case inactiveFile < 0:
		return 0, fmt.Errorf("wakeup: inactive_file %d bytes must not be negative", inactiveFile)
	case thresholdBytes >= capacity:
		return 0, fmt.Errorf("wakeup: threshold %d bytes is not below capacity %d bytes: it is met at any usage, there is nothing to arm", thresholdBytes, capacity)
	}
	workingSet := capacity - thresholdBytes
	if inactiveFile > math.MaxInt64-workingSet {
		return 0, fmt.Errorf("wakeup: capacity %d − threshold %d + inactive_file %d overflows", capacity, thresholdBytes, inactiveFile)
	}
	return workingSet + inactiveFile, nil
}

// NeedRearm reports whether a threshold armed at usage armed should be
// re-armed at want (the current ThresholdUsage): when they differ by more
// than tolerance bytes. Since usage = capacity − threshold + inactive_file,
// with a fixed capacity and threshold this is "inactive_file moved by more
// than tolerance"; a changed capacity (a resized kubepods limit) is caught by
// the same comparison.
func NeedRearm(armed, want, tolerance int64) bool {
	d := float64(want) - float64(armed) // no int64 overflow
	return math.Abs(d) > float64(tolerance)
}
