// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The own-node benchmark's knobs: the pod counts (hack/bench-scale.sh sets
// it from OWNNODE_PODS) and the rounds (EVICTD_BENCH_TRIALS).
const ownNodePodsEnv = "EVICTD_BENCH_OWNNODE_PODS"

// ownNodePolicy is deploy/own-node-evictions.yaml's policy and binding.
const ownNodePolicy = "evictd-own-node-evictions"

// The cluster's shape: pods on ownNodeNodes Nodes (Node objects only, no
// kubelet: the policy reads the pods' spec.nodeName, nothing a kubelet
// writes), in namespaces of ownNodeNSPods pods each, the spread of a real
// cluster's tenants; and one namespace that holds as many pods as all of
// those together, the worst case for a policy whose params are the pods of
// the Eviction's namespace.
const (
	ownNodeNodes   = 100
	ownNodeNSPods  = 50
	ownNodeSamples = 100              // evictions per figure, state and round, at most
	ownNodeMinimum = 5                // evictions per figure at least, however long they take
	ownNodeFor     = 15 * time.Second // sampling time per figure past ownNodeMinimum
	ownNodeHeapN   = 5                // scrapes of the API server's heap per state and round
)

// TestOwnNodeCost measures what deploy/own-node-evictions.yaml costs the
// API server (issue 58): its memory (RSS, and the Go heap in use from its
// /metrics) and the round trip of an eviction, with the policy on and off,
// at each pod count of EVICTD_BENCH_OWNNODE_PODS (default 1000,5000,20000:
// that many pods spread over namespaces of 50, and as many again in one
// namespace). Evictions are server-side dry runs, which pass through
// admission exactly as a real one does and leave the pod in place: by
// evictd's token bound to its pod on own-000, of a pod on own-000 in a
// namespace of 50 and in the big namespace, and by the admin (anyone's
// eviction pays the params too). Each round measures one state, toggles the
// binding, and measures the other, alternating which comes first; the
// ratios are each round's on/off, medians over the rounds.
func TestOwnNodeCost(t *testing.T) {
	requireBench(t)
	levels := ownNodeLevels(t)
	rounds := envInt(t, trialsEnv, 3)
	loadBefore := loadavg()
	c := framework.Start(t)
	ctx := context.Background()
	for _, p := range []string{framework.LeasePolicy, framework.EvictionPolicy} {
		if err := c.EnforcePolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	h := &ownNodeHarness{c: c, admin: unthrottled(t, c.AdminConfig)}
	h.nodes(t)
	tokenCfg, _ := c.EvictdNodeToken(t, nodeName(0))
	h.agent = unthrottled(t, tokenCfg)
	version := ""
	if v, err := c.Admin.Discovery().ServerVersion(); err == nil {
		version = v.GitVersion
	}

	var tabs []*Table
	state := false // the policy is off
	for _, n := range levels {
		h.grow(t, n)
		var small, big, admin, heap, rss OwnNodeFigure
		for r := range rounds {
			first := h.measureState(t, state)
			state = h.toggle(t, !state)
			second := h.measureState(t, state)
			off, on := first, second
			if !state {
				off, on = second, first
			}
			small.Add(off.small.Seconds(), on.small.Seconds())
			big.Add(off.big.Seconds(), on.big.Seconds())
			admin.Add(off.admin.Seconds(), on.admin.Seconds())
			heap.Add(off.heap, on.heap)
			rss.Add(off.rss, on.rss)
			t.Logf("%d pods, round %d: off %+v, on %+v", n, r+1, off, on)
		}
		tab := &Table{
			Title: fmt.Sprintf("own-node policy at %d pods in namespaces of %d, and %d in one namespace (%d pods, %d namespaces, %d Nodes)",
				n, ownNodeNSPods, n, h.total, len(h.spread)+1, ownNodeNodes),
			Header: []string{"figure", "policy off", "policy on", "on/off", "added per pod of the namespace"},
		}
		lat := func(name string, f OwnNodeFigure, nsPods int) {
			tab.Row(name, Ms(dur(f.Off())), Ms(dur(f.On())), fmt.Sprintf("%.2f", f.Ratio()), Micros(PerParam(f, nsPods)))
		}
		lat(fmt.Sprintf("evictd's eviction, namespace of %d (median)", ownNodeNSPods), small, ownNodeNSPods)
		lat(fmt.Sprintf("evictd's eviction, namespace of %d (median)", n), big, n)
		lat(fmt.Sprintf("the admin's eviction, namespace of %d (median)", n), admin, n)
		tab.Row("API server Go heap in use", mibOf(heap.Off()), mibOf(heap.On()), fmt.Sprintf("%.2f", heap.Ratio()), "")
		tab.Row("API server RSS", mibOf(rss.Off()), mibOf(rss.On()), fmt.Sprintf("%.2f", rss.Ratio()), "")
		tab.Notes = append(tab.Notes,
			fmt.Sprintf("%d rounds; each eviction figure is the median of %d server-side dry-run evictions (fewer, but %d at least, where %d took over %s; client round trip, sequential), "+
				"the medians and on/off ratios over the rounds; memory is the median of %d readings a second apart after the evictions",
				rounds, ownNodeSamples, ownNodeMinimum, ownNodeSamples, ownNodeFor, ownNodeHeapN),
			fmt.Sprintf("a pod as stored: %d bytes of JSON (one container, the ServiceAccount's projected token volume, a toleration)", h.podBytes))
		tabs = append(tabs, tab)
	}
	tabs[0].Title = fmt.Sprintf("deploy/own-node-evictions.yaml against kube-apiserver %s (the shipped policies in force too)\n%s\n\n%s",
		version, machine(loadBefore), tabs[0].Title)
	report(t, "ownnode", tabs...)
}

func ownNodeLevels(t *testing.T) []int {
	t.Helper()
	s := os.Getenv(ownNodePodsEnv)
	if s == "" {
		return []int{1000, 5000, 20000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < ownNodeNSPods || (len(out) > 0 && n <= out[len(out)-1]) {
			t.Fatalf("%s=%q: want rising pod counts of at least %d, comma-separated", ownNodePodsEnv, s, ownNodeNSPods)
		}
		out = append(out, n)
	}
	return out
}

type ownNodeHarness struct {
	c            *framework.Cluster
	admin, agent kubernetes.Interface

	spread   []string // the namespaces of ownNodeNSPods pods
	spreadN  int      // pods in them
	bigNS    string
	bigN     int
	total    int
	podBytes int
}

// ownNodeState is one state's figures.
type ownNodeState struct {
	small, big, admin time.Duration
	heap, rss         float64
}

func nodeName(i int) string { return fmt.Sprintf("own-%03d", i) }

func unthrottled(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// nodes creates the Node objects: no kubelet behind them, and no
// controller that would count them lost runs on the test control plane.
func (h *ownNodeHarness) nodes(t *testing.T) {
	t.Helper()
	for i := range ownNodeNodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i)}}
		if _, err := h.admin.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// grow adds pods until the spread namespaces hold n and the big one n.
// The first pod of each namespace is "victim", on own-000, the pod
// evictd's token may evict; the first spread namespace also holds "probe",
// on own-001, which the policy refuses it.
func (h *ownNodeHarness) grow(t *testing.T, n int) {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	if h.bigNS == "" {
		h.bigNS = h.namespace(t, "own-big")
	}
	type job struct {
		ns, name string
		node     int
	}
	jobs := make(chan job, 256)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for j := range jobs {
				if err := h.createPod(ctx, j.ns, j.name, nodeName(j.node)); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	seq := h.total
	next := func() int { seq++; return 1 + seq%(ownNodeNodes-1) }
	for h.spreadN < n {
		ns := h.namespace(t, "own-spread")
		h.spread = append(h.spread, ns)
		jobs <- job{ns, "victim", 0}
		k := 1
		if len(h.spread) == 1 {
			jobs <- job{ns, "probe", 1}
			k = 2
		}
		for ; k < ownNodeNSPods; k++ {
			jobs <- job{ns, fmt.Sprintf("pod-%03d", k), next()}
		}
		h.spreadN += ownNodeNSPods
	}
	for ; h.bigN < n; h.bigN++ {
		name, node := fmt.Sprintf("pod-%06d", h.bigN), next()
		if h.bigN == 0 {
			name, node = "victim", 0
		}
		jobs <- job{h.bigNS, name, node}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	h.total = h.spreadN + h.bigN
	if h.podBytes == 0 {
		p, err := h.admin.CoreV1().Pods(h.bigNS).Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		h.podBytes = len(b)
	}
	t.Logf("%d pods (%d spread over %d namespaces, %d in %s) after %s", h.total, h.spreadN, len(h.spread), h.bigN, h.bigNS,
		time.Since(start).Round(time.Second))
}

// namespace creates a namespace and waits for its default ServiceAccount,
// which the ServiceAccount admission plugin needs for the pods.
func (h *ownNodeHarness) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := h.c.CreateNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ServiceAccount default in "+ns, 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := h.admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return ns
}

// createPod creates a pod bound to node: one container, the default
// ServiceAccount's token mounted as on any pod, and a toleration of every
// taint.
func (h *ownNodeHarness) createPod(ctx context.Context, ns, name, node string) error {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "own-node-bench"}},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "app", Image: "evictd.test/workload:latest"}},
		},
	}
	var err error
	for range 5 {
		if _, err = h.admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("create pod %s/%s: %w", ns, name, err)
}

// toggle turns the policy on (applies deploy/own-node-evictions.yaml) or
// off (deletes its binding) and waits until the API server enforces that:
// the token's dry-run eviction of the probe, on another node, is refused
// by the policy, or allowed.
func (h *ownNodeHarness) toggle(t *testing.T, on bool) bool {
	t.Helper()
	ctx := context.Background()
	if on {
		root, err := framework.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.c.ApplyFile(ctx, filepath.Join(root, "deploy", "own-node-evictions.yaml")); err != nil {
			t.Fatal(err)
		}
	} else {
		err := h.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, ownNodePolicy, metav1.DeleteOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	var last error
	waitFor(t, fmt.Sprintf("%s on=%v in force", ownNodePolicy, on), 60*time.Second, func(ctx context.Context) (bool, error) {
		last = h.evict(ctx, h.agent, h.spread[0], "probe")
		refused := last != nil && apierrors.IsForbidden(last) && strings.Contains(last.Error(), ownNodePolicy)
		if on {
			return refused, nil
		}
		return last == nil, nil
	})
	return on
}

func (h *ownNodeHarness) evict(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	return client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
	})
}

// measureState takes the evictions' medians, then the API server's memory.
func (h *ownNodeHarness) measureState(t *testing.T, on bool) ownNodeState {
	t.Helper()
	var s ownNodeState
	s.small = h.latency(t, h.agent, h.spread[len(h.spread)/2], on)
	s.big = h.latency(t, h.agent, h.bigNS, on)
	s.admin = h.latency(t, h.admin, h.bigNS, on)
	pid, err := h.c.PID("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	var heaps, rsss []float64
	for i := range ownNodeHeapN {
		if i > 0 {
			time.Sleep(time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		body, err := h.c.Admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		cancel()
		if err != nil {
			t.Fatalf("scrape the API server's /metrics: %v", err)
		}
		m, err := ParseMetrics(body, "go_memstats_heap_inuse_bytes")
		if err != nil {
			t.Fatal(err)
		}
		u, err := ReadProcUsage("/proc", pid)
		if err != nil {
			t.Fatal(err)
		}
		heaps = append(heaps, m["go_memstats_heap_inuse_bytes"])
		rsss = append(rsss, float64(u.RSS))
	}
	var hf, rf OwnNodeFigure
	for i := range heaps {
		hf.Add(heaps[i], 0)
		rf.Add(rsss[i], 0)
	}
	s.heap, s.rss = hf.Off(), rf.Off()
	return s
}

// latency is the median round trip of ownNodeSamples dry-run evictions of
// the victim of ns by client (fewer, but at least ownNodeMinimum, when they
// take more than ownNodeFor in all: at tens of thousands of pods in a
// namespace, one takes seconds). Every one must be allowed: the victim is
// on the token's node.
func (h *ownNodeHarness) latency(t *testing.T, client kubernetes.Interface, ns string, on bool) time.Duration {
	t.Helper()
	var xs []time.Duration
	began := time.Now()
	for len(xs) < ownNodeSamples && (len(xs) < ownNodeMinimum || time.Since(began) < ownNodeFor) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sent := time.Now()
		err := h.evict(ctx, client, ns, "victim")
		d := time.Since(sent)
		cancel()
		if err != nil {
			t.Fatalf("dry-run eviction of %s/victim (policy on=%v): %v", ns, on, err)
		}
		xs = append(xs, d)
	}
	return Summarize(xs).Median
}

func dur(seconds float64) time.Duration { return time.Duration(seconds * float64(time.Second)) }

func mibOf(bytes float64) string { return fmt.Sprintf("%.0f MiB", bytes/mib) }
