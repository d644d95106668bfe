// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/test/e2e/framework"
)

// TestShadowReport: evictd in shadow mode beside a "kubelet" (the node
// stand-in, which evicts the hog as the kubelet's eviction manager does:
// kills it and leaves the pod Failed, reason Evicted, with a
// DisruptionTarget condition, written through pods/status) during a leak.
// evictd evicts nothing; at the episode's end its report lines up what it
// would have evicted, and when, with the kubelet's eviction, read from the
// pods of its node: in the log and at /shadow. Through the whole run the
// API server's audit log shows evictd watching its node's pods and never
// listing or watching an Event.
func TestShadowReport(t *testing.T) {
	audit := auditListWatches(t)
	m := newMemoryNode(t, "shadow", audit.option)
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--shadow", "--secure-bind-address=127.0.0.1:0")...)
	if start := e.waitLog(30*time.Second, "evictd starting", nil); start.Fields["dryRun"] != true || start.Fields["shadow"] != true {
		t.Fatalf("evictd starting with dryRun %v shadow %v, want both on", start.Fields["dryRun"], start.Fields["shadow"])
	}
	// Every informer has listed and opened its watch by then.
	e.waitLog(60*time.Second, "informers synced", nil)
	audit.check(t, m.c, m.node.Name)

	_, hog := m.startHog(t, hogSpec(50, 600))
	first := e.waitLog(60*time.Second, "would evict pod", nil)

	// Another node's kubelet evicts a pod of its own: not this node's
	// eviction, and not in this agent's view.
	ctx := context.Background()
	msg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. "
	elsewhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: m.ns},
		Spec: corev1.PodSpec{NodeName: "another-node", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}}}
	elsewhere, err := m.c.Admin.CoreV1().Pods(m.ns).Create(ctx, elsewhere, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: msg, Conditions: []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonTerminationByKubelet, Message: msg,
		LastTransitionTime: metav1.Now()}}}
	if _, err := m.c.Admin.CoreV1().Pods(m.ns).UpdateStatus(ctx, elsewhere, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// This node's "kubelet" acts a second after evictd would have, on the
	// hog, as an oom_score-blind manager ranking by usage alone might.
	time.Sleep(time.Second)
	why := msg + "Container hog was using 600Mi, request is 128Mi, has larger consumption of memory. "
	if err := m.node.Evict(ctx, hog.UID, why); err != nil {
		t.Fatal(err)
	}
	evicted, err := m.c.Admin.CoreV1().Pods(hog.Namespace).Get(ctx, hog.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kubeletAt time.Time
	for _, c := range evicted.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			kubeletAt = c.LastTransitionTime.Time
		}
	}
	if evicted.Status.Phase != corev1.PodFailed || evicted.Status.Reason != "Evicted" || kubeletAt.IsZero() {
		t.Fatalf("the hog after the kubelet's eviction: phase %s reason %q conditions %+v; want Failed, Evicted, a DisruptionTarget",
			evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Conditions)
	}

	line := e.waitLog(90*time.Second, "shadow report", nil)
	var wouldEvict, kubelet []shadow.Action
	decodeField(t, line, "wouldEvict", &wouldEvict)
	decodeField(t, line, "kubeletEvicted", &kubelet)
	if len(wouldEvict) == 0 || wouldEvict[0].Pod != podKey(m.pods["batch"]) || wouldEvict[0].Pod != first.Pod {
		t.Errorf("would have evicted %+v, want batch first, as its first would-evict line (%s)", wouldEvict, first.Pod)
	}
	if len(kubelet) != 1 || kubelet[0].Pod != podKey(hog) || kubelet[0].UID != string(hog.UID) {
		t.Errorf("kubelet evicted %+v, want the hog alone (not another node's eviction)", kubelet)
	} else if !kubelet[0].At.Equal(kubeletAt) || kubelet[0].AtFrom != shadow.AtCondition || kubelet[0].Why != why {
		t.Errorf("the kubelet's eviction %+v; want it at %v, from its DisruptionTarget condition, with the pod's message", kubelet[0], kubeletAt)
	}
	if lead, err := time.ParseDuration(line.Str("lead")); err != nil || line.Fields["hasLead"] != true || lead <= 0 {
		t.Errorf("lead %v (hasLead %v), want evictd ahead of the kubelet", line.Fields["lead"], line.Fields["hasLead"])
	}
	summary := line.Str("summary")
	if !strings.HasPrefix(summary, "memory pressure for ") || !strings.Contains(summary, "evictd first, by ") {
		t.Errorf("summary %q", summary)
	}
	var kOnly, both []string
	decodeField(t, line, "kubeletOnly", &kOnly)
	decodeField(t, line, "both", &both)
	if !slices.Contains(append(kOnly, both...), podKey(hog)) || !strings.Contains(summary, podKey(hog)) {
		t.Errorf("the report (kubelet only %v, both %v) does not name the hog: %q", kOnly, both, summary)
	}
	// A dry run: every pod but the hog the "kubelet" took is still there.
	for _, name := range []string{"batch", "web", "db", "critical"} {
		untouched(t, m.c.Admin, m.node, m.pods[name])
	}

	// The same report at /shadow, for a caller with the grant.
	ns := m.c.Namespace(t, "callers")
	reader := callerToken(t, m.c, ns, "reader", "evictd-explain-reader")
	code, body := secureGet(t, e.secureAddress(), "/shadow", reader)
	var got struct{ Reports []shadow.Report }
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 200 || len(got.Reports) != 1 || got.Reports[0].Summary != summary {
		t.Errorf("/shadow answered %d (%v): %s; want the one report", code, err, firstLines(body, 5))
	}
	// Through the episode and the report, still no Event list or watch.
	audit.check(t, m.c, m.node.Name)
}

// TestShadowMetrics: evictd in shadow mode under real memory pressure (a
// hog holding 300 MiB in its pod cgroup on the 1 GiB node) counts what it
// would have evicted in evictd_shadow_would_evictions_total, as a fleet's
// Prometheus reads it from /metrics, and evicts nothing. The node's
// "kubelet" then evicts the hog: evictd_shadow_kubelet_evictions_total
// counts it once, read from the pods of the node as the report reads it.
// The pressure gone, the episode is counted in
// evictd_shadow_episodes_total as one evictd would have acted first in.
// Every wait ends on the metric, with a deadline of minutes.
func TestShadowMetrics(t *testing.T) {
	m := newMemoryNode(t, "shadow-metrics")
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--shadow")...)
	would := map[string]string{"resource": "memory", "signal": "memory.available"}
	kubelet := map[string]string{"resource": "memory"}
	byEvictd := map[string]string{"resource": "memory", "first": "evictd"}
	// Every series is there, at 0, before anything happened: a sum across
	// nodes sees this agent, and increase() the first event.
	mt := e.scrape()
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"evictd_shadow_would_evictions_total", would},
		{"evictd_shadow_kubelet_evictions_total", kubelet},
		{"evictd_shadow_episodes_total", byEvictd},
		{"evictd_shadow_episodes_total", map[string]string{"resource": "memory", "first": "kubelet"}},
	} {
		if v := mt.Value(t, s.name, s.labels); v != 0 {
			t.Errorf("%s%v = %v before any pressure, want 0", s.name, s.labels, v)
		}
	}
	// The host's OOM kills (this node's /proc is the host's, where other
	// tests run): the series is there; its value is not this test's.
	mt.Value(t, "evictd_shadow_oom_kills_total", map[string]string{"episode": "none"})

	// The hog holds 300 MiB at once: memory.available stays near 160 MiB,
	// under the threshold and far from the OOM killer, as nothing goes.
	_, hog := m.startHog(t, podSpec{name: "hog", priorityClass: classHigh, holdMiB: 300, requests: res("memory", "128Mi")})
	if err := waitMetricAtLeast(e, 2*time.Minute, "evictd_shadow_would_evictions_total", would, 1); err != nil {
		t.Fatalf("%v; log tail:\n%s", err, e.tail(30))
	}
	first := e.find("would evict pod")
	if len(first) == 0 {
		t.Fatalf("the metric counted a would-be eviction the log does not name:\n%s", e.tail(30))
	}
	mt = e.scrape()
	// Each is a "would evict pod" line (the log has PDB verdicts too).
	if n, lines := mt.Value(t, "evictd_shadow_would_evictions_total", would), len(e.find("would evict pod")); n > float64(lines) {
		t.Errorf("%v would-be evictions counted, more than the log's %d", n, lines)
	}
	for _, result := range []string{"evicted", "forced_delete"} {
		if n := mt.Evictions(result); n != 0 {
			t.Errorf("evictd_evictions_total{result=%s} = %v in shadow mode, want 0", result, n)
		}
	}
	if len(evicted(e)) != 0 {
		t.Errorf("shadow mode logged evictions: %v", podsOf(evicted(e)))
	}
	for _, name := range []string{"batch", "web", "db", "critical", "hog"} {
		untouched(t, m.c.Admin, m.node, m.pods[name])
	}
	untouched(t, m.c.Admin, m.node, m.mirror)

	// The "kubelet" evicts the hog in a later second than evictd's first
	// would-be eviction: the pod's time of it is a whole second.
	time.Sleep(time.Until(first[0].TS.Truncate(time.Second).Add(time.Second)))
	why := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. Container hog was using 300Mi, request is 128Mi, has larger consumption of memory. "
	if err := m.node.Evict(context.Background(), hog.UID, why); err != nil {
		t.Fatal(err)
	}
	if err := waitMetricAtLeast(e, 2*time.Minute, "evictd_shadow_kubelet_evictions_total", kubelet, 1); err != nil {
		t.Fatalf("%v; log tail:\n%s", err, e.tail(30))
	}
	// With the hog gone the pressure ends: 2 s of transition period later
	// the episode is counted.
	if err := waitMetricAtLeast(e, 2*time.Minute, "evictd_shadow_episodes_total", byEvictd, 1); err != nil {
		t.Fatalf("%v; episodes: %v; log tail:\n%s", err, e.scrape()["evictd_shadow_episodes_total"], e.tail(30))
	}
	report := e.waitLog(30*time.Second, "shadow report", nil)
	if report.Str("first") != "evictd" {
		t.Errorf("the shadow report says %q acted first, want evictd: %s", report.Str("first"), report.Raw)
	}
	mt = e.scrape()
	// The informer saw the hog again as it was deleted, or listed anew:
	// counted once.
	for name, want := range map[string]float64{"evictd_shadow_kubelet_evictions_total": 1, "evictd_shadow_episodes_total": 1} {
		if got := mt.Value(t, name, nil); got != want {
			t.Errorf("%s = %v in all, want %v", name, got, want)
		}
	}
	// What the agent asked of the API server, for the record: shadow mode's
	// counts add no request (docs/shadow.md).
	for _, s := range mt["evictd_api_requests_total"].GetMetric() {
		var labels []string
		for _, l := range s.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		t.Logf("evictd_api_requests_total{%s} %v", strings.Join(labels, ","), s.GetCounter().GetValue())
	}
}

// waitMetricAtLeast polls e's /metrics until name{labels} is at least want.
func waitMetricAtLeast(e *evictd, timeout time.Duration, name string, labels map[string]string, want float64) error {
	deadline := time.Now().Add(timeout)
	var got float64
	for time.Now().Before(deadline) {
		if got = e.scrape().Sum(name, labels); got >= want {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s%v = %v after %s; want at least %v", name, labels, got, timeout, want)
}

// auditedListWatches is the API server's audit log of lists and watches of
// pods and Events (auditListWatches).
type auditedListWatches struct {
	option framework.Option
	path   string
}

// listWatchAuditPolicy logs every list and watch of pods and of Events
// (core and events.k8s.io), once each, as the API server receives it:
// before authorization, so a forbidden one is in it too.
const listWatchAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
- level: Metadata
  verbs: ["list", "watch"]
  resources:
  - group: ""
    resources: ["pods", "events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: None
`

// auditListWatches writes the policy and returns the option that starts
// the API server with it, each event written before the request goes on
// (blocking mode).
func auditListWatches(t *testing.T) auditedListWatches {
	t.Helper()
	dir := t.TempDir()
	policy, path := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(listWatchAuditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	return auditedListWatches{path: path, option: framework.WithAPIServerArgs("--audit-policy-file="+policy, "--audit-log-path="+path,
		"--audit-log-mode=blocking", "--audit-log-format=json", "--audit-log-maxbackup=1")}
}

// check reads the audit log: evictd's identity has watched the pods of
// node (the proof that the log sees its requests) and never listed or
// watched an Event, in any namespace or group.
func (a auditedListWatches) check(t *testing.T, c *framework.Cluster, node string) {
	t.Helper()
	data, err := os.ReadFile(a.path)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + c.EvictdServiceAccount.Namespace + ":" + c.EvictdServiceAccount.Name
	var podWatch bool
	var eventCalls []string
	for n, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit log line %d: %v: %q", n+1, err, line)
		}
		if ev.User.Username != user || ev.ObjectRef == nil {
			continue
		}
		switch ev.ObjectRef.Resource {
		case "pods":
			podWatch = podWatch || ev.Verb == "watch" && strings.Contains(ev.RequestURI, "fieldSelector=spec.nodeName%3D"+node)
		case "events":
			eventCalls = append(eventCalls, ev.Verb+" "+ev.RequestURI)
		}
	}
	if !podWatch {
		t.Errorf("the audit log has no watch of %s's pods by %s: it does not see the agent's requests", node, user)
	}
	if len(eventCalls) > 0 {
		t.Errorf("%s listed or watched Events (%d calls): %q; want none, shadow mode reads the kubelet's evictions from the node's pods",
			user, len(eventCalls), eventCalls)
	}
}

// decodeField decodes a structured field of a log line.
func decodeField(t *testing.T, l logEntry, key string, into any) {
	t.Helper()
	raw, err := json.Marshal(l.Fields[key])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("field %s of %q: %v (%s)", key, l.Msg, err, raw)
	}
}
