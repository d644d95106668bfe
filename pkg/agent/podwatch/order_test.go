// SPDX-License-Identifier: Apache-2.0

package podwatch

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The node's pods come in UID order at every call. The lister's order is
// its map's: the trace, which records a pass's pod list only when it
// differs from the last, recorded all of it at every pass (seen: 114 of
// 117 passes at 110 pods, 310 KB of JSON each).
func TestPodsInUIDOrder(t *testing.T) {
	c := framework.Start(t)
	ns := c.Namespace(t, "order")
	const node, n = "order-node", 12
	ctx := context.Background()
	for i := range n {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%02d", i), Namespace: ns},
			Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "example.invalid/none"}}},
		}
		if _, err := c.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := startWatcherOn(t, Options{Client: c.EvictdAPI, NodeName: node, SyncTimeout: time.Minute})
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(w.Pods()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher sees %d pods, want %d", len(w.Pods()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	first := w.Pods()
	if !slices.IsSortedFunc(first, func(a, b *v1.Pod) int { return cmp.Compare(a.UID, b.UID) }) {
		t.Fatalf("pods not in UID order: %v", names(first))
	}
	for range 20 {
		if again := w.Pods(); !slices.Equal(again, first) {
			t.Fatalf("a later call has the pods in another order: %v, first %v", names(again), names(first))
		}
	}
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name + "/" + string(p.UID)
	}
	return out
}
