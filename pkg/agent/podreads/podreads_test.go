// SPDX-License-Identifier: Apache-2.0

package podreads

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

const mib = 1 << 20

func TestDecide(t *testing.T) {
	ths, err := thresholds.Parse(thresholds.Spec{
		Hard: map[string]string{"memory.available": "300Mi", "nodefs.available": "10%"},
		Soft: map[string]string{"memory.available": "500Mi"}, GracePeriod: map[string]string{"memory.available": "30s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mem := func(avail int64) map[thresholds.Signal]thresholds.Observation {
		return map[thresholds.Signal]thresholds.Observation{
			thresholds.MemoryAvailable: {Available: avail, Capacity: 4096 * mib},
			thresholds.NodeFsAvailable: {Available: 50 << 30, Capacity: 100 << 30},
		}
	}
	far := mem(3000 * mib)
	for _, tc := range []struct {
		name string
		in   Input
		want Reason
	}{
		{"far, read 1s ago", Input{Now: t0, Last: t0.Add(-time.Second), Signals: far}, Reuse},
		{"never read", Input{Now: t0, Signals: far}, Due},
		{"read 10s ago", Input{Now: t0, Last: t0.Add(-10 * time.Second), Signals: far}, Due},
		{"read 9.9s ago", Input{Now: t0, Last: t0.Add(-9900 * time.Millisecond), Signals: far}, Reuse},
		{"a shorter MaxAge", Input{Now: t0, Last: t0.Add(-2 * time.Second), MaxAge: time.Second, Signals: far}, Due},
		{"busy", Input{Now: t0, Last: t0.Add(-time.Second), Signals: far, Busy: true}, Busy},
		// The soft threshold (500Mi) with its margin (500Mi) is the widest band: 1000Mi.
		{"inside the soft threshold's band", Input{Now: t0, Last: t0.Add(-time.Second), Signals: mem(1000 * mib)}, Near},
		{"just above every band", Input{Now: t0, Last: t0.Add(-time.Second), Signals: mem(1000*mib + 1)}, Reuse},
		{"past a threshold", Input{Now: t0, Last: t0.Add(-time.Second), Signals: mem(100 * mib)}, Near},
		{"available negative", Input{Now: t0, Last: t0.Add(-time.Second), Signals: mem(-5)}, Near},
		{"a disk threshold near", Input{Now: t0, Last: t0.Add(-time.Second), Signals: map[thresholds.Signal]thresholds.Observation{
			thresholds.MemoryAvailable: {Available: 3000 * mib, Capacity: 4096 * mib},
			thresholds.NodeFsAvailable: {Available: 20 << 30, Capacity: 100 << 30},
		}}, Near},
		{"a signal not measured", Input{Now: t0, Last: t0.Add(-time.Second), Signals: map[thresholds.Signal]thresholds.Observation{}}, Reuse},
	} {
		tc.in.Thresholds = ths
		if got := Decide(tc.in); got != tc.want {
			t.Errorf("%s: Decide = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestMargin(t *testing.T) {
	for _, tc := range []struct{ amount, capacity, want int64 }{
		{300 * mib, 4096 * mib, 300 * mib},            // the threshold itself
		{10 * mib, 4096 * mib, 4096 * mib / 20},       // a twentieth of the capacity
		{math.MaxInt64, math.MaxInt64, math.MaxInt64}, // no overflow
	} {
		if got := Margin(tc.amount, tc.capacity); got != tc.want {
			t.Errorf("Margin(%d, %d) = %d, want %d", tc.amount, tc.capacity, got, tc.want)
		}
	}
	// Act-early bets within half a threshold above it: that band is always read.
	for _, amount := range []int64{1, 100 * mib, 300 * mib, 1 << 40} {
		if Margin(amount, 0) < amount/2 {
			t.Errorf("Margin(%d) is narrower than act-early's band", amount)
		}
	}
}

func TestDecideExtremes(t *testing.T) {
	ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "99%"}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	in := Input{Now: t0, Last: t0, Thresholds: ths, Signals: map[thresholds.Signal]thresholds.Observation{
		thresholds.MemoryAvailable: {Available: math.MaxInt64, Capacity: math.MaxInt64},
	}}
	if got := Decide(in); got != Near {
		t.Errorf("available at the very top of a threshold of 99%%: %q, want near", got)
	}
	in.Signals[thresholds.MemoryAvailable] = thresholds.Observation{Available: math.MinInt64, Capacity: 1}
	if got := Decide(in); got != Near {
		t.Errorf("available at the very bottom: %q, want near", got)
	}
}

// TestReasonsAreTheMetricsLabels: pod_reads_total counts each reason from
// 0, from the metrics' own list of label values; a reason added here and
// not there would be counted without ever being exported at 0.
func TestReasonsAreTheMetricsLabels(t *testing.T) {
	var got []string
	for _, r := range Reasons() {
		got = append(got, string(r))
	}
	if !slices.Equal(got, metrics.PodReadReasons) {
		t.Errorf("podreads.Reasons() %v; metrics.PodReadReasons %v: keep them equal", got, metrics.PodReadReasons)
	}
}
