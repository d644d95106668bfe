// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"os"
	"sort"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgrouptest"
)

func TestMain(m *testing.M) {
	// The real-cgroup tests re-execute this binary as their workload.
	cgrouptest.RunChildIfRequested()
	os.Exit(m.Run())
}

// percentile returns the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s)) + 0.999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}
