// SPDX-License-Identifier: Apache-2.0

package leasepace

import (
	"context"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/thresholds"
)

const mi = 1 << 20

func threshold(t *testing.T, signal thresholds.Signal, value string) thresholds.Threshold {
	t.Helper()
	v, err := thresholds.ParseValue(value)
	if err != nil {
		t.Fatal(err)
	}
	return thresholds.Threshold{Signal: signal, Value: v}
}

func TestNear(t *testing.T) {
	mem := threshold(t, thresholds.MemoryAvailable, "300Mi")
	disk := threshold(t, thresholds.NodeFsAvailable, "10%")
	off := thresholds.Threshold{Signal: thresholds.PIDAvailable, Value: thresholds.Value{Percentage: 0}}
	capacity := int64(4096 * mi)
	for _, tc := range []struct {
		name  string
		ths   []thresholds.Threshold
		avail map[thresholds.Signal]int64
		rates map[thresholds.Signal]float64
		want  bool
	}{
		{"far", []thresholds.Threshold{mem}, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 2048 * mi}, nil, false},
		{"at twice the threshold", []thresholds.Threshold{mem}, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 600 * mi}, nil, false},
		{"within twice", []thresholds.Threshold{mem}, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 600*mi - 2}, nil, true},
		{"below", []thresholds.Threshold{mem}, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 100 * mi}, nil, true},
		{"falling fast", []thresholds.Threshold{mem}, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 2048 * mi},
			map[thresholds.Signal]float64{thresholds.MemoryAvailable: 100 * mi}, true},
		{"falling slowly", []thresholds.Threshold{mem}, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 2048 * mi},
			map[thresholds.Signal]float64{thresholds.MemoryAvailable: 10 * mi}, false},
		{"rising", []thresholds.Threshold{mem}, map[thresholds.Signal]int64{thresholds.MemoryAvailable: 2048 * mi},
			map[thresholds.Signal]float64{thresholds.MemoryAvailable: -100 * mi}, false},
		{"a percentage", []thresholds.Threshold{disk}, map[thresholds.Signal]int64{thresholds.NodeFsAvailable: capacity / 6}, nil, true},
		{"switched off", []thresholds.Threshold{off}, map[thresholds.Signal]int64{thresholds.PIDAvailable: 0}, nil, false},
		{"switched off, falling", []thresholds.Threshold{off}, map[thresholds.Signal]int64{thresholds.PIDAvailable: 1000},
			map[thresholds.Signal]float64{thresholds.PIDAvailable: 100}, false},
		{"not observed", []thresholds.Threshold{mem}, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := map[thresholds.Signal]thresholds.Observation{}
			for s, a := range tc.avail {
				sig[s] = thresholds.Observation{Available: a, Capacity: capacity}
			}
			if got := Near(tc.ths, sig, tc.rates, 30*time.Second); got != tc.want {
				t.Errorf("Near = %v, want %v", got, tc.want)
			}
		})
	}
}

type lease struct {
	near   []bool
	waited int
}

func (l *lease) SetNear(near bool) { l.near = append(l.near, near) }
func (l *lease) WaitActive(ctx context.Context) bool {
	l.waited++
	<-ctx.Done()
	return false
}

// TestFeatureTellsTheLease: a signal near its threshold or an open episode
// brings the lease to the active pace; neither, back to idle; a call waits
// for the lease within the bound.
func TestFeatureTellsTheLease(t *testing.T) {
	mem := threshold(t, thresholds.MemoryAvailable, "300Mi")
	l := &lease{}
	f := New(l, 30*time.Second, time.Millisecond)
	pass := func(avail int64, open int) {
		f.Assessed(feature.Assessment{Thresholds: []thresholds.Threshold{mem},
			Signals: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Available: avail, Capacity: 4096 * mi}}})
		f.Episodes(feature.Episodes{Open: make([]feature.Episode, open)})
	}
	pass(2048*mi, 0)
	pass(500*mi, 0)
	pass(2048*mi, 1)
	pass(2048*mi, 0)
	if want := []bool{false, true, true, false}; len(l.near) != len(want) || l.near[0] != want[0] || l.near[1] != want[1] || l.near[2] != want[2] || l.near[3] != want[3] {
		t.Errorf("the lease was told near %v, want %v", l.near, want)
	}
	f.BeforeCall(context.Background(), "memory")
	if l.waited != 1 {
		t.Errorf("a call waited for the lease %d times, want 1", l.waited)
	}
}
