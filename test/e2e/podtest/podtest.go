// SPDX-License-Identifier: Apache-2.0

// Package podtest builds the pods and PodDisruptionBudgets the end-to-end
// tests and the demo create, and waits for the API server to show what they
// expect of them. It is not a test package so that the demo command can use
// it too; it talks to the API only through the client it is given.
package podtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Option changes the pod New builds.
type Option func(*corev1.Pod)

// New builds a pod in ns with one container, "main", running the image
// "evictd.test/none:latest"; opts fill in the rest.
func New(ns, name string, opts ...Option) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "evictd.test/none:latest"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// OnNode binds the pod to node, as the scheduler would.
func OnNode(node string) Option { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// Labels sets the pod's labels.
func Labels(l map[string]string) Option { return func(p *corev1.Pod) { p.Labels = l } }

// Priority sets the pod's PriorityClass.
func Priority(class string) Option { return func(p *corev1.Pod) { p.Spec.PriorityClassName = class } }

// Grace sets terminationGracePeriodSeconds.
func Grace(seconds int64) Option {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(seconds) }
}

// NeverRestart sets restartPolicy Never, so that a workload that exits
// leaves the pod Succeeded or Failed.
func NeverRestart() Option {
	return func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }
}

// Run sets the container's image, command and arguments.
func Run(image, command string, args ...string) Option {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Image, c.Command, c.Args = image, []string{command}, args
	}
}

// Container renames the container and sets its image.
func Container(name, image string) Option {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Name, p.Spec.Containers[0].Image = name, image }
}

// Resources sets the container's requests and limits, which decide its QoS
// class; nil leaves either unset.
func Resources(requests, limits corev1.ResourceList) Option {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
}

// Scratch gives the container an emptyDir volume at /scratch, where a
// workload writes what counts against the pod's ephemeral storage.
func Scratch() Option {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
}

// List builds a ResourceList from name=quantity pairs, as in
// List("cpu", "100m", "memory", "64Mi"). A pair with an empty quantity is
// left out. It panics on a malformed quantity: the pairs are the tests' own
// literals.
func List(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
	}
	return l
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RunningAndReady is the condition a kubelet reports for a started pod.
func RunningAndReady(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && IsReady(p) }

// WaitPod polls the pod until cond holds and returns it as the API has it;
// the test fails naming what it waited for and the last status seen.
func WaitPod(t testing.TB, client kubernetes.Interface, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Status
		}
		t.Fatalf("pod %s/%s never became %s within %s; last status: %+v", ns, name, what, timeout, status)
	}
	return last
}

// CreateRunning creates each pod and waits up to timeout for each to be
// Running and Ready. It returns them by name, as the API has them.
func CreateRunning(t testing.TB, client kubernetes.Interface, timeout time.Duration, pods ...*corev1.Pod) map[string]*corev1.Pod {
	t.Helper()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
	out := map[string]*corev1.Pod{}
	for _, p := range pods {
		out[p.Name] = WaitPod(t, client, p.Namespace, p.Name, timeout, "Running and Ready", RunningAndReady)
	}
	return out
}

// CreateReady creates the pod and, standing in for a kubelet where none
// runs, marks it Running and Ready: what a PodDisruptionBudget counts, and
// what keeps a pod from being evicted past one as Pending.
func CreateReady(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) (*corev1.Pod, error) {
	created, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	created.Status.Phase = corev1.PodRunning
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	updated, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("mark pod %s/%s ready: %w", pod.Namespace, pod.Name, err)
	}
	return updated, nil
}

// PDB builds a PodDisruptionBudget that keeps minAvailable of the pods
// matching labels.
func PDB(ns, name string, minAvailable int32, labels map[string]string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}
}

// Settled reports whether the disruption controller has processed the
// current generation of pdb.
func Settled(pdb *policyv1.PodDisruptionBudget) bool {
	return pdb.Status.ObservedGeneration >= pdb.Generation
}

// WaitPDB polls the PodDisruptionBudget until cond holds, returning the last
// one read (nil if none was) with any error.
func WaitPDB(ctx context.Context, client kubernetes.Interface, ns, name string, timeout time.Duration, cond func(*policyv1.PodDisruptionBudget) bool) (*policyv1.PodDisruptionBudget, error) {
	var last *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got
		return cond(got), nil
	})
	if err != nil {
		return last, fmt.Errorf("PDB %s/%s: %w", ns, name, err)
	}
	return last, nil
}

// CreatePDB protects the pods matching labels with minAvailable, deletes
// the budget when the test ends, and waits until the real disruption
// controller has processed it: its status has caught up with its
// generation, counts at least minAvailable healthy pods and allows
// wantAllowed disruptions.
func CreatePDB(t testing.TB, client kubernetes.Interface, ns, name string, minAvailable int32, labels map[string]string, wantAllowed int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, PDB(ns, name, minAvailable, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.PolicyV1().PodDisruptionBudgets(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	last, err := WaitPDB(ctx, client, ns, name, 60*time.Second, func(got *policyv1.PodDisruptionBudget) bool {
		return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy >= minAvailable &&
			got.Status.DisruptionsAllowed == wantAllowed
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Status
		}
		t.Fatalf("PDB %s/%s never settled at %d allowed disruptions: %v; last status %+v", ns, name, wantAllowed, err, status)
	}
}
