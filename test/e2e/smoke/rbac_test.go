package smoke

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// testRBAC makes real requests with evictd's ServiceAccount token (RBAC
// objects applied from deploy/daemonset.yaml) and checks each is allowed or
// forbidden as the least-privilege design says.
func testRBAC(t *testing.T, c *framework.Cluster, node *nodesim.Node, ns string) {
	target := createRunning(t, c.Admin, podSpec{name: "rbac-target", args: []string{"--hold-mib=4"}}.build(ns, node.Name))
	t.Cleanup(func() {
		_ = c.Admin.CoreV1().Pods(ns).Delete(context.Background(), target.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	onNode := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String()}
	thisNode := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node.Name).String()}
	dryRun := []string{metav1.DryRunAll}
	now := metav1.NewMicroTime(time.Now())

	tests := []struct {
		name    string
		allowed bool
		call    func(ctx context.Context, cs kubernetes.Interface) error
	}{
		// What evictd needs.
		{"list pods on its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			l, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, onNode)
			if err == nil && len(l.Items) == 0 {
				t.Errorf("list on node %s found no pods", node.Name)
			}
			return err
		}},
		{"watch pods on its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			w, err := cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, onNode)
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get a pod", true, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, target.Name, metav1.GetOptions{})
			return err
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
			}, metav1.CreateOptions{})
			return err
		}},
		{"create a core Event", true, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{GenerateName: "evictd-", Namespace: ns},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: target.Name, UID: target.UID},
				Reason:         "Evicted", Message: "smoke test", Type: corev1.EventTypeWarning,
				Source: corev1.EventSource{Component: "evictd"},
			}, metav1.CreateOptions{})
			return err
		}},
		{"get its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			return err
		}},
		{"list and watch its node", true, func(ctx context.Context, cs kubernetes.Interface) error {
			if _, err := cs.CoreV1().Nodes().List(ctx, thisNode); err != nil {
				return err
			}
			w, err := cs.CoreV1().Nodes().Watch(ctx, thisNode)
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"list priorityclasses", true, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get a priorityclass", true, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{})
			return err
		}},

		// What it must not do.
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
