// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestEvictionRequestMode: --eviction-request on an API server that serves
// lifecycle.k8s.io/v1alpha1 (feature gate EvictionRequestAPI, alpha in
// 1.37), with the optional RBAC rule of deploy/daemonset.yaml granted.
//   - A soft memory eviction is asked for with an EvictionRequest named for
//     the pod's UID, with evictd's requester, the pod's name and UID, intent
//     Eviction; the pod is not evicted while the responder wait runs.
//   - Pressure that ends first withdraws it (intent Withdrawn), and the pod
//     stays.
//   - Pressure that comes back sets the same object's intent to Eviction
//     again; with no responder (Kubernetes 1.37.2 runs none), evictd falls
//     back to the Eviction API once the wait is over, and the pod goes.
func TestEvictionRequestMode(t *testing.T) {
	const (
		softGrace     = 2 * time.Second
		responderWait = 12 * time.Second
	)
	c := framework.Start(t, framework.WithAPIServerArgs(
		"--feature-gates=EvictionRequestAPI=true", "--runtime-config=lifecycle.k8s.io/v1alpha1=true"))
	grantEvictionRequests(t, c)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "evreq", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "evreq")
	pods := createRunning(t, c.Admin, podsFor(ns, node.Name, []podSpec{
		{name: "batch", priorityClass: classLow, holdMiB: 200, grace: 2},
		{name: "steady", priorityClass: classHigh, holdMiB: 250,
			requests: res("cpu", "100m", "memory", "300Mi"), limits: res("cpu", "100m", "memory", "300Mi")},
	})...)
	waitHolding(t, node, mapValues(pods)...)
	e := startEvictd(t, c, node,
		softOnlyHard,
		"--eviction-soft=memory.available<400Mi",
		"--eviction-soft-grace-period=memory.available="+softGrace.String(),
		"--act-early=false",
		"--eviction-request",
		"--eviction-request-responder-wait="+responderWait.String(),
	)
	if got := e.scrape().Sum("evictd_eviction_request_served", nil); got != 1 {
		t.Errorf("evictd_eviction_request_served = %v, want 1", got)
	}
	batch := pods["batch"]
	erName := "evictd-" + string(batch.UID)

	// 1: pressure that lasts past the soft grace period; the load stays under
	// its request, so batch (BestEffort, above its request) is the victim.
	load := createRunning(t, c.Admin, podSpec{name: "load", priorityClass: classHigh, holdMiB: 10, growMiBPerSec: 50, growToMiB: 250,
		requests: res("memory", "300Mi")}.pod(ns, node.Name))["load"]
	er := waitEvictionRequest(t, c, ns, erName, 40*time.Second, "created with intent Eviction",
		func(er *lifecyclev1alpha1.EvictionRequest) bool {
			return er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
		})
	if er.Spec.Requester != evictreq.DefaultRequester {
		t.Errorf("requester %q, want %q", er.Spec.Requester, evictreq.DefaultRequester)
	}
	if p := er.Spec.Target.Pod; p == nil || p.Name != batch.Name || p.UID != batch.UID {
		t.Errorf("target %+v, want pod %s (%s)", er.Spec.Target.Pod, batch.Name, batch.UID)
	}
	requested := time.Now()

	// 2: the load goes before the responder wait is over; the pressure ends
	// and the request is withdrawn, batch untouched.
	if err := c.Admin.CoreV1().Pods(ns).Delete(context.Background(), load.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c.Admin, load, 30*time.Second)
	waitEvictionRequest(t, c, ns, erName, responderWait, "withdrawn",
		func(er *lifecyclev1alpha1.EvictionRequest) bool {
			return er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn
		})
	if since := time.Since(requested); since >= responderWait {
		t.Fatalf("withdrawn %s after the request, past the responder wait %s: the test is mis-sized", since, responderWait)
	}
	if p, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), batch.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("batch after the withdrawal: %v, %+v; want it running", err, p)
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Fatalf("evicted %v while the request was open or withdrawn", podsOf(evs))
	}

	// 3: the pressure comes back: the same request asks again, no responder
	// answers, and the Eviction API evicts batch after the wait.
	again := time.Now()
	createRunning(t, c.Admin, podSpec{name: "load2", priorityClass: classHigh, holdMiB: 10, growMiBPerSec: 50, growToMiB: 250,
		requests: res("memory", "300Mi")}.pod(ns, node.Name))
	waitEvictionRequest(t, c, ns, erName, 40*time.Second, "asking again",
		func(er *lifecyclev1alpha1.EvictionRequest) bool {
			return er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
		})
	evs := waitEvictions(t, e, 1, responderWait+40*time.Second)
	if got := podsOf(evs); len(got) != 1 || got[0] != podKey(batch) {
		t.Fatalf("evicted %v, want %s", got, podKey(batch))
	}
	if took := evs[0].TS.Sub(again); took < responderWait {
		t.Errorf("the Eviction API evicted batch %s after the pressure came back, before the responder wait %s", took, responderWait)
	}
	waitGone(t, c.Admin, batch, 30*time.Second)
	t.Logf("request %s: withdrawn %s after it was made; asked again, evicted through the Eviction API %s after the pressure came back",
		erName, time.Since(requested).Round(time.Second), evs[0].TS.Sub(again).Round(time.Millisecond))
}

// grantEvictionRequests binds evictd's ServiceAccount to the optional rule
// deploy/daemonset.yaml documents for --eviction-request.
func grantEvictionRequests(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "evictd-eviction-requests"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"lifecycle.k8s.io"}, Resources: []string{"evictionrequests"}, Verbs: []string{"create", "get", "update"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		}}
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: c.EvictdServiceAccount.Namespace,
			Name: c.EvictdServiceAccount.Name}}}
	if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitEvictionRequest polls the EvictionRequest ns/name until cond holds.
func waitEvictionRequest(t *testing.T, c *framework.Cluster, ns, name string, timeout time.Duration, what string,
	cond func(*lifecyclev1alpha1.EvictionRequest) bool) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	var last *lifecyclev1alpha1.EvictionRequest
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last, lastErr = c.Admin.LifecycleV1alpha1().EvictionRequests(ns).Get(ctx, name, metav1.GetOptions{})
		return lastErr == nil && cond(last), nil
	})
	if err != nil {
		t.Fatalf("EvictionRequest %s/%s not %s within %s: last %+v, error %v", ns, name, what, timeout, last, lastErr)
	}
	return last
}
