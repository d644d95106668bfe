// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
