// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/nodebrake"
)

// workloadPod is a pod of the workload image on the node: args for the
// workload binary, memory request and limit (0: none).
func workloadPod(ns, name string, request, limit int64, args ...string) *corev1.Pod {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if request > 0 {
		res.Requests[corev1.ResourceMemory] = *resource.NewQuantity(request, resource.BinarySI)
	}
	if limit > 0 {
		res.Limits[corev1.ResourceMemory] = *resource.NewQuantity(limit, resource.BinarySI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Tolerations:                   brakeTolerations(),
			Containers: []corev1.Container{{
				Name:            "work",
				Image:           workloadImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            args,
				Resources:       res,
			}},
		},
	}
}

// brakeTolerations let a test's pods land on the node while evictd's brake
// from an earlier test's episode is still on: the shipped configuration
// keeps it the 5 min transition period after the pressure. The tests are
// about whom evictd evicts, not where the scheduler places;
// TestNodeProtectedPods checks that the brake keeps an untolerating pod away.
func brakeTolerations() []corev1.Toleration {
	var out []corev1.Toleration
	for _, r := range nodebrake.Resources() {
		out = append(out, corev1.Toleration{Key: nodebrake.TaintKey(r), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// asRoot runs the pod's container as root: the images' user (65532) cannot
// write to their root directory, which a pod filling its writable layer
// needs.
func asRoot(p *corev1.Pod) *corev1.Pod {
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0)}
	return p
}

// withEmptyDir mounts a disk-backed emptyDir in the pod's container at dir.
func withEmptyDir(p *corev1.Pod, dir string) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: dir})
	return p
}

// createRunning creates the pods and waits until each runs.
func createRunning(t *testing.T, ctx context.Context, n *Node, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	for _, p := range pods {
		if _, err := n.Cluster.Admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	for _, p := range pods {
		var got *corev1.Pod
		err := n.poll(ctx, 4*time.Minute, "pod "+p.Namespace+"/"+p.Name+" running", func(ctx context.Context) error {
			q, err := n.Cluster.Admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if q.Status.Phase == corev1.PodRunning && len(q.Status.ContainerStatuses) > 0 && q.Status.ContainerStatuses[0].State.Running != nil {
				got = q
				return nil
			}
			return fmt.Errorf("%s", describePods([]corev1.Pod{*q}))
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, n.Diagnostics())
		}
		out = append(out, got)
	}
	return out
}

// newNamespace makes a namespace for one test and deletes it at the end.
func newNamespace(t *testing.T, n *Node, prefix string) string {
	t.Helper()
	ns, err := n.Cluster.CreateNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		// Terminating, the namespace takes no new pod (a ReplicaSet's
		// replacement, say), so its pods can be deleted for good.
		_ = n.Cluster.Admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		// Wait for its pods to go, so the next test starts on a quiet
		// node; not for the namespace, which the namespace controller looks
		// at again only once the pods' own grace periods could have passed
		// (5-20 s a test, spent waiting). Deleted again at a 1 s grace,
		// the pods need not wait out the one the namespace controller gave.
		_ = n.Cluster.Admin.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{})
		_ = n.poll(ctx, 2*time.Minute, "the pods of namespace "+ns+" gone", func(ctx context.Context) error {
			pods, err := n.Cluster.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("%s", describePods(pods.Items))
			}
			return nil
		})
	})
	return ns
}

// containerID is a running container's ID in containerd.
func containerID(p *corev1.Pod, name string) (string, error) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			id, ok := strings.CutPrefix(cs.ContainerID, "containerd://")
			if !ok {
				return "", fmt.Errorf("pod %s container %s: ID %q is not containerd's", p.Name, name, cs.ContainerID)
			}
			return id, nil
		}
	}
	return "", fmt.Errorf("pod %s has no container %s", p.Name, name)
}

var execSeq struct {
	sync.Mutex
	n int
}

// execInContainer runs argv in a running container, as kubectl exec would
// (the API server never dials the node, so through ctr in the guest).
func execInContainer(ctx context.Context, n *Node, p *corev1.Pod, container string, argv ...string) (*ExecResult, error) {
	id, err := containerID(p, container)
	if err != nil {
		return nil, err
	}
	execSeq.Lock()
	execSeq.n++
	execID := fmt.Sprintf("vmnode-%d", execSeq.n)
	execSeq.Unlock()
	return n.Exec(ctx, append([]string{n.Ctr, "-n", "k8s.io", "task", "exec", "--exec-id", execID, id}, argv...),
		WithTimeout(3*time.Minute))
}

// observeInPod runs evictd observe -o json in the evictd pod, through its
// host mounts, as an operator would.
func observeInPod(ctx context.Context, n *Node, evictd *corev1.Pod) (*statsv1alpha1.Summary, []byte, error) {
	r, err := execInContainer(ctx, n, evictd, "evictd", "/evictd", "observe", "--host-root=/host", "-o", "json")
	if err != nil {
		return nil, nil, err
	}
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	var s statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		return nil, []byte(r.Stdout), fmt.Errorf("evictd observe -o json: %w", err)
	}
	return &s, []byte(r.Stdout), nil
}

var evictdOnce struct {
	sync.Mutex
	pod  *corev1.Pod
	args []string // the extra arguments it runs with
}

// evictdPod deploys evictd as shipped once (or again after a test removed
// or reconfigured it) and returns its current pod.
func evictdPod(t *testing.T, n *Node) *corev1.Pod {
	return evictdPodWith(t, n)
}

// evictdPodWith is evictdPod with extra arguments for evictd; the next
// evictdPod puts the shipped configuration back.
func evictdPodWith(t *testing.T, n *Node, extraArgs ...string) *corev1.Pod {
	t.Helper()
	since := time.Now()
	t.Cleanup(func() { logEarlyBets(t, n, since) })
	evictdOnce.Lock()
	defer evictdOnce.Unlock()
	ctx := context.Background()
	if evictdOnce.pod != nil && slices.Equal(evictdOnce.args, extraArgs) {
		p, err := n.Cluster.Admin.CoreV1().Pods("evictd-system").Get(ctx, evictdOnce.pod.Name, metav1.GetOptions{})
		if err == nil && p.DeletionTimestamp == nil && podReady(p) {
			evictdOnce.pod = p
			return p
		}
	}
	evictdOnce.pod = deployEvictd(t, ctx, n, extraArgs...)
	evictdOnce.args = extraArgs
	return evictdOnce.pod
}

// logEarlyBets lists, in the test's output, every eviction evictd made in
// the test for a predicted crossing (act-early) with the memory available
// then: the record the node runs with act-early on are read for (docs/decide.md,
// "A bet only where one is needed, and bounded"). It never fails the test.
func logEarlyBets(t *testing.T, n *Node, since time.Time) {
	evictdOnce.Lock()
	p := evictdOnce.pod
	evictdOnce.Unlock()
	if p == nil {
		return
	}
	out, err := n.Sh(context.Background(), fmt.Sprintf("cat /var/log/pods/%s_%s_%s/evictd/*.log", p.Namespace, p.Name, p.UID))
	if err != nil {
		t.Logf("act-early bets: evictd's log unreadable: %v", err)
		return
	}
	bets := 0
	for _, l := range CRILogLines(out) {
		if l.TS.Before(since) || l.Msg != "evicted pod" || !strings.Contains(l.Str("reason"), " predicted below ") {
			continue
		}
		bets++
		t.Logf("act-early bet: %s at %s: %s", l.Str("pod"), l.TS.Format(time.StampMilli), l.Str("reason"))
	}
	t.Logf("act-early bets in this test: %d", bets)
}

// evictdLog is the evictd container's log on the node, as the kubelet keeps it.
func evictdLog(t *testing.T, n *Node, p *corev1.Pod) string {
	t.Helper()
	out, err := n.Sh(context.Background(), fmt.Sprintf("cat /var/log/pods/%s_%s_%s/evictd/*.log", p.Namespace, p.Name, p.UID))
	if err != nil {
		t.Fatalf("evictd's log: %v", err)
	}
	return out
}

// evictdLogSince is evictd's log from since on.
func evictdLogSince(t *testing.T, n *Node, p *corev1.Pod, since time.Time) string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(evictdLog(t, n, p), "\n") {
		// CRI log lines start with an RFC 3339 time.
		ts, _, ok := strings.Cut(line, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil || at.Before(since) {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// podFates records how the pods of a namespace ended, in the order seen.
// An evicted pod is deleted soon after its eviction, so the fate is caught
// by checking while it goes, not after.
type podFates struct {
	n     *Node
	ns    string
	fates map[string]string
	order []string
}

func newPodFates(n *Node, ns string) *podFates {
	return &podFates{n: n, ns: ns, fates: map[string]string{}}
}

// check records the fates of the pods that ended since the last check.
func (f *podFates) check(ctx context.Context) error {
	list, err := f.n.Cluster.Admin.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if fate := FateOf(p); fate != "" && f.fates[p.Name] == "" {
			f.fates[p.Name] = fate
			f.order = append(f.order, p.Name)
		}
	}
	return nil
}

// evictedIn names the pods of namespace ns that evictd's log says it
// evicted ("evicted pod" lines), in the log's order.
func evictedIn(t *testing.T, n *Node, ev *corev1.Pod, ns string) []string {
	t.Helper()
	var out []string
	for _, l := range CRILogLines(evictdLog(t, n, ev)) {
		if name, ok := strings.CutPrefix(l.Str("pod"), ns+"/"); ok && l.Msg == "evicted pod" {
			out = append(out, name)
		}
	}
	return out
}

// hasEvictdEvent reports whether podEvents' lines hold an Event evictd
// wrote on the named pod.
func hasEvictdEvent(events, pod string) bool {
	for _, line := range strings.Split(events, "\n") {
		if strings.Contains(line, " Pod/"+pod+": ") && strings.HasSuffix(line, "("+evict.ReportingController+")") {
			return true
		}
	}
	return false
}

// waitEvictdLooked waits until each of evictd's series in zero reads 0 (a
// threshold no longer met, an episode over) and then until evictd has made
// passes observations more: the positive sign the waiting rule asks for
// before "nothing more happened" is read. Its deadlines are the loaded
// guest's (minutes); it returns the last metrics page.
func waitEvictdLooked(t *testing.T, ctx context.Context, n *Node, ev *corev1.Pod, passes int, zero ...string) string {
	t.Helper()
	const count = `evictd_observation_duration_seconds_count`
	want := map[string]float64{count: 0}
	for _, z := range zero {
		want[z] = 0
	}
	var from float64
	if err := n.poll(ctx, 3*time.Minute, fmt.Sprintf("evictd's %v at 0", zero), func(ctx context.Context) error {
		page, err := evictdMetrics(ctx, n, ev)
		if err != nil {
			return err
		}
		got := seriesValues(page, want)
		if _, ok := got[count]; !ok {
			return fmt.Errorf("no %s on evictd's page", count)
		}
		for _, z := range zero {
			if got[z] != 0 {
				return fmt.Errorf("%s = %v", z, got[z])
			}
		}
		from = got[count]
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	var page string
	if err := n.poll(ctx, 3*time.Minute, fmt.Sprintf("%d observations more by evictd", passes), func(ctx context.Context) error {
		p, err := evictdMetrics(ctx, n, ev)
		if err != nil {
			return err
		}
		if c := seriesValues(p, want)[count]; c < from+float64(passes) {
			return fmt.Errorf("%s = %.0f; want %.0f", count, c, from+float64(passes))
		}
		page = p
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	return page
}
