// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/test/e2e/framework"
)

// TestShadowReport: evictd in shadow mode beside a "kubelet" (the test, on
// the stand-in node: it writes the kubelet's Evicted Event and deletes the
// pod, as the kubelet's eviction manager does) during a leak. evictd evicts
// nothing; at the episode's end its report lines up what it would have
// evicted, and when, with the kubelet's eviction: in the log and at /shadow.
func TestShadowReport(t *testing.T) {
	m := newMemoryNode(t, "shadow")
	grantShadowEvents(t, m.c)
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--shadow", "--secure-bind-address=127.0.0.1:0")...)
	if start := e.waitLog(30*time.Second, "evictd starting", nil); start.Fields["dryRun"] != true || start.Fields["shadow"] != true {
		t.Fatalf("evictd starting with dryRun %v shadow %v, want both on", start.Fields["dryRun"], start.Fields["shadow"])
	}
	_, hog := m.startHog(t, hogSpec(50, 600))
	first := e.waitLog(60*time.Second, "would evict pod", nil)

	// The "kubelet" acts a second later, on the hog, as an oom_score-blind
	// manager ranking by usage alone might.
	time.Sleep(time.Second)
	ctx := context.Background()
	kubeletAt := time.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: hog.Name + ".", Namespace: hog.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: hog.Namespace, Name: hog.Name, UID: hog.UID, APIVersion: "v1"},
		Reason:         "Evicted", Message: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi.",
		Type: corev1.EventTypeWarning, Source: corev1.EventSource{Component: "kubelet", Host: m.node.Name},
		FirstTimestamp: metav1.NewTime(kubeletAt), LastTimestamp: metav1.NewTime(kubeletAt), Count: 1,
	}
	// Another node's kubelet's Evicted Event (on a pod of this node, as a
	// stale object would say): not this node's eviction.
	other := ev.DeepCopy()
	other.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: hog.Namespace, Name: "web", UID: m.pods["web"].UID}
	other.Source.Host = "another-node"
	for _, e := range []*corev1.Event{other, ev} {
		if _, err := m.c.Admin.CoreV1().Events(hog.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.c.Admin.CoreV1().Pods(hog.Namespace).Delete(ctx, hog.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
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
	code, body := secureGet(t, e.waitLog(5*time.Second, "evictd starting", nil).Str("secureAddress"), "/shadow", reader)
	var got struct{ Reports []shadow.Report }
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 200 || len(got.Reports) != 1 || got.Reports[0].Summary != summary {
		t.Errorf("/shadow answered %d (%v): %s; want the one report", code, err, firstLines(body, 5))
	}
}

// grantShadowEvents gives evictd's ServiceAccount what the chart's
// shadow.enabled adds: list and watch of Events.
func grantShadowEvents(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "evictd-shadow"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}}}}
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := c.EvictdServiceAccount
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "evictd-shadow"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}}
	if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
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
