// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// The memory scenarios run on a 1 GiB node with one hard threshold and a
// minimum reclaim. Every other signal is switched off so that the host's
// own disk cannot make a test flaky.
const (
	nodeMemory      = 1 << 30
	memThreshold    = 300 * mib
	memMinReclaim   = 100 * mib
	sampleInterval  = 10 * time.Millisecond
	evictionTimeout = 60 * time.Second
)

var memoryFlags = []string{
	"--eviction-hard=memory.available<300Mi,allocatableMemory.available<none,nodefs.available<none," +
		"nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none",
	"--eviction-minimum-reclaim=memory.available=100Mi",
}

// memoryNode is a cluster with one simulated 1 GiB node and the workload of
// the memory scenarios:
//
//	pod       QoS         priority              holds            rank (memory)
//	batch     BestEffort  0                     100 MiB          1: above request, lowest priority
//	web       Burstable   e2e-mid (1000)        250 MiB, req 64  2: above request
//	hog       Burstable   e2e-high (10000)      grows, req 128   3: above request once it grows
//	db        Guaranteed  e2e-high (10000)      100 of 200 MiB   4: within its request
//	critical  BestEffort  system-node-critical   40 MiB          never: critical
//	static    BestEffort  0                      40 MiB          never: static (mirror pod)
//
// The hog is created by the test, after evictd has started.
type memoryNode struct {
	c      *framework.Cluster
	node   *nodesim.Node
	ns     string
	pods   map[string]*corev1.Pod // the API's copies, by name
	mirror *corev1.Pod
	avail  *sampler
}

func newMemoryNode(t *testing.T, nodeName string, opts ...framework.Option) *memoryNode {
	t.Helper()
	c := framework.Start(t, opts...)
	createPriorityClasses(t, c)
	m := &memoryNode{c: c}
	m.node = c.StartNode(t, nodesim.Options{Name: nodeName, MemoryBytes: nodeMemory})
	m.ns = c.Namespace(t, "mem")
	specs := []podSpec{
		{name: "batch", holdMiB: 100, labels: map[string]string{"app": "batch"}},
		{name: "web", priorityClass: classMid, holdMiB: 250, requests: res("memory", "64Mi")},
		{name: "db", priorityClass: classHigh, holdMiB: 100,
			requests: res("cpu", "100m", "memory", "200Mi"), limits: res("cpu", "100m", "memory", "200Mi")},
		{name: "critical", priorityClass: classNodeCritical, holdMiB: 40},
	}
	m.pods = createRunning(t, c.Admin, podsFor(m.ns, m.node.Name, specs)...)
	if got := m.pods["critical"].Spec.Priority; got == nil || *got < 2_000_000_000 {
		t.Fatalf("critical pod's priority is %v, want system-node-critical's", got)
	}
	if q := m.pods["db"].Status.QOSClass; q != "" && q != corev1.PodQOSGuaranteed {
		t.Fatalf("db is %s, want Guaranteed", q)
	}
	static := podSpec{name: "static", holdMiB: 40}.pod(m.ns, m.node.Name)
	mirror, err := m.node.CreateStaticPod(context.Background(), static)
	if err != nil {
		t.Fatal(err)
	}
	m.mirror = waitPod(t, c.Admin, mirror.Namespace, mirror.Name, 60*time.Second, "Running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	})
	waitHolding(t, m.node, append(mapValues(m.pods), m.mirror)...)
	m.avail = startSampler(t, sampleInterval, memoryAvailable(m.node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, m.node, m.avail, append(mapValues(m.pods), m.mirror))
	return m
}

// hogSpec grows from 64 MiB at rate MiB/s to toMiB.
func hogSpec(rate float64, toMiB int64) podSpec {
	return podSpec{name: "hog", priorityClass: classHigh, holdMiB: 64, growMiBPerSec: rate, growToMiB: toMiB,
		requests: res("memory", "128Mi")}
}

// startHog creates the hog and returns when it was created (the start of
// the pressure phase) and the pod.
func (m *memoryNode) startHog(t *testing.T, s podSpec) (time.Time, *corev1.Pod) {
	t.Helper()
	start := time.Now()
	hog := createRunning(t, m.c.Admin, s.pod(m.ns, m.node.Name))["hog"]
	waitHolding(t, m.node, hog)
	m.pods["hog"] = hog
	return start, hog
}

// evicted returns evictd's `evicted pod` log entries in order.
func evicted(e *evictd) []logEntry { return e.find("evicted pod") }

func podsOf(entries []logEntry) []string {
	var out []string
	for _, l := range entries {
		out = append(out, l.Pod)
	}
	return out
}

// waitEvictions waits until evictd has logged n evictions.
func waitEvictions(t *testing.T, e *evictd, n int, timeout time.Duration) []logEntry {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := evicted(e)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("evictd evicted %v within %s, want %d evictions; log tail:\n%s", podsOf(got), timeout, n, e.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordLatencies measures, for each eviction, the time from the threshold
// crossing that led to it: the first downward crossing after the previous
// eviction (or after from) and before the next one. When evictd evicted
// before any crossing (--act-early), the crossing is projected from the fill
// rate of the second before the eviction, and the figure is negative.
func recordLatencies(t *testing.T, s *sampler, from time.Time, threshold int64, evs []logEntry, what string, counted bool) {
	t.Helper()
	prev := from
	for i, ev := range evs {
		next := time.Now()
		if i+1 < len(evs) {
			next = evs[i+1].TS
		}
		name := fmt.Sprintf("%s %s", what, ev.Pod)
		x, crossed := s.crossing(prev, threshold)
		projected, falling := s.projectedCrossing(ev.TS, time.Second, threshold)
		switch {
		case crossed && x.at.Before(ev.TS):
			figures.addLatency(t, latency{what: name, d: ev.TS.Sub(x.at), counted: counted})
		case falling:
			figures.addLatency(t, latency{what: name, d: ev.TS.Sub(projected), projected: true, counted: counted})
		default:
			t.Logf("eviction of %s at %s: no threshold crossing measured or projected between %s and %s",
				ev.Pod, ev.TS.Format(time.StampMilli), prev.Format(time.StampMilli), next.Format(time.StampMilli))
		}
		prev = ev.TS
	}
}

// TestMemoryPressureHard: one pod grows on a 1 GiB node; evictd evicts in the
// documented order, one pod at a time, until the minimum reclaim is met,
// never touches static, mirror or critical pods, and the kernel OOM killer
// never strikes although the hog alone would take the node past its limit.
func TestMemoryPressureHard(t *testing.T) {
	m := newMemoryNode(t, "mem-hard")
	e := startEvictd(t, m.c, m.node, append(memoryFlags, explainedFlag)...)
	// 64 → 600 MiB at 50 MiB/s: with nothing evicted the node would need
	// 1.1 GiB and OOM; batch and web alone are not enough either.
	start, hog := m.startHog(t, hogSpec(50, 600))

	want := []string{podKey(m.pods["batch"]), podKey(m.pods["web"]), podKey(hog)}
	evs := waitEvictions(t, e, len(want), evictionTimeout)
	e.waitLog(30*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[len(evs)-1].TS) })
	// Let anything that would wrongly come next come now ...
	time.Sleep(3 * time.Second)
	// ... and after passes evictd made since: it looked, however slow the host.
	e.waitObservedPasses(e.observedPasses(), 3, evictionTimeout)
	evs = evicted(e)
	if got := podsOf(evs); !slices.Equal(got, want) {
		t.Fatalf("evictd evicted %v, want exactly %v in that order", got, want)
	}
	for i, ev := range evs {
		if ev.Signal != "memory.available" || ev.Str("kind") != "hard" {
			t.Errorf("eviction %d: signal %q kind %q, want memory.available hard", i, ev.Signal, ev.Str("kind"))
		}
		if g, ok := ev.Num("gracePeriodSeconds"); !ok || g < 1 || g > 5 {
			t.Errorf("eviction %d of %s: gracePeriodSeconds %v, want 1..5 (hard cap 5)", i, ev.Pod, ev.Fields["gracePeriodSeconds"])
		}
	}
	// One at a time: each eviction came after the stand-in had seen the
	// previous victim's deletion.
	victims := []string{"batch", "web", "hog"}
	for i, name := range victims {
		p := m.pods[name]
		waitGone(t, m.c.Admin, p, 30*time.Second)
		tl, ok := m.node.Record(p.UID)
		if !ok || tl.SIGTERM.IsZero() {
			t.Errorf("%s: the stand-in never sent SIGTERM (timeline %+v)", name, tl)
			continue
		}
		if i > 0 {
			prev, _ := m.node.Record(m.pods[victims[i-1]].UID)
			if evs[i].TS.Before(prev.DeletionSeen) {
				t.Errorf("%s was evicted at %s, before the previous victim's deletion was even seen (%s)", name, evs[i].TS, prev.DeletionSeen)
			}
		}
		t.Logf("%s: evicted %s, SIGTERM %s, exited %s, deleted %s", name, evs[i].TS.Format(time.StampMilli),
			tl.SIGTERM.Format(time.StampMilli), tl.Exited.Format(time.StampMilli), tl.APIDeleted.Format(time.StampMilli))
	}
	for _, name := range []string{"db", "critical"} {
		untouched(t, m.c.Admin, m.node, m.pods[name])
	}
	untouched(t, m.c.Admin, m.node, m.mirror)
	if n := m.node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes on the node", n)
	}

	// Pressure is gone with the minimum reclaim. That no more was evicted
	// than needed is the exact victim list above: the hog's 600 MiB leave
	// the node short unless batch, web and the hog itself go, and db (rank
	// 4) stays.
	final, err := m.avail.last()
	if err != nil {
		t.Fatal(err)
	}
	if final.available < memThreshold+memMinReclaim {
		t.Errorf("memory.available after the evictions is %d MiB, want at least threshold + minimum reclaim = %d MiB",
			final.available/mib, (memThreshold+memMinReclaim)/mib)
	}
	if low, ok := m.avail.min(start); ok {
		t.Logf("lowest memory.available under pressure: %d MiB at %s", low.available/mib, low.at.Format(time.StampMilli))
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "evicted"}); got != 3 {
		t.Errorf("evictd_evictions_total{result=evicted} = %v, want 3", got)
	}
	if got := mt.Value(t, "evictd_threshold_met", map[string]string{"signal": "memory.available", "kind": "hard"}); got != 0 {
		t.Errorf("evictd_threshold_met{memory.available,hard} = %v after pressure ended, want 0", got)
	}
	if got := mt.Value(t, "evictd_eviction_latency_seconds", map[string]string{"signal": "memory.available"}); got != 3 {
		t.Errorf("evictd_eviction_latency_seconds has %v observations, want 3", got)
	}
	events := evictdEvents(t, m.c, m.ns)
	for _, name := range []string{"batch", "web", "hog"} {
		if !slices.ContainsFunc(events, func(s string) bool { return strings.HasPrefix(s, "Evicted Pod/"+name+":") }) {
			t.Errorf("no Evicted Event on pod %s; evictd's Events: %q", name, events)
		}
	}
	// Each Event names the victim's place and the runner-up, as its log
	// line does; when the hog went, batch and web were in flight or gone,
	// and db was the one pod left that could have gone in its place.
	for _, ev := range evs {
		rank, _ := ev.Num("rank")
		tail := fmt.Sprintf("Rank %d in evictd's eviction order; no other pod could have been evicted in its place.", int(rank))
		if r := ev.Str("runnerUp"); r != "" {
			rr, _ := ev.Num("runnerUpRank")
			tail = fmt.Sprintf("Rank %d in evictd's eviction order; next in line: %s, rank %d (%s).", int(rank), r, int(rr), ev.Str("runnerUpReason"))
		}
		name := strings.TrimPrefix(ev.Pod, m.ns+"/")
		if !slices.ContainsFunc(events, func(s string) bool {
			return strings.HasPrefix(s, "Evicted Pod/"+name+":") && strings.HasSuffix(s, tail)
		}) {
			t.Errorf("no Evicted Event on pod %s ending %q; evictd's Events: %q", name, tail, events)
		}
	}
	if r := evs[2].Str("runnerUp"); r != podKey(m.pods["db"]) {
		t.Errorf("the hog's runner-up was %q, want %s (batch and web in flight, critical and the mirror pod never eligible)", r, podKey(m.pods["db"]))
	}
	recordLatencies(t, m.avail, start, memThreshold, evs, "memory hard", true)
	// evictd explain, asked before each eviction, names the pod that then
	// goes; while a victim's memory is on its way back, it says the agent
	// waits, and for what.
	waits := checkExplainedNext(t, e)
	if !slices.ContainsFunc(waits, func(w string) bool { return strings.HasPrefix(w, "memory.available: waits") }) {
		t.Errorf("no explanation said the agent waits for memory.available while a victim was on its way out: %q", waits)
	}
}

// TestMemoryPressurePDB: the first-ranked pod is protected by a
// PodDisruptionBudget that the real disruption controller keeps; evictd's
// eviction of it is refused with 429, it evicts the next pod instead, and
// the protected pod survives the whole episode.
func TestMemoryPressurePDB(t *testing.T) {
	m := newMemoryNode(t, "mem-pdb")
	createPDB(t, m.c, m.ns, "batch", 1, map[string]string{"app": "batch"}, 0)
	// Without acting on predicted crossings, evictd reacts to a threshold
	// actually crossed: this test also measures that reaction time, the
	// figure comparable to the kubelet's; TestMemoryPressureHard runs the
	// default, predictive mode.
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--act-early=false", explainedFlag)...)
	start, hog := m.startHog(t, hogSpec(50, 600))

	want := []string{podKey(m.pods["web"]), podKey(hog)}
	evs := waitEvictions(t, e, len(want), evictionTimeout)
	e.waitLog(30*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[len(evs)-1].TS) })
	time.Sleep(3 * time.Second)
	// ... and after passes evictd made since: it looked, however slow the host.
	e.waitObservedPasses(e.observedPasses(), 3, evictionTimeout)
	evs = evicted(e)
	if got := podsOf(evs); !slices.Equal(got, want) {
		t.Fatalf("evictd evicted %v, want exactly %v in that order (batch is protected)", got, want)
	}
	blocked := e.find("eviction blocked by PodDisruptionBudget")
	if len(blocked) == 0 || blocked[0].Pod != podKey(m.pods["batch"]) {
		t.Errorf("want a log line naming %s blocked by its PodDisruptionBudget, got %v", podKey(m.pods["batch"]), podsOf(blocked))
	} else if !blocked[0].TS.Before(evs[0].TS) {
		t.Errorf("batch was refused at %s, after web was evicted at %s: the refusal should come first in the pass", blocked[0].TS, evs[0].TS)
	}
	untouched(t, m.c.Admin, m.node, m.pods["batch"])
	untouched(t, m.c.Admin, m.node, m.pods["db"])
	untouched(t, m.c.Admin, m.node, m.pods["critical"])
	untouched(t, m.c.Admin, m.node, m.mirror)
	if n := m.node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes on the node", n)
	}
	mt := e.scrape()
	// The alerts tell an enforcing agent's refusals from a dry run's by it.
	if got := mt.Value(t, "evictd_dry_run", nil); got != 0 {
		t.Errorf("evictd_dry_run = %v enforcing, want 0", got)
	}
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "pdb_blocked"}); got < 1 {
		t.Errorf("evictd_evictions_total{result=pdb_blocked} = %v, want > 0", got)
	}
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "evicted"}); got != 2 {
		t.Errorf("evictd_evictions_total{result=evicted} = %v, want 2", got)
	}
	recordLatencies(t, m.avail, start, memThreshold, evs, "memory hard, PDB", true)
	checkExplainedNext(t, e)
}

// TestMemoryPressurePDBPaced: every pod of the node is under a
// PodDisruptionBudget that allows no disruption (the real disruption
// controller keeps it), under a memory pressure that nothing evictd may
// evict can end. What the node asks of the API server is paced: three
// eviction calls refused back to back, then a pause (5 s ±20 %) before the
// fourth eligible pod is asked, not every pod at once (docs/run.md).
func TestMemoryPressurePDBPaced(t *testing.T) {
	m := newMemoryNode(t, "mem-pdb-paced")
	ctx := context.Background()
	m.startHog(t, hogSpec(80, 300))
	pods, err := m.c.Admin.CoreV1().Pods(m.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createPDB(t, m.c, m.ns, "all", int32(len(pods.Items)), nil, 0)
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--log-level=debug")...)

	// batch, web, hog and db are eligible: the fourth refusal comes after
	// the pause.
	const refusedMsg = "eviction blocked by PodDisruptionBudget"
	var refused []logEntry
	e.waitLog(evictionTimeout+30*time.Second, refusedMsg, func(logEntry) bool {
		refused = e.find(refusedMsg)
		return len(refused) >= 4
	})
	if gap := refused[3].TS.Sub(refused[2].TS); gap < 4*time.Second {
		t.Errorf("the fourth pod, %s, asked %v after the third refusal, want after the pause (5 s ±20 %%)", refused[3].Pod, gap)
	}
	// The pause is said (at debug) before the fourth call.
	var paused []logEntry
	for _, l := range e.find("eviction deferred") {
		if strings.Contains(l.Str("reason"), "refused by PodDisruptionBudgets") {
			paused = append(paused, l)
		}
	}
	if len(paused) == 0 {
		t.Errorf("no %q line for the PodDisruptionBudget pause", "eviction deferred")
	} else {
		before := 0
		for _, r := range refused {
			if !r.TS.After(paused[0].TS) {
				before++
			}
		}
		if before != 3 {
			t.Errorf("%d refusals before the pause at %s, want 3: %v", before, stamp(paused[0].TS), podsOf(refused))
		}
	}
	if first := podsOf(refused[:4]); len(slices.Compact(slices.Sorted(slices.Values(first)))) != 4 {
		t.Errorf("the first four refusals are for %v, want four pods, each once", first)
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Errorf("evictd evicted %v past their PodDisruptionBudgets", podsOf(evs))
	}
	if got := e.scrape().Value(t, "evictd_evictions_total", map[string]string{"result": "pdb_blocked"}); got < 4 {
		t.Errorf("evictd_evictions_total{result=pdb_blocked} = %v, want every refusal counted (4 at least)", got)
	}
}

// TestMemoryPressureDryRun: the same pressure with --dry-run evicts nothing;
// the log and metrics name the would-be victims with the API server's PDB
// verdicts, each once per episode, and evictd writes nothing to the cluster.
func TestMemoryPressureDryRun(t *testing.T) {
	m := newMemoryNode(t, "mem-dry")
	createPDB(t, m.c, m.ns, "batch", 1, map[string]string{"app": "batch"}, 0)
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--dry-run", explainedFlag)...)
	// The hog holds 300 MiB at once instead of growing: the pressure lasts
	// (memory.available about 160 MiB) but stays far from the OOM killer,
	// since nothing will be evicted.
	start, _ := m.startHog(t, podSpec{name: "hog", priorityClass: classHigh, holdMiB: 300, requests: res("memory", "128Mi")})

	webLine := e.waitLog(evictionTimeout, "would evict pod", func(l logEntry) bool { return l.Pod == podKey(m.pods["web"]) })
	// Keep the pressure on for a number of passes, each a chance to
	// repeat itself, which evictd must not take: passes, not seconds, so
	// that a slow machine cannot make the check vacuous.
	e.waitObservedPasses(e.observedPasses(), 10, 60*time.Second)
	if x, ok := m.avail.crossing(start, memThreshold); !ok {
		t.Fatalf("memory.available never went below the threshold; the test made no pressure")
	} else {
		figures.addLatency(t, latency{what: "memory hard, dry run (would evict) " + webLine.Pod, d: webLine.TS.Sub(x.at), counted: true})
	}
	if last, _ := m.avail.last(); last.available >= memThreshold {
		t.Fatalf("pressure did not last: memory.available is %d MiB at the end", last.available/mib)
	}

	would := e.find("would evict pod")
	verdicts := map[string][]string{}
	for _, l := range would {
		verdicts[l.Pod] = append(verdicts[l.Pod], l.Str("verdict"))
	}
	for pod, v := range verdicts {
		if len(v) != 1 {
			t.Errorf("%s named %d times as a would-be victim in one pressure episode, want once: %v", pod, len(v), v)
		}
	}
	if v := verdicts[podKey(m.pods["web"])]; len(v) == 0 || v[0] != "allowed" {
		t.Errorf("web's verdict: %v, want allowed", v)
	}
	if v := verdicts[podKey(m.pods["batch"])]; len(v) == 0 || v[0] != "blocked by PodDisruptionBudget" {
		t.Errorf("batch's verdict: %v, want blocked by PodDisruptionBudget", v)
	}
	for _, name := range []string{"db", "critical"} {
		if _, ok := verdicts[podKey(m.pods[name])]; ok {
			t.Errorf("%s was named as a would-be victim; the pressure did not need it", name)
		}
	}
	if _, ok := verdicts[podKey(m.mirror)]; ok {
		t.Errorf("the mirror pod was named as a would-be victim")
	}
	if len(evicted(e)) != 0 {
		t.Errorf("dry run logged evictions: %v", podsOf(evicted(e)))
	}
	for _, name := range []string{"batch", "web", "db", "critical", "hog"} {
		untouched(t, m.c.Admin, m.node, m.pods[name])
	}
	untouched(t, m.c.Admin, m.node, m.mirror)
	mt := e.scrape()
	// Its pdb_blocked is a verdict, not a refusal: the alerts leave it out by this.
	if got := mt.Value(t, "evictd_dry_run", nil); got != 1 {
		t.Errorf("evictd_dry_run = %v in dry run, want 1", got)
	}
	for _, tt := range []struct {
		result string
		ok     func(float64) bool
		want   string
	}{
		{"dry_run", func(v float64) bool { return v >= 1 }, ">= 1"},
		{"pdb_blocked", func(v float64) bool { return v >= 1 }, ">= 1"},
		{"evicted", func(v float64) bool { return v == 0 }, "0"},
		{"forced_delete", func(v float64) bool { return v == 0 }, "0"},
	} {
		if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": tt.result}); !tt.ok(got) {
			t.Errorf("evictd_evictions_total{result=%s} = %v, want %s", tt.result, got, tt.want)
		}
	}
	if got := mt.Value(t, "evictd_threshold_met", map[string]string{"signal": "memory.available", "kind": "hard"}); got != 1 {
		t.Errorf("evictd_threshold_met{memory.available,hard} = %v under pressure, want 1", got)
	}
	if ev := evictdEvents(t, m.c, ""); len(ev) != 0 {
		t.Errorf("dry run wrote Events: %q", ev)
	}
	if n := m.node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes on the node", n)
	}
	p, err := m.c.Admin.CoreV1().Pods(m.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 6 {
		t.Errorf("%d pods in the namespace after the dry run, want all 6", len(p.Items))
	}
	checkExplainedNext(t, e)
}
