// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
)

// cleanupPolicy is deploy/daemonset.yaml's admission policy for evictd
// cleanup's ServiceAccount (the chart's <release>-<namespace>-cleanup-node-writes).
const cleanupPolicy = "evictd-cleanup-node-writes"

// TestAdmissionCleanupNodeWrites: the ServiceAccount evictd cleanup runs as
// (deploy/daemonset.yaml's evictd-cleanup, its RBAC and its policy, as
// every test cluster applies them) may take evictd's brake off any Node,
// with the writes pkg/cleanup makes: remove evictd.io/ taints, set evictd's
// conditions to False, delete them; on two Nodes, with a token bound to no
// pod (the Job runs anywhere). Everything else is refused by
// evictd-cleanup-node-writes with the message of the validation it broke:
// adding or changing an evictd.io/ taint, removing another taint, a label,
// unschedulable, an evictd condition set True (or added True), a change of
// the kubelet's conditions.
func TestAdmissionCleanupNodeWrites(t *testing.T) {
	c := framework.Start(t)
	ctx := context.Background()
	brake := corev1.Taint{Key: "evictd.io/memory-pressure", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	// Two Nodes with evictd's brake on and another taint; no kubelet: the
	// policy sees Node objects only.
	var names []string
	for _, name := range []string{"cln-a", "cln-b"} {
		n, err := c.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{other, brake}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: "EvictdMemoryPressure", Status: corev1.ConditionTrue, Reason: "EvictdPressureEpisode", LastHeartbeatTime: now, LastTransitionTime: now},
		}
		if _, err := c.Admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}

	sa := c.EvictdServiceAccount
	tr, err := c.Admin.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, "evictd-cleanup", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s/evictd-cleanup, evictd cleanup's ServiceAccount in deploy/daemonset.yaml: %v", sa.Namespace, err)
	}
	cfg := rest.CopyConfig(c.EvictdConfig)
	cfg.BearerToken = tr.Status.Token
	cleanup, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The policy reaches admission through an informer: wait until a label
	// write (a dry run) is refused by it.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = cleanup.CoreV1().Nodes().Patch(ctx, names[0], types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/probe":"x"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return isPolicyRefusal(last, cleanupPolicy), nil
	}); err != nil {
		t.Fatalf("%s is not in force after 30 s (last answer: %v)", cleanupPolicy, last)
	}

	taints := func(node string, change func([]corev1.Taint) []corev1.Taint) error {
		return patchTaints(ctx, t, c.Admin, cleanup, node, change)
	}
	condition := func(node string, cond map[string]any) error {
		return patchCondition(ctx, t, cleanup, node, cond)
	}
	brakeCondition := func(typ string, status corev1.ConditionStatus) map[string]any {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		return map[string]any{"type": typ, "status": status, "reason": "Test", "message": "test", "lastHeartbeatTime": now, "lastTransitionTime": now}
	}
	a := names[0]
	for _, tc := range []admissionCase{
		{name: "add an evictd.io taint", policy: cleanupPolicy, refusal: "may only remove evictd.io/ taints",
			write: func(ctx context.Context) error {
				return taints(a, addTaint(corev1.Taint{Key: "evictd.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule}))
			}},
		{name: "change an evictd.io taint's effect", policy: cleanupPolicy, refusal: "may only remove evictd.io/ taints",
			write: func(ctx context.Context) error {
				return taints(a, func(ts []corev1.Taint) []corev1.Taint {
					return append(removeTaint(brake.Key)(ts), corev1.Taint{Key: brake.Key, Effect: corev1.TaintEffectPreferNoSchedule})
				})
			}},
		{name: "remove another taint", policy: cleanupPolicy, refusal: "whose key does not start with evictd.io/",
			write: func(ctx context.Context) error { return taints(a, removeTaint(other.Key)) }},
		{name: "a label", policy: cleanupPolicy, refusal: "labels, annotations",
			write: func(ctx context.Context) error {
				_, err := cleanup.CoreV1().Nodes().Patch(ctx, a, types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/x":"y"}}}`), metav1.PatchOptions{})
				return err
			}},
		{name: "unschedulable", policy: cleanupPolicy, refusal: "no field of a Node's spec but taints",
			write: func(ctx context.Context) error {
				_, err := cleanup.CoreV1().Nodes().Patch(ctx, a, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
				return err
			}},
		{name: "the kubelet's Ready condition", policy: cleanupPolicy, refusal: "change or remove only the Node conditions",
			write: func(ctx context.Context) error { return condition(a, brakeCondition("Ready", corev1.ConditionFalse)) }},
		// Counted as a multiset: the kubelet's Ready swapped for a second
		// copy of another condition keeps the size and every entry "in" the
		// old list.
		{name: "the kubelet's Ready swapped for a duplicate", policy: cleanupPolicy, refusal: "change or remove only the Node conditions",
			write: func(ctx context.Context) error {
				if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, a, types.StrategicMergePatchType,
					mustJSON(t, map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "NetworkUnavailable", "status": "False", "reason": "Test"}}}}),
					metav1.PatchOptions{}, "status"); err != nil {
					t.Fatal(err)
				}
				cur, err := c.Admin.CoreV1().Nodes().Get(ctx, a, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var net corev1.NodeCondition
				conds := slices.DeleteFunc(slices.Clone(cur.Status.Conditions), func(x corev1.NodeCondition) bool {
					if x.Type == "NetworkUnavailable" {
						net = x
					}
					return x.Type == corev1.NodeReady
				})
				p := mustJSON(t, []any{map[string]any{"op": "replace", "path": "/status/conditions", "value": append(conds, net)}})
				_, err = cleanup.CoreV1().Nodes().Patch(ctx, a, types.JSONPatchType, p, metav1.PatchOptions{}, "status")
				return err
			}},
		{name: "evictd's disk condition added True", policy: cleanupPolicy, refusal: "only to False",
			write: func(ctx context.Context) error {
				return condition(a, brakeCondition("EvictdDiskPressure", corev1.ConditionTrue))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkAdmission(t, tc.write(ctx), tc.policy, tc.refusal) })
	}
	// What pkg/cleanup writes, on each Node.
	for _, n := range names {
		checkAdmission(t, taints(n, removeTaint(brake.Key)), "", "")
		checkAdmission(t, condition(n, brakeCondition("EvictdMemoryPressure", corev1.ConditionFalse)), "", "")
		// False, then True again: refused.
		checkAdmission(t, condition(n, brakeCondition("EvictdMemoryPressure", corev1.ConditionTrue)), cleanupPolicy, "only to False")
		checkAdmission(t, condition(n, map[string]any{"type": "EvictdMemoryPressure", "$patch": "delete"}), "", "")
		got, err := c.Admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The API server adds node.kubernetes.io/not-ready to a new Node
		// (TaintNodesByCondition); it stays, as every taint not evictd's.
		brakeLeft := slices.ContainsFunc(got.Spec.Taints, func(x corev1.Taint) bool { return x.Key == brake.Key })
		otherKept := slices.ContainsFunc(got.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&other) && x.Value == other.Value })
		evictdCond := slices.ContainsFunc(got.Status.Conditions, func(x corev1.NodeCondition) bool { return x.Type == "EvictdMemoryPressure" })
		ready := slices.ContainsFunc(got.Status.Conditions, func(x corev1.NodeCondition) bool { return x.Type == corev1.NodeReady })
		if brakeLeft || !otherKept || evictdCond || !ready {
			t.Errorf("%s after the cleanup's writes: taints %v, conditions %v; want %s kept, evictd's taint and condition gone, Ready kept",
				n, got.Spec.Taints, got.Status.Conditions, other.ToString())
		}
	}
}
