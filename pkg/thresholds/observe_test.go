// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func TestObserve(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Second)
	full := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{Time: metav1.NewTime(t0), AvailableBytes: u64(1 << 30), WorkingSetBytes: u64(3 << 30)},
		SystemContainers: []statsapi.ContainerStats{
			{Name: "kubelet", Memory: &statsapi.MemoryStats{AvailableBytes: u64(1), WorkingSetBytes: u64(1)}},
			{Name: "pods", Memory: &statsapi.MemoryStats{Time: metav1.NewTime(t0), AvailableBytes: u64(512 << 20), WorkingSetBytes: u64(2 << 30)}},
		},
		Fs: &statsapi.FsStats{Time: metav1.NewTime(t1), AvailableBytes: u64(10 << 30), CapacityBytes: u64(100 << 30), InodesFree: u64(900), Inodes: u64(1000)},
		Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{
			Time: metav1.NewTime(t1), AvailableBytes: u64(20 << 30), CapacityBytes: u64(200 << 30), InodesFree: u64(50), Inodes: u64(100),
		}},
		Rlimit: &statsapi.RlimitStats{Time: metav1.NewTime(t1), MaxPID: i64(32768), NumOfRunningProcesses: i64(768)},
	}}
	tests := []struct {
		name    string
		summary *statsapi.Summary
		want    map[Signal]Observation
	}{
		{name: "nil", summary: nil, want: map[Signal]Observation{}},
		{name: "empty", summary: &statsapi.Summary{}, want: map[Signal]Observation{}},
		{
			name:    "every signal",
			summary: full,
			want: map[Signal]Observation{
				MemoryAvailable:            {Available: 1 << 30, Capacity: 4 << 30, Time: t0},
				AllocatableMemoryAvailable: {Available: 512 << 20, Capacity: 2<<30 + 512<<20, Time: t0},
				NodeFsAvailable:            {Available: 10 << 30, Capacity: 100 << 30, Time: t1},
				NodeFsInodesFree:           {Available: 900, Capacity: 1000, Time: t1},
				ImageFsAvailable:           {Available: 20 << 30, Capacity: 200 << 30, Time: t1},
				ImageFsInodesFree:          {Available: 50, Capacity: 100, Time: t1},
				PIDAvailable:               {Available: 32000, Capacity: 32768, Time: t1},
			},
		},
		{
			name: "partial fields are left out",
			summary: &statsapi.Summary{Node: statsapi.NodeStats{
				Memory:  &statsapi.MemoryStats{AvailableBytes: u64(1)},
				Fs:      &statsapi.FsStats{InodesFree: u64(1), Inodes: u64(2)},
				Runtime: &statsapi.RuntimeStats{},
				Rlimit:  &statsapi.RlimitStats{MaxPID: i64(10)},
			}},
			want: map[Signal]Observation{NodeFsInodesFree: {Available: 1, Capacity: 2}},
		},
		{
			name: "absurd readings saturate instead of wrapping",
			summary: &statsapi.Summary{Node: statsapi.NodeStats{
				Memory: &statsapi.MemoryStats{AvailableBytes: u64(math.MaxUint64), WorkingSetBytes: u64(5)},
			}},
			want: map[Signal]Observation{MemoryAvailable: {Available: math.MaxInt64, Capacity: math.MaxInt64}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(tc.summary)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d signals %v, want %d", len(got), got, len(tc.want))
			}
			for s, w := range tc.want {
				g, ok := got[s]
				if !ok || g.Available != w.Available || g.Capacity != w.Capacity || !g.Time.Equal(w.Time) {
					t.Errorf("%s = %+v (present %v), want %+v", s, g, ok, w)
				}
			}
		})
	}
}

func TestObserveSwap(t *testing.T) {
	at := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	s := &statsapi.Summary{Node: statsapi.NodeStats{Swap: &statsapi.SwapStats{Time: at, SwapAvailableBytes: u64(768 << 20), SwapUsageBytes: u64(256 << 20)}}}
	o, ok := Observe(s)[SwapAvailable]
	if !ok || o.Available != 768<<20 || o.Capacity != 1<<30 || !o.Time.Equal(at.Time) {
		t.Errorf("swap.available = %+v (%v), want 768Mi of 1Gi", o, ok)
	}
	// No swap (nil, or none configured): no observation, so no threshold
	// on it is ever met.
	for _, sw := range []*statsapi.SwapStats{nil, {SwapAvailableBytes: u64(0), SwapUsageBytes: u64(0)}, {SwapUsageBytes: u64(1)}} {
		if o, ok := Observe(&statsapi.Summary{Node: statsapi.NodeStats{Swap: sw}})[SwapAvailable]; ok {
			t.Errorf("swap %+v observed as %+v", sw, o)
		}
	}
}
