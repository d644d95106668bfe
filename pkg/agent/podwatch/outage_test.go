// SPDX-License-Identifier: Apache-2.0

package podwatch

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestPodsSeenSoonAfterAnAPIOutage, against a real API server with
// evictd's own identity: kube-apiserver is stopped for 15 s, long enough
// for a reflector's back-off to reach several seconds, and started again.
// A pod created on the node then, and an eviction call answered (here a
// 404, a pod that is not there), must bring the watcher's view up to date
// within seconds: client-go's reflector alone waited 30 to 60 s, during
// which evictd took an evicted pod that had gone for one that never went.
func TestPodsSeenSoonAfterAnAPIOutage(t *testing.T) {
	c := framework.Start(t)
	ns := c.Namespace(t, "outage")
	const node = "outage-node"
	w, _ := startWatcherOn(t, Options{Client: c.EvictdAPI, NodeName: node, SyncTimeout: time.Minute})
	ctx := context.Background()
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	argv, err := c.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(15 * time.Second)
	if err := c.StartAPIServer(ctx, argv); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	late := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "example.invalid/none"}}},
	}
	if _, err := c.Admin.CoreV1().Pods(ns).Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What evictd does under pressure as soon as the API server is back:
	// an eviction, answered.
	err = c.EvictdAPI.Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "absent", Namespace: ns}})
	if !ServerAnswered(err) {
		t.Fatalf("the eviction of an absent pod answered %v, want a 404", err)
	}
	w.Answered(err)
	deadline := up.Add(25 * time.Second) // the reflector alone: 30 to 60 s
	for {
		if pods := w.Pods(); len(pods) == 1 && pods[0].Name == "late" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher sees %d pods 25 s after the API server came back, want the late one", len(w.Pods()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the late pod seen %v after the API server was ready", time.Since(up).Round(time.Millisecond))
}
