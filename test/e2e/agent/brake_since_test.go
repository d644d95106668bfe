// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/nodebrake"
)

// brakeSince is the gauge EvictdNodeBrakeHeldLong reads.
const brakeSince = "evictd_node_brake_since_timestamp_seconds"

// waitBrakeSince waits until e exports brakeSince{memory} at want (Unix
// seconds) and returns the last value seen, for the failure message.
func waitBrakeSince(t *testing.T, e *evictd, want int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := e.scrape().Lookup(brakeSince, map[string]string{"resource": "memory"})
		if err == nil && got == float64(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{resource=memory} never became %d (the condition's lastTransitionTime) within %s: %v, %v; log tail:\n%s",
				brakeSince, want, timeout, got, err, e.tail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNodeBrakeSinceOutlivesAgent: on the real API server, a memory episode
// nothing can end (every pod under a PodDisruptionBudget that allows no
// disruption) keeps the brake on; the agent exports when it went on, the
// condition's lastTransitionTime, and after it is SIGKILLed mid-episode the
// next agent takes the brake over and exports the same time, from before
// it started: the hour of EvictdNodeBrakeHeldLong does not start again
// with each agent, as a `for:` on evictd_node_brake_on would. The next
// agent starts with the pressure still on, and a watch of the Node shows
// that it never lifts the dead agent's brake before it has judged the node
// (no change with the taint gone or the condition not True, from the kill
// until the next agent's episode runs); once the pressure is gone (the hog
// deleted) it lifts the brake at its episode's end.
func TestNodeBrakeSinceOutlivesAgent(t *testing.T) {
	m := newMemoryNode(t, "brake-since")
	ctx := context.Background()
	_, kubeconfig := m.c.EvictdNodeToken(t, m.node.Name)
	_, hog := m.startHog(t, hogSpec(80, 300))
	pods, err := m.c.Admin.CoreV1().Pods(m.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every pod of the namespace, none to spare.
	createPDB(t, m.c, m.ns, "all", int32(len(pods.Items)), nil, 0)

	e := startBraking(t, m, kubeconfig)
	on := waitBrake(t, m, evictionTimeout, "went on", brakeState.on)
	since := on.cond.LastTransitionTime.Unix()
	waitBrakeSince(t, e, since, 30*time.Second)

	// Every change of the Node from here on: the brake must stay on.
	w := watchNode(t, m.c, m.node.Name)
	var lifts []string
	seen := func(n *corev1.Node) {
		if taint, cond := memoryBrake(n); !taint || !cond {
			lifts = append(lifts, fmt.Sprintf("rv %s: taint %v, condition %v", n.ResourceVersion, taint, cond))
		}
	}
	e.kill()
	// The Node keeps whole seconds: the next agent starts in a later one,
	// so that a time of its own could not pass for the Node's.
	for time.Since(on.cond.LastTransitionTime.Time) < 2*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	started := time.Now()
	next := startBraking(t, m, kubeconfig)
	next.waitLog(60*time.Second, "pressure episode started", func(l logEntry) bool { return l.Str("resource") == "memory" })
	// The next agent has judged the node and holds the brake (its round
	// with the episode's brake ran): every change of the Node until a
	// mark written now is read, and none may have lifted the brake.
	if err := waitMetric(next, 60*time.Second, "evictd_node_brake_on", map[string]string{"resource": "memory"}, 1); err != nil {
		t.Fatalf("the next agent: %v", err)
	}
	w.sync(30*time.Second, seen)
	if len(lifts) > 0 {
		t.Errorf("the Node lost the dead agent's brake while the pressure was still on, after the kill: %v", lifts)
	}
	waitBrakeSince(t, next, since, 60*time.Second)
	after := readBrake(t, m)
	if !after.on() || after.cond.LastTransitionTime.Unix() != since {
		t.Errorf("the next agent did not keep the brake as it was: condition %+v, taint %v; want on since %d", after.cond, after.taint, since)
	}
	t.Logf("brake on since %s, %s before the next agent started; it exports the same time",
		on.cond.LastTransitionTime.UTC().Format(time.RFC3339), started.Sub(on.cond.LastTransitionTime.Time).Round(time.Second))

	// The pressure goes: the next agent ends its episode and lifts the brake.
	if err := m.c.Admin.CoreV1().Pods(hog.Namespace).Delete(ctx, hog.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	w.until(60*time.Second, "lost the brake once the pressure was gone", func(n *corev1.Node) bool {
		taint, _ := memoryBrake(n)
		return !taint && slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == nodebrake.ConditionType(nodebrake.Memory) && c.Status == corev1.ConditionFalse
		})
	}, nil)
	ended := next.waitLog(60*time.Second, "pressure episode ended", func(l logEntry) bool { return l.Str("resource") == "memory" })
	lifted := next.waitLog(30*time.Second, "node brake lifted", func(l logEntry) bool { return l.Str("resource") == "memory" })
	if lifted.TS.Before(ended.TS) {
		t.Errorf("the next agent lifted the brake at %s, before its episode ended at %s", stamp(lifted.TS), stamp(ended.TS))
	}
}
