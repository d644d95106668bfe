// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/nodebrake"
)

// brakeState is what the API server holds of evictd's memory brake on a
// Node: its condition (nil when absent) and whether its taint is there.
type brakeState struct {
	cond  *corev1.NodeCondition
	taint bool
	// others are the Node's taints and conditions that are not evictd's,
	// which the brake must leave as they are.
	others []string
}

func readBrake(t *testing.T, m *memoryNode) brakeState {
	t.Helper()
	n, err := m.c.Admin.CoreV1().Nodes().Get(context.Background(), m.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var s brakeState
	for i, c := range n.Status.Conditions {
		if c.Type == nodebrake.ConditionType(nodebrake.Memory) {
			s.cond = &n.Status.Conditions[i]
		} else {
			s.others = append(s.others, "condition "+string(c.Type)+"="+string(c.Status))
		}
	}
	for _, tn := range n.Spec.Taints {
		// The default effect: startBraking passes none.
		if tn.Key == nodebrake.TaintKey(nodebrake.Memory) && tn.Effect == corev1.TaintEffectPreferNoSchedule {
			s.taint = true
		} else {
			s.others = append(s.others, "taint "+tn.ToString())
		}
	}
	return s
}

func (s brakeState) on() bool {
	return s.taint && s.cond != nil && s.cond.Status == corev1.ConditionTrue && s.cond.Reason == nodebrake.ReasonPressure
}

func (s brakeState) lifted() bool {
	return !s.taint && s.cond != nil && s.cond.Status == corev1.ConditionFalse
}

func waitBrake(t *testing.T, m *memoryNode, timeout time.Duration, what string, cond func(brakeState) bool) brakeState {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := readBrake(t, m)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Node's brake never %s within %s: condition %+v, taint %v", what, timeout, s.cond, s.taint)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startBraking starts evictd on m's node with its DaemonSet pod's identity
// (a token bound to a pod on the node, as the admission policy requires)
// and the brake on, as shipped.
func startBraking(t *testing.T, m *memoryNode, kubeconfig string, extra ...string) *evictd {
	t.Helper()
	return startEvictdWith(t, m.c, m.node, evictdSetup{kubeconfig: kubeconfig},
		append(append([]string{"--node-brake=true", "--eviction-pressure-transition-period=3s", "--node-lease-duration=3s"}, memoryFlags...), extra...)...)
}

// TestNodeBrake: the brake lives and dies with the memory episode on the
// real API server, with the admission policy shipped in the manifest in
// force: evictd's condition True and its taint on from the episode's first
// eviction, the condition False and the taint gone once the episode ends;
// left behind by an agent SIGKILLed mid-episode, kept by the next one for
// the pressure transition period and then lifted (TestNodeBrakeRestartKeepsBrake
// holds the period); the condition deleted at a clean exit. The kubelet's
// conditions and the Node's other taints stay as they were throughout.
func TestNodeBrake(t *testing.T) {
	m := newMemoryNode(t, "brake")
	ctx := context.Background()
	_, kubeconfig := m.c.EvictdNodeToken(t, m.node.Name)
	before := readBrake(t, m)
	if before.cond != nil || before.taint {
		t.Fatalf("the Node has evictd's brake before any evictd ran: %+v", before)
	}

	e := startBraking(t, m, kubeconfig)
	_, hog := m.startHog(t, hogSpec(80, 700))
	evs := waitEvictions(t, e, 1, evictionTimeout)
	on := waitBrake(t, m, 30*time.Second, "went on", brakeState.on)
	brakeOn := e.waitLog(30*time.Second, "node brake on: new pods kept away until the episode ends", nil)
	if got := e.scrape().Value(t, "evictd_node_brake_on", map[string]string{"resource": "memory"}); got != 1 {
		t.Errorf("evictd_node_brake_on{memory} = %v during the episode, want 1", got)
	}
	// The episode of the first eviction, by evictd's own log: the brake
	// belongs to it, so "on" must lie between its start and its end. Order,
	// not a stopwatch: how many seconds the write took is the API server's
	// and the machine's business.
	var started logEntry
	for _, l := range e.find("pressure episode started") {
		if l.Str("resource") == "memory" && !l.TS.After(evs[0].TS) {
			started = l
		}
	}
	if started.TS.IsZero() {
		t.Fatalf("evictd evicted %s at %s without a memory pressure episode started before it:\n%s", evs[0].Pod, evs[0].TS, e.tail(30))
	}
	ended := e.waitLog(60*time.Second, "pressure episode ended", func(l logEntry) bool {
		return l.Str("resource") == "memory" && !l.TS.Before(started.TS)
	})
	t.Logf("brake on %s after the episode started, %s after the first eviction (%s): %s",
		brakeOn.TS.Sub(started.TS).Round(time.Millisecond), brakeOn.TS.Sub(evs[0].TS).Round(time.Millisecond), evs[0].Pod, on.cond.Message)
	if brakeOn.TS.Before(started.TS) || brakeOn.TS.After(ended.TS) {
		t.Errorf("the brake went on at %s, outside its episode (started %s, ended %s)", stamp(brakeOn.TS), stamp(started.TS), stamp(ended.TS))
	}
	off := waitBrake(t, m, 30*time.Second, "was lifted", brakeState.lifted)
	lifted := e.waitLog(30*time.Second, "node brake lifted", nil)
	t.Logf("brake lifted %s after the episode ended: %s", lifted.TS.Sub(ended.TS).Round(time.Millisecond), off.cond.Message)
	if lifted.TS.Before(ended.TS) {
		t.Errorf("the brake was lifted at %s, before its episode ended at %s", stamp(lifted.TS), stamp(ended.TS))
	}
	if !off.cond.LastTransitionTime.After(on.cond.LastTransitionTime.Time) {
		t.Errorf("condition's lastTransitionTime %v not after the episode's start %v", off.cond.LastTransitionTime, on.cond.LastTransitionTime)
	}
	if got := e.scrape().Value(t, "evictd_node_brake_on", map[string]string{"resource": "memory"}); got != 0 {
		t.Errorf("evictd_node_brake_on{memory} = %v after the episode, want 0", got)
	}
	for _, obj := range []string{nodebrake.ObjectCondition, nodebrake.ObjectTaint} {
		if got := e.scrape().Sum("evictd_node_brake_writes_total", map[string]string{"object": obj, "result": "error"}); got > 0 {
			t.Errorf("evictd_node_brake_writes_total{object=%s,result=error} = %v, want 0: the policy refused the agent's own writes", obj, got)
		}
	}
	waitGone(t, m.c.Admin, hog, 30*time.Second)

	// SIGKILL mid-episode: the brake stays behind, with nobody to lift it.
	hog2 := hogSpec(80, 700)
	hog2.name, hog2.priorityClass = "hog", classLow
	_, hog = m.startHog(t, hog2)
	waitBrake(t, m, evictionTimeout, "went on again", brakeState.on)
	e.kill()
	// The pressure goes without evictd: the hog, and any victim still
	// terminating, are deleted at once.
	_ = m.c.Admin.CoreV1().Pods(hog.Namespace).Delete(ctx, hog.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	waitGone(t, m.c.Admin, hog, 30*time.Second)
	time.Sleep(time.Second)
	if s := readBrake(t, m); !s.on() {
		t.Fatalf("after the SIGKILL the brake is %+v; want it left on (the case the next agent must clean)", s)
	}

	next := startBraking(t, m, kubeconfig)
	next.waitLog(60*time.Second, "node brake lifted", nil)
	waitBrake(t, m, 30*time.Second, "was lifted by the next agent", brakeState.lifted)
	if got := next.find("pressure episode started"); len(got) != 0 {
		t.Errorf("the next agent started an episode on a node without pressure: %s", got[0].Raw)
	}

	// A clean exit deletes evictd's condition: no agent, no claim.
	next.ended = true
	if killed, code, err := next.p.Stop(stopGrace); killed || code != 0 || err != nil {
		t.Fatalf("evictd after SIGTERM: killed %v, exit code %d, %v", killed, code, err)
	}
	after := readBrake(t, m)
	if after.cond != nil || after.taint {
		t.Errorf("after a clean exit the Node still has evictd's brake: condition %+v, taint %v", after.cond, after.taint)
	}
	if !slices.Equal(after.others, before.others) {
		t.Errorf("the Node's other conditions and taints changed: before %v, after %v", before.others, after.others)
	}
}
