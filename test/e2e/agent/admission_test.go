// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

// The admission policies of deploy/daemonset.yaml: every test cluster
// applies the first with evictd's RBAC, the second on request.
const (
	nodeWritesPolicy = "evictd-node-writes"
	evictionsPolicy  = framework.EvictionPolicy
	// rbac stands for RBAC's 403, which comes before any admission.
	rbac = "RBAC"
	// validation stands for the API server's validation of the object
	// (422 Invalid), which comes before the validating admission policies.
	validation = "validation"
)

// admissionCase is one write and the answer it must get: allowed when
// policy is empty, else refused by that policy with a message containing
// refusal (the validation that fired). policy rbac stands for RBAC's own
// refusal, before admission.
// runAdmissionCases makes each case's write as a subtest, with a deadline of
// its own, and checks the policy's verdict on it.
func runAdmissionCases(t *testing.T, ctx context.Context, cases []admissionCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			checkAdmission(t, tc.write(wctx), tc.policy, tc.refusal)
		})
	}
}

type admissionCase struct {
	name    string
	write   func(ctx context.Context) error
	policy  string
	refusal string
	// check, when set, reads the Node back after an allowed write.
	check func(t *testing.T, n *corev1.Node)
}

// TestAdmissionNodeWrites: on one cluster with two simulated nodes A and B,
// the shipped RBAC and admission policies let evictd's ServiceAccount, with
// a token bound to its pod on A, write exactly the node brake to A: its own
// taint keys (merge patch of the whole list at the resourceVersion read,
// as the brake writes it) and its own condition types (strategic merge
// patch of nodes/status, set True, False, deleted). Everything else is
// refused by evictd-node-writes, each with the message of the validation
// it broke: the same taint on B, a label, an annotation, an owner
// reference, another taint key, an evictd.io/ key not the brake's, a
// NoExecute brake taint, unschedulable, the kubelet's conditions (a
// MemoryPressure swapped for a second copy of another condition included),
// another status field, and any write with the token minted for the
// ServiceAccount alone (no node-name claim). A new Node by server-side
// apply is refused by RBAC before any policy: "patch" does not create; a
// taint swapped for a second copy of another, by the API server's
// validation (taints are unique by key and effect).
// Evictions: the pod-bound token may evict a pod on B (the Eviction's
// admission sees the Eviction, not the pod, and the shipped policies do not
// look the pod up: the documented residual risk); the unbound token may
// evict nothing (evictd-evictions).
func TestAdmissionNodeWrites(t *testing.T) {
	start := time.Now()
	c := framework.Start(t)
	nodeA, nodeB, asA, _ := nodesAB(t, c, "adm")
	unbound := c.EvictdClient
	ctx := context.Background()
	a, b := nodeA.Name, nodeB.Name

	// Every test cluster has evictd-node-writes; evictd-evictions only
	// when asked for, since most tests evict with the unbound token.
	if err := c.EnforceEvictionPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	waitPolicies(t, c, asA, unbound, a)
	// Two taints not evictd's on A, as a cluster's own would be, for the
	// swap below.
	kept := []corev1.Taint{
		{Key: "example.com/kept-1", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "example.com/kept-2", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, a, types.MergePatchType,
		mustJSON(t, map[string]any{"spec": map[string]any{"taints": kept}}), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	before := map[string]*corev1.Node{}
	for _, n := range []string{a, b} {
		node, err := c.Admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[n] = node
	}

	nodes := asA.CoreV1().Nodes()
	taintPatch := func(ctx context.Context, client kubernetes.Interface, node string, change func([]corev1.Taint) []corev1.Taint) error {
		return patchTaints(ctx, t, c.Admin, client, node, change)
	}
	brakeTaint := corev1.Taint{Key: "evictd.io/memory-pressure", Effect: corev1.TaintEffectNoSchedule}
	conditionPatch := func(ctx context.Context, client kubernetes.Interface, node string, cond map[string]any) error {
		return patchCondition(ctx, t, client, node, cond)
	}
	brakeCondition := func(status corev1.ConditionStatus, reason string) map[string]any {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		return map[string]any{
			"type": "EvictdMemoryPressure", "status": status, "reason": reason,
			"message":           "test: evictd's memory brake",
			"lastHeartbeatTime": now, "lastTransitionTime": now,
		}
	}
	hasTaint := func(want bool) func(t *testing.T, n *corev1.Node) {
		return func(t *testing.T, n *corev1.Node) {
			if got := slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&brakeTaint) }); got != want {
				t.Errorf("%s has the taint %s: %v, want %v (taints %v)", n.Name, brakeTaint.ToString(), got, want, n.Spec.Taints)
			}
		}
	}
	condition := func(want corev1.ConditionStatus) func(t *testing.T, n *corev1.Node) {
		return func(t *testing.T, n *corev1.Node) {
			var got corev1.ConditionStatus = "absent"
			for _, cd := range n.Status.Conditions {
				if cd.Type == "EvictdMemoryPressure" {
					got = cd.Status
				}
			}
			if got != want {
				t.Errorf("%s's EvictdMemoryPressure condition is %s, want %s", n.Name, got, want)
			}
			if !slices.ContainsFunc(n.Status.Conditions, func(cd corev1.NodeCondition) bool {
				return cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue
			}) {
				t.Errorf("%s lost its Ready condition: %v", n.Name, n.Status.Conditions)
			}
		}
	}
	mergePatch := func(node string, patch string, subresource ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := nodes.Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, subresource...)
			return err
		}
	}

	cases := []admissionCase{
		// The node brake, as pkg/nodebrake writes it.
		{name: "brake taint on own node", check: hasTaint(true),
			write: func(ctx context.Context) error { return taintPatch(ctx, asA, a, addTaint(brakeTaint)) }},
		{name: "brake taint lifted from own node", check: hasTaint(false),
			write: func(ctx context.Context) error {
				return taintPatch(ctx, asA, a, func(ts []corev1.Taint) []corev1.Taint {
					return slices.DeleteFunc(ts, func(x corev1.Taint) bool { return x.Key == brakeTaint.Key })
				})
			}},
		{name: "brake condition True on own node", check: condition(corev1.ConditionTrue),
			write: func(ctx context.Context) error {
				return conditionPatch(ctx, asA, a, brakeCondition(corev1.ConditionTrue, "EvictdPressureEpisode"))
			}},
		{name: "brake condition False on own node", check: condition(corev1.ConditionFalse),
			write: func(ctx context.Context) error {
				return conditionPatch(ctx, asA, a, brakeCondition(corev1.ConditionFalse, "EvictdNoPressure"))
			}},
		{name: "brake condition deleted from own node", check: condition("absent"),
			write: func(ctx context.Context) error {
				return conditionPatch(ctx, asA, a, map[string]any{"type": "EvictdMemoryPressure", "$patch": "delete"})
			}},

		// Anything else with A's pod-bound token.
		{name: "brake taint on another node", policy: nodeWritesPolicy, refusal: "bound to a pod on " + a + ", not on " + b,
			write: func(ctx context.Context) error { return taintPatch(ctx, asA, b, addTaint(brakeTaint)) }},
		{name: "brake condition on another node", policy: nodeWritesPolicy, refusal: "bound to a pod on " + a + ", not on " + b,
			write: func(ctx context.Context) error {
				return conditionPatch(ctx, asA, b, brakeCondition(corev1.ConditionTrue, "EvictdPressureEpisode"))
			}},
		{name: "label on own node", policy: nodeWritesPolicy, refusal: "labels",
			write: mergePatch(a, `{"metadata":{"labels":{"example.com/evictd":"x"}}}`)},
		{name: "annotation on own node", policy: nodeWritesPolicy, refusal: "annotations",
			write: mergePatch(a, `{"metadata":{"annotations":{"example.com/evictd":"x"}}}`)},
		{name: "label through nodes/status", policy: nodeWritesPolicy, refusal: "labels",
			write: mergePatch(a, `{"metadata":{"labels":{"example.com/evictd":"x"}}}`, "status")},
		{name: "owner reference on own node", policy: nodeWritesPolicy, refusal: "ownerReferences",
			write: mergePatch(a, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`)},
		{name: "other taint on own node", policy: nodeWritesPolicy, refusal: "does not start with evictd.io/",
			write: func(ctx context.Context) error {
				return taintPatch(ctx, asA, a, addTaint(corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule}))
			}},
		{name: "evictd.io taint not the brake's", policy: nodeWritesPolicy, refusal: "only the taints",
			write: func(ctx context.Context) error {
				return taintPatch(ctx, asA, a, addTaint(corev1.Taint{Key: "evictd.io/other", Effect: corev1.TaintEffectNoSchedule}))
			}},
		{name: "brake taint NoExecute", policy: nodeWritesPolicy, refusal: "NoSchedule or PreferNoSchedule",
			write: func(ctx context.Context) error {
				return taintPatch(ctx, asA, a, addTaint(corev1.Taint{Key: brakeTaint.Key, Effect: corev1.TaintEffectNoExecute}))
			}},
		{name: "unschedulable own node", policy: nodeWritesPolicy, refusal: "unschedulable",
			write: mergePatch(a, `{"spec":{"unschedulable":true}}`)},
		{name: "Ready condition changed", policy: nodeWritesPolicy, refusal: "only the Node conditions",
			write: func(ctx context.Context) error {
				return conditionPatch(ctx, asA, a, map[string]any{"type": "Ready", "status": "False", "reason": "EvictdSaysSo"})
			}},
		{name: "MemoryPressure condition added", policy: nodeWritesPolicy, refusal: "only the Node conditions",
			write: func(ctx context.Context) error {
				return conditionPatch(ctx, asA, a, map[string]any{"type": "MemoryPressure", "status": "True", "reason": "EvictdSaysSo"})
			}},
		// The whole list replaced (a merge patch of nodes/status at the
		// resourceVersion read), the same size, each condition one the
		// Node had: only counting each one tells the swap apart.
		{name: "MemoryPressure swapped for a second DiskPressure", policy: nodeWritesPolicy, refusal: "only the Node conditions",
			write: func(ctx context.Context) error {
				cur, err := c.Admin.CoreV1().Nodes().Get(ctx, a, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				conds := slices.Clone(cur.Status.Conditions)
				mem := slices.IndexFunc(conds, func(cd corev1.NodeCondition) bool { return cd.Type == corev1.NodeMemoryPressure })
				disk := slices.IndexFunc(conds, func(cd corev1.NodeCondition) bool { return cd.Type == corev1.NodeDiskPressure })
				if mem < 0 || disk < 0 {
					t.Fatalf("%s has no MemoryPressure or no DiskPressure condition: %v", a, conds)
				}
				conds[mem] = conds[disk]
				p := mustJSON(t, map[string]any{
					"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
					"status":   map[string]any{"conditions": conds},
				})
				_, err = nodes.Patch(ctx, a, types.MergePatchType, p, metav1.PatchOptions{}, "status")
				return err
			}},
		// The same swap of taints is refused before admission: the API
		// server keeps a Node's taints unique by key and effect.
		{name: "taint swapped for a second copy of another", policy: validation, refusal: "taints must be unique by key and effect pair",
			write: func(ctx context.Context) error {
				return taintPatch(ctx, asA, a, func(ts []corev1.Taint) []corev1.Taint {
					i := slices.IndexFunc(ts, func(x corev1.Taint) bool { return x.Key == kept[0].Key })
					j := slices.IndexFunc(ts, func(x corev1.Taint) bool { return x.Key == kept[1].Key })
					if i < 0 || j < 0 {
						t.Fatalf("%s lost its taints %v: %v", a, kept, ts)
					}
					ts[i] = ts[j]
					return ts
				})
			}},
		{name: "other status field", policy: nodeWritesPolicy, refusal: "capacity",
			write: mergePatch(a, `{"status":{"capacity":{"example.com/widgets":"1"}}}`, "status")},
		{name: "node created by server-side apply", policy: rbac, refusal: `cannot create resource "nodes"`,
			write: func(ctx context.Context) error {
				force := true
				_, err := nodes.Patch(ctx, "adm-ghost", types.ApplyPatchType,
					[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"adm-ghost"}}`),
					metav1.PatchOptions{FieldManager: "evictd-test", Force: &force})
				return err
			}},

		// The token minted for the ServiceAccount alone.
		{name: "unbound token: brake taint on a node", policy: nodeWritesPolicy, refusal: "no node-name claim",
			write: func(ctx context.Context) error { return taintPatch(ctx, unbound, a, addTaint(brakeTaint)) }},
		{name: "unbound token: brake condition on a node", policy: nodeWritesPolicy, refusal: "no node-name claim",
			write: func(ctx context.Context) error {
				return conditionPatch(ctx, unbound, a, brakeCondition(corev1.ConditionTrue, "EvictdPressureEpisode"))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			checkAdmission(t, tc.write(wctx), tc.policy, tc.refusal)
			if tc.check != nil && !t.Failed() {
				n, err := c.Admin.CoreV1().Nodes().Get(wctx, a, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, n)
			}
		})
	}
	// The refused writes changed nothing, and the allowed ones left the
	// Nodes as they found them (the brake set and lifted again).
	for _, n := range []string{a, b} {
		node, err := c.Admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		was := before[n]
		if !equality.Semantic.DeepEqual(node.Spec, was.Spec) || !maps.Equal(node.Labels, was.Labels) ||
			!maps.Equal(node.Annotations, was.Annotations) || len(node.OwnerReferences) > 0 ||
			!equality.Semantic.DeepEqual(node.Status.Conditions, was.Status.Conditions) {
			t.Errorf("%s changed:\nspec %+v\nwas  %+v\nlabels %v, was %v\nannotations %v, was %v\nowners %v\nconditions %+v\nwas        %+v",
				n, node.Spec, was.Spec, node.Labels, was.Labels, node.Annotations, was.Annotations, node.OwnerReferences,
				node.Status.Conditions, was.Status.Conditions)
		}
	}
	if _, err := c.Admin.CoreV1().Nodes().Get(ctx, "adm-ghost", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node adm-ghost: %v, want not found", err)
	}

	t.Run("evictions", func(t *testing.T) {
		ns := c.Namespace(t, "admission")
		pods := podtest.CreateRunning(t, c.Admin, 60*time.Second,
			podtest.New(ns, "on-b", podtest.OnNode(b), podtest.Run("evictd.test/workload:latest", nodesim.WorkloadCommand)),
			podtest.New(ns, "on-a", podtest.OnNode(a), podtest.Run("evictd.test/workload:latest", nodesim.WorkloadCommand)))
		evict := func(client kubernetes.Interface, p *corev1.Pod) error {
			ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return client.PolicyV1().Evictions(p.Namespace).Evict(ectx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		}

		err := evict(unbound, pods["on-a"])
		checkAdmission(t, err, evictionsPolicy, "no node-name claim")
		if p, gerr := c.Admin.CoreV1().Pods(ns).Get(ctx, "on-a", metav1.GetOptions{}); gerr != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod on-a after the refused eviction: %v (err %v), want it running, not terminating", deletionOf(p), gerr)
		}

		// The Eviction's admission sees the Eviction, not the pod it
		// names, and the shipped policies do not look the pod up: nothing
		// holds A's agent to A's pods, and it may evict on B. The opt-in
		// deploy/own-node-evictions.yaml does (TestAdmissionOwnNodeEvictions).
		if err := evict(asA, pods["on-b"]); err != nil {
			t.Errorf("evicting a pod on %s with %s's token: %v; want it allowed (the shipped policies cannot see the pod's node)", b, a, err)
		} else {
			t.Logf("residual risk, as documented: %s's pod-bound token evicted %s on %s (the Eviction's admission sees no node)", a, podKey(pods["on-b"]), b)
		}
		waitGone(t, c.Admin, pods["on-b"], 60*time.Second)
	})
	t.Logf("took %s (cluster start %s)", time.Since(start).Round(time.Millisecond), c.StartDuration.Round(time.Millisecond))
}

// waitPolicies waits until the API server enforces both policies: policies
// created a moment ago reach admission through an informer. Each probe is
// a server-side dry run, which admission sees and nothing stores.
func waitPolicies(t *testing.T, c *framework.Cluster, bound, unbound kubernetes.Interface, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, last = bound.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/probe":"x"}}}`), dry)
		if !isPolicyRefusal(last, nodeWritesPolicy) {
			return false, nil
		}
		last = unbound.PolicyV1().Evictions(c.EvictdServiceAccount.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: "evictd-" + node, Namespace: c.EvictdServiceAccount.Namespace},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
		return isPolicyRefusal(last, evictionsPolicy), nil
	})
	if err != nil {
		t.Fatalf("the admission policies are not in force after 30 s (last answer: %v)", last)
	}
}

// isPolicyRefusal reports whether err is an admission policy's refusal:
// Forbidden (the policies' reason) or Invalid (a validation's default),
// naming the policy.
func isPolicyRefusal(err error, policy string) bool {
	return (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) &&
		strings.Contains(err.Error(), fmt.Sprintf("ValidatingAdmissionPolicy '%s'", policy))
}

// checkAdmission asserts err is the outcome wanted: nil when policy is
// empty, else the policy's refusal (or RBAC's 403, for rbac; the object's
// validation's 422, for validation) carrying refusal in its message.
func checkAdmission(t *testing.T, err error, policy, refusal string) {
	t.Helper()
	if policy == "" {
		if err != nil {
			t.Errorf("want allowed, got %v", err)
		}
		return
	}
	if err == nil {
		t.Errorf("want refused by %s, but it was allowed", policy)
		return
	}
	var ok bool
	switch policy {
	case rbac:
		ok = apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
	case validation:
		ok = apierrors.IsInvalid(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
	default:
		ok = isPolicyRefusal(err, policy)
	}
	switch {
	case !ok:
		var status apierrors.APIStatus
		code := int32(0)
		if errors.As(err, &status) {
			code = status.Status().Code
		}
		t.Errorf("want refused by %s, got %d: %v", policy, code, err)
	case !strings.Contains(err.Error(), refusal):
		t.Errorf("refused by %s, but the message does not say %q: %v", policy, refusal, err)
	default:
		t.Logf("refused as wanted: %v", err)
	}
}

// patchTaints is the brake's taint write as client: the node's whole taint
// list (read with admin, as evictd reads it from its informer) with change
// applied, conditional on the resourceVersion read.
func patchTaints(ctx context.Context, t *testing.T, admin, client kubernetes.Interface, node string, change func([]corev1.Taint) []corev1.Taint) error {
	t.Helper()
	cur, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := mustJSON(t, map[string]any{
		"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
		"spec":     map[string]any{"taints": change(slices.Clone(cur.Spec.Taints))},
	})
	_, err = client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, p, metav1.PatchOptions{})
	return err
}

// addTaint and removeTaint are changes for patchTaints.
func addTaint(tn corev1.Taint) func([]corev1.Taint) []corev1.Taint {
	return func(ts []corev1.Taint) []corev1.Taint { return append(ts, tn) }
}

func removeTaint(key string) func([]corev1.Taint) []corev1.Taint {
	return func(ts []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(ts, func(x corev1.Taint) bool { return x.Key == key })
	}
}

// patchCondition is the brake's condition write as client: a strategic
// merge of cond into the node's status conditions.
func patchCondition(ctx context.Context, t *testing.T, client kubernetes.Interface, node string, cond map[string]any) error {
	t.Helper()
	p := mustJSON(t, map[string]any{"status": map[string]any{"conditions": []any{cond}}})
	_, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, p, metav1.PatchOptions{}, "status")
	return err
}

// nodesAB starts the simulated nodes <prefix>-a and <prefix>-b of the
// admission tests and mints A's pod-bound evictd token: a client with it,
// and a kubeconfig file for an evictd process on A.
func nodesAB(t *testing.T, c *framework.Cluster, prefix string) (nodeA, nodeB *nodesim.Node, asA kubernetes.Interface, kubeconfigA string) {
	t.Helper()
	nodeA = c.StartNode(t, nodesim.Options{Name: prefix + "-a", MemoryBytes: nodeMemory})
	nodeB = c.StartNode(t, nodesim.Options{Name: prefix + "-b", MemoryBytes: nodeMemory})
	cfgA, kubeconfigA := c.EvictdNodeToken(t, nodeA.Name)
	asA, err := kubernetes.NewForConfig(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	return nodeA, nodeB, asA, kubeconfigA
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ownNodePolicy is the opt-in policy of deploy/own-node-evictions.yaml,
// and its binding's name.
const ownNodePolicy = "evictd-own-node-evictions"

// TestAdmissionOwnNodeEvictions: deploy/own-node-evictions.yaml, applied
// as a user would on top of the shipped policies, closes the residual risk
// TestAdmissionNodeWrites shows. On one cluster with simulated nodes A and
// B, with A's pod-bound token: evicting a running pod bound to B is
// refused by evictd-own-node-evictions, naming both nodes, and the pod
// keeps running; evicting a pod bound to A is allowed and the pod
// terminates; a pod of the same name on A in another namespace may be
// evicted (the params are the pods of the Eviction's namespace only); an
// unscheduled pod may not ("on no node"). The token minted for the
// ServiceAccount alone is refused by this policy too (before
// evictd-evictions is applied, so that the refusal is this policy's).
// The header's fail-closed case holds for anyone: in a namespace without
// pods the admin's eviction is refused ("no params found"), not answered
// 404. Last, evictd itself, with A's token, under memory pressure on A,
// evicts its victim there: the policy lets the agent do its work.
func TestAdmissionOwnNodeEvictions(t *testing.T) {
	start := time.Now()
	c := framework.Start(t)
	nodeA, nodeB, asA, kubeconfigA := nodesAB(t, c, "own")
	a, b := nodeA.Name, nodeB.Name
	ctx := context.Background()
	evict := func(client kubernetes.Interface, ns, name string) error {
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return client.PolicyV1().Evictions(ns).Evict(ectx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	stillRunning := func(t *testing.T, p *corev1.Pod) {
		t.Helper()
		got, err := c.Admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil {
			t.Errorf("pod %s after the refused eviction: %v (err %v), want it running, not terminating", podKey(p), deletionOf(got), err)
		}
	}

	ns := c.Namespace(t, "own-node")
	twinNS := c.Namespace(t, "own-node-twin")
	workload := podtest.Run("evictd.test/workload:latest", nodesim.WorkloadCommand)
	pods := podtest.CreateRunning(t, c.Admin, 60*time.Second,
		podtest.New(ns, "on-b", podtest.OnNode(b), workload, podtest.Grace(1)),
		podtest.New(ns, "on-a", podtest.OnNode(a), workload, podtest.Grace(1)))
	// The same name as the pod on B, but on A, in another namespace.
	twin := podtest.CreateRunning(t, c.Admin, 60*time.Second,
		podtest.New(twinNS, "on-b", podtest.OnNode(a), workload, podtest.Grace(1)))["on-b"]
	// No scheduler runs: a pod without a node stays unscheduled.
	unscheduled, err := c.Admin.CoreV1().Pods(ns).Create(ctx, podtest.New(ns, "unscheduled", workload), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	applied := applyPolicyFile(t, c, "own-node-evictions.yaml", ownNodePolicy, "ValidatingAdmissionPolicy")
	// A's token on B's pod: evictd-evictions (not applied yet) would let
	// it through.
	waitEvictionRefused(t, asA, ns, "on-b", ownNodePolicy)
	t.Logf("%s in force %s after the apply", ownNodePolicy, time.Since(applied).Round(time.Millisecond))

	t.Run("unbound token", func(t *testing.T) {
		checkAdmission(t, evict(c.EvictdClient, ns, "on-a"), ownNodePolicy, "no node-name claim")
		stillRunning(t, pods["on-a"])
	})

	// With the shipped policies too, as installed. The API server tries
	// policies in no fixed order and names only the first that refuses:
	// the probe is the unbound token on a pod the namespace does not
	// have, which ownNodePolicy lets through (no param has its name).
	if err := c.EnforceEvictionPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	waitEvictionRefused(t, c.EvictdClient, ns, "absent", evictionsPolicy)

	t.Run("pod on another node", func(t *testing.T) {
		checkAdmission(t, evict(asA, ns, "on-b"), ownNodePolicy,
			fmt.Sprintf("pod %s/on-b is on %s, the token is bound to a pod on %s", ns, b, a))
		stillRunning(t, pods["on-b"])
	})
	t.Run("unscheduled pod", func(t *testing.T) {
		checkAdmission(t, evict(asA, ns, unscheduled.Name), ownNodePolicy,
			fmt.Sprintf("pod %s is on no node, the token is bound to a pod on %s", podKey(unscheduled), a))
		stillRunning(t, unscheduled)
	})
	t.Run("namespace without pods", func(t *testing.T) {
		// Anyone's eviction, the admin's here: the params are collected
		// before matchConditions are evaluated.
		empty := c.Namespace(t, "own-node-empty")
		checkAdmission(t, evict(c.Admin, empty, "ghost"), ownNodePolicy, "no params found")
	})
	t.Run("pod on own node", func(t *testing.T) {
		checkAdmission(t, evict(asA, ns, "on-a"), "", "")
		waitGone(t, c.Admin, pods["on-a"], 30*time.Second)
	})
	t.Run("same name on own node in another namespace", func(t *testing.T) {
		checkAdmission(t, evict(asA, twinNS, "on-b"), "", "")
		waitGone(t, c.Admin, twin, 30*time.Second)
		stillRunning(t, pods["on-b"])
	})
	t.Run("evictd on its node", func(t *testing.T) {
		began := time.Now()
		hog := createRunning(t, c.Admin, podSpec{name: "hog", holdMiB: 800, grace: 1}.pod(ns, a))["hog"]
		waitHolding(t, nodeA, hog)
		e := startEvictdWith(t, c, nodeA, evictdSetup{kubeconfig: kubeconfigA}, memoryFlags...)
		evs := waitEvictions(t, e, 1, 30*time.Second)
		if evs[0].Pod != podKey(hog) {
			t.Errorf("evictd evicted %s; want %s, the only pod it may pick on %s", evs[0].Pod, podKey(hog), a)
		}
		waitGone(t, c.Admin, hog, 30*time.Second)
		m := e.scrape()
		for _, result := range []string{metrics.ResultRefused, metrics.ResultError} {
			if got := m.Sum("evictd_evictions_total", map[string]string{"result": result}); got > 0 {
				t.Errorf("evictd_evictions_total{result=%s} = %v; want 0 with the policy in force", result, got)
			}
		}
		t.Logf("evictd evicted %s on %s, %s after the hog was created", evs[0].Pod, a, evs[0].TS.Sub(began).Round(time.Millisecond))
	})
	t.Logf("took %s (cluster start %s)", time.Since(start).Round(time.Millisecond), c.StartDuration.Round(time.Millisecond))
}

// waitEvictionRefused waits until the API server enforces policy: a
// server-side dry run of client's eviction of pod ns/name is refused by it.
// Policies reach admission through an informer, a moment after their
// create.
func waitEvictionRefused(t *testing.T, client kubernetes.Interface, ns, name, policy string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
		return isPolicyRefusal(last, policy), nil
	})
	if err != nil {
		t.Fatalf("%s is not in force after 30 s (last answer to the eviction of %s/%s: %v)", policy, ns, name, last)
	}
}

// applyPolicyFile applies deploy/<file>, checks that it holds only the
// policy name of kind and its binding, and returns when it was applied:
// the API server puts a policy in force some time after (its informer).
func applyPolicyFile(t *testing.T, c *framework.Cluster, file, name, kind string) time.Time {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	objs, err := c.ApplyFile(context.Background(), filepath.Join(root, "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		if o.GetName() != name {
			t.Errorf("deploy/%s has %s %s; want only the policy %s and its binding", file, o.GetKind(), o.GetName(), name)
		}
		kinds = append(kinds, o.GetKind())
	}
	if want := []string{kind, kind + "Binding"}; !slices.Equal(kinds, want) {
		t.Fatalf("deploy/%s has %v; want %v", file, kinds, want)
	}
	return applied
}
