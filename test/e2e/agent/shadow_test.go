// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"encoding/json"
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
