// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestChartCleanupHook: helm uninstall runs evictd cleanup first, in the
// chart's one hook, a pre-delete Job, which is deploy/cleanup/job.yaml's
// Job field for field but for what only a release has (Helm's labels, the
// hook's annotations); its identity and admission policy are release
// objects, not hooks (TestChartDefaultsEqualManifest holds them equal to
// deploy/daemonset.yaml's), so that they exist and are in force before the
// Job runs. cleanup.enabled false renders none of it, and the kustomize
// step's image is the one deploy/ sets.
func TestChartCleanupHook(t *testing.T) {
	rel, err := dryRunInstall(t, defaultRelease, defaultNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Hooks) != 1 {
		t.Fatalf("the chart has %d hooks; want 1, the cleanup Job", len(rel.Hooks))
	}
	hook := rel.Hooks[0]
	if got := []string{string(hook.Kind), hook.Name}; !slices.Equal(got, []string{"Job", "evictd-cleanup"}) {
		t.Fatalf("the chart's hook is %v; want Job evictd-cleanup", got)
	}
	if len(hook.Events) != 1 || hook.Events[0] != "pre-delete" {
		t.Errorf("the cleanup Job runs at %v; want pre-delete only", hook.Events)
	}
	var deletePolicies []string
	for _, p := range hook.DeletePolicies {
		deletePolicies = append(deletePolicies, string(p))
	}
	if want := []string{"before-hook-creation", "hook-succeeded"}; !slices.Equal(deletePolicies, want) {
		t.Errorf("the cleanup Job's hook-delete-policy is %v; want %v", deletePolicies, want)
	}
	objs, err := framework.ParseManifest(strings.NewReader(hook.Manifest))
	if err != nil || len(objs) != 1 {
		t.Fatalf("the hook's manifest: %v, %d objects", err, len(objs))
	}
	got := objs[0]
	withoutReleaseIdentity(t, got)
	unstructured.RemoveNestedField(got.Object, "metadata", "annotations")
	podLabels := nested[map[string]any](t, got, "spec", "template", "metadata", "labels")
	if podLabels["app.kubernetes.io/instance"] != defaultRelease {
		t.Errorf("the cleanup pod's labels %v; want app.kubernetes.io/instance %s", podLabels, defaultRelease)
	}
	unstructured.RemoveNestedField(got.Object, "spec", "template", "metadata", "labels", "app.kubernetes.io/instance")
	want, err := framework.ReadManifest(repoPath(t, "deploy", "cleanup", "job.yaml"))
	if err != nil || len(want) != 1 {
		t.Fatalf("deploy/cleanup/job.yaml: %v, %d objects", err, len(want))
	}
	if d := cmp.Diff(want[0].Object, got.Object); d != "" {
		t.Errorf("the chart's cleanup Job differs from deploy/cleanup/job.yaml (-manifest +chart):\n%s", d)
	}

	off, err := dryRunInstall(t, defaultRelease, defaultNamespace, "cleanup: {enabled: false}")
	if err != nil {
		t.Fatal(err)
	}
	if len(off.Hooks) != 0 || strings.Contains(off.Manifest, "cleanup") {
		t.Errorf("cleanup.enabled: false still renders the cleanup Job (%d hooks) or its identity", len(off.Hooks))
	}
	if _, err := render(t, "cleanup: {timeout: soon}"); err == nil || !strings.Contains(err.Error(), "/cleanup/timeout") {
		t.Errorf("cleanup.timeout: soon rendered (%v); want the schema's error naming it", err)
	}

	images := func(path ...string) any {
		raw, err := os.ReadFile(repoPath(t, path...))
		if err != nil {
			t.Fatal(err)
		}
		var k map[string]any
		if err := yaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
		return k["images"]
	}
	if a, b := images("deploy", "kustomization.yaml"), images("deploy", "cleanup", "kustomization.yaml"); a == nil || !reflect.DeepEqual(a, b) {
		t.Errorf("deploy/cleanup/kustomization.yaml sets images %v; deploy/kustomization.yaml %v: the cleanup Job must run the agents' image", b, a)
	}
}

// helmUninstallTimeout is helm uninstall's --timeout when none is given,
// which bounds its wait for the pre-delete hook.
const helmUninstallTimeout = 5 * time.Minute

// cleanupHookJob is the cleanup Job the chart's pre-delete hook creates,
// and the DaemonSet of the same render, for values.
func cleanupHookJob(t *testing.T, values string) (*batchv1.Job, *appsv1.DaemonSet) {
	t.Helper()
	rel, err := dryRunInstall(t, defaultRelease, defaultNamespace, values)
	if err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	if len(rel.Hooks) != 1 {
		t.Fatalf("values %q: %d hooks; want the cleanup Job", values, len(rel.Hooks))
	}
	hook, err := framework.ParseManifest(strings.NewReader(rel.Hooks[0].Manifest))
	if err != nil || len(hook) != 1 {
		t.Fatalf("the hook's manifest: %v, %d objects", err, len(hook))
	}
	objs, err := framework.ParseManifest(strings.NewReader(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(hook[0].Object, &job); err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "DaemonSet", "evictd").Object, &ds); err != nil {
		t.Fatal(err)
	}
	return &job, &ds
}

// tolerates reports whether tolerations let a pod onto a node with taint,
// as the scheduler and the kubelet decide (corev1.Toleration.ToleratesTaint,
// without its alpha comparison operators). A PreferNoSchedule taint keeps
// no pod away and is tolerated by anyone.
func tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	if taint.Effect == corev1.TaintEffectPreferNoSchedule {
		return true
	}
	return slices.ContainsFunc(tolerations, func(tl corev1.Toleration) bool {
		switch {
		case tl.Effect != "" && tl.Effect != taint.Effect:
			return false
		case tl.Key != "" && tl.Key != taint.Key:
			return false
		case tl.Operator == corev1.TolerationOpExists:
			return true
		default: // Equal, or empty
			return tl.Value == taint.Value
		}
	})
}

// daemonSetTolerations are the DaemonSet's pod's tolerations with those
// the DaemonSet controller adds to every DaemonSet pod
// (k8s.io/kubernetes/pkg/controller/daemon/util.AddOrUpdateDaemonPodTolerations;
// node.kubernetes.io/network-unavailable only for host network, which
// evictd's pods are not on).
func daemonSetTolerations(ds *appsv1.DaemonSet) []corev1.Toleration {
	out := slices.Clone(ds.Spec.Template.Spec.Tolerations)
	for _, k := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		out = append(out, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	}
	for _, k := range []string{corev1.TaintNodeDiskPressure, corev1.TaintNodeMemoryPressure, corev1.TaintNodePIDPressure, corev1.TaintNodeUnschedulable} {
		out = append(out, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// TestChartCleanupJobCannotHang: helm uninstall waits for the cleanup Job,
// so the Job must end, and must run where it can. Its deadline
// (activeDeadlineSeconds) is above the cleanup's own --timeout, so that a
// cleanup that runs long ends on its own and says what is left, and under
// helm uninstall's default --timeout, so that a Job that cannot run fails
// (DeadlineExceeded) and helm reports that, not a timeout of its own. A
// cleanup that exits non-zero fails the Job at once (its podFailurePolicy);
// a failed Job stays an hour at least, for its log. It lands wherever the
// DaemonSet's pods may: every NoSchedule or NoExecute taint the agents
// tolerate, it tolerates (the DaemonSet controller's own tolerations
// included, but for a node not ready or unreachable, where no pod would
// start), evictd's own taints always; the DaemonSet's node selector,
// affinity and priority class. With the defaults and with values of one's
// own.
func TestChartCleanupJobCannotHang(t *testing.T) {
	taints := []corev1.Taint{
		{Key: "evictd.io/memory-pressure", Value: "evictd-system.evictd", Effect: corev1.TaintEffectNoSchedule},
		{Key: "evictd.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule},
		{Key: "evictd.io/pid-pressure", Value: "other.evictd", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute},
		{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	}
	for _, tc := range []struct{ what, values string }{
		{"the defaults", ""},
		{"a dedicated pool", `
tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]
nodeSelector: {pool: infra}
affinity: {nodeAffinity: null, podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: x}}, topologyKey: kubernetes.io/hostname}]}}
priorityClassName: evictd-critical
cleanup: {timeout: 10m}`},
		{"no tolerations", `tolerations: []`},
	} {
		job, ds := cleanupHookJob(t, tc.values)
		var timeout time.Duration
		for _, a := range job.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--timeout="); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatalf("%s: the cleanup's %s: %v", tc.what, a, err)
				}
				timeout = d
			}
		}
		if timeout == 0 {
			t.Fatalf("%s: the cleanup Job's args %v pass no --timeout", tc.what, job.Spec.Template.Spec.Containers[0].Args)
		}
		if d := job.Spec.ActiveDeadlineSeconds; d == nil {
			t.Errorf("%s: the cleanup Job has no activeDeadlineSeconds: a Job that cannot run keeps helm uninstall waiting until its --timeout", tc.what)
		} else if deadline := time.Duration(*d) * time.Second; deadline <= timeout {
			t.Errorf("%s: the cleanup Job's deadline %s is not above the cleanup's --timeout %s", tc.what, deadline, timeout)
		} else if tc.values == "" && deadline >= helmUninstallTimeout {
			t.Errorf("%s: the cleanup Job's deadline %s is not under helm uninstall's default --timeout %s: helm would time out first, with no cause", tc.what, deadline, helmUninstallTimeout)
		}
		if b := job.Spec.BackoffLimit; b == nil || *b > 2 {
			t.Errorf("%s: the cleanup Job's backoffLimit %v; want at most 2", tc.what, b)
		}
		if !failsJobOnExit(job, "cleanup", 1) {
			t.Errorf("%s: a cleanup that exits 1 (what is left, named) does not fail the Job at once: podFailurePolicy %+v", tc.what, job.Spec.PodFailurePolicy)
		}
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil && *ttl < 3600 {
			t.Errorf("%s: the cleanup Job's ttlSecondsAfterFinished %d: a failed Job's log must stay an hour at least", tc.what, *ttl)
		}

		pod, dsPod := job.Spec.Template.Spec, ds.Spec.Template.Spec
		agents := daemonSetTolerations(ds)
		for _, taint := range taints {
			node := strings.HasPrefix(taint.Key, "node.kubernetes.io/not-ready") || strings.HasPrefix(taint.Key, "node.kubernetes.io/unreachable")
			evictd := strings.HasPrefix(taint.Key, "evictd.io/")
			got := tolerates(pod.Tolerations, taint)
			switch {
			case (evictd || tolerates(agents, taint) && !node) && !got:
				t.Errorf("%s: the cleanup Job does not tolerate %s, which the agents' pods tolerate or evictd puts on: a cluster of such nodes never runs it", tc.what, taint.ToString())
			case node && got && !tolerates(dsPod.Tolerations, taint):
				t.Errorf("%s: the cleanup Job tolerates %s, which the DaemonSet's tolerations do not: it may land on a node where it never starts", tc.what, taint.ToString())
			}
		}
		if !reflect.DeepEqual(pod.NodeSelector, dsPod.NodeSelector) {
			t.Errorf("%s: the cleanup Job's nodeSelector %v; want the DaemonSet's %v", tc.what, pod.NodeSelector, dsPod.NodeSelector)
		}
		if d := cmp.Diff(dsPod.Affinity, pod.Affinity); d != "" {
			t.Errorf("%s: the cleanup Job's affinity differs from the DaemonSet's (-DaemonSet +Job):\n%s", tc.what, d)
		}
		if pod.PriorityClassName != dsPod.PriorityClassName {
			t.Errorf("%s: the cleanup Job's priorityClassName %q; want the DaemonSet's %q", tc.what, pod.PriorityClassName, dsPod.PriorityClassName)
		}
	}

	// A deadline at or under the cleanup's own bound is refused, naming both.
	_, err := render(t, "cleanup: {timeout: 5m, deadline: 4m}")
	if err == nil || !strings.Contains(err.Error(), `cleanup.deadline "4m" is not above cleanup.timeout "5m"`) {
		t.Errorf("cleanup: {timeout: 5m, deadline: 4m} rendered (%v); want it refused, naming both values", err)
	}
	if job, _ := cleanupHookJob(t, "cleanup: {timeout: 1s, deadline: 1500ms}"); job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds != 2 {
		t.Errorf("cleanup.deadline 1500ms: activeDeadlineSeconds %v; want 2, rounded up", job.Spec.ActiveDeadlineSeconds)
	}
	if _, err := render(t, "cleanup: {deadline: soon}"); err == nil || !strings.Contains(err.Error(), "/cleanup/deadline") {
		t.Errorf("cleanup.deadline: soon rendered (%v); want the schema's error naming it", err)
	}
}

// failsJobOnExit reports whether the Job's podFailurePolicy fails the Job
// when container exits with code, as the Job controller reads its rules:
// the first that matches decides.
func failsJobOnExit(job *batchv1.Job, container string, code int32) bool {
	if job.Spec.PodFailurePolicy == nil {
		return false
	}
	for _, r := range job.Spec.PodFailurePolicy.Rules {
		e := r.OnExitCodes
		if e == nil || e.ContainerName != nil && *e.ContainerName != container {
			continue
		}
		in := slices.Contains(e.Values, code)
		if (e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == in {
			return r.Action == batchv1.PodFailurePolicyActionFailJob
		}
	}
	return false
}
