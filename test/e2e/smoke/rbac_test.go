// SPDX-License-Identifier: Apache-2.0

package smoke

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// access is one permission: verb on group/resource[/subresource].
type access struct {
	verb, group, resource, subresource string
	// why names the code path that needs it, or why it is not granted.
	why string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	return a.verb + " " + r
}

// usedByCode is every API call evictd makes with the shipped manifest (a
// grep of pkg/ and cmd/ for client calls and informers): the ClusterRole of
// deploy/daemonset.yaml must grant exactly these, cluster-wide.
var usedByCode = []access{
	{verb: "list", resource: "pods", why: "pkg/agent/podwatch: pod informer, field selector spec.nodeName"},
	{verb: "watch", resource: "pods", why: "pkg/agent/podwatch: pod informer, field selector spec.nodeName"},
	{verb: "create", resource: "pods", subresource: "eviction", why: "pkg/evict: the Eviction API, dry run included"},
	{verb: "create", group: "events.k8s.io", resource: "events", why: "pkg/evict: EventWriter (events.k8s.io/v1, created once, never patched)"},
	{verb: "list", group: "scheduling.k8s.io", resource: "priorityclasses", why: "pkg/agent/podwatch: PriorityClass informer"},
	{verb: "watch", group: "scheduling.k8s.io", resource: "priorityclasses", why: "pkg/agent/podwatch: PriorityClass informer"},
	{verb: "list", resource: "nodes", why: "pkg/agent/podwatch: Node informer, field selector metadata.name, for status.images"},
	{verb: "watch", resource: "nodes", why: "pkg/agent/podwatch: Node informer, field selector metadata.name, for status.images"},
	{verb: "list", resource: "namespaces", why: "pkg/agent/podwatch: namespace informer, for priority groups with a namespaceSelector"},
	{verb: "watch", resource: "namespaces", why: "pkg/agent/podwatch: namespace informer, for priority groups with a namespaceSelector"},
	{verb: "patch", resource: "nodes", why: "pkg/nodebrake: evictd's taints on its own Node (the admission policy evictd-node-writes bounds it)"},
	{verb: "patch", resource: "nodes", subresource: "status", why: "pkg/nodebrake: evictd's conditions on its own Node (the admission policy evictd-node-writes bounds it)"},
}

// notGranted is what the code does not use (or uses only behind an opt-in
// the shipped manifest leaves out): each must be denied.
var notGranted = []access{
	{verb: "get", resource: "nodes", why: "reads come from the informer's cache"},
	{verb: "update", resource: "nodes", why: "the brake patches; an update would write back fields this client does not know"},
	{verb: "update", resource: "nodes", subresource: "status", why: "the brake patches its own conditions only"},
	{verb: "delete", resource: "nodes", why: "never"},
	{verb: "delete", resource: "pods", why: "only --pdb-policy=best-effort, an opt-in the manifest does not grant"},
	{verb: "deletecollection", resource: "pods", why: "never"},
	{verb: "get", resource: "pods", why: "reads come from the informer's cache"},
	{verb: "create", resource: "pods", why: "never"},
	{verb: "patch", resource: "pods", why: "never"},
	{verb: "patch", resource: "pods", subresource: "status", why: "never"},
	{verb: "patch", group: "events.k8s.io", resource: "events", why: "Events are created once, never patched"},
	{verb: "create", resource: "events", why: "only events.k8s.io/v1 Events are written"},
	{verb: "patch", resource: "events", why: "only events.k8s.io/v1 Events are written"},
	{verb: "get", group: "scheduling.k8s.io", resource: "priorityclasses", why: "reads come from the informer's cache"},
	{verb: "create", group: "scheduling.k8s.io", resource: "priorityclasses", why: "never"},
	{verb: "get", resource: "namespaces", why: "reads come from the informer's cache"},
	{verb: "patch", resource: "namespaces", why: "never"},
	{verb: "list", resource: "secrets", why: "never"},
	{verb: "get", resource: "secrets", why: "never"},
	{verb: "list", resource: "configmaps", why: "the config is a file"},
	{verb: "list", group: "policy", resource: "poddisruptionbudgets", why: "the Eviction API checks PDBs server-side"},
	{verb: "create", resource: "serviceaccounts", subresource: "token", why: "never"},
	{verb: "get", group: "coordination.k8s.io", resource: "leases", why: "the node lease is granted by a Role in evictd's own namespace only (test/e2e/agent TestNodeLeaseRBAC)"},
}

// clusterRoleAccess expands the manifest's ClusterRole evictd, the agent's
// own (the others are the readers of its secure port, bound to no one),
// into one access per verb and resource, failing on anything that cannot be
// expanded exactly (wildcards, resourceNames, non-resource URLs,
// aggregation).
func clusterRoleAccess(t *testing.T) map[string]bool {
	t.Helper()
	var role *rbacv1.ClusterRole
	for _, obj := range readManifest(t) {
		if obj.GetKind() != "ClusterRole" || obj.GetName() != "evictd" {
			continue
		}
		if role != nil {
			t.Fatal("the manifest has more than one ClusterRole evictd")
		}
		role = &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, role, true); err != nil {
			t.Fatalf("ClusterRole does not decode strictly: %v", err)
		}
	}
	if role == nil {
		t.Fatal("no ClusterRole in the manifest")
	}
	if role.AggregationRule != nil {
		t.Error("the ClusterRole aggregates other roles: its grants are not in the file")
	}
	got := map[string]bool{}
	for i, r := range role.Rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("rule %d: nonResourceURLs or resourceNames: %+v", i, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" || strings.HasSuffix(res, "/*") {
						t.Errorf("rule %d grants a wildcard: %+v", i, r)
					}
					name, sub, _ := strings.Cut(res, "/")
					got[access{verb: v, group: g, resource: name, subresource: sub}.String()] = true
				}
			}
		}
	}
	return got
}

// TestClusterRoleIsWhatTheCodeUses checks without a cluster that the shipped
// ClusterRole grants exactly usedByCode: nothing missing, nothing more.
func TestClusterRoleIsWhatTheCodeUses(t *testing.T) {
	got := clusterRoleAccess(t)
	want := map[string]bool{}
	for _, a := range usedByCode {
		want[a.String()] = true
		if !got[a.String()] {
			t.Errorf("the ClusterRole does not grant %s (used by %s)", a, a.why)
		}
	}
	var extra []string
	for a := range got {
		if !want[a] {
			extra = append(extra, a)
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 {
		t.Errorf("the ClusterRole grants what no code uses: %s", strings.Join(extra, ", "))
	}
	for _, a := range notGranted {
		if want[a.String()] {
			t.Errorf("%s is in both usedByCode and notGranted", a)
		}
	}
}

// clusterScoped are the resources of usedByCode and notGranted that live
// outside namespaces.
var clusterScoped = map[string]bool{"nodes": true, "namespaces": true, "priorityclasses": true}

// testAccessReviews asks the API server, as evictd's ServiceAccount (a
// SelfSubjectAccessReview with its own token), whether each permission the
// code uses is allowed cluster-wide and each one it does not use is denied,
// cluster-wide and in a namespace of its own.
func testAccessReviews(t *testing.T, c *framework.Cluster, ns string) {
	review := func(t *testing.T, cs kubernetes.Interface, a access, namespace string) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview %s: %v", a, err)
		}
		return r.Status.Allowed
	}
	for _, a := range usedByCode {
		t.Run("allowed: "+a.String(), func(t *testing.T) {
			if !review(t, c.EvictdClient, a, metav1.NamespaceAll) {
				t.Errorf("%s is denied cluster-wide (used by %s)", a, a.why)
			}
		})
	}
	for _, a := range notGranted {
		t.Run("denied: "+a.String(), func(t *testing.T) {
			scopes := []string{metav1.NamespaceAll}
			if !clusterScoped[a.resource] {
				scopes = append(scopes, ns)
			}
			for _, scope := range scopes {
				if review(t, c.EvictdClient, a, scope) {
					t.Errorf("%s is allowed (namespace %q); it should not be: %s", a, scope, a.why)
				}
			}
			// The admin is allowed the same, so the denial is RBAC's
			// answer to a well-formed question.
			if !review(t, c.Admin, a, metav1.NamespaceAll) {
				t.Errorf("admin control: %s is denied to the admin too", a)
			}
		})
	}
}

// testRBAC makes real requests with evictd's ServiceAccount token (RBAC
// objects applied from deploy/daemonset.yaml) and checks each is allowed or
// forbidden as the least-privilege design says; then testAccessReviews
// covers every permission the code uses, and more denials.
func testRBAC(t *testing.T, c *framework.Cluster, node *nodesim.Node, ns string) {
	t.Run("access reviews", func(t *testing.T) { testAccessReviews(t, c, ns) })

	target := createRunning(t, c.Admin, podSpec{name: "rbac-target", args: []string{"--hold-mib=4"}}.build(ns, node.Name))
	t.Cleanup(func() {
		_ = c.Admin.CoreV1().Pods(ns).Delete(context.Background(), target.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	onNode := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String()}
	thisNode := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node.Name).String()}
	dryRun := []string{metav1.DryRunAll}
	now := metav1.NewMicroTime(time.Now())
	watchOnce := func(w interface{ Stop() }, err error) error {
		if err == nil {
			w.Stop()
		}
		return err
	}

	tests := []struct {
		name    string
		allowed bool
		call    func(ctx context.Context, cs kubernetes.Interface) error
	}{
		// What evictd needs.
		{"list pods on its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			l, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, onNode)
			if err == nil && len(l.Items) == 0 {
				return fmt.Errorf("list on node %s found no pods", node.Name)
			}
			return err
		}},
		{"watch pods on its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			return watchOnce(cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, onNode))
		}},
		{"create pods/eviction (dry run)", true, func(ctx context.Context, cs kubernetes.Interface) error {
			return cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Name: target.Name, Namespace: ns},
				DeleteOptions: &metav1.DeleteOptions{DryRun: dryRun},
			})
		}},
		{"create an events.k8s.io Event", true, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "evictd-", Namespace: ns},
				EventTime:  now, Reason: "Evicted", Action: "Evict", Type: corev1.EventTypeWarning,
				Note: "smoke test", ReportingController: "evictd.io/evictd", ReportingInstance: "evictd-" + node.Name,
				Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: target.Name, UID: target.UID, APIVersion: "v1"},
			}, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"list priorityclasses", true, func(ctx context.Context, cs kubernetes.Interface) error {
			l, err := cs.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
			if err == nil && len(l.Items) == 0 {
				return fmt.Errorf("no PriorityClasses listed; the built-in ones exist")
			}
			return err
		}},
		{"watch priorityclasses", true, func(ctx context.Context, cs kubernetes.Interface) error {
			return watchOnce(cs.SchedulingV1().PriorityClasses().Watch(ctx, metav1.ListOptions{}))
		}},
		{"list its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			l, err := cs.CoreV1().Nodes().List(ctx, thisNode)
			if err == nil && len(l.Items) != 1 {
				return fmt.Errorf("%d nodes listed; want %s", len(l.Items), node.Name)
			}
			return err
		}},
		{"watch its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			return watchOnce(cs.CoreV1().Nodes().Watch(ctx, thisNode))
		}},
		{"list namespaces", true, func(ctx context.Context, cs kubernetes.Interface) error {
			l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err == nil && !slices.ContainsFunc(l.Items, func(n corev1.Namespace) bool { return n.Name == ns }) {
				return fmt.Errorf("namespace %s not listed", ns)
			}
			return err
		}},
		{"watch namespaces", true, func(ctx context.Context, cs kubernetes.Interface) error {
			return watchOnce(cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{}))
		}},

		// What it must not do.
		{"get a pod", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, target.Name, metav1.GetOptions{})
			return err
		}},
		{"delete a pod directly", false, func(ctx context.Context, cs kubernetes.Interface) error {
			return cs.CoreV1().Pods(ns).Delete(ctx, target.Name, metav1.DeleteOptions{DryRun: dryRun})
		}},
		{"delete a collection of pods", false, func(ctx context.Context, cs kubernetes.Interface) error {
			return cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{DryRun: dryRun}, metav1.ListOptions{})
		}},
		{"create a pod", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, podSpec{name: "rbac-new"}.build(ns, node.Name), metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"patch a pod", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods(ns).Patch(ctx, target.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"patch pod status", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods(ns).Patch(ctx, target.Name, types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{DryRun: dryRun}, "status")
			return err
		}},
		{"create a core Event", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{GenerateName: "evictd-", Namespace: ns},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: target.Name, UID: target.UID},
				Reason:         "Evicted", Message: "smoke test", Type: corev1.EventTypeWarning,
				Source: corev1.EventSource{Component: "evictd"},
			}, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"get its node", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			return err
		}},
		{"get a priorityclass", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{})
			return err
		}},
		{"get a namespace", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		}},
		{"read a Secret", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"read ConfigMaps", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"patch a node", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{"patch node status", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(`{"status":{"phase":"x"}}`), metav1.PatchOptions{DryRun: dryRun}, "status")
			return err
		}},
		{"list PodDisruptionBudgets", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a PriorityClass", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.SchedulingV1().PriorityClasses().Create(ctx, newPriorityClass(), metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{"mint a ServiceAccount token", false, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ServiceAccounts(c.EvictdServiceAccount.Namespace).CreateToken(ctx, c.EvictdServiceAccount.Name,
				&authenticationv1.TokenRequest{}, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tt.call(ctx, c.EvictdClient)
			switch {
			case tt.allowed && err != nil:
				t.Errorf("want allowed, got %v", err)
			case !tt.allowed && !apierrors.IsForbidden(err):
				t.Errorf("want 403 Forbidden, got %v", err)
			}
		})
	}

	// The same calls with the admin identity succeed, so a 403 above is
	// RBAC speaking and not a malformed request.
	for _, tt := range tests {
		if tt.allowed {
			continue
		}
		t.Run("admin control: "+tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tt.call(ctx, c.Admin); apierrors.IsForbidden(err) {
				t.Errorf("admin also forbidden: %v", err)
			}
		})
	}
}
