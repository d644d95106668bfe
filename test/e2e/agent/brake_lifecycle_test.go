// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

// nodeWatch follows one Node through a watch on the API server, from the
// version read when it starts: every change, in order, none missed.
type nodeWatch struct {
	t       *testing.T
	c       *framework.Cluster
	name    string
	changes chan *corev1.Node
	last    *corev1.Node
	barrier int
}

func watchNode(t *testing.T, c *framework.Cluster, name string) *nodeWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: n.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	nw := &nodeWatch{t: t, c: c, name: name, changes: make(chan *corev1.Node, 1000), last: n}
	go func() {
		defer close(nw.changes)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Modified {
				nw.changes <- n
			}
		}
	}()
	return nw
}

// until returns the first state of the Node (the one it had when the
// watch started, or a change after it) for which cond holds, passing every
// change it reads to seen (nil: none); it fails the test after timeout.
func (w *nodeWatch) until(timeout time.Duration, what string, cond func(*corev1.Node) bool, seen func(*corev1.Node)) *corev1.Node {
	w.t.Helper()
	if cond(w.last) {
		return w.last
	}
	deadline := time.After(timeout)
	for {
		select {
		case n, ok := <-w.changes:
			if !ok {
				w.t.Fatalf("the watch of Node %s ended before it %s", w.name, what)
			}
			w.last = n
			if seen != nil {
				seen(n)
			}
			if cond(n) {
				return n
			}
		case <-deadline:
			w.t.Fatalf("Node %s never %s within %s: taints %v, conditions %v", w.name, what, timeout, w.last.Spec.Taints, evictdConditions(w.last))
		}
	}
}

// sync writes a mark on the Node and reads changes until the watch brings
// it: every change made before the mark has then been read (and passed to
// seen). The positive sign that the watch is up to date.
func (w *nodeWatch) sync(timeout time.Duration, seen func(*corev1.Node)) *corev1.Node {
	w.t.Helper()
	w.barrier++
	mark := strconv.Itoa(w.barrier)
	p, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"e2e.evictd.io/mark": mark}}})
	if _, err := w.c.Admin.CoreV1().Nodes().Patch(context.Background(), w.name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return w.until(timeout, "showed the test's mark "+mark, func(n *corev1.Node) bool { return n.Annotations["e2e.evictd.io/mark"] == mark }, seen)
}

// memoryBrake reports whether n carries evictd's memory brake: its taint
// (any effect) and its condition at True.
func memoryBrake(n *corev1.Node) (taint, cond bool) {
	taint = slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodebrake.TaintKey(nodebrake.Memory) })
	cond = slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == nodebrake.ConditionType(nodebrake.Memory) && c.Status == corev1.ConditionTrue
	})
	return taint, cond
}

func noEvictdBrake(n *corev1.Node) bool {
	taint, cond := memoryBrake(n)
	return !taint && !cond
}

// otherTaints are n's taints that are not evictd's.
func otherTaints(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		if t.Key != nodebrake.TaintKey(nodebrake.Memory) {
			out = append(out, t.ToString())
		}
	}
	return out
}

func evictdConditions(n *corev1.Node) []string {
	var out []string
	for _, c := range n.Status.Conditions {
		if c.Type == nodebrake.ConditionType(nodebrake.Memory) || c.Type == nodebrake.ConditionType(nodebrake.Disk) || c.Type == nodebrake.ConditionType(nodebrake.PIDs) {
			out = append(out, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
	}
	return out
}

// putLeftover leaves on the Node the memory brake an agent killed
// mid-episode would have left: its taint beside another taint, and its
// condition at True.
func putLeftover(t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	ctx := context.Background()
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if taint, _ := memoryBrake(n); !taint { // still there when an earlier run failed to lift it
		taints := append(slices.Clone(n.Spec.Taints), corev1.Taint{Key: nodebrake.TaintKey(nodebrake.Memory), Effect: corev1.TaintEffectNoSchedule})
		p, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
		if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	p, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: nodebrake.ConditionType(nodebrake.Memory), Status: corev1.ConditionTrue, Reason: nodebrake.ReasonPressure,
		Message: "left by an earlier evictd", LastHeartbeatTime: now, LastTransitionTime: now,
	}}}})
	if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, p, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestNodeBrakeOffLiftsLeftover: an agent that puts no brake on (the
// brake off, a dry run, shadow mode) still lifts the memory brake an
// earlier agent left on its node, with the shipped RBAC and admission
// policy in force (a token bound to a pod on the node): after `helm
// upgrade --set nodeBrake.enabled=false` mid-episode, nothing else would.
func TestNodeBrakeOffLiftsLeftover(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "leftover", MemoryBytes: nodeMemory})
	_, kubeconfig := c.EvictdNodeToken(t, node.Name)
	for _, mode := range []struct {
		name  string
		flags []string
	}{
		{"brake off", []string{"--node-brake=false"}},
		{"dry run", []string{"--node-brake=true", "--dry-run"}},
		{"shadow", []string{"--node-brake=true", "--shadow"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			putLeftover(t, c, node.Name)
			w := watchNode(t, c, node.Name)
			if taint, cond := memoryBrake(w.last); !taint || !cond {
				t.Fatalf("the leftover is not on the Node: taint %v, condition %v", taint, cond)
			}
			e := startEvictdWith(t, c, node, evictdSetup{kubeconfig: kubeconfig, noWait: true},
				append(append([]string{"--node-lease-duration=3s"}, memoryFlags...), mode.flags...)...)
			others := otherTaints(w.last)
			lifted := w.until(60*time.Second, "lost the leftover brake", noEvictdBrake, nil)
			// This agent lifted it, not one of an earlier run.
			e.waitLog(30*time.Second, "node brake lifted", func(l logEntry) bool { return l.Str("resource") == "memory" })
			t.Logf("%s: the leftover lifted; taints now %v", mode.name, lifted.Spec.Taints)
			if got := otherTaints(lifted); !slices.Equal(got, others) {
				t.Errorf("the Node's other taints went from %v to %v; the lift must leave them", others, got)
			}
			if got := e.find("pressure episode started"); len(got) > 0 {
				t.Errorf("an episode started on a node without pressure: %s", got[0].Raw)
			}
		})
	}
}

// TestNodeBrakeHandoverKeepsBrake: agent a holds the node lease and has
// the memory brake on in an episode that cannot end (the hog is protected
// by its PodDisruptionBudget); a stalls past its lease (SIGSTOP: a GC
// pause, a frozen cgroup, a starved CPU), b takes the lease over and acts
// in the same episode with the brake on; then a exits (SIGTERM as it
// resumes). a's exit must leave b's brake on: it reads the lease, finds b
// holding it, and lifts nothing. Every change of the Node, through a
// watch, is checked from a's SIGTERM until a mark written after a's exit.
func TestNodeBrakeHandoverKeepsBrake(t *testing.T) {
	m := newMemoryNode(t, "handover")
	_, kubeconfig := m.c.EvictdNodeToken(t, m.node.Name)
	hog := pdbHeldHog(t, m)

	a, b, w := startHandoverPair(t, m, kubeconfig, kubeconfig, hog)

	// a stalls; b takes the lease once it expires and acts in the episode.
	if err := syscall.Kill(a.p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = syscall.Kill(a.p.Pid(), syscall.SIGCONT)
		}
	})
	bActs := b.waitLog(60*time.Second, "acting on this node: holding its lease", nil)
	b.waitLog(60*time.Second, "pressure episode started", func(l logEntry) bool { return l.Str("resource") == "memory" && !l.TS.Before(bActs.TS) })
	if err := waitMetric(b, 60*time.Second, "evictd_node_brake_on", map[string]string{"resource": "memory"}, 1); err != nil {
		t.Fatalf("b: %v", err)
	}

	// a resumes into its SIGTERM and exits.
	var lifts []string
	seen := func(n *corev1.Node) {
		if taint, cond := memoryBrake(n); !taint || !cond {
			lifts = append(lifts, fmt.Sprintf("rv %s: taint %v, condition %v", n.ResourceVersion, taint, cond))
		}
	}
	w.sync(30*time.Second, seen)
	lifts = nil // the watch is now at a's SIGTERM
	if err := syscall.Kill(a.p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(a.p.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	a.waitLog(60*time.Second, "stopped", nil)
	a.ended = true
	if killed, code, err := a.p.Stop(stopGrace); killed || code != 0 || err != nil {
		t.Errorf("a after SIGTERM: killed %v, exit code %d, %v", killed, code, err)
	}
	final := w.sync(30*time.Second, seen)
	checkExitLeftBrake(t, a, b, final, lifts, "while b holds the node lease",
		"leaving the node brake on at exit: another evictd holds the node lease and acts here now")
}

// checkExitLeftBrake holds a hand-over's end: a's exit wrote no lift
// (lifts, the Node's versions seen after a's SIGTERM) and logged why
// (reason), b's memory brake is on the final Node, and b's episode is
// still open, as the test needs it.
func checkExitLeftBrake(t *testing.T, a, b *evictd, final *corev1.Node, lifts []string, when, reason string) {
	t.Helper()
	if len(lifts) > 0 {
		t.Errorf("a's exit lifted b's brake mid-episode, %s: %v", when, lifts)
	}
	if taint, cond := memoryBrake(final); !taint || !cond {
		t.Errorf("after a's exit the Node has taint %v, condition %v; want b's brake on", taint, cond)
	}
	if got := a.find("node brake lifted"); len(got) > 0 {
		t.Errorf("a logged %q at exit: %s", "node brake lifted", got[len(got)-1].Raw)
	}
	if got := b.find("pressure episode ended"); len(got) > 0 {
		t.Fatalf("b's episode ended (%s): the test needs it open to the end", got[0].Raw)
	}
	if got := a.find(reason); len(got) == 0 {
		t.Errorf("a did not say why it left the brake on (%q):\n%s", reason, a.tail(20))
	}
}

// waitMetric polls e's /metrics until name{labels} is want.
func waitMetric(e *evictd, timeout time.Duration, name string, labels map[string]string, want float64) error {
	deadline := time.Now().Add(timeout)
	var got float64
	for time.Now().Before(deadline) {
		if got = e.scrape().Sum(name, labels); got == want {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s%v = %v after %s; want %v", name, labels, got, timeout, want)
}

// startHandoverPair starts the two agents of a hand-over test on m: a,
// acting and braking, with aKubeconfig, then b, waiting for the lease,
// with bKubeconfig; then starts hog and waits until a's memory brake is
// on the Node, which the returned watch has seen.
func startHandoverPair(t *testing.T, m *memoryNode, aKubeconfig, bKubeconfig string, hog podSpec) (a, b *evictd, w *nodeWatch) {
	t.Helper()
	a = startBraking(t, m, aKubeconfig)
	a.waitLog(30*time.Second, "acting on this node: holding its lease", nil)
	b = startEvictdWith(t, m.c, m.node, evictdSetup{kubeconfig: bKubeconfig, noWait: true},
		append([]string{"--node-brake=true", "--eviction-pressure-transition-period=3s", "--node-lease-duration=3s"}, memoryFlags...)...)
	b.waitLog(60*time.Second, "not acting: another evictd acts on this node", nil)

	m.startHog(t, hog)
	a.waitLog(evictionTimeout, "node brake on: new pods kept away until the episode ends", nil)
	w = watchNode(t, m.c, m.node.Name)
	w.until(30*time.Second, "showed a's brake", func(n *corev1.Node) bool { taint, cond := memoryBrake(n); return taint && cond }, nil)
	return a, b, w
}

// pdbHeldHog is a memory hog for m whose PodDisruptionBudget allows no
// disruption, so that its episode cannot end: the budget is made before the
// hog exists (createPDB waits for healthy pods, which there are none of
// yet), and waited for until it allows none.
func pdbHeldHog(t *testing.T, m *memoryNode) podSpec {
	t.Helper()
	hog := hogSpec(80, 700)
	hog.labels = map[string]string{"app": "hog"}
	ctx := context.Background()
	if _, err := m.c.Admin.PolicyV1().PodDisruptionBudgets(m.ns).Create(ctx, podtest.PDB(m.ns, "hog", 1, hog.labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := podtest.WaitPDB(ctx, m.c.Admin, m.ns, "hog", 60*time.Second, func(p *policyv1.PodDisruptionBudget) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 0
	}); err != nil {
		t.Fatal(err)
	}
	return hog
}
