// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// TestRegisterRetriesAConflict: a controller may write the Node between its
// create and the status update (the node lifecycle controller taints a new
// Node; seen in the VM node's cluster as "the object has been modified"),
// so the status update is retried on a fresh copy, not fatal, and keeps
// what the controller wrote.
func TestRegisterRetriesAConflict(t *testing.T) {
	client := fake.NewClientset()
	statusUpdates := 0
	client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		statusUpdates++
		if statusUpdates > 1 {
			return false, nil, nil
		}
		// The controller's write lands first.
		n, err := client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "node-a")
		if err != nil {
			return true, nil, err
		}
		tainted := n.(*corev1.Node).DeepCopy()
		tainted.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
		if err := client.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, tainted, ""); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "node-a", nil)
	})
	disk, err := newHostRoot(t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: "node-a", disk: disk, opts: Options{Client: client, MemoryBytes: 1 << 30, ReservedMemoryBytes: 64 << 20,
		CPU: "2", Pods: 110, Clock: clock.RealClock{}}}
	if err := n.register(context.Background()); err != nil {
		t.Fatalf("register: %v", err)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if statusUpdates != 2 {
		t.Errorf("%d status updates; want the conflicting one and one retry", statusUpdates)
	}
	if a := got.Status.Allocatable[corev1.ResourceMemory]; a.Cmp(*resource.NewQuantity(1<<30-64<<20, resource.BinarySI)) != 0 {
		t.Errorf("allocatable memory %s; want 960Mi", a.String())
	}
	if len(got.Spec.Taints) != 1 {
		t.Errorf("taints %v; want the controller's kept", got.Spec.Taints)
	}
}
