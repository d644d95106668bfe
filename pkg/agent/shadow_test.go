// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/shadow"
)

// In shadow mode the loop tells the recorder each episode and each dry-run
// eviction; the report at the episode's end lines them up with the
// kubelet's.
func TestLoopShadowReportsTheEpisode(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	n.evictResult = func(*simPod, evict.Request) (evict.Outcome, error) {
		return evict.Outcome{Result: evict.DryRun, GracePeriodSeconds: 5, Attempts: 1}, nil
	}
	var reports []shadow.Report
	rec := shadow.NewRecorder(func() (int64, error) { return 0, nil }, func(r shadow.Report) { reports = append(reports, r) })
	n.shadow = rec
	w := n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "1200Mi"))), 10*time.Second)
	// The kubelet evicts b 4 s in; then the pressure ends.
	rec.KubeletEvicted(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "uid-b"},
		Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Conditions: []v1.PodCondition{{Type: v1.DisruptionTarget,
			Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, LastTransitionTime: metav1.NewTime(n.clk.Now().Add(-6 * time.Second))}}}})
	n.mu.Lock()
	n.base -= 2000 * mi
	n.mu.Unlock()
	n.runMore(t, 5*time.Second, w)
	if len(reports) != 1 {
		t.Fatalf("%d reports, want 1 at the episode's end", len(reports))
	}
	r := reports[0]
	if len(r.WouldEvict) != 2 || r.WouldEvict[0].Pod != "ns/a" || r.WouldEvict[0].Signal != "memory.available" {
		t.Errorf("would-be evictions %+v, want ns/a then ns/b for memory.available", r.WouldEvict)
	}
	if !eq(r.Both, []string{"ns/b"}) || !eq(r.EvictdOnly, []string{"ns/a"}) || !r.HasLead || r.Lead <= 0 || r.OOMKills != 0 {
		t.Errorf("report %+v: want b by both, a by evictd alone, evictd first, no OOM kill", r)
	}
}

// In shadow mode the loop's passes reach the fleet's counters: each
// would-be eviction by its episode's resource and signal, an OOM kill
// during the episode under it, and the episode, as it ends, by who acted
// first (evictd, its first would-be eviction before the kill).
func TestLoopShadowCounts(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	n.evictResult = func(*simPod, evict.Request) (evict.Outcome, error) {
		return evict.Outcome{Result: evict.DryRun, GracePeriodSeconds: 5, Attempts: 1}, nil
	}
	n.metrics = newMetrics(t)
	var oom atomic.Int64
	oom.Store(100)
	rec := shadow.NewRecorder(func() (int64, error) { return oom.Load(), nil }, nil)
	rec.CountInto(n.metrics)
	n.shadow = rec
	w := n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "1200Mi"))), 10*time.Second)
	oom.Add(2) // the kernel kills twice during the episode
	n.mu.Lock()
	n.base -= 2000 * mi
	n.mu.Unlock()
	n.runMore(t, 5*time.Second, w)
	oom.Add(1) // and once after it
	n.runMore(t, 2*time.Second, w)
	reg := n.metrics.Registry()
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"evictd_shadow_would_evictions_total", map[string]string{"resource": "memory", "signal": "memory.available"}, 2},
		{"evictd_shadow_oom_kills_total", map[string]string{"episode": "memory"}, 2},
		{"evictd_shadow_oom_kills_total", map[string]string{"episode": "none"}, 1},
		{"evictd_shadow_episodes_total", map[string]string{"resource": "memory", "first": "evictd"}, 1},
	} {
		if got := metrictest.Value(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%s = %v, want %v", tc.name, metrictest.Selector(tc.labels), got, tc.want)
		}
	}
}
