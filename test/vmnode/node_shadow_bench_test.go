// SPDX-License-Identifier: Apache-2.0

//go:build vmnode && vmnodebench

package vmnode

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/shadow"
)

// TestNodeShadow: evictd in shadow mode (--shadow, a dry run) beside the
// real kubelet, which alone evicts, during a leak at 100 MiB/s: the report
// docs/shadow.md shows, from the real node. A benchmark (make
// bench-shadow-node), not a test of make test: the kubelet alone can leave
// the guest in a reclaim livelock for minutes (TestNodeHeadToHead). It
// checks that the report came and lines up with what the pods' fates say.
func TestNodeShadow(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	// What the chart's shadow.enabled grants.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "evictd-shadow"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}}}}
	if _, err := n.Cluster.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "evictd-shadow"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "evictd", Namespace: "evictd-system"}}}
	if _, err := n.Cluster.Admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ev := evictdPodWith(t, n, "--shadow", "--eviction-pressure-transition-period=30s")
	run := raceOnce(t, n, "kubelet + evictd --shadow", 100)
	t.Logf("the run:\n%s", RaceTable([]RaceRun{run}))

	// The report comes at the episode's end: the transition period after
	// the last pressure, on a guest that may still be slow to answer.
	var reports []map[string]any
	deadline := time.Now().Add(3 * time.Minute)
	for len(reports) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Second)
		for _, line := range strings.Split(evictdLogSince(t, n, ev, run.Start), "\n") {
			// CRI log line: time, stream, tag, then evictd's JSON.
			_, js, ok := strings.Cut(line, "{")
			if !ok || !strings.Contains(line, `"msg":"shadow report"`) {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte("{"+js), &m); err == nil {
				reports = append(reports, m)
				t.Logf("shadow report from the node:\n%s", "{"+js)
			}
		}
	}
	if len(reports) == 0 {
		lines := strings.Split(evictdLog(t, n, ev), "\n")
		t.Fatalf("no shadow report in evictd's log 3 minutes after the run; its last lines:\n%s",
			strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	var kubelet []shadow.Action
	raw, _ := json.Marshal(reports[0]["kubeletEvicted"])
	_ = json.Unmarshal(raw, &kubelet)
	for _, f := range run.Fates {
		if f.By != ByKubelet {
			continue
		}
		found := false
		for _, k := range kubelet {
			found = found || strings.HasSuffix(k.Pod, "/"+f.Pod)
		}
		if !found {
			t.Errorf("the kubelet evicted %s, which the report's kubeletEvicted %+v lacks", f.Pod, kubelet)
		}
	}
}
