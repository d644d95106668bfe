// SPDX-License-Identifier: Apache-2.0

package podwatch

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
)

// seenEvicted collects what Options.Evicted is given: each pod's
// namespace/name, with " (gone)" when the watcher's view no longer had it
// then (a deletion: the informer updates its store before it tells the
// handlers).
type seenEvicted struct {
	mu   sync.Mutex
	w    *Watcher
	pods []string
}

func (s *seenEvicted) add(p *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := p.Namespace + "/" + p.Name
	if s.w != nil && !slices.ContainsFunc(s.w.Pods(), func(q *v1.Pod) bool { return q.UID == p.UID }) {
		name += " (gone)"
	}
	s.pods = append(s.pods, name)
}

func (s *seenEvicted) watching(w *Watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}

func (s *seenEvicted) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pods)
}

// wait returns the names given so far once cond holds of them.
func (s *seenEvicted) wait(t *testing.T, what string, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := s.list()
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Evicted was given %v; want %s", got, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kubeletEvicts writes p's status through pods/status as the kubelet's
// eviction manager does: phase Failed, reason Evicted, its message, the
// DisruptionTarget condition.
func kubeletEvicts(t *testing.T, c *framework.Cluster, p *v1.Pod) {
	t.Helper()
	ctx := context.Background()
	cur, err := c.Admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90112Ki. "
	cur.Status.Phase, cur.Status.Reason, cur.Status.Message = v1.PodFailed, "Evicted", msg
	cur.Status.Conditions = append(cur.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: v1.PodReasonTerminationByKubelet, Message: msg, LastTransitionTime: metav1.Now()})
	if _, err := c.Admin.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEvictedPodsFromTheNodesInformer, against a real API server with
// evictd's identity: the pods of the node that the kubelet evicted are
// passed to Options.Evicted from the informer on the node's pods (no
// other watch): one evicted before the watcher started (listed), one as
// its status turns so, and again as it is deleted. A pod failed for
// another reason, and one the kubelet of another node evicted, are not.
// The field selector (spec.nodeName) keeps terminal pods: the evicted pod
// stays in the view until it is deleted.
func TestEvictedPodsFromTheNodesInformer(t *testing.T) {
	c := framework.Start(t)
	ns := c.Namespace(t, "evicted")
	const node = "evicted-node"
	ctx := context.Background()
	create := func(name, on string) *v1.Pod {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       v1.PodSpec{NodeName: on, Containers: []v1.Container{{Name: "c", Image: "example.invalid/none"}}},
		}
		out, err := c.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before, later, oom, elsewhere := create("before", node), create("later", node), create("oom", node), create("elsewhere", "another-node")
	kubeletEvicts(t, c, before)

	var seen seenEvicted
	w, _ := startWatcherOn(t, Options{Client: c.EvictdAPI, NodeName: node, SyncTimeout: time.Minute, Evicted: seen.add})
	seen.watching(w)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	seen.wait(t, ns+"/before, listed", func(got []string) bool { return slices.Contains(got, ns+"/before") })

	// Failed for another reason; then another node's eviction; then this
	// node's. Each write comes after the last, so once "later" is given,
	// the OOM kill on this node has been through the same watch.
	cur, err := c.Admin.CoreV1().Pods(ns).Get(ctx, oom.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase, cur.Status.Reason = v1.PodFailed, "OOMKilled"
	if _, err := c.Admin.CoreV1().Pods(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeletEvicts(t, c, elsewhere)
	kubeletEvicts(t, c, later)
	got := seen.wait(t, ns+"/later, as it turned evicted", func(got []string) bool { return slices.Contains(got, ns+"/later") })
	for _, name := range []string{"oom", "elsewhere"} {
		if slices.Contains(got, ns+"/"+name) {
			t.Errorf("Evicted was given %s/%s (%v); want only the kubelet's evictions on %s", ns, name, got, node)
		}
	}
	if !slices.ContainsFunc(w.Pods(), func(p *v1.Pod) bool { return p.Name == "later" && p.Status.Phase == v1.PodFailed }) {
		t.Errorf("the view lost the evicted pod: %v", names(w.Pods()))
	}

	// Deleted: given again, with its last state, once gone from the view.
	if err := c.Admin.CoreV1().Pods(ns).Delete(ctx, later.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	seen.wait(t, ns+"/later again, as it was deleted", func(got []string) bool { return slices.Contains(got, ns+"/later (gone)") })
}
