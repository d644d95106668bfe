// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/test/e2e/framework"
)

// The scenarios of the e2e suite (memory, PDB, critical and static pods)
// on the real node, with the kubelet's real pod lifecycle. Each sets the
// node's memory.available between evictd's threshold (300Mi) and the
// kubelet's (100Mi), so evictd alone is expected to act, and checks whom.

// settle is where the scenarios park memory.available: under evictd's
// 300Mi, over the kubelet's 100Mi.
const settle = 200 << 20

// fillTo is how much more memory the pods of a scenario may hold, in MiB,
// for memory.available to settle at settle; the rest of the node is as the
// last sample found it, once only evictd's pods (and alsoKeep's) are on it.
func fillTo(t *testing.T, n *Node, alsoKeep ...string) int64 {
	t.Helper()
	waitQuietNode(t, n, alsoKeep...)
	avail, err := nodeAvailable(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return (avail - settle) >> 20
}

// TestNodeProtectedPods: the pods that hold the memory are a static pod
// (its mirror in the API), a system-node-critical pod and a pod whose
// PodDisruptionBudget allows no disruption, all far above their requests;
// evictd evicts none of them and takes the ordinary pod, though it frees
// less. The PDB's refusal comes from the real disruption controller's
// status, the eviction from the real kubelet's pod lifecycle; the host's
// e2e suite (TestMemoryPressurePDB) covers the API side of the PDB alone.
// make test runs it on the cgroupfs node only: what the driver changes
// (the cgroups evictd reads) every memory test on the systemd node covers.
func TestNodeProtectedPods(t *testing.T) {
	n := sharedNode(t)
	// NoSchedule, not the default PreferNoSchedule: on this one node only a
	// NoSchedule taint keeps a pod away (keptAway), PreferNoSchedule yields
	// when nothing else fits.
	ev := evictdPodWith(t, n, "--node-brake-taint-effect=NoSchedule")
	waitNoMemoryPressure(t, n)
	ctx := context.Background()
	ns := newNamespace(t, n, "protected")
	room := fillTo(t, n)
	ordinary := int64(150)
	each := (room - ordinary) / 3

	static := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: static-hog
  namespace: %s
spec:
  restartPolicy: Never
  containers:
    - name: work
      image: %s
      imagePullPolicy: Never
      args: ["--grow-mib-per-sec=50", "--grow-to-mib=%d"]
      resources:
        requests:
          memory: 16Mi
`, ns, workloadImage, each)
	manifest := n.OutDir + "/manifests/static-hog.yaml"
	r, err := n.Exec(ctx, []string{"/bin/sh", "-c", "cat > " + manifest}, WithStdin(static))
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = n.Exec(context.Background(), []string{"/bin/rm", "-f", manifest}) })

	// The guarded pod: a ReplicaSet's, with a budget of minAvailable 1.
	labels := map[string]string{"app": "guarded"}
	tmpl := workloadPod(ns, "unused", 16<<20, 0, "--grow-mib-per-sec=50", "--grow-to-mib="+strconv.FormatInt(each, 10))
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	if _, err := n.Cluster.Admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Cluster.Admin.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	critical := workloadPod(ns, "critical-hog", 16<<20, 0, "--grow-mib-per-sec=50", "--grow-to-mib="+strconv.FormatInt(each, 10))
	critical.Spec.PriorityClassName = "system-node-critical"
	createRunning(t, ctx, n, workloadPod(ns, "ordinary", 64<<20, 0, "--hold-mib="+strconv.FormatInt(ordinary, 10)), critical)

	var fates map[string]string
	err = n.poll(ctx, 5*time.Minute, "evictd to evict the ordinary pod", func(ctx context.Context) error {
		pods, err := n.Cluster.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		fates = map[string]string{"ordinary": "gone"}
		for i := range pods.Items {
			fates[pods.Items[i].Name] = FateOf(&pods.Items[i])
		}
		if fates["ordinary"] == "" {
			return fmt.Errorf("the ordinary pod still runs; %s", describePods(pods.Items))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	// A while longer, still under evictd's threshold: the protected pods
	// stay through ten more of evictd's passes (a second or less apart
	// under pressure, 10 s at most), and nothing else goes.
	waitEvictdLooked(t, ctx, n, ev, 10)
	pods, err := n.Cluster.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sawMirror, sawGuarded := false, false
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
			sawMirror = true
		}
		if strings.HasPrefix(p.Name, "guarded-") {
			sawGuarded = true
		}
		if f := FateOf(p); f != "" && p.Name != "ordinary" {
			t.Errorf("%s, a protected pod, was ended by %s", p.Name, f)
		}
	}
	if !sawMirror {
		t.Errorf("no mirror pod of the static pod in %s: %s", ns, describePods(pods.Items))
	}
	if !sawGuarded {
		t.Errorf("no PDB-guarded pod in %s: %s", ns, describePods(pods.Items))
	}
	t.Logf("fates: %v", fates)
	// evictd, not anyone else, evicted the ordinary pod, and only it.
	if got := evictedIn(t, n, ev, ns); !slices.Equal(got, []string{"ordinary"}) {
		t.Errorf("evictd's \"evicted pod\" lines in %s name %v, want [ordinary]", ns, got)
	}
	events := podEvents(t, n, ns)
	t.Logf("events in %s:\n%s", ns, events)
	if !hasEvictdEvent(events, "ordinary") {
		t.Errorf("no Event from evictd on the evicted ordinary pod")
	}

	// The brake: the protected pods hold their memory, so the episode goes
	// on, evictd's condition and NoSchedule taint are on the Node, and the
	// real scheduler keeps away a pod that does not tolerate them.
	if on, err := brakeOn(ctx, n, corev1.TaintEffectNoSchedule); err != nil || !on {
		t.Errorf("evictd's memory brake is not on the Node during the episode (%v)", err)
	}
	keptAway(t, n, ns)
	// A clean exit lifts it, as in a DaemonSet rollout: the pressure goes,
	// then evictd's pod; the next pod finds no pressure and sets nothing.
	_, _ = n.Exec(ctx, []string{"/bin/rm", "-f", manifest})
	if err := n.Cluster.Admin.AppsV1().ReplicaSets(ns).Delete(ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := n.Cluster.Admin.CoreV1().Pods(ns).Delete(ctx, "critical-hog", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Error(err)
	}
	if err := n.Cluster.Admin.CoreV1().Pods(ev.Namespace).Delete(ctx, ev.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.poll(ctx, 2*time.Minute, "evictd's brake lifted by its pod's exit", func(ctx context.Context) error {
		node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == nodebrake.ConditionType(nodebrake.Memory) {
				return fmt.Errorf("condition %s=%s", c.Type, c.Status)
			}
		}
		for _, tn := range node.Spec.Taints {
			if strings.HasPrefix(tn.Key, nodebrake.TaintPrefix) {
				return fmt.Errorf("taint %s", tn.ToString())
			}
		}
		return nil
	}); err != nil {
		t.Errorf("%v\n%s", err, n.Diagnostics())
	}
}

// brakeOn reports whether evictd's memory condition is True on the node and
// its taint there with the effect.
func brakeOn(ctx context.Context, n *Node, effect corev1.TaintEffect) (bool, error) {
	node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return nodebrake.Applied(node, effect)[nodebrake.Memory], nil
}

// keptAway creates a pod without the tests' brake tolerations and checks
// that the real scheduler leaves it unplaced for evictd's taint.
func keptAway(t *testing.T, n *Node, ns string) {
	t.Helper()
	ctx := context.Background()
	p := workloadPod(ns, "kept-away", 16<<20, 0, "--hold-mib=8")
	p.Spec.Tolerations = nil
	if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := nodebrake.TaintKey(nodebrake.Memory)
	if err := n.poll(ctx, 3*time.Minute, "the scheduler to keep kept-away off the tainted node", func(ctx context.Context) error {
		got, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Spec.NodeName != "" {
			return fmt.Errorf("placed on %s: the brake did not keep it away", got.Spec.NodeName)
		}
		for _, c := range got.Status.Conditions {
			if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "untolerated taint") {
				continue
			}
			// The scheduler no longer names the taint: the node's own say
			// which it was. Only evictd's may keep a pod away here.
			node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var keeping []string
			for _, tn := range node.Spec.Taints {
				if tn.Effect != corev1.TaintEffectPreferNoSchedule {
					keeping = append(keeping, tn.Key)
				}
			}
			if !slices.Equal(keeping, []string{key}) {
				return fmt.Errorf("unplaced (%s), but the node's taints are %v: want only %s", c.Message, keeping, key)
			}
			t.Logf("kept-away: %s (the node's only taint: %s)", c.Message, key)
			return nil
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	}); err != nil {
		t.Error(err)
	}
	_ = n.Cluster.Admin.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
}

// podEvents lists a namespace's Events, one per line.
func podEvents(t *testing.T, n *Node, ns string) string {
	t.Helper()
	evs, err := n.Cluster.Admin.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "%s %s %s/%s: %s (%s)\n", e.Type, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note, e.ReportingController)
	}
	return b.String()
}

// TestNodeStuckTerminating: the runtime cannot stop the first victim. Its
// containerd shim is stopped (SIGSTOP) before the pressure comes, as a hung
// shim would be, so the kubelet's StopContainer never reaches the process:
// the pod stays Terminating with its memory. After the victim's grace period
// (5 s) and evictd's GoneTimeout (30 s), evictd must say so once (log,
// EvictionStuck Event, its pod unready through the readiness probe) and
// evict the next pod, and nothing more; once the shim runs again the victim
// goes and evictd is Ready again.
func TestNodeStuckTerminating(t *testing.T) {
	const msgVictimStuck = "victim not gone in time; its reclaim no longer counts"
	n := sharedNode(t)
	ev := evictdPod(t, n)
	waitNoMemoryPressure(t, n)
	ctx := context.Background()
	ns := newNamespace(t, n, "stuck")
	// stuck (BestEffort, 300 MiB) ranks first and next (150 MiB over its
	// 32Mi request) second; the load stays within its request and brings
	// memory.available to settle, 100 MiB under evictd's threshold, which
	// either of the first two covers.
	const stuckMiB, nextMiB = 300, 150
	room := fillTo(t, n)
	load := room - stuckMiB - nextMiB
	if load < 32 {
		t.Fatalf("only %d MiB of room on the node", room)
	}
	pods := createRunning(t, ctx, n,
		workloadPod(ns, "stuck", 0, 0, "--hold-mib="+strconv.Itoa(stuckMiB)),
		workloadPod(ns, "next", 32<<20, 0, "--hold-mib="+strconv.Itoa(nextMiB)))
	cid, err := containerID(pods[0], "work")
	if err != nil {
		t.Fatal(err)
	}
	// The shim is the parent of the container's first process.
	shim, err := n.Sh(ctx, fmt.Sprintf(`pid=$(%s -n k8s.io task ls | awk '$1=="%s"{print $2}'); awk '{print $4}' /proc/$pid/stat`, n.Ctr, cid))
	shim = strings.TrimSpace(shim)
	if err != nil || shim == "" {
		t.Fatalf("the stuck pod's shim: %q, %v", shim, err)
	}
	if _, err := n.Sh(ctx, "kill -STOP "+shim); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if _, err := n.Sh(context.Background(), "kill -CONT "+shim); err != nil {
				t.Errorf("resuming the shim %s: %v", shim, err)
			}
		}
	}
	t.Cleanup(resume)
	t.Logf("shim %s of the stuck pod stopped; load holds %d MiB", shim, load)
	createRunning(t, ctx, n, workloadPod(ns, "load", (load+64)<<20, 0, "--hold-mib="+strconv.FormatInt(load, 10)))

	// evictd evicts stuck, waits out its grace and GoneTimeout, then next.
	var stuckAt, nextAt time.Time
	unready := false
	err = n.poll(ctx, 4*time.Minute, "evictd to evict the next pod", func(ctx context.Context) error {
		if p, err := n.Cluster.Admin.CoreV1().Pods("evictd-system").Get(ctx, ev.Name, metav1.GetOptions{}); err == nil && !podReady(p) {
			unready = true
		}
		list, err := n.Cluster.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			p := &list.Items[i]
			switch {
			case p.Name == "stuck" && stuckAt.IsZero() && FateOf(p) != "":
				stuckAt = time.Now()
			case p.Name == "next" && nextAt.IsZero() && FateOf(p) != "":
				nextAt = time.Now()
			}
		}
		if nextAt.IsZero() {
			return fmt.Errorf("next not evicted; %s", describePods(list.Items))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nevictd's log (tail):\n%s", err, framework.LastLines(evictdLog(t, n, ev), 30))
	}
	t.Logf("the test saw stuck evicted, then next %s later (host's polls)", nextAt.Sub(stuckAt).Round(time.Second))
	// The wait is evictd's own, on its clock: from its "evicted pod" line
	// for stuck to the one for next, never the host's sightings (a poll of
	// the loaded guest's API may see one late and the other on time). A
	// second's slack for the moments each line is written after its pass.
	lines := CRILogLines(evictdLog(t, n, ev))
	stuckLine, okStuck := FirstLogAfter(lines, time.Time{}, "evicted pod", map[string]string{"pod": ns + "/stuck"})
	nextLine, okNext := FirstLogAfter(lines, time.Time{}, "evicted pod", map[string]string{"pod": ns + "/next"})
	if !okStuck || !okNext {
		t.Fatalf("evictd's log has no \"evicted pod\" line for stuck (%v) or for next (%v):\n%s", okStuck, okNext, framework.LastLines(evictdLog(t, n, ev), 30))
	}
	if waited := nextLine.TS.Sub(stuckLine.TS); waited < 30*time.Second-time.Second {
		t.Errorf("evictd evicted next %s after stuck (its log): want after stuck's grace and evictd's 30 s GoneTimeout", waited.Round(time.Millisecond))
	} else {
		t.Logf("evictd evicted next %s after stuck (its log)", waited.Round(time.Millisecond))
	}
	p, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "stuck", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Errorf("the stuck pod is not Terminating (err %v): the scenario did not happen", err)
	}
	// A while longer: the load stays, and evictd's pod shows the stuck
	// victim as not ready.
	_ = n.poll(ctx, 3*time.Minute, "evictd's pod unready", func(ctx context.Context) error {
		if p, err := n.Cluster.Admin.CoreV1().Pods("evictd-system").Get(ctx, ev.Name, metav1.GetOptions{}); err == nil && !podReady(p) {
			unready = true
			return nil
		}
		return errors.New("Ready")
	})
	if !unready {
		t.Errorf("evictd's pod stayed Ready while its victim could not be stopped")
	}
	log := evictdLog(t, n, ev)
	if c := strings.Count(log, msgVictimStuck); c != 1 {
		t.Errorf("evictd said %q %d times, want once", msgVictimStuck, c)
	}
	events := podEvents(t, n, ns)
	if !strings.Contains(events, evict.ReasonVictimStuck+" Pod/stuck") {
		t.Errorf("no %s Event on the stuck pod:\n%s", evict.ReasonVictimStuck, events)
	}
	if p, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "load", metav1.GetOptions{}); err != nil || FateOf(p) != "" {
		t.Errorf("the load went too (err %v); two evictions relieved the pressure", err)
	}
	// evictd itself evicted stuck, then next, and no one else.
	if got := evictedIn(t, n, ev, ns); !slices.Equal(got, []string{"stuck", "next"}) {
		t.Errorf("evictd's \"evicted pod\" lines in %s name %v, want [stuck next]", ns, got)
	}
	if !hasEvictdEvent(events, "next") {
		t.Errorf("no Event from evictd on the next pod:\n%s", events)
	}

	// The shim runs again: the kubelet stops the victim, it goes, and
	// evictd is Ready again.
	resume()
	if err := n.poll(ctx, 3*time.Minute, "the stuck pod gone and evictd Ready", func(ctx context.Context) error {
		if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "stuck", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("stuck still there (%v)", err)
		}
		p, err := n.Cluster.Admin.CoreV1().Pods("evictd-system").Get(ctx, ev.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(p) {
			return errors.New("evictd not Ready")
		}
		return nil
	}); err != nil {
		t.Errorf("%v\n%s", err, n.Diagnostics())
	}
	t.Logf("events in %s:\n%s", ns, events)
}
