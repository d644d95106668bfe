// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/buildinfo"
)

// TestNodeBrakeSince: evictd_node_brake_since_timestamp_seconds is the
// Node's own record of when the brake went on (a predecessor's, hours old,
// kept), the time this agent saw it on while its copy of the Node lags,
// never a copy older than this agent's own lift, and no series while off.
func TestNodeBrakeSince(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "v1.2.3-test"})
	if err != nil {
		t.Fatal(err)
	}
	since := func() float64 {
		t.Helper()
		if n := testutil.CollectAndCount(m.nodeBrake.since); n != 1 {
			t.Fatalf("%d series of evictd_node_brake_since_timestamp_seconds while the brake is on, want 1", n)
		}
		return testutil.ToFloat64(m.nodeBrake.since.WithLabelValues("memory"))
	}
	old := time.Now().Add(-3 * time.Hour).Truncate(time.Second)

	// Taken over from an agent killed outright: the Node's time stands.
	m.SetNodeBrake("memory", true, old)
	if got := since(); got != float64(old.Unix()) {
		t.Errorf("brake on since %v by the Node: gauge %v, want %v", old, got, old.Unix())
	}
	// A pass whose copy of the Node does not show it keeps it.
	m.SetNodeBrake("memory", true, time.Time{})
	if got := since(); got != float64(old.Unix()) {
		t.Errorf("after a pass without the Node's time: gauge %v, want %v kept", got, old.Unix())
	}

	m.SetNodeBrake("memory", false, time.Time{})
	if n := testutil.CollectAndCount(m.nodeBrake.since); n != 0 {
		t.Errorf("%d series of evictd_node_brake_since_timestamp_seconds after the brake was lifted, want none", n)
	}
	if got := testutil.ToFloat64(m.nodeBrake.on.WithLabelValues("memory")); got != 0 {
		t.Errorf("evictd_node_brake_on = %v after the lift, want 0", got)
	}

	// On again while the copy of the Node still shows the old condition
	// True (older than our lift): not this brake's start.
	before := time.Now()
	m.SetNodeBrake("memory", true, old)
	if got := since(); got < float64(before.UnixNano())/1e9 {
		t.Errorf("brake on again with a stale copy of the Node: gauge %v, want at least %v (now), not the old %v", got, before.Unix(), old.Unix())
	}
	// The copy catches up: the condition's own time replaces ours.
	fresh := time.Now().Truncate(time.Second)
	m.SetNodeBrake("memory", true, fresh)
	if got := since(); got != float64(fresh.Unix()) {
		t.Errorf("once the Node shows the new condition: gauge %v, want its lastTransitionTime %v", got, fresh.Unix())
	}
}
