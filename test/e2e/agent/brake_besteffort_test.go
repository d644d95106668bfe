// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
)

// besteffortPolicy names the MutatingAdmissionPolicy of
// deploy/brake-besteffort-only.yaml and its binding.
const besteffortPolicy = "evictd-brake-besteffort-only"

// brakeToleration is the one toleration the policy adds: the memory brake's
// key under every effect.
var brakeToleration = corev1.Toleration{Key: nodebrake.TaintKey(nodebrake.Memory), Operator: corev1.TolerationOpExists}

// TestBrakeBestEffortOnly: with deploy/brake-besteffort-only.yaml applied,
// the API server gives every pod created that is not BestEffort exactly
// one toleration more than it would have had, {key:
// evictd.io/memory-pressure, operator: Exists}, and a BestEffort pod
// none; the server's own status.qosClass of each pod agrees with the
// policy's reading of it. Burstable (a cpu request), Guaranteed, Burstable
// through an init container alone, and Guaranteed through pod-level
// resources alone get it; BestEffort, a request of 0 cpu (still
// BestEffort) and an ephemeral-storage request alone (BestEffort) do not;
// a pod that already tolerates the key under every effect is left as it
// was, and one that tolerates it with NoSchedule alone gets the toleration
// (evictd's brake may taint PreferNoSchedule). Run twice: with the API
// server's default admission plugins, where DefaultTolerationSeconds has
// given every pod tolerations before the policy runs (the policy appends),
// and without that plugin, where a pod may come with none (the policy
// creates the list). No node is needed: the pods stay unscheduled.
func TestBrakeBestEffortOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []framework.Option
	}{
		{"default admission plugins", nil},
		{"without DefaultTolerationSeconds", []framework.Option{framework.WithAPIServerArgs("--disable-admission-plugins=DefaultTolerationSeconds")}},
	} {
		t.Run(tc.name, func(t *testing.T) { testBrakeBestEffortOnly(t, tc.opts...) })
	}
}

func testBrakeBestEffortOnly(t *testing.T, opts ...framework.Option) {
	start := time.Now()
	c := framework.Start(t, opts...)
	ns := c.Namespace(t, "besteffort")
	ctx := context.Background()

	// Without the policy: what every pod gets from the other admission
	// plugins, and no brake toleration.
	bare, err := c.Admin.CoreV1().Pods(ns).Create(ctx, podtest.New(ns, "before-policy", podtest.Resources(podtest.List("cpu", "100m"), nil)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(bare.Spec.Tolerations, isBrakeToleration) {
		t.Fatalf("a Burstable pod has the brake toleration before the policy is applied: %v", bare.Spec.Tolerations)
	}
	defaults := bare.Spec.Tolerations

	applied := applyPolicyFile(t, c, "brake-besteffort-only.yaml", besteffortPolicy, "MutatingAdmissionPolicy")

	// The API server loads policies through an informer: in force once a
	// dry-run create of a Burstable pod comes back tolerating the brake.
	// The deadline only bounds a policy that never loads; a loaded host
	// may take a while.
	probe := podtest.New(ns, "probe", podtest.Resources(podtest.List("memory", "64Mi"), nil))
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Admin.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(p.Spec.Tolerations, isBrakeToleration), nil
	}); err != nil {
		t.Fatalf("the policy is not in force 60s after it was applied: %v", err)
	}
	t.Logf("policy in force %s after it was applied", time.Since(applied).Round(time.Millisecond))

	exists := func(effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: brakeToleration.Key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	withTolerations := func(ts ...corev1.Toleration) podtest.Option {
		return func(p *corev1.Pod) { p.Spec.Tolerations = ts }
	}
	initContainer := func(requests corev1.ResourceList) podtest.Option {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "evictd.test/none:latest",
				Resources: corev1.ResourceRequirements{Requests: requests}}}
		}
	}
	podLevel := func(limits corev1.ResourceList) podtest.Option {
		return func(p *corev1.Pod) { p.Spec.Resources = &corev1.ResourceRequirements{Limits: limits} }
	}
	for _, pc := range []struct {
		pod   *corev1.Pod
		qos   corev1.PodQOSClass
		added bool
	}{
		{podtest.New(ns, "burstable", podtest.Resources(podtest.List("cpu", "100m"), nil)), corev1.PodQOSBurstable, true},
		{podtest.New(ns, "guaranteed", podtest.Resources(podtest.List("cpu", "100m", "memory", "64Mi"), podtest.List("cpu", "100m", "memory", "64Mi"))), corev1.PodQOSGuaranteed, true},
		{podtest.New(ns, "besteffort"), corev1.PodQOSBestEffort, false},
		{podtest.New(ns, "tolerates", podtest.Resources(podtest.List("cpu", "100m"), nil), withTolerations(exists(""))), corev1.PodQOSBurstable, false},
		{podtest.New(ns, "tolerates-noschedule", podtest.Resources(podtest.List("cpu", "100m"), nil), withTolerations(exists(corev1.TaintEffectNoSchedule))), corev1.PodQOSBurstable, true},
		{podtest.New(ns, "init-container", initContainer(podtest.List("memory", "64Mi"))), corev1.PodQOSBurstable, true},
		{podtest.New(ns, "pod-level", podLevel(podtest.List("cpu", "200m", "memory", "64Mi"))), corev1.PodQOSGuaranteed, true},
		{podtest.New(ns, "zero-cpu", podtest.Resources(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}, nil)), corev1.PodQOSBestEffort, false},
		{podtest.New(ns, "ephemeral-storage", podtest.Resources(podtest.List("ephemeral-storage", "1Gi"), nil)), corev1.PodQOSBestEffort, false},
	} {
		sent := slices.Clone(pc.pod.Spec.Tolerations)
		got, err := c.Admin.CoreV1().Pods(ns).Create(ctx, pc.pod, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("create %s: %v", pc.pod.Name, err)
			continue
		}
		if got.Status.QOSClass != pc.qos {
			t.Errorf("%s: the API server says QoS %s; the test expects %s", got.Name, got.Status.QOSClass, pc.qos)
		}
		// What the pod would have had without the policy: its own, then
		// what the other admission plugins give every pod.
		want := append(sent, defaults...)
		if pc.added {
			want = append(want, brakeToleration)
		}
		if !tolerationsEqual(got.Spec.Tolerations, want) {
			t.Errorf("%s (%s): tolerations\n  %s\nwant\n  %s", got.Name, got.Status.QOSClass, tolerationList(got.Spec.Tolerations), tolerationList(want))
		}
	}
	// How long the subtest took, cluster start included, is logged for
	// whoever watches the suite's time; it is no pass/fail criterion on a
	// shared, loaded machine (issue 46).
	t.Logf("took %s, cluster start included", time.Since(start).Round(time.Millisecond))
}

func isBrakeToleration(tl corev1.Toleration) bool { return tl.Key == brakeToleration.Key }

// tolerationsEqual compares in order, tolerationSeconds included: the
// policy appends after what the other admission plugins have added.
func tolerationsEqual(a, b []corev1.Toleration) bool {
	return len(a) == len(b) && (len(a) == 0 || equality.Semantic.DeepEqual(a, b))
}

func tolerationList(ts []corev1.Toleration) string {
	if len(ts) == 0 {
		return "none"
	}
	var s string
	for i, tl := range ts {
		if i > 0 {
			s += ", "
		}
		secs := "-"
		if tl.TolerationSeconds != nil {
			secs = fmt.Sprint(*tl.TolerationSeconds)
		}
		s += fmt.Sprintf("{key %q op %q value %q effect %q seconds %s}", tl.Key, tl.Operator, tl.Value, tl.Effect, secs)
	}
	return s
}
