// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

// The memory brake's taint and condition on evictd's own Node.
var (
	brakeTaintKey  = nodebrake.TaintKey(nodebrake.Memory)
	brakeCondition = nodebrake.ConditionType(nodebrake.Memory)
)

// brakeWindow is how long each phase of TestBrakeLoop watches the loop at
// least. A grower takes about 9 s from its start to evictd's threshold, so
// the window holds four or five rounds of the loop when nothing brakes it
// on an idle machine. It is the span of the figures, never the evidence:
// the phase without the brake waits for its second eviction however long
// that takes (loopTimeout), and its figures span until then if longer.
const brakeWindow = 45 * time.Second

// loopTimeout is how long the phase without the brake waits for the loop's
// second eviction on A before it gives up.
const loopTimeout = 120 * time.Second

// growerApp labels the pods of TestBrakeLoop's Deployment.
const growerApp = "grower"

// brakePhase is one phase of TestBrakeLoop: node A's evictd without the
// node brake, or with it and the taint effect it should set.
type brakePhase struct {
	name   string
	brake  bool
	effect corev1.TaintEffect // the effect A's taint must have (brake only)
	flags  []string
}

// loopFigures is what one phase measured over its window.
type loopFigures struct {
	phase                  string
	span                   time.Duration // the span the figures cover
	evictionsA             int
	placementsA            int // replacements bound to A
	placementsB            int // replacements bound to B
	unplaced               int // replacements never bound within the window
	evictionToRunning      []time.Duration
	taintedFor             time.Duration // A's brake taint, summed over the window
	episodeStartToTaintOn  time.Duration // valid when taintOnSeen
	taintOnSeen            bool
	episodeEndToTaintGone  time.Duration // valid when taintGoneSeen
	taintGoneSeen          bool
	replacementsWhileTaint int // replacements bound to A while A had the taint
}

// TestBrakeLoop measures kubernetes#89068's loop, which evictd's acting
// before the kubelet would bring back, and evictd's node brake that stops
// it, in one cluster with the real scheduler and the real ReplicaSet and
// Deployment controllers. A Deployment's one pod prefers node A and grows
// past its request until A's evictd evicts it; its ReplicaSet recreates it
// at once. Without the brake the scheduler places every replacement back on
// A, where it grows and is evicted again: at least two evictions on A in the
// window (however long that takes on a loaded machine: the window is
// stretched to the second eviction). With the brake A carries evictd's taint
// from the start of its pressure episode, with each effect in turn:
// NoSchedule, and PreferNoSchedule (the default, passed as no flag), whose
// TaintToleration score must outweigh the Deployment's preference for A
// since B fits. Either way the replacement lands on B (twice A's memory, so
// it never comes under pressure there) and runs, nothing is placed on A
// while the taint is on, the taint has the phase's effect, and it goes when
// A's episode ends; the condition goes when A's evictd stops. The figures
// of every phase are logged as a table for docs/run.md and
// docs/performance.md.
func TestBrakeLoop(t *testing.T) {
	c := framework.Start(t, framework.WithScheduler())
	nodeA := c.StartNode(t, nodesim.Options{Name: "brake-a", MemoryBytes: nodeMemory})
	nodeB := c.StartNode(t, nodesim.Options{Name: "brake-b", MemoryBytes: 2 * nodeMemory})
	_, kubeconfigB := c.EvictdNodeToken(t, nodeB.Name)
	eB := startEvictdWith(t, c, nodeB, evictdSetup{kubeconfig: kubeconfigB}, memoryFlags...)

	phases := []brakePhase{
		{name: "without brake", flags: []string{"--node-brake=false"}},
		{name: "NoSchedule", brake: true, effect: corev1.TaintEffectNoSchedule, flags: []string{"--node-brake=true", "--node-brake-taint-effect=NoSchedule"}},
		{name: "PreferNoSchedule (default)", brake: true, effect: corev1.TaintEffectPreferNoSchedule, flags: []string{"--node-brake=true"}},
	}
	var figs []loopFigures
	for _, ph := range phases {
		var f loopFigures
		if !t.Run(ph.name, func(t *testing.T) { f = runBrakePhase(t, c, nodeA, nodeB, ph) }) {
			t.Errorf("phase %q failed; its figures are not reported", ph.name)
			continue
		}
		figs = append(figs, f)
	}

	// A's evictd has stopped (the subtest's cleanup): a clean exit takes
	// back its condition and taint.
	n, err := c.Admin.CoreV1().Nodes().Get(context.Background(), nodeA.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasBrakeTaint(n) {
		t.Errorf("node %s still has the taint %s after its evictd stopped: %v", nodeA.Name, brakeTaintKey, n.Spec.Taints)
	}
	if cond := nodeCondition(n, brakeCondition); cond != nil {
		t.Errorf("node %s still has the condition %s (%s, %q) after its evictd stopped", nodeA.Name, brakeCondition, cond.Status, cond.Message)
	}
	if evs := evicted(eB); len(evs) != 0 {
		t.Errorf("evictd on %s evicted %v; B is sized never to come under pressure", nodeB.Name, podsOf(evs))
	}
	for _, nd := range []*nodesim.Node{nodeA, nodeB} {
		if k := nd.OOMKills(); k != 0 {
			t.Errorf("the kernel OOM-killed %d processes on %s", k, nd.Name)
		}
	}
	t.Logf("node brake, a window of at least %s per phase (Deployment of 1 replica preferring A; A %d MiB, B %d MiB, memory.available<300Mi):\n%s",
		brakeWindow, nodeMemory/mib, 2*nodeMemory/mib, brakeTable(figs))
}

// runBrakePhase runs A's evictd with the phase's flags, lets the grower
// loop for brakeWindow, checks the phase's promises and returns its figures.
func runBrakePhase(t *testing.T, c *framework.Cluster, nodeA, nodeB *nodesim.Node, ph brakePhase) loopFigures {
	ctx := context.Background()
	_, kubeconfigA := c.EvictdNodeToken(t, nodeA.Name)
	eA := startEvictdWith(t, c, nodeA, evictdSetup{kubeconfig: kubeconfigA}, append(slices.Clone(memoryFlags), ph.flags...)...)
	ns := c.Namespace(t, "brake")
	w := watchLoop(t, c, ns, nodeA.Name)

	dep := growerDeployment(ns, nodeA.Name)
	start := time.Now()
	if _, err := c.Admin.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment %s: %v", dep.Name, err)
	}
	first := w.waitPod(t, 60*time.Second, "the first pod Running on "+nodeA.Name, func(p podRecord) bool {
		return p.node == nodeA.Name && !p.running.IsZero()
	})
	t.Logf("first pod %s Running on %s %s after the Deployment was created", first.name, first.node, first.running.Sub(start).Round(time.Millisecond))
	waitEvictions(t, eA, 1, evictionTimeout)
	if ph.brake {
		// The replacement of the first victim: the brake must send it to B.
		repl := w.waitPod(t, 60*time.Second, "the replacement Running", func(p podRecord) bool {
			return p.uid != first.uid && !p.running.IsZero()
		})
		if repl.node != nodeB.Name {
			t.Errorf("the replacement %s of the evicted %s runs on %s, want %s: A's taint should have kept it away", repl.name, first.name, repl.node, nodeB.Name)
		}
		// Landing on B is the brake's doing only if A had the taint when
		// the scheduler placed the replacement: the taint comes with the
		// episode's start, before the eviction.
		if !w.taintedAt(repl.bound) {
			t.Errorf("the replacement %s was placed on %s at %s, when A had no taint %s (taint changes seen: %v)",
				repl.name, repl.node, stamp(repl.bound), brakeTaintKey, w.taintChanges())
		}
	}
	if !ph.brake {
		// The loop's evidence is an event: a second eviction on A, of a
		// replacement placed back on A. The figures then span at least the
		// window, so that both phases' rows compare.
		waitEvictions(t, eA, 2, loopTimeout)
	}
	time.Sleep(time.Until(start.Add(brakeWindow)))
	end := time.Now()

	f := w.figures(ph.name, start, end, nodeA.Name, nodeB.Name, inNamespace(evicted(eA), ns))
	f.span = end.Sub(start)
	t.Logf("%s over %s: %d evictions on A, replacements placed on A %d, on B %d, unplaced %d; eviction → replacement Running %v",
		ph.name, f.span.Round(time.Second), f.evictionsA, f.placementsA, f.placementsB, f.unplaced, roundAll(f.evictionToRunning))
	for _, p := range w.pods() {
		t.Logf("  pod %s", p)
	}

	if !ph.brake {
		if f.evictionsA < 2 {
			t.Errorf("without the brake: %d evictions on A in %s, want at least 2 (the loop of kubernetes#89068)", f.evictionsA, f.span.Round(time.Second))
		}
		if f.taintedFor > 0 {
			t.Errorf("without the brake A had the taint %s for %s", brakeTaintKey, f.taintedFor)
		}
	}
	if ph.brake {
		if f.evictionsA < 1 {
			t.Errorf("with the brake: no eviction on A in the window; the phase proved nothing")
		}
		if f.replacementsWhileTaint != 0 {
			t.Errorf("with the brake: %d replacements placed on A while A had the taint %s", f.replacementsWhileTaint, brakeTaintKey)
		}
		if f.placementsB < 1 {
			t.Errorf("with the brake: no replacement placed on B")
		}
		if f.taintedFor == 0 {
			t.Errorf("with the brake: A never had the taint %s in the window", brakeTaintKey)
		}
		if effects := w.effects(); !slices.Equal(effects, []corev1.TaintEffect{ph.effect}) {
			t.Errorf("with the brake: A's taint %s had the effects %v; want only %s", brakeTaintKey, effects, ph.effect)
		}
		// A's episode ends once the victim is gone and the transition period
		// has passed; the brake is lifted with it.
		ended := eA.waitLog(60*time.Second, "pressure episode ended", func(l logEntry) bool { return l.Str("resource") == "memory" })
		n := w.waitNode(t, 30*time.Second, "without the taint "+brakeTaintKey, func(n *corev1.Node) bool { return !hasBrakeTaint(n) })
		if cond := nodeCondition(n, brakeCondition); cond == nil || cond.Status != corev1.ConditionFalse {
			t.Errorf("after A's episode ended its condition %s is %+v, want False", brakeCondition, cond)
		}
		if started := eA.find("pressure episode started"); len(started) > 0 {
			if on, ok := w.taintOn(); ok {
				f.episodeStartToTaintOn, f.taintOnSeen = on.Sub(started[0].TS), true
			}
		}
		if gone, ok := w.taintGone(ended.TS); ok {
			f.episodeEndToTaintGone, f.taintGoneSeen = gone.Sub(ended.TS), true
		} else if f.taintedFor > 0 {
			t.Errorf("the watch never saw A's taint come off after the episode ended at %s", ended.TS.Format(time.StampMilli))
		}
		onB := w.waitPod(t, 30*time.Second, "a pod Running on "+nodeB.Name, func(p podRecord) bool {
			return p.node == nodeB.Name && !p.running.IsZero() && p.deleted.IsZero()
		})
		t.Logf("replacement %s Running on %s; A's episode ended at %s, taint gone %s later", onB.name, onB.node,
			ended.TS.Format(time.StampMilli), f.episodeEndToTaintGone.Round(time.Millisecond))
	}

	// Tear the phase down before A's evictd stops (this subtest's cleanup):
	// no pod of the Deployment left, A's episode over.
	if err := c.Admin.AppsV1().Deployments(ns).Delete(ctx, dep.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatalf("delete Deployment %s: %v", dep.Name, err)
	}
	w.waitNoPods(t, 60*time.Second)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return len(eA.find("pressure episode ended")) >= len(eA.find("pressure episode started")), nil
	})
	if err != nil {
		t.Errorf("A's pressure episode did not end within 60s of the Deployment's deletion; log tail:\n%s", eA.tail(20))
	}
	return f
}

// growerDeployment is one replica of a pod that holds 64 MiB and grows at
// 80 MiB/s to 800 MiB, far past its 128 MiB request: alone it takes the
// 1 GiB node A below memory.available 300 MiB, while the 2 GiB node B keeps
// more than 1 GiB available. It prefers A the way a workload prefers a zone
// or a node pool: scheduling on B is allowed, A wins when it can take it.
func growerDeployment(ns, preferred string) *appsv1.Deployment {
	labels := map[string]string{"app": growerApp}
	s := podSpec{name: growerApp, holdMiB: 64, growMiBPerSec: 80, growToMiB: 800, grace: 2, requests: res("cpu", "10m", "memory", "128Mi")}
	pod := s.pod(ns, "")
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{preferred},
			}}},
		}},
	}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: growerApp, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod.Spec,
			},
		},
	}
}

// podRecord is what the test saw of one pod of the Deployment, each time
// when its watch first showed it.
type podRecord struct {
	uid, name string
	node      string
	created   time.Time // the watch's first sight of the pod
	bound     time.Time // first seen with spec.nodeName
	running   time.Time // first seen Running and Ready
	deleted   time.Time // first seen with a deletionTimestamp
}

func (p podRecord) String() string {
	return fmt.Sprintf("%s on %q: bound %s, Running %s, deleted %s", p.name, p.node, stamp(p.bound), stamp(p.running), stamp(p.deleted))
}

// taintChange is a moment the brake's taint came onto node A, left it or
// changed its effect.
type taintChange struct {
	at     time.Time
	on     bool
	effect corev1.TaintEffect // while on
}

// loopWatch records the Deployment's pods and node A's brake taint from
// informers, stamping each change when it is seen.
type loopWatch struct {
	mu       sync.Mutex
	order    []string // pod UIDs in the order first seen
	byUID    map[string]*podRecord
	taint    []taintChange
	node     *corev1.Node
	nodeName string
}

func watchLoop(t *testing.T, c *framework.Cluster, ns, nodeA string) *loopWatch {
	t.Helper()
	w := &loopWatch{byUID: map[string]*podRecord{}, nodeName: nodeA}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	pods := informers.NewSharedInformerFactoryWithOptions(c.Admin, 0, informers.WithNamespace(ns)).Core().V1().Pods().Informer()
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels["app"] == growerApp {
			w.sawPod(p, time.Now())
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }}); err != nil {
		t.Fatal(err)
	}
	nodes := informers.NewSharedInformerFactoryWithOptions(c.Admin, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeA).String()
	})).Core().V1().Nodes().Informer()
	onNode := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			w.sawNode(n, time.Now())
		}
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onNode, UpdateFunc: func(_, obj any) { onNode(obj) }}); err != nil {
		t.Fatal(err)
	}
	go pods.RunWithContext(ctx)
	go nodes.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, nodes.HasSynced) {
		t.Fatal("pod and node informers did not sync")
	}
	return w
}

func (w *loopWatch) sawPod(p *corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.byUID[string(p.UID)]
	if r == nil {
		r = &podRecord{uid: string(p.UID), name: p.Name, created: now}
		w.byUID[r.uid] = r
		w.order = append(w.order, r.uid)
	}
	if r.bound.IsZero() && p.Spec.NodeName != "" {
		r.node, r.bound = p.Spec.NodeName, now
	}
	if r.running.IsZero() && podtest.RunningAndReady(p) {
		r.running = now
	}
	if r.deleted.IsZero() && p.DeletionTimestamp != nil {
		r.deleted = now
	}
}

func (w *loopWatch) sawNode(n *corev1.Node, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.node = n.DeepCopy()
	ch := taintChange{at: now}
	if i := slices.IndexFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == brakeTaintKey }); i >= 0 {
		ch.on, ch.effect = true, n.Spec.Taints[i].Effect
	}
	if len(w.taint) == 0 || w.taint[len(w.taint)-1].on != ch.on || w.taint[len(w.taint)-1].effect != ch.effect {
		w.taint = append(w.taint, ch)
	}
}

// effects lists the effects the taint was seen with, each once, in order.
func (w *loopWatch) effects() []corev1.TaintEffect {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []corev1.TaintEffect
	for _, ch := range w.taint {
		if ch.on && !slices.Contains(out, ch.effect) {
			out = append(out, ch.effect)
		}
	}
	return out
}

// pods returns the records in the order the pods were first seen.
func (w *loopWatch) pods() []podRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]podRecord, 0, len(w.order))
	for _, uid := range w.order {
		out = append(out, *w.byUID[uid])
	}
	return out
}

// taintedAt reports whether the taint was on at t, as last seen before it.
func (w *loopWatch) taintedAt(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	on := false
	for _, ch := range w.taint {
		if ch.at.After(t) {
			break
		}
		on = ch.on
	}
	return on
}

// taintedFor sums the time the taint was on between from and to.
func (w *loopWatch) taintedFor(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum time.Duration
	var since time.Time
	for _, ch := range w.taint {
		at := ch.at
		if at.Before(from) {
			at = from
		}
		if at.After(to) {
			at = to
		}
		switch {
		case ch.on && since.IsZero():
			since = at
		case !ch.on && !since.IsZero():
			sum += at.Sub(since)
			since = time.Time{}
		}
	}
	if !since.IsZero() {
		sum += to.Sub(since)
	}
	return sum
}

// taintOn is when the taint was first seen on.
func (w *loopWatch) taintOn() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.taint {
		if ch.on {
			return ch.at, true
		}
	}
	return time.Time{}, false
}

// taintChanges lists the taint's changes as seen, for a failure message.
func (w *loopWatch) taintChanges() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, ch := range w.taint {
		out = append(out, fmt.Sprintf("%s on=%v %s", stamp(ch.at), ch.on, ch.effect))
	}
	return out
}

// taintGone is when the taint was first seen gone at or after t.
func (w *loopWatch) taintGone(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, ch := range w.taint {
		if !ch.on && i > 0 && w.taint[i-1].on && !ch.at.Before(t.Add(-time.Second)) {
			return ch.at, true
		}
	}
	return time.Time{}, false
}

func (w *loopWatch) waitPod(t *testing.T, timeout time.Duration, what string, cond func(podRecord) bool) podRecord {
	t.Helper()
	found, err := pollFind(timeout, w.pods, cond)
	if err != nil {
		t.Fatalf("never saw %s within %s; pods: %v", what, timeout, w.pods())
	}
	return found
}

func (w *loopWatch) waitNode(t *testing.T, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		n = w.node
		w.mu.Unlock()
		return n != nil && cond(n), nil
	})
	if err != nil {
		var taints []corev1.Taint
		if n != nil {
			taints = n.Spec.Taints
		}
		t.Fatalf("node %s never %s within %s; its taints: %v", w.nodeName, what, timeout, taints)
	}
	return n
}

// waitNoPods waits until every pod of the Deployment has been seen deleted
// and the namespace lists none.
func (w *loopWatch) waitNoPods(t *testing.T, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, p := range w.pods() {
			if p.deleted.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the Deployment's pods were not all deleted within %s: %v", timeout, w.pods())
	}
}

// figures counts the phase's window: evictions on A, where each
// replacement (every pod after the first: the Deployment has one replica)
// was placed, and the time from each eviction to its replacement Running.
func (w *loopWatch) figures(phase string, from, to time.Time, nodeA, nodeB string, evs []logEntry) loopFigures {
	f := loopFigures{phase: phase, taintedFor: w.taintedFor(from, to)}
	pods := w.pods()
	index := map[string]int{}
	for i, p := range pods {
		index[p.name] = i
	}
	for _, ev := range evs {
		if ev.TS.Before(from) || ev.TS.After(to) {
			continue
		}
		f.evictionsA++
		_, name, _ := strings.Cut(ev.Pod, "/")
		i, ok := index[name]
		if !ok || i+1 >= len(pods) {
			continue
		}
		if next := pods[i+1]; !next.running.IsZero() && !next.running.After(to) {
			f.evictionToRunning = append(f.evictionToRunning, next.running.Sub(ev.TS))
		}
	}
	for _, p := range pods[min(1, len(pods)):] {
		switch {
		case p.bound.IsZero() || p.bound.After(to):
			f.unplaced++
		case p.node == nodeA:
			f.placementsA++
			if w.taintedAt(p.bound) {
				f.replacementsWhileTaint++
			}
		case p.node == nodeB:
			f.placementsB++
		}
	}
	return f
}

// inNamespace keeps the log entries whose pod is in ns.
func inNamespace(entries []logEntry, ns string) []logEntry {
	var out []logEntry
	for _, l := range entries {
		if strings.HasPrefix(l.Pod, ns+"/") {
			out = append(out, l)
		}
	}
	return out
}

func hasBrakeTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == brakeTaintKey })
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.StampMilli)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// brakeTable is the phases' figures as a Markdown table.
func brakeTable(figs []loopFigures) string {
	var b strings.Builder
	b.WriteString("| phase | span | evictions on A | replacements on A | replacements on B | unplaced | eviction → replacement Running (median, max) | A tainted | episode start → taint on | episode end → taint gone |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range figs {
		run := "-"
		if len(f.evictionToRunning) > 0 {
			ds := slices.Clone(f.evictionToRunning)
			slices.Sort(ds)
			run = fmt.Sprintf("%s, %s", median(ds).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
		}
		on, gone := "-", "-"
		if f.taintOnSeen {
			on = f.episodeStartToTaintOn.Round(time.Millisecond).String()
		}
		if f.taintGoneSeen {
			gone = f.episodeEndToTaintGone.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %s | %s | %s | %s |\n", f.phase, f.span.Round(time.Second), f.evictionsA, f.placementsA, f.placementsB, f.unplaced,
			run, f.taintedFor.Round(100*time.Millisecond), on, gone)
	}
	return b.String()
}
