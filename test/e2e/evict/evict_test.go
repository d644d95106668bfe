// SPDX-License-Identifier: Apache-2.0

// Package evict_test runs pkg/evict's Evictor against a real API server and
// kube-controller-manager (the disruption controller keeps the
// PodDisruptionBudgets' status), as evictd's own ServiceAccount: what the
// server decides (PDB verdicts, the grace period a pod gets, dry run leaving
// everything alone, the UID precondition) is checked here, not faked.
//
// The pods are bound to a node that has no kubelet, so a graceful deletion
// stays visible (deletionTimestamp and deletionGracePeriodSeconds) for the
// test to read; the test sets their Ready status as a kubelet would, which
// is what a PodDisruptionBudget counts.
package evict_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/metricstest"
	"github.com/evictd/evictd/test/e2e/podtest"
)

// nodeName is a node with no kubelet behind it.
const nodeName = "evict-e2e-node"

func TestEvictor(t *testing.T) {
	c := framework.Start(t)
	ns := c.Namespace(t, "evict")

	t.Run("accepted eviction gets the computed grace", func(t *testing.T) { testGrace(t, c, ns) })
	t.Run("PDB refusal is pdb_blocked", func(t *testing.T) { testPDB(t, c, ns) })
	t.Run("dry run changes nothing", func(t *testing.T) { testDryRun(t, c, ns) })
	t.Run("recreated pod is not evicted", func(t *testing.T) { testUIDPrecondition(t, c, ns) })
	t.Run("forced delete past a PDB", func(t *testing.T) { testForceDelete(t, c, ns) })
}

// evictor is an Evictor with its Event writer and metrics.
type evictor struct {
	*evict.Evictor
	events  *evict.EventWriter
	metrics *metrics.Metrics
}

// newEvictor builds an Evictor on evictd's own client (pkg/kube) with cfg's
// identity.
func newEvictor(t *testing.T, cfg *rest.Config, mutate func(*evict.Options)) *evictor {
	t.Helper()
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := evict.Defaults()
	o.Rate, o.Burst = 100, 100 // the limits have unit tests; here they would only slow the table down
	if mutate != nil {
		mutate(&o)
	}
	m, err := metrics.New(buildinfo.Info{Version: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t)
	w := evict.NewEventWriter(client, "evictd-"+nodeName, log, nil)
	t.Cleanup(func() { _ = w.Shutdown(context.Background()) })
	e, err := evict.New(evict.Config{Options: o, Client: client, NodeName: nodeName, Events: w, Metrics: m, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &evictor{Evictor: e, events: w, metrics: m}
}

// flush waits until every queued Event is written.
func (e *evictor) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.events.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func (e *evictor) count(t *testing.T, r evict.Result) float64 {
	t.Helper()
	v, err := metricstest.Counter(e.metrics.Registry(), "evictd_evictions_total", map[string]string{"result": string(r)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// createReadyPod creates a pod bound to nodeName and marks it Running and
// Ready, as a kubelet would. It is force-deleted when the test ends.
func createReadyPod(t *testing.T, c *framework.Cluster, ns, name string, grace *int64, labels map[string]string) *corev1.Pod {
	t.Helper()
	opts := []podtest.Option{podtest.OnNode(nodeName), podtest.Labels(labels)}
	if grace != nil {
		opts = append(opts, podtest.Grace(*grace))
	}
	t.Cleanup(func() {
		_ = c.Admin.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	pod, err := podtest.CreateReady(context.Background(), c.Admin, podtest.New(ns, name, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// createPDB protects the pods with labels with minAvailable and waits until
// the disruption controller has counted them (podtest.CreatePDB).
func createPDB(t *testing.T, c *framework.Cluster, ns, name string, minAvailable int32, labels map[string]string, wantAllowed int32) {
	t.Helper()
	podtest.CreatePDB(t, c.Admin, ns, name, minAvailable, labels, wantAllowed)
}

func getPod(t *testing.T, c *framework.Cluster, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return p
}

// eventsAbout lists the events.k8s.io Events in ns about the object named.
func eventsAbout(t *testing.T, c *framework.Cluster, ns, name string) []eventsv1.Event {
	t.Helper()
	list, err := c.Admin.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func request(pod *corev1.Pod, hard bool) evict.Request {
	return evict.Request{
		Pod: pod, Signal: thresholds.MemoryAvailable, Hard: hard,
		Threshold: 100 << 20, Available: 92 << 20, Usage: 300 << 20, Request: 100 << 20,
		Rank: 1, Reason: "e2e",
	}
}

func testGrace(t *testing.T, c *framework.Cluster, ns string) {
	e := newEvictor(t, c.EvictdConfig, func(o *evict.Options) { o.MaxPodGracePeriod, o.HardGracePeriod = 30, 4 })
	tests := []struct {
		name      string
		grace     *int64
		hard      bool
		override  *int64
		wantGrace int64
	}{
		{"soft-caps-long-grace", ptr.To[int64](120), false, nil, 30},
		{"soft-keeps-short-grace", ptr.To[int64](12), false, nil, 12},
		{"soft-default-grace", nil, false, nil, 30},
		{"hard-caps", ptr.To[int64](30), true, nil, 4},
		{"override-shortens", ptr.To[int64](30), true, ptr.To[int64](2), 2},
		// A pod asking for 0 gets 1: a 0 would make the API server delete
		// the object at once, before anything stopped.
		{"zero-grace-sent-as-one", ptr.To[int64](0), false, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := createReadyPod(t, c, ns, "grace-"+tt.name, tt.grace, nil)
			req := request(pod, tt.hard)
			req.GraceOverride = tt.override
			out, err := e.Evict(context.Background(), req)
			if err != nil || out.Result != evict.Evicted {
				t.Fatalf("Evict: %+v, %v; want Evicted", out, err)
			}
			got := getPod(t, c, ns, pod.Name)
			if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != tt.wantGrace {
				t.Fatalf("pod after eviction: deletionTimestamp %v, grace %v; want grace %d", got.DeletionTimestamp, got.DeletionGracePeriodSeconds, tt.wantGrace)
			}
			// The eviction API marks the pod as a disruption target.
			found := false
			for _, cond := range got.Status.Conditions {
				found = found || cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue
			}
			if !found {
				t.Errorf("evicted pod lacks the DisruptionTarget condition: %+v", got.Status.Conditions)
			}
		})
	}
	e.NodeThresholdMet(thresholds.MemoryAvailable, true, 100<<20, 92<<20)
	e.flush(t)

	if got := e.count(t, evict.Evicted); got != float64(len(tests)) {
		t.Errorf("evictd_evictions_total{result=evicted} = %v, want %d", got, len(tests))
	}
	evs := eventsAbout(t, c, ns, "grace-soft-caps-long-grace")
	if len(evs) != 1 || evs[0].Reason != evict.ReasonEvicted || evs[0].Type != corev1.EventTypeWarning ||
		!strings.HasPrefix(evs[0].Note, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi. Pod was using 300Mi, request is 100Mi, has larger consumption of memory.") {
		t.Errorf("Evicted event on the pod: %+v", evs)
	}
	nodeEvs := eventsAbout(t, c, metav1.NamespaceDefault, nodeName)
	if len(nodeEvs) != 1 || nodeEvs[0].Reason != evict.ReasonThresholdMet || nodeEvs[0].Regarding.Kind != "Node" {
		t.Errorf("EvictionThresholdMet event on the node: %+v", nodeEvs)
	}
}

func testPDB(t *testing.T, c *framework.Cluster, ns string) {
	labels := map[string]string{"app": "guarded"}
	pod := createReadyPod(t, c, ns, "guarded", ptr.To[int64](30), labels)
	createPDB(t, c, ns, "guarded-pdb", 1, labels, 0)

	for _, dry := range []bool{false, true} {
		e := newEvictor(t, c.EvictdConfig, func(o *evict.Options) { o.DryRun = dry })
		out, err := e.Evict(context.Background(), request(pod, true))
		if out.Result != evict.PDBBlocked || !errors.Is(err, evict.ErrPDBBlocked) {
			t.Fatalf("dry run %v: %+v, %v; want PDBBlocked", dry, out, err)
		}
		// The server's reason names the budget and the pod.
		if !strings.Contains(err.Error(), "guarded-pdb") || !strings.Contains(err.Error(), ns+"/guarded") {
			t.Errorf("dry run %v: error %q does not name the PDB and the pod", dry, err)
		}
		if got := e.count(t, evict.PDBBlocked); got != 1 {
			t.Errorf("dry run %v: pdb_blocked counted %v, want 1", dry, got)
		}
		e.flush(t)
	}
	if got := getPod(t, c, ns, pod.Name); got.DeletionTimestamp != nil {
		t.Fatalf("PDB-protected pod is being deleted: %v", got.DeletionTimestamp)
	}
	if evs := eventsAbout(t, c, ns, pod.Name); len(evs) != 0 {
		t.Errorf("a refused eviction left events: %+v", evs)
	}
}

func testDryRun(t *testing.T, c *framework.Cluster, ns string) {
	labels := map[string]string{"app": "dry"}
	a := createReadyPod(t, c, ns, "dry-a", ptr.To[int64](30), labels)
	b := createReadyPod(t, c, ns, "dry-b", ptr.To[int64](30), labels)
	// One disruption allowed: a real eviction would use it up.
	createPDB(t, c, ns, "dry-pdb", 1, labels, 1)
	pdbBefore, err := c.Admin.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "dry-pdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	e := newEvictor(t, c.EvictdConfig, func(o *evict.Options) { o.DryRun = true })
	e.NodeThresholdMet(thresholds.MemoryAvailable, true, 100<<20, 92<<20)
	for _, p := range []*corev1.Pod{a, b, a} {
		out, err := e.Evict(context.Background(), request(p, true))
		if err != nil || out.Result != evict.DryRun {
			t.Fatalf("dry-run eviction of %s: %+v, %v; want DryRun", p.Name, out, err)
		}
	}
	e.flush(t)

	for _, p := range []*corev1.Pod{a, b} {
		got := getPod(t, c, ns, p.Name)
		if got.DeletionTimestamp != nil || got.ResourceVersion != p.ResourceVersion {
			t.Errorf("dry run changed pod %s: deletionTimestamp %v, resourceVersion %s -> %s", p.Name, got.DeletionTimestamp, p.ResourceVersion, got.ResourceVersion)
		}
		if evs := eventsAbout(t, c, ns, p.Name); len(evs) != 0 {
			t.Errorf("dry run wrote events about %s: %+v", p.Name, evs)
		}
	}
	if evs := eventsAbout(t, c, metav1.NamespaceDefault, nodeName); len(evs) > 1 {
		// testGrace wrote one node event for real; the dry run must add none.
		t.Errorf("dry run wrote a node event: %+v", evs)
	}
	pdbAfter, err := c.Admin.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "dry-pdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdbAfter.Status.DisruptionsAllowed != 1 || len(pdbAfter.Status.DisruptedPods) != 0 || pdbAfter.ResourceVersion != pdbBefore.ResourceVersion {
		t.Errorf("dry run touched the PDB: allowed %d, disrupted %v, resourceVersion %s -> %s",
			pdbAfter.Status.DisruptionsAllowed, pdbAfter.Status.DisruptedPods, pdbBefore.ResourceVersion, pdbAfter.ResourceVersion)
	}
	if got := e.count(t, evict.DryRun); got != 2 {
		t.Errorf("dry_run counted %v, want 2 (the repeat for dry-a reuses its verdict)", got)
	}
}

func testUIDPrecondition(t *testing.T, c *framework.Cluster, ns string) {
	ctx := context.Background()
	old := createReadyPod(t, c, ns, "reborn", ptr.To[int64](30), nil)
	if err := c.Admin.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Admin.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	e := newEvictor(t, c.EvictdConfig, nil)
	// The pod is gone altogether: 404.
	if out, err := e.Evict(ctx, request(old, true)); err != nil || out.Result != evict.NotFound {
		t.Fatalf("evicting a deleted pod: %+v, %v; want NotFound", out, err)
	}
	// Another pod now has its name: the UID precondition refuses.
	reborn := createReadyPod(t, c, ns, "reborn", ptr.To[int64](30), nil)
	if reborn.UID == old.UID {
		t.Fatal("recreated pod kept its UID")
	}
	if out, err := e.Evict(ctx, request(old, true)); err != nil || out.Result != evict.NotFound {
		t.Fatalf("evicting the old pod by name: %+v, %v; want NotFound", out, err)
	}
	if got := getPod(t, c, ns, "reborn"); got.DeletionTimestamp != nil {
		t.Fatal("the recreated pod was evicted in place of the old one")
	}
	if got := e.count(t, evict.NotFound); got != 2 {
		t.Errorf("not_found counted %v, want 2", got)
	}
}

// testForceDelete uses the admin identity: deploy/daemonset.yaml does not
// grant evictd "delete pods", which only --pdb-policy=best-effort needs.
func testForceDelete(t *testing.T, c *framework.Cluster, ns string) {
	labels := map[string]string{"app": "forced"}
	pod := createReadyPod(t, c, ns, "forced", ptr.To[int64](60), labels)
	createPDB(t, c, ns, "forced-pdb", 1, labels, 0)

	strict := newEvictor(t, c.AdminConfig, nil)
	if out, err := strict.ForceDelete(context.Background(), request(pod, true)); !errors.Is(err, evict.ErrStrictPDBPolicy) || out.Result != evict.Failed {
		t.Fatalf("strict ForceDelete: %+v, %v; want a refusal", out, err)
	}

	e := newEvictor(t, c.AdminConfig, func(o *evict.Options) { o.PDBPolicy, o.HardGracePeriod = evict.PDBBestEffort, 3 })
	if out, _ := e.Evict(context.Background(), request(pod, true)); out.Result != evict.PDBBlocked {
		t.Fatalf("eviction first: %+v, want PDBBlocked", out)
	}
	out, err := e.ForceDelete(context.Background(), request(pod, true))
	if err != nil || out.Result != evict.ForcedDelete {
		t.Fatalf("ForceDelete: %+v, %v; want ForcedDelete", out, err)
	}
	got := getPod(t, c, ns, pod.Name)
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 3 {
		t.Fatalf("after ForceDelete: deletionTimestamp %v, grace %v; want grace 3", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	e.flush(t)
	evs := eventsAbout(t, c, ns, pod.Name)
	if len(evs) != 1 || evs[0].Reason != evict.ReasonEvictedDespitePDB {
		t.Errorf("events after ForceDelete: %+v", evs)
	}
	if got := e.count(t, evict.ForcedDelete); got != 1 {
		t.Errorf("forced_delete counted %v, want 1", got)
	}
}
