// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
)

// These tests run the loop against a real API server (and its disruption
// controller) with evictd's own ServiceAccount: the Eviction API, the
// PodDisruptionBudget answers, the informers and the RBAC are real. No
// kubelet runs: the observer is scripted from the pods the API server still
// holds (a pod's memory is back once the pod object is deleted), and the
// test plays the kubelet's final deletion.

// apiNode is the scripted observer: node memory is what the listed pods use
// plus a base.
type apiNode struct {
	mu       sync.Mutex
	capacity int64
	base     int64
	usage    map[string]int64 // pod name → working set
	pods     func() []*v1.Pod
	passes   int // Observe calls: one at the start of each of the loop's passes
}

func (n *apiNode) Observe(context.Context) (*pressure.Observation, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.passes++
	now := metav1.Now()
	ws := n.base
	var stats []statsapi.PodStats
	for _, p := range n.pods() {
		u, ok := n.usage[p.Name]
		if !ok {
			continue
		}
		ws += u
		v := uint64(u)
		stats = append(stats, statsapi.PodStats{
			PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
			Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: &v, UsageBytes: &v},
		})
	}
	avail, wsu := uint64(max(n.capacity-ws, 0)), uint64(ws)
	return &pressure.Observation{Time: now.Time, Summary: &statsapi.Summary{
		Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{Time: now, AvailableBytes: &avail, WorkingSetBytes: &wsu, UsageBytes: &wsu}},
		Pods: stats,
	}}, nil
}

type apiFixture struct {
	c       *framework.Cluster
	ns      string
	node    string
	pods    map[string]*v1.Pod
	metrics *metrics.Metrics
	loop    *Loop
	watcher *podwatch.Watcher
	obs     *apiNode
}

// startAPIFixture creates a Node, three running pods bound to it (a: 1000Mi
// with a PDB that allows no disruption, b: 800Mi, c: 600Mi within its
// request) and runs the loop with evictd's identity until the test ends.
func startAPIFixture(t *testing.T, dryRun bool) *apiFixture {
	c := framework.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &apiFixture{c: c, ns: c.Namespace(t, "agent"), node: "agent-" + rand.String(6), pods: map[string]*v1.Pod{}}
	if _, err := c.Admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Admin.CoreV1().Nodes().Delete(context.Background(), f.node, metav1.DeleteOptions{}) })

	for _, p := range []struct {
		name    string
		request string
	}{{"a", "100Mi"}, {"b", "0"}, {"c", "1000Mi"}} {
		pod := podtest.New(f.ns, p.name, podtest.OnNode(f.node), podtest.Labels(map[string]string{"app": p.name}), podtest.Grace(30),
			podtest.Container("c", "none"), podtest.Resources(podtest.List("memory", p.request), nil))
		// Running and Ready, as a kubelet would report: a Pending pod is
		// evicted past any PodDisruptionBudget.
		created, err := podtest.CreateReady(ctx, c.Admin, pod)
		if err != nil {
			t.Fatal(err)
		}
		f.pods[p.name] = created
	}
	pdb := podtest.PDB(f.ns, "a", 1, map[string]string{"app": "a"})
	_, err := c.Admin.PolicyV1().PodDisruptionBudgets(f.ns).Create(ctx, pdb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the disruption controller has looked at it.
	if _, err := podtest.WaitPDB(ctx, c.Admin, f.ns, "a", time.Minute, func(pdb *policyv1.PodDisruptionBudget) bool {
		return podtest.Settled(pdb) && pdb.Status.ExpectedPods == 1
	}); err != nil {
		t.Fatalf("the PDB was never processed: %v", err)
	}

	log := zaptest.NewLogger(t)
	clk := clock.RealClock{}
	f.metrics, err = metrics.New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	opts := evict.Defaults()
	opts.DryRun = dryRun
	opts.Rate, opts.Burst = 100, 10
	var events *evict.EventWriter
	if !dryRun {
		events = evict.NewEventWriter(c.EvictdAPI, "evictd-"+f.node, log, clk)
	}
	ev, err := evict.New(evict.Config{Options: opts, Client: c.EvictdAPI, NodeName: f.node, Events: events, Metrics: f.metrics, Logger: log, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var loopMu sync.Mutex
	f.watcher, err = podwatch.New(podwatch.Options{Client: c.EvictdAPI, NodeName: f.node, Log: log, OnDelete: func(p *v1.Pod) {
		loopMu.Lock()
		defer loopMu.Unlock()
		if f.loop != nil {
			f.loop.PodDeleted(p)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.watcher.Start(ctx)
	if err := f.watcher.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(f.watcher.Pods()); got != 3 {
		t.Fatalf("the informer sees %d pods on %s, want 3", got, f.node)
	}
	// The API server's built-in classes, listed with evictd's own RBAC.
	if v, ok := f.watcher.PriorityClasses()["system-node-critical"]; !ok || v != 2000001000 {
		t.Fatalf("PriorityClasses()[system-node-critical] = %d, %v", v, ok)
	}
	set, err := wakeup.New(log, clk, wakeup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 250Mi available, threshold 300Mi + 200Mi minimum reclaim: 250Mi needed.
	obs := &apiNode{capacity: 4096 * mi, base: 4096*mi - 250*mi - 2400*mi,
		usage: map[string]int64{"a": 1000 * mi, "b": 800 * mi, "c": 600 * mi}, pods: f.watcher.Pods}
	f.obs = obs
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	cfg.Decide.Evict = opts
	cfg.Housekeeping = 200 * time.Millisecond
	cfg.Poll = wakeup.PollPolicy{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	loopMu.Lock()
	f.loop, err = NewLoop(cfg, Deps{Observer: obs, Waker: set, Pods: f.watcher, Evictor: ev, Metrics: f.metrics, Log: log, Clock: clk})
	loopMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("loop: %v", err)
		}
		f.watcher.Shutdown()
		if events != nil {
			sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = events.Shutdown(sctx)
			scancel()
		}
		_ = set.Close()
	})
	return f
}

// waitPasses waits until the loop has run at least n whole passes after
// the call: the observer is asked once at the start of each pass, and the
// passes run one after another, so the (n+1)th observation from now
// begins only once n passes have ended. The give-up is generous for a
// loaded machine.
func (f *apiFixture) waitPasses(t *testing.T, n int) {
	t.Helper()
	f.obs.mu.Lock()
	want := f.obs.passes + n + 1
	f.obs.mu.Unlock()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		f.obs.mu.Lock()
		defer f.obs.mu.Unlock()
		return f.obs.passes >= want, nil
	})
	if err != nil {
		f.obs.mu.Lock()
		got := f.obs.passes
		f.obs.mu.Unlock()
		t.Fatalf("the loop did not run %d more passes (observations %d, want %d): %v", n, got, want, err)
	}
}

func (f *apiFixture) get(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := f.c.Admin.CoreV1().Pods(f.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

// evictionCount is evictd_evictions_total{signal="memory.available"} for
// result. The fixture creates no series up front (no InitSignals): a result
// not yet counted fails the test, so a wait for the first one polls
// lookupEvictions.
func (f *apiFixture) evictionCount(t *testing.T, result string) float64 {
	t.Helper()
	return metrictest.Value(t, f.metrics.Registry(), "evictd_evictions_total", evictionLabels(result))
}

func (f *apiFixture) lookupEvictions(result string) (float64, error) {
	return metrictest.Lookup(f.metrics.Registry(), "evictd_evictions_total", evictionLabels(result))
}

func evictionLabels(result string) map[string]string {
	return map[string]string{"signal": "memory.available", "result": result}
}

func TestAPIEvictsPastAPDBThroughTheEvictionAPI(t *testing.T) {
	f := startAPIFixture(t, false)
	ctx := context.Background()

	// a ranks first but its PDB refuses (429); b is evicted in the same pass.
	var b *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		b = f.get(t, "b")
		return b.DeletionTimestamp != nil, nil
	})
	if err != nil {
		t.Fatalf("b was never evicted: %v", err)
	}
	if g := b.DeletionGracePeriodSeconds; g == nil || *g != 5 {
		t.Errorf("b's grace period %v, want the 5s hard cap", g)
	}
	if a := f.get(t, "a"); a.DeletionTimestamp != nil {
		t.Error("a was evicted despite its PodDisruptionBudget")
	}
	if n := f.evictionCount(t, "pdb_blocked"); n < 1 {
		t.Errorf("pdb_blocked evictions %v, want at least 1", n)
	}

	// b is terminating and its memory still in use: it is in flight and
	// covers the need, so nothing else is evicted meanwhile: several
	// passes under unchanged pressure.
	f.waitPasses(t, 3)
	if c := f.get(t, "c"); c.DeletionTimestamp != nil {
		t.Fatal("c was evicted while b's reclaim was in flight")
	}
	if n := f.evictionCount(t, "evicted"); n != 1 {
		t.Errorf("evicted count %v, want 1", n)
	}
	inFlight := f.loop.InFlight()
	if len(inFlight) != 1 || inFlight[0].Pod != f.ns+"/b" {
		t.Errorf("in flight %+v, want b", inFlight)
	}

	// The kubelet's final deletion: b is gone, its memory is back, pressure
	// is relieved, nothing more is evicted.
	zero := int64(0)
	if err := f.c.Admin.CoreV1().Pods(f.ns).Delete(ctx, "b", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(f.loop.InFlight()) == 0, nil
	})
	if err != nil {
		t.Fatalf("b is still in flight after its deletion: %+v", f.loop.InFlight())
	}
	f.waitPasses(t, 3)
	for _, name := range []string{"a", "c"} {
		if p := f.get(t, name); p.DeletionTimestamp != nil {
			t.Errorf("%s was evicted after the pressure was relieved", name)
		}
	}

	// The Events: Evicted on b, EvictionThresholdMet on the node.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := f.c.Admin.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var pod, node bool
		for _, e := range evs.Items {
			pod = pod || (e.Reason == evict.ReasonEvicted && e.Regarding.Name == "b" && strings.Contains(e.Note, "memory"))
			node = node || (e.Reason == evict.ReasonThresholdMet && e.Regarding.Name == f.node)
		}
		return pod && node, nil
	})
	if err != nil {
		t.Errorf("events not found: %v", err)
	}
}

func TestAPIDryRunChangesNothing(t *testing.T) {
	f := startAPIFixture(t, true)
	ctx := context.Background()
	// The dry-run verdicts: a blocked by its PDB, b allowed.
	var lookupErr error // the series appears with the first dry-run verdict
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		n, err := f.lookupEvictions("dry_run")
		lookupErr = err
		return err == nil && n >= 1, nil
	})
	if err != nil && lookupErr != nil {
		t.Fatalf("no dry-run eviction counted: %v; %v", err, lookupErr)
	}
	if err != nil {
		t.Fatalf("no dry-run eviction counted: %v", err)
	}
	f.waitPasses(t, 5) // several passes under unchanged pressure
	if n := f.evictionCount(t, "dry_run"); n != 1 {
		t.Errorf("dry_run count %v after several passes, want 1 (once per pod per episode)", n)
	}
	if n := f.evictionCount(t, "pdb_blocked"); n != 1 {
		t.Errorf("pdb_blocked count %v, want 1 (a's verdict, asked once)", n)
	}
	for _, name := range []string{"a", "b", "c"} {
		if p := f.get(t, name); p.DeletionTimestamp != nil {
			t.Errorf("dry run evicted %s", name)
		}
	}
	evs, err := f.c.Admin.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.ReportingController == evict.ReportingController {
			t.Errorf("dry run wrote an Event: %s %s", e.Reason, e.Note)
		}
	}
}
