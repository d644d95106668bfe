// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

// podDeletesPolicy is deploy/daemonset.yaml's policy on evictd's direct
// pod deletes (--pdb-policy=best-effort), applied by every test cluster
// with evictd's RBAC.
const podDeletesPolicy = "evictd-pod-deletes"

// TestAdmissionPodDeletes: with "delete pods" granted to evictd's
// ServiceAccount cluster-wide, as --pdb-policy=best-effort needs (the
// chart's pdbPolicy grants exactly that), the shipped evictd-pod-deletes
// policy lets a token bound to evictd's pod on A delete a pod bound to A,
// and refuses, naming the pod's node and the token's: a pod bound to B, a
// pod bound to no node, and any delete with a token not bound to a pod.
// The refused pods are still there, not terminating. The allowed delete
// proves what the policy rests on: the API server hands a DELETE's
// admission the pod being deleted as oldObject (without it the policy's
// expression could not read the node, and failurePolicy Fail would refuse
// every delete).
func TestAdmissionPodDeletes(t *testing.T) {
	start := time.Now()
	c := framework.Start(t)
	nodeA, nodeB, asA, _ := nodesAB(t, c, "del")
	a, b := nodeA.Name, nodeB.Name
	unbound := c.EvictdClient
	ctx := context.Background()

	// The grant a user adds for best-effort (the chart's pdbPolicy rule).
	sa := c.EvictdServiceAccount
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "evictd-test-delete-pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}}},
	}
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
	}
	if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ns := c.Namespace(t, "pod-deletes")
	workload := podtest.Run("evictd.test/workload:latest", nodesim.WorkloadCommand)
	pods := podtest.CreateRunning(t, c.Admin, 60*time.Second,
		podtest.New(ns, "on-a", podtest.OnNode(a), workload, podtest.Grace(1)),
		podtest.New(ns, "on-b", podtest.OnNode(b), workload, podtest.Grace(1)))
	// No scheduler runs: a pod without a node stays unscheduled.
	unscheduled, err := c.Admin.CoreV1().Pods(ns).Create(ctx, podtest.New(ns, "unscheduled", workload), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	del := func(client kubernetes.Interface, name string, dryRun bool) error {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		o := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}
		if dryRun {
			o.DryRun = []string{metav1.DryRunAll}
		}
		return client.CoreV1().Pods(ns).Delete(dctx, name, o)
	}
	// In force once RBAC lets A's token through to admission and the
	// policy refuses it B's pod: both reach the API server through
	// informers, a moment after their create.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	if err := wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		last = del(asA, "on-b", true)
		return isPolicyRefusal(last, podDeletesPolicy), nil
	}); err != nil {
		t.Fatalf("%s is not in force after 30 s with the delete granted: A's token's dry-run delete of %s/on-b (on %s) answered %v", podDeletesPolicy, ns, b, last)
	}

	stillThere := func(t *testing.T, p *corev1.Pod) {
		t.Helper()
		got, err := c.Admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil {
			t.Errorf("pod %s after the refused delete: %v (err %v), want it there, not terminating", podKey(p), deletionOf(got), err)
		}
	}
	t.Run("pod on another node", func(t *testing.T) {
		checkAdmission(t, del(asA, "on-b", false), podDeletesPolicy,
			fmt.Sprintf("pod %s/on-b is on %s, the token is bound to a pod on %s", ns, b, a))
		stillThere(t, pods["on-b"])
	})
	t.Run("unscheduled pod", func(t *testing.T) {
		checkAdmission(t, del(asA, unscheduled.Name, false), podDeletesPolicy,
			fmt.Sprintf("pod %s is on no node, the token is bound to a pod on %s", podKey(unscheduled), a))
		stillThere(t, unscheduled)
	})
	t.Run("unbound token", func(t *testing.T) {
		checkAdmission(t, del(unbound, "on-a", false), podDeletesPolicy, "no node-name claim")
		stillThere(t, pods["on-a"])
	})
	t.Run("pod on own node", func(t *testing.T) {
		checkAdmission(t, del(asA, "on-a", false), "", "")
		waitGone(t, c.Admin, pods["on-a"], 30*time.Second)
	})
	t.Logf("took %s (cluster start %s)", time.Since(start).Round(time.Millisecond), c.StartDuration.Round(time.Millisecond))
}
