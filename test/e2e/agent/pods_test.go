// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

const mib = 1 << 20

// Priority classes every test cluster gets (see createPriorityClasses).
const (
	classLow  = "e2e-low"  // 100
	classMid  = "e2e-mid"  // 1000
	classHigh = "e2e-high" // 10000
	// classNodeCritical is built into the API server (2,000,001,000).
	classNodeCritical = "system-node-critical"
)

func createPriorityClasses(t *testing.T, c *framework.Cluster) {
	t.Helper()
	for name, v := range map[string]int32{classLow: 100, classMid: 1000, classHigh: 10000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
		if _, err := c.Admin.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// podSpec is a workload pod: what its one container does (flags of
// test/cmd/workload), its resources, priority and grace period.
type podSpec struct {
	name          string
	priorityClass string
	labels        map[string]string

	holdMiB       int64
	growToMiB     int64
	growMiBPerSec float64
	writeMiB      int64
	writeRate     float64 // MiB/s
	exitAfter     time.Duration
	termDelay     time.Duration // how long it keeps running after SIGTERM
	files         int           // empty files it makes in its emptyDir at start (inodes)

	grace int64 // terminationGracePeriodSeconds; 0 means 30
	// requests and limits, as "cpu=100m,memory=64Mi,ephemeral-storage=10Mi".
	requests, limits corev1.ResourceList
}

func (s podSpec) args() []string {
	var a []string
	add := func(flag string, v string) { a = append(a, "--"+flag+"="+v) }
	if s.holdMiB > 0 {
		add("hold-mib", strconv.FormatInt(s.holdMiB, 10))
	}
	if s.growMiBPerSec > 0 {
		add("grow-mib-per-sec", strconv.FormatFloat(s.growMiBPerSec, 'f', -1, 64))
		add("grow-to-mib", strconv.FormatInt(s.growToMiB, 10))
	}
	if s.writeMiB > 0 {
		add("write-mib", strconv.FormatInt(s.writeMiB, 10))
		if s.writeRate > 0 {
			add("write-mib-per-sec", strconv.FormatFloat(s.writeRate, 'f', -1, 64))
		}
	}
	if s.exitAfter > 0 {
		add("exit-after", s.exitAfter.String())
	}
	if s.termDelay > 0 {
		add("term-delay", s.termDelay.String())
	}
	if s.files > 0 {
		add("files", strconv.Itoa(s.files))
	}
	return a
}

func (s podSpec) pod(ns, node string) *corev1.Pod {
	grace := s.grace
	if grace == 0 {
		grace = 30
	}
	return podtest.New(ns, s.name, podtest.OnNode(node), podtest.Labels(s.labels), podtest.Priority(s.priorityClass),
		podtest.Grace(grace), podtest.NeverRestart(), podtest.Run("evictd.test/workload:latest", nodesim.WorkloadCommand, s.args()...),
		podtest.Resources(s.requests, s.limits), podtest.Scratch())
}

// podsFor builds the pods of specs for node.
func podsFor(ns, node string, specs []podSpec) []*corev1.Pod {
	var out []*corev1.Pod
	for _, s := range specs {
		out = append(out, s.pod(ns, node))
	}
	return out
}

// res builds a ResourceList from name=quantity pairs.
func res(pairs ...string) corev1.ResourceList { return podtest.List(pairs...) }

// createRunning creates each pod and waits until all are Running and Ready
// on the simulated node. It returns them by name, as the API has them.
func createRunning(t *testing.T, client kubernetes.Interface, pods ...*corev1.Pod) map[string]*corev1.Pod {
	t.Helper()
	return podtest.CreateRunning(t, client, 60*time.Second, pods...)
}

// waitHolding waits until each pod's workload has allocated and touched its
// --hold-mib (it says so in its container log), so that a baseline is not
// taken while memory is still being faulted in on a busy machine.
func waitHolding(t *testing.T, node *nodesim.Node, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		path := filepath.Join(node.PodLogDir(p), p.Spec.Containers[0].Name, "0.log")
		var b []byte
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			b, _ = os.ReadFile(path)
			return strings.Contains(string(b), "workload: holding"), nil
		})
		if err != nil {
			t.Fatalf("pod %s never said it holds its memory; %s has %q", podKey(p), path, b)
		}
	}
}

// waitPod polls the pod until cond holds.
func waitPod(t *testing.T, client kubernetes.Interface, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return podtest.WaitPod(t, client, ns, name, timeout, what, cond)
}

// waitGone waits until the pod (by UID) is no longer in the API server.
func waitGone(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && p.UID != pod.UID, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s was not deleted within %s", pod.Namespace, pod.Name, timeout)
	}
}

// untouched checks that the pod is still there, the same one, Running, with
// no deletionTimestamp, and that the stand-in never signalled it.
func untouched(t *testing.T, client kubernetes.Interface, node *nodesim.Node, pod *corev1.Pod) {
	t.Helper()
	p, err := client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("pod %s/%s should still exist: %v", pod.Namespace, pod.Name, err)
		return
	case p.UID != pod.UID:
		t.Errorf("pod %s/%s was replaced (UID %s, was %s)", pod.Namespace, pod.Name, p.UID, pod.UID)
	case p.DeletionTimestamp != nil:
		t.Errorf("pod %s/%s has a deletionTimestamp (%s); it should not have been touched", pod.Namespace, pod.Name, p.DeletionTimestamp)
	case p.Status.Phase != corev1.PodRunning:
		t.Errorf("pod %s/%s is %s, want Running", pod.Namespace, pod.Name, p.Status.Phase)
	}
	if tl, ok := node.Record(pod.UID); ok && (!tl.SIGTERM.IsZero() || !tl.DeletionSeen.IsZero()) {
		t.Errorf("the stand-in saw pod %s/%s deleted (at %s) or signalled (SIGTERM at %s)", pod.Namespace, pod.Name, tl.DeletionSeen, tl.SIGTERM)
	}
}

// createPDB protects the pods matching labels with minAvailable and waits
// until the real disruption controller has processed it (podtest.CreatePDB).
func createPDB(t *testing.T, c *framework.Cluster, ns, name string, minAvailable int32, labels map[string]string, wantAllowed int32) {
	t.Helper()
	podtest.CreatePDB(t, c.Admin, ns, name, minAvailable, labels, wantAllowed)
}

// evictdEvents lists the events.k8s.io Events that evictd wrote in ns (""
// for all namespaces), as "Reason Kind/name: note".
func evictdEvents(t *testing.T, c *framework.Cluster, ns string) []string {
	t.Helper()
	list, err := c.Admin.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.ReportingController == "evictd" {
			out = append(out, fmt.Sprintf("%s %s/%s: %s", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note))
		}
	}
	return out
}

// podKey is the pod's "namespace/name", the form of evictd's `pod` log key.
func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
