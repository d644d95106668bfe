// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/cleanup"
	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/framework"
)

// cleanupHooks is pkg/cleanup's API on the real client, with hooks that
// run as a call arrives, before it goes out: what the cluster does in
// between two of cleanup's calls.
type cleanupHooks struct {
	*kube.Client
	list        func(r kube.Resource)
	exists      func(bool)
	deleteLease func(name string)
	deleteER    func(name string)
	// leaseErrs and erErrs are the deletes' answers.
	mu                sync.Mutex
	leaseErrs, erErrs []error
}

func (h *cleanupHooks) List(ctx context.Context, r kube.Resource, opts metav1.ListOptions) (runtime.Object, error) {
	if h.list != nil {
		h.list(r)
	}
	return h.Client.List(ctx, r, opts)
}

func (h *cleanupHooks) DaemonSetExists(ctx context.Context, namespace, name string) (bool, error) {
	ok, err := h.Client.DaemonSetExists(ctx, namespace, name)
	if err == nil && h.exists != nil {
		h.exists(ok)
	}
	return ok, err
}

func (h *cleanupHooks) DeleteLease(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if h.deleteLease != nil {
		h.deleteLease(name)
	}
	err := h.Client.DeleteLease(ctx, namespace, name, opts)
	h.mu.Lock()
	h.leaseErrs = append(h.leaseErrs, err)
	h.mu.Unlock()
	return err
}

func (h *cleanupHooks) DeleteEvictionRequest(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if h.deleteER != nil {
		h.deleteER(name)
	}
	err := h.Client.DeleteEvictionRequest(ctx, namespace, name, opts)
	h.mu.Lock()
	h.erErrs = append(h.erErrs, err)
	h.mu.Unlock()
	return err
}

func adminAPI(t *testing.T, c *framework.Cluster) *kube.Client {
	t.Helper()
	api, err := kube.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// TestCleanupWaitsForTheAgentsPods: evictd cleanup deletes the DaemonSet
// with foreground propagation, so that the garbage collector keeps the
// DaemonSet until its pods are gone, and cleanup, which waits for the
// DaemonSet, takes the install's state back only once no agent is left to
// put a brake back. The DaemonSet controller is off (the simulated nodes
// cannot run the chart's pod), so the agent's pod is the test's, owned by
// the DaemonSet as the controller's would be, on a Node with no kubelet:
// the test is its kubelet. When the garbage collector deletes it, the
// agent's last pass puts its brake on, and then the agent exits (the pod
// goes) once cleanup has seen the DaemonSet still there, or has ended.
// Cleanup must find no pod of the DaemonSet when it first lists the Nodes,
// and must leave no brake.
func TestCleanupWaitsForTheAgentsPods(t *testing.T) {
	c := framework.Start(t)
	ctx := context.Background()
	ns := c.Namespace(t, "fg")
	id := ns + "/evictd"
	const nodeName = "fg-node"
	if _, err := c.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "evictd"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "evictd", Image: "evictd:e2e"}}, TerminationGracePeriodSeconds: ptr.To[int64](30),
		AutomountServiceAccountToken: ptr.To(false)}
	ds, err := c.Admin.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "evictd", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "evictd-agent", Namespace: ns, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}, Spec: spec}
	agentPod.Spec.NodeName = nodeName
	if agentPod, err = c.Admin.CoreV1().Pods(ns).Create(ctx, agentPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// agentPods lists the pods the DaemonSet owns, read apart from cleanup.
	agentPods := func() []string {
		pods, err := c.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("list pods: %v", err)
			return nil
		}
		var out []string
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == ds.UID {
				out = append(out, p.Name)
			}
		}
		return out
	}

	var sawDaemonSet, done atomic.Bool
	var firstList sync.Once
	var podsAtFirstList []string
	api := &cleanupHooks{Client: adminAPI(t, c),
		exists: func(ok bool) {
			if ok {
				sawDaemonSet.Store(true)
			}
		},
		list: func(r kube.Resource) {
			if r == kube.Nodes {
				firstList.Do(func() { podsAtFirstList = agentPods() })
			}
		}}

	// The agent: the kubelet stand-in's view of its pod.
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- func() error {
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					return fmt.Errorf("the agent's pod was never deleted (no deletionTimestamp within 2 minutes)")
				}
				p, err := c.Admin.CoreV1().Pods(ns).Get(ctx, agentPod.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p.DeletionTimestamp != nil {
					break
				}
			}
			// Its last pass, after SIGTERM, before it exits: its brake on.
			patch := `{"spec":{"taints":[{"key":"` + nodebrake.TaintKey(nodebrake.Memory) + `","value":"` + install.Mark(id) + `","effect":"NoSchedule"}]}}`
			if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
			for deadline := time.Now().Add(2 * time.Minute); !sawDaemonSet.Load() && !done.Load(); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					return fmt.Errorf("cleanup neither saw the DaemonSet still there nor ended within 2 minutes")
				}
			}
			// The agent has exited: its kubelet removes the pod.
			return c.Admin.CoreV1().Pods(ns).Delete(ctx, agentPod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}()
	}()

	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := cleanup.Run(runCtx, cleanup.Options{API: api, Install: id, LeaseNamespace: ns, Requester: evictreq.DefaultRequester,
		DaemonSet: id, Poll: 100 * time.Millisecond, Log: zaptest.NewLogger(t)})
	done.Store(true)
	if aerr := <-agentDone; aerr != nil {
		t.Fatalf("the agent's stand-in: %v", aerr)
	}
	if len(podsAtFirstList) != 0 {
		t.Errorf("cleanup began to take the install's state back (its first list of the Nodes) while the DaemonSet's pods %v were still there: "+
			"an agent still running may put its brake back", podsAtFirstList)
	}
	if err != nil || res.TaintsRemoved != 1 {
		t.Errorf("cleanup: %+v, %v; want the brake the agent put on before it exited taken back (1 taint), and nothing left", res, err)
	}
	n, gerr := c.Admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	for _, tn := range n.Spec.Taints {
		if strings.HasPrefix(tn.Key, nodebrake.TaintPrefix) {
			t.Errorf("taint %s left on node %s after cleanup: the agent put it on after cleanup had lifted the brakes", tn.ToString(), nodeName)
		}
	}
}

// TestCleanupDeletesAreConditional: the real API server refuses cleanup's
// deletes of what changed since cleanup listed it (a 409 whose message
// says which precondition failed, as pkg/cleanup's unit tests' fake
// answers), and cleanup leaves it: a lease another install's agent took
// over between the list and the delete (same UID, a new version) and an
// EvictionRequest another install made anew under the same name (a new
// UID).
func TestCleanupDeletesAreConditional(t *testing.T) {
	c := framework.Start(t, framework.WithAPIServerArgs("--feature-gates=EvictionRequestAPI=true", "--runtime-config=lifecycle.k8s.io/v1alpha1=true"))
	ctx := context.Background()
	ns := c.Namespace(t, "cond")
	id, otherID := ns+"/evictd", ns+"/second-evictd"
	leases := c.Admin.CoordinationV1().Leases(ns)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodelease.NamePrefix + "cond-node", Namespace: ns,
		Annotations: map[string]string{install.Annotation: id}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(ns + "/evictd-x1"), LeaseDurationSeconds: ptr.To[int32](40)}}
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.Admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "target", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:e2e"}}, AutomountServiceAccountToken: ptr.To(false)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ers := c.Admin.LifecycleV1alpha1().EvictionRequests(ns)
	ours := evictreq.Build(pod, evictreq.DefaultRequester)
	ours.Labels[install.Label] = install.Mark(id)
	if _, err := ers.Create(ctx, ours, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var leaseTaken, erAnew sync.Once
	var anewUID types.UID
	api := &cleanupHooks{Client: adminAPI(t, c),
		deleteLease: func(name string) {
			leaseTaken.Do(func() {
				l, err := leases.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Errorf("get lease: %v", err)
					return
				}
				l.Annotations[install.Annotation] = otherID
				l.Spec.HolderIdentity = ptr.To(ns + "/second-evictd-y1")
				if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
					t.Errorf("the other install's agent takes the lease over: %v", err)
				}
			})
		},
		deleteER: func(name string) {
			erAnew.Do(func() {
				if err := ers.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Errorf("delete EvictionRequest: %v", err)
					return
				}
				theirs := evictreq.Build(pod, evictreq.DefaultRequester)
				theirs.Labels[install.Label] = install.Mark(otherID)
				got, err := ers.Create(ctx, theirs, metav1.CreateOptions{})
				if err != nil {
					t.Errorf("the other install makes the EvictionRequest anew: %v", err)
					return
				}
				anewUID = got.UID
			})
		}}
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := cleanup.Run(runCtx, cleanup.Options{API: api, Install: id, LeaseNamespace: ns, Requester: evictreq.DefaultRequester,
		Log: zaptest.NewLogger(t)})
	if err != nil || res.LeasesDeleted != 0 || res.EvictionRequestsDeleted != 0 {
		t.Errorf("cleanup: %+v, %v; want nothing deleted and nothing of its install left", res, err)
	}
	// The API server's answers, which pkg/cleanup's fake mirrors.
	for _, tc := range []struct {
		what string
		errs []error
		want string
	}{
		{"lease", api.leaseErrs, "the ResourceVersion in the precondition"},
		{"EvictionRequest", api.erErrs, "the UID in the precondition"},
	} {
		if len(tc.errs) != 1 || !apierrors.IsConflict(tc.errs[0]) || !strings.Contains(tc.errs[0].Error(), tc.want) {
			t.Errorf("the %s's deletes were answered %v; want one 409 %q", tc.what, tc.errs, tc.want)
		}
	}
	if l, err := leases.Get(ctx, lease.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("lease after cleanup: %v; want the other install's agent's kept", err)
	} else if of := l.Annotations[install.Annotation]; of != otherID {
		t.Errorf("lease after cleanup names install %q; want the other install's agent's (%s) kept", of, otherID)
	}
	if er, err := ers.Get(ctx, ours.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("EvictionRequest after cleanup: %v; want the other install's, made anew, kept", err)
	} else if er.UID != anewUID {
		t.Errorf("EvictionRequest after cleanup has UID %s; want the other install's, made anew (UID %s), kept", er.UID, anewUID)
	}
}
