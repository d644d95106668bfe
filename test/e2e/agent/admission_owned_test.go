// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	lifecyclev1alpha1client "k8s.io/client-go/kubernetes/typed/lifecycle/v1alpha1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

// The names of deploy/daemonset.yaml's policies on evictd cleanup's deletes
// and on the agents' EvictionRequest writes.
const (
	cleanupDeletesPolicy   = "evictd-cleanup-deletes"
	evictionRequestsPolicy = framework.EvictionRequestPolicy
)

// kubeNodeLease is where the kubelets keep their heartbeat Leases, each
// named after its node.
const kubeNodeLease = "kube-node-lease"

// cleanupClient is a client with a token of evictd cleanup's
// ServiceAccount, as the uninstall Job's pod holds (bound to no node).
func cleanupClient(t *testing.T, c *framework.Cluster) kubernetes.Interface {
	t.Helper()
	sa := c.EvictdServiceAccount
	tr, err := c.Admin.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(context.Background(), "evictd-cleanup", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s/evictd-cleanup: %v", sa.Namespace, err)
	}
	cfg := rest.CopyConfig(c.EvictdConfig)
	cfg.BearerToken = tr.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// waitRefused waits until write is refused by policy (a dry run, so that
// nothing changes meanwhile): policies reach admission through an
// informer, a moment after their create.
func waitRefused(t *testing.T, policy string, write func(ctx context.Context) error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = write(ctx)
		return isPolicyRefusal(last, policy), nil
	}); err != nil {
		t.Fatalf("%s is not in force after 30 s (last answer: %v)", policy, last)
	}
}

// heartbeat is a kubelet's heartbeat Lease of node, in ns, as the kubelet
// writes it: held by the node's name, renewed now.
func heartbeat(ns, node string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
}

// TestLeaseNeverAKubeletsHeartbeat: nodes x and evictd-x collide in
// kube-node-lease (the agent of x's Lease evictd-x there is node
// evictd-x's kubelet heartbeat). With the shipped RBAC and policies, the
// agent of x, with its real pod-bound token, cannot create, update or
// delete kube-node-lease/evictd-x (RBAC has no grant there, and
// evictd-leases allows its own namespace's evictd-x alone), and evictd
// itself on x takes its Lease in its own namespace and leaves the kubelet's
// as it was. evictd cleanup's token cannot delete a kubelet's heartbeat
// (no grant in kube-node-lease), nor, in evictd's own namespace, a Lease
// held by a node's name (evictd-cleanup-deletes); it may delete an
// agent's. A Lease in evictd's namespace under x's name held by a node
// name is never taken by the agent: it stays not ready and says why.
func TestLeaseNeverAKubeletsHeartbeat(t *testing.T) {
	c := framework.Start(t)
	ctx := context.Background()
	x := c.StartNode(t, nodesim.Options{Name: "collide", MemoryBytes: nodeMemory})
	other := nodelease.Name(x.Name) // the node whose kubelet Lease collides
	if _, err := c.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubelet, err := c.Admin.CoordinationV1().Leases(kubeNodeLease).Create(ctx, heartbeat(kubeNodeLease, other), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfgX, kubeconfigX := c.EvictdNodeToken(t, x.Name)
	asX, err := kubernetes.NewForConfig(cfgX)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnforcePolicy(ctx, leasesPolicy); err != nil {
		t.Fatal(err)
	}
	own := nodelease.FallbackNamespace

	leases := asX.CoordinationV1().Leases(kubeNodeLease)
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context) error
	}{
		{"create", func(ctx context.Context) error {
			// Deleted first by the admin, as when node evictd-x's kubelet
			// is away: the name is free to take.
			if err := c.Admin.CoordinationV1().Leases(kubeNodeLease).Delete(ctx, other, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			_, refused := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: other, Namespace: kubeNodeLease},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("evictd-system/evictd-abcde")}}, metav1.CreateOptions{})
			if refused == nil {
				return nil // taken: the test fails, and the kubelet's Lease is the agent's
			}
			var err error
			if kubelet, err = c.Admin.CoordinationV1().Leases(kubeNodeLease).Create(ctx, heartbeat(kubeNodeLease, other), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return refused
		}},
		{"update", func(ctx context.Context) error {
			l := kubelet.DeepCopy()
			l.Spec.HolderIdentity = ptr.To("evictd-system/evictd-abcde")
			_, err := leases.Update(ctx, l, metav1.UpdateOptions{})
			return err
		}},
		{"delete", func(ctx context.Context) error { return leases.Delete(ctx, other, metav1.DeleteOptions{}) }},
	} {
		t.Run("agent of x: "+tc.name+" node evictd-x's heartbeat", func(t *testing.T) {
			err := tc.write(ctx)
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s of %s/%s with the agent of %s's token: %v; want it forbidden", tc.name, kubeNodeLease, other, x.Name, err)
			}
		})
	}
	// As its kubelet keeps it, whatever the agent's token did to it.
	if _, err := c.Admin.CoordinationV1().Leases(kubeNodeLease).Create(ctx, heartbeat(kubeNodeLease, other), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cleanup := cleanupClient(t, c)
	t.Run("cleanup: delete a kubelet's heartbeat", func(t *testing.T) {
		err := cleanup.CoordinationV1().Leases(kubeNodeLease).Delete(ctx, other, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("evictd cleanup's delete of %s/%s: %v; want it forbidden", kubeNodeLease, other, err)
		}
	})
	// The rest needs the policies in force: they reach admission through
	// an informer, a moment after their create.
	waitLeasePolicy(t, asX, own, nodelease.Name("someone-else"))

	// In evictd's own namespace: a Lease under an agent's name held by a
	// node's name (as a kubelet would hold it), and an agent's.
	squatted, err := c.Admin.CoordinationV1().Leases(own).Create(ctx, heartbeat(own, nodelease.Name("squat")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRefused(t, cleanupDeletesPolicy, func(ctx context.Context) error {
		return cleanup.CoordinationV1().Leases(own).Delete(ctx, squatted.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	})
	agents := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodelease.Name("gone"), Namespace: own},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(own + "/evictd-gone1"), LeaseDurationSeconds: ptr.To[int32](40)}}
	if _, err := c.Admin.CoordinationV1().Leases(own).Create(ctx, agents, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("cleanup: delete a Lease held by a node name", func(t *testing.T) {
		err := cleanup.CoordinationV1().Leases(own).Delete(ctx, squatted.Name, metav1.DeleteOptions{})
		checkAdmission(t, err, cleanupDeletesPolicy, "held by '"+squatted.Name+"'")
	})
	t.Run("cleanup: delete an agent's Lease", func(t *testing.T) {
		checkAdmission(t, cleanup.CoordinationV1().Leases(own).Delete(ctx, agents.Name, metav1.DeleteOptions{}), "", "")
	})

	t.Run("evictd on x", func(t *testing.T) {
		// A Lease under x's agent's name, held by a node's name: never
		// the agent's to take, however stale.
		squat := heartbeat(own, nodelease.Name(x.Name))
		squat.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}
		if _, err := c.Admin.CoordinationV1().Leases(own).Create(ctx, squat, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e := startEvictdWith(t, c, x, evictdSetup{kubeconfig: kubeconfigX, noWait: true})
		e.waitLog(60*time.Second, "the node lease's name is taken by a Lease no agent wrote: not acting", nil)
		l, err := c.Admin.CoordinationV1().Leases(own).Get(ctx, squat.Name, metav1.GetOptions{})
		if err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != squat.Name {
			t.Fatalf("the squatted Lease %s/%s after evictd saw it: %v, holder %q; want it left as it was", own, squat.Name, err, ptr.Deref(l.Spec.HolderIdentity, ""))
		}
		// Gone, the agent takes its own Lease there (it is ready only
		// once it holds it) and never the kubelet's.
		if err := c.Admin.CoordinationV1().Leases(own).Delete(ctx, squat.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitReadyz(60*time.Second, "ready, holding its Lease", func(code int, _ string) bool { return code == http.StatusOK })
		l, err = c.Admin.CoordinationV1().Leases(own).Get(ctx, nodelease.Name(x.Name), metav1.GetOptions{})
		if err != nil || !nodelease.IsEvictds(l) {
			t.Fatalf("evictd's Lease %s/%s with evictd ready on %s: %v", own, nodelease.Name(x.Name), x.Name, err)
		}
		hb, err := c.Admin.CoordinationV1().Leases(kubeNodeLease).Get(ctx, other, metav1.GetOptions{})
		if err != nil || hb.ResourceVersion != kubelet.ResourceVersion || ptr.Deref(hb.Spec.HolderIdentity, "") != other {
			t.Errorf("node %s's heartbeat with evictd acting on %s: %v, holder %q, resourceVersion %s (was %s); want it untouched",
				other, x.Name, err, ptr.Deref(hb.Spec.HolderIdentity, ""), hb.ResourceVersion, kubelet.ResourceVersion)
		}
	})
}

// TestAdmissionEvictionRequestsBounded: with --eviction-request's opt-in
// rules granted (deploy/daemonset.yaml's comment, the chart's
// evictionRequest.enabled) and the shipped evictd-eviction-requests, the
// agent of A, with its pod-bound token, may create, withdraw and delete
// an EvictionRequest labelled evictd.io/node=A, as pkg/evictreq builds it,
// and may not create one labelled for B or unlabelled, nor update or
// delete B's; a token not bound to a pod writes none. evictd cleanup's
// token may delete evictd's requests and not another requester's
// (evictd-cleanup-deletes, on the object as stored).
func TestAdmissionEvictionRequestsBounded(t *testing.T) {
	c := framework.Start(t, framework.WithAPIServerArgs("--feature-gates=EvictionRequestAPI=true", "--runtime-config=lifecycle.k8s.io/v1alpha1=true"))
	ctx := context.Background()
	nodeA, nodeB, asA, _ := nodesAB(t, c, "er")
	a, b := nodeA.Name, nodeB.Name
	ns := c.Namespace(t, "er")
	sa := c.EvictdServiceAccount
	// The opt-in rules, as deploy/daemonset.yaml's ClusterRole comment
	// gives them.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "evictd-eviction-requests-test"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"lifecycle.k8s.io"}, Resources: []string{"evictionrequests"}, Verbs: []string{"create", "get", "update", "list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	}}
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.EnforcePolicy(ctx, evictionRequestsPolicy); err != nil {
		t.Fatal(err)
	}
	// A pod on each node: the requests' targets.
	pod := func(name, node string) *corev1.Pod {
		p, err := c.Admin.CoreV1().Pods(ns).Create(ctx, podtest.New(ns, name, podtest.OnNode(node)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	onA, onB := pod("on-a", a), pod("on-b", b)
	ers := func(client kubernetes.Interface) func() lifecyclev1alpha1client.EvictionRequestInterface {
		return func() lifecyclev1alpha1client.EvictionRequestInterface {
			return client.LifecycleV1alpha1().EvictionRequests(ns)
		}
	}
	agent, admin := ers(asA), ers(c.Admin)
	waitRefused(t, evictionRequestsPolicy, func(ctx context.Context) error {
		_, err := agent().Create(ctx, evictreq.Build(onB, evictreq.DefaultRequester), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})

	// B's request, as B's agent made it; another requester's on A.
	ofB, err := admin().Create(ctx, evictreq.Build(onB, evictreq.DefaultRequester), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	theirs := evictreq.Build(onA, "example.com/drainer")
	theirs.Name = "drainer-" + string(onA.UID)
	delete(theirs.Labels, evictreq.NodeLabel)
	if theirs, err = admin().Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unlabelled := evictreq.Build(onA, evictreq.DefaultRequester)
	unlabelled.Labels = nil
	var ofA *lifecyclev1alpha1.EvictionRequest
	runAdmissionCases(t, ctx, []admissionCase{
		{name: "agent of A: create one for B", policy: evictionRequestsPolicy, refusal: "labelled for '" + b + "'",
			write: func(ctx context.Context) error {
				_, err := agent().Create(ctx, evictreq.Build(onB, evictreq.DefaultRequester), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}},
		{name: "agent of A: create one unlabelled", policy: evictionRequestsPolicy, refusal: "labelled for ''",
			write: func(ctx context.Context) error {
				_, err := agent().Create(ctx, unlabelled, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}},
		{name: "agent of A: relabel B's as A's", policy: evictionRequestsPolicy, refusal: "of node '" + b + "'",
			write: func(ctx context.Context) error {
				er := ofB.DeepCopy()
				er.Labels[evictreq.NodeLabel] = a
				_, err := agent().Update(ctx, er, metav1.UpdateOptions{})
				return err
			}},
		{name: "agent of A: withdraw B's", policy: evictionRequestsPolicy, refusal: "'" + b + "'",
			write: func(ctx context.Context) error {
				er := ofB.DeepCopy()
				er.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
				_, err := agent().Update(ctx, er, metav1.UpdateOptions{})
				return err
			}},
		{name: "agent of A: delete B's", policy: evictionRequestsPolicy, refusal: "of node '" + b + "'",
			write: func(ctx context.Context) error { return agent().Delete(ctx, ofB.Name, metav1.DeleteOptions{}) }},
		{name: "unbound token: create one for A", policy: evictionRequestsPolicy, refusal: "no node-name claim",
			write: func(ctx context.Context) error {
				_, err := ers(c.EvictdClient)().Create(ctx, evictreq.Build(onA, evictreq.DefaultRequester), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}},
		{name: "agent of A: create its own", write: func(ctx context.Context) error {
			var err error
			ofA, err = agent().Create(ctx, evictreq.Build(onA, evictreq.DefaultRequester), metav1.CreateOptions{})
			return err
		}},
		{name: "agent of A: withdraw its own", write: func(ctx context.Context) error {
			er := ofA.DeepCopy()
			er.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
			var err error
			ofA, err = agent().Update(ctx, er, metav1.UpdateOptions{})
			return err
		}},
		{name: "agent of A: delete its own", write: func(ctx context.Context) error { return agent().Delete(ctx, ofA.Name, metav1.DeleteOptions{}) }},
	})
	got, err := admin().Get(ctx, ofB.Name, metav1.GetOptions{})
	if err != nil || got.ResourceVersion != ofB.ResourceVersion {
		t.Errorf("B's EvictionRequest after A's refused writes: %v; want it as it was", err)
	}

	cleanup := cleanupClient(t, c)
	waitRefused(t, cleanupDeletesPolicy, func(ctx context.Context) error {
		return cleanup.LifecycleV1alpha1().EvictionRequests(ns).Delete(ctx, theirs.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	})
	runAdmissionCases(t, ctx, []admissionCase{
		{name: "cleanup: delete another requester's", policy: cleanupDeletesPolicy, refusal: "requested by 'example.com/drainer'",
			write: func(ctx context.Context) error {
				return cleanup.LifecycleV1alpha1().EvictionRequests(ns).Delete(ctx, theirs.Name, metav1.DeleteOptions{})
			}},
		{name: "cleanup: delete evictd's", write: func(ctx context.Context) error {
			return cleanup.LifecycleV1alpha1().EvictionRequests(ns).Delete(ctx, ofB.Name, metav1.DeleteOptions{})
		}},
	})
	if _, err := admin().Get(ctx, theirs.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("another requester's EvictionRequest after cleanup's refused delete: %v", err)
	}
}
