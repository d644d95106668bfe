// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

// CrossingLevel is the memory.usage_in_bytes above which memory.available
// is below threshold, with the kubelet's definitions: available = capacity −
// working set, working set = usage − inactive_file (floored at 0), and a
// threshold is met when available < threshold.
func CrossingLevel(capacity, threshold, inactiveFile int64) (int64, error) {
	if capacity <= 0 || threshold <= 0 || inactiveFile < 0 || threshold > capacity {
		return 0, fmt.Errorf("crossing level: capacity %d, threshold %d, inactive_file %d: want 0 < threshold <= capacity and inactive_file >= 0",
			capacity, threshold, inactiveFile)
	}
	return capacity - threshold + inactiveFile, nil
}

// Crossing is when a usage file was first seen above a level.
type Crossing struct {
	// LastBelow is when the last read that was still at or below the level
	// began; zero if the first read was already above.
	LastBelow time.Time
	// At is when the first read above the level began. The true crossing
	// lies between LastBelow and At.
	At time.Time
	// Usage is the value that read returned.
	Usage int64
}

// Earliest is the earliest the crossing can have happened: LastBelow, or At
// when the first read was already above.
func (c Crossing) Earliest() time.Time {
	if c.LastBelow.IsZero() {
		return c.At
	}
	return c.LastBelow
}

// Resolution is how far the true crossing may lie before At.
func (c Crossing) Resolution() time.Duration {
	if c.LastBelow.IsZero() {
		return 0
	}
	return c.At.Sub(c.LastBelow)
}

// WatchCrossing re-reads the single-number cgroup file path (e.g. a memory
// cgroup's memory.usage_in_bytes) every interval until its value exceeds
// level, and returns when that was first seen. It keeps the file open and
// reads it with pread (about 2 µs a read, docs/kernel.md, "What reading the files costs"), on a locked
// OS thread, so that a 250 µs interval costs about 1% of a core and the
// crossing is timed independently of how evictd learns about it.
//
// started, if not nil, is closed once the file is open and about to be read
// for the first time, so the caller can start the step after that.
func WatchCrossing(ctx context.Context, path string, level int64, interval time.Duration, started chan<- struct{}) (Crossing, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := os.Open(path)
	if started != nil {
		defer func() {
			if started != nil {
				close(started)
			}
		}()
	}
	if err != nil {
		return Crossing{}, err
	}
	defer f.Close()
	buf := make([]byte, 32)
	var lastBelow time.Time
	for {
		start := time.Now()
		n, err := f.ReadAt(buf, 0)
		if n == 0 && err != nil {
			return Crossing{}, fmt.Errorf("read %s: %w", path, err)
		}
		v, err := strconv.ParseInt(string(bytes.TrimSpace(buf[:n])), 10, 64)
		if err != nil {
			return Crossing{}, fmt.Errorf("%s: %q is not a byte count", path, bytes.TrimSpace(buf[:n]))
		}
		if v > level {
			return Crossing{LastBelow: lastBelow, At: start, Usage: v}, nil
		}
		if started != nil {
			close(started)
			started = nil
		}
		lastBelow = start
		select {
		case <-ctx.Done():
			return Crossing{}, fmt.Errorf("%s stayed at or below %d (last %d): %w", path, level, v, ctx.Err())
		default:
		}
		time.Sleep(interval)
	}
}

// ReadStatValue returns one key's value from a cgroup v1 memory.stat file
// (e.g. total_inactive_file).
func ReadStatValue(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return ParseStatValue(b, key)
}

// ParseStatValue returns the value of key in memory.stat content ("key N"
// lines).
func ParseStatValue(b []byte, key string) (int64, error) {
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if !ok || string(k) != key {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("memory.stat %s: %q is not a byte count", key, v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("memory.stat has no %s line", key)
}
