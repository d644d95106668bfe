// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/framework"
)

// leasesPolicy is deploy/daemonset.yaml's policy on evictd's Lease writes.
const leasesPolicy = framework.LeasePolicy

// TestAdmissionLeases: on one cluster with simulated nodes A and B and the
// shipped evictd-leases policy, evictd's ServiceAccount with a token bound
// to its pod on A may create, update and delete the Lease evictd-A in its
// own namespace, and no other: creating, updating or deleting B's agent's
// Lease evictd-B, or Leases named A and B beside them, is refused,
// each refusal naming the Lease and the token's node; a token not bound to
// a pod writes no Lease. The refused writes leave those Leases as they
// were. Last, evictd itself with A's token takes its Lease on A (it is
// ready only once it holds it) and deletes it at exit.
func TestAdmissionLeases(t *testing.T) {
	start := time.Now()
	c := framework.Start(t)
	nodeA, nodeB, asA, kubeconfigA := nodesAB(t, c, "lease")
	a, b := nodeA.Name, nodeB.Name
	unbound := c.EvictdClient
	ctx := context.Background()
	ns := nodelease.FallbackNamespace
	own, othersAgent := nodelease.Name(a), nodelease.Name(b)

	if err := c.EnforcePolicy(ctx, leasesPolicy); err != nil {
		t.Fatal(err)
	}
	waitLeasePolicy(t, asA, ns, othersAgent)

	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(name),
				LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime:            &metav1.MicroTime{Time: time.Now()},
			},
		}
	}
	create := func(client kubernetes.Interface, name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := client.CoordinationV1().Leases(ns).Create(ctx, lease(name), metav1.CreateOptions{})
			return err
		}
	}
	// update renews the Lease as read by the admin, as a holder would.
	update := func(client kubernetes.Interface, name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			l, err := c.Admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l.Spec.HolderIdentity = ptr.To("evictd-test")
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, err = client.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			return err
		}
	}
	del := func(client kubernetes.Interface, name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			return client.CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
	refusedA := func(name string) string {
		return "may write only the Lease " + ns + "/" + own + " of the node its pod runs on: the token is bound to a pod on " + a +
			", so it may not write Lease " + ns + "/" + name
	}
	refusedUnbound := func(name string) string {
		return "no node-name claim (" + framework.NodeNameClaim + "), so it may not write Lease " + ns + "/" + name
	}
	// refusedToA is verb, as A's token, on each Lease A's agent may not
	// write: B's agent's and the kubelets' heartbeat Leases.
	refusedToA := func(verb string, write func(kubernetes.Interface, string) func(context.Context) error) []admissionCase {
		var cases []admissionCase
		for _, l := range []struct{ what, name string }{
			{"other node's agent lease", othersAgent}, {"own node's kubelet lease", a}, {"other node's kubelet lease", b},
		} {
			cases = append(cases, admissionCase{name: verb + " " + l.what, policy: leasesPolicy, refusal: refusedA(l.name), write: write(asA, l.name)})
		}
		return cases
	}

	// Creates, while none of these Leases exists: the kubelets' heartbeat
	// Leases are named after their node, A's own included.
	cases := []admissionCase{{name: "create own lease", write: create(asA, own)}}
	cases = append(cases, refusedToA("create", create)...)
	runAdmissionCases(t, ctx, append(cases,
		admissionCase{name: "unbound token: create a lease", policy: leasesPolicy, refusal: refusedUnbound(othersAgent), write: create(unbound, othersAgent)},
	))

	// B's agent's Lease and the kubelets', as their holders write them.
	before := map[string]string{} // name -> resourceVersion
	for _, name := range []string{othersAgent, a, b} {
		l, err := c.Admin.CoordinationV1().Leases(ns).Create(ctx, lease(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[name] = l.ResourceVersion
	}
	cases = []admissionCase{{name: "update own lease", write: update(asA, own)}}
	cases = append(cases, refusedToA("update", update)...)
	cases = append(cases, refusedToA("delete", del)...)
	runAdmissionCases(t, ctx, append(cases,
		admissionCase{name: "unbound token: update a lease", policy: leasesPolicy, refusal: refusedUnbound(own), write: update(unbound, own)},
		admissionCase{name: "unbound token: delete a lease", policy: leasesPolicy, refusal: refusedUnbound(own), write: del(unbound, own)},
		admissionCase{name: "delete own lease", write: del(asA, own)},
	))
	for name, rv := range before {
		l, err := c.Admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("lease %s after the refused writes: %v", name, err)
		} else if l.ResourceVersion != rv {
			t.Errorf("lease %s changed (resourceVersion %s, was %s): holder %v", name, l.ResourceVersion, rv, ptr.Deref(l.Spec.HolderIdentity, ""))
		}
	}

	t.Run("evictd on its node", func(t *testing.T) {
		// Ready only once it holds its Lease (pkg/nodelease).
		e := startEvictdWith(t, c, nodeA, evictdSetup{kubeconfig: kubeconfigA})
		l, err := c.Admin.CoordinationV1().Leases(ns).Get(ctx, own, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease %s with evictd ready on %s: %v", own, a, err)
		}
		if got := leaseHeld(t, e); got != 1 {
			t.Errorf("evictd_node_lease_held = %v, want 1 (holder %s)", got, ptr.Deref(l.Spec.HolderIdentity, ""))
		}
		e.stop() // SIGTERM: evictd deletes its Lease as it exits
		e.ended = true
		if _, err := c.Admin.CoordinationV1().Leases(ns).Get(ctx, own, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("lease %s after evictd stopped: %v, want NotFound (the delete at exit refused?)", own, err)
		}
	})
	t.Logf("took %s (cluster start %s)", time.Since(start).Round(time.Millisecond), c.StartDuration.Round(time.Millisecond))
}

// waitLeasePolicy waits until the API server enforces evictd-leases: a
// server-side dry run of client's create of the Lease name, not its own,
// is refused by it. Policies reach admission through an informer, a
// moment after their create.
func waitLeasePolicy(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, last = client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return isPolicyRefusal(last, leasesPolicy), nil
	})
	if err != nil {
		t.Fatalf("%s is not in force after 30 s (last answer to the create of %s/%s: %v)", leasesPolicy, ns, name, last)
	}
}
