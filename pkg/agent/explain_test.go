// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/explain"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

// The live explanation names what only the running agent knows: a pod a
// PodDisruptionBudget protects keeps its place but is held until its
// recheck, the victim that cannot stop is terminating, and the next to go
// is the first pod free to go.
func TestExplainHoldsWhatTheAgentKnows(t *testing.T) {
	pods := threePods()
	pods[0].pdb = true  // a: refused by its PDB
	pods[1].hang = true // b: evicted, terminating, its memory kept
	n := newSimNode(t, 4096*mi, base250, pods...)
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	n.run(t, cfg, 5*time.Second)
	if got := n.victims(); !eq(got, []string{"a", "b"}) {
		t.Fatalf("calls %v, want [a b]", got)
	}
	live := n.loop.Explain("node-1", false)
	if live.Node != "node-1" || live.ObservedAt.IsZero() || live.StandingBy {
		t.Fatalf("explanation %+v: want node-1, observed, acting", live)
	}
	mem := live.Signals[0]
	why := map[string]string{}
	for _, p := range mem.Pods {
		why[p.Name] = p.Why
		if (p.Rank == 0) != (p.Name == "b") {
			t.Errorf("pod %s: rank %d", p.Name, p.Rank)
		}
	}
	if !strings.HasPrefix(why["a"], "blocked by a PodDisruptionBudget (1 refusals in this episode); asked again after ") {
		t.Errorf("a: %q, want held by its PodDisruptionBudget", why["a"])
	}
	if !strings.Contains(why["b"], "terminating") {
		t.Errorf("b: %q, want it terminating", why["b"])
	}
	if len(mem.Next) != 1 || mem.Next[0].Name != "c" {
		t.Errorf("next %+v, want c, the one pod free to go", mem.Next)
	}

	// Served as JSON, GET only.
	h := ExplainHandler(n.loop, "node-1", false)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/explain", nil))
	var got Live
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK || len(got.Signals) == 0 {
		t.Errorf("GET /explain: %d %v %s", w.Code, err, w.Body)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/explain", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /explain: %d, want 405", w.Code)
	}
}

// Before the first observation there is nothing to explain, and it says so.
func TestExplainBeforeTheFirstObservation(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	l, err := NewLoop(testLoopConfig(mustThresholds(t, memSpec("300Mi", ""))),
		Deps{Observer: n, Waker: &simWaker{n: n}, Pods: n, Evictor: n, Metrics: n.metrics, Clock: n.clk})
	if err != nil {
		t.Fatal(err)
	}
	if live := l.Explain("node-1", true); !live.ObservedAt.IsZero() || len(live.Signals) != 0 || !live.DryRun {
		t.Errorf("explanation before any pass: %+v", live)
	}
}

// explained runs the node's loop for d (with fams, or the configured
// families when none), keeping the explanation of every pass, and checks
// that each eviction call was named as the next to go by the explanation
// of the pass before it: what explain says the agent does next is what
// it does.
func (n *simNode) explained(t *testing.T, cfg LoopConfig, d time.Duration, fams ...family.Family) []Live {
	t.Helper()
	n.explainW = &simWaker{n: n}
	deps := Deps{Observer: n, Waker: n.explainW, Pods: n, Evictor: n, Metrics: n.metrics, Log: zaptest.NewLogger(t), Clock: n.clk, Go: syncCall}
	if len(fams) > 0 {
		deps.Families = fams
	}
	l, err := NewLoop(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	return n.explainedMore(t, d)
}

// explainedMore goes on as explained does for d more.
func (n *simNode) explainedMore(t *testing.T, d time.Duration) []Live {
	t.Helper()
	ctx := context.Background()
	end := n.clk.Now().Add(d)
	var out []Live
	for i := 0; n.clk.Now().Before(end); i++ {
		if i > 100000 {
			t.Fatal("the loop does not advance the clock")
		}
		wk, err := n.explainW.Wait(ctx, n.explainWait)
		if err != nil {
			t.Fatal(err)
		}
		n.steps++
		calls := len(n.victims())
		n.explainWait = n.loop.Step(ctx, wk)
		live := n.loop.Explain("node-1", false)
		for _, pod := range n.victims()[calls:] {
			if n.lastLive == nil || n.explainNoNext {
				continue // the first pass: no explanation before it
			}
			if next := nextToGo(*n.lastLive); !slices.Contains(next, pod) {
				t.Errorf("pass %d evicted %s; the explanation before it named %v as the next to go", n.steps, pod, next)
			}
		}
		n.lastLive = &live
		out = append(out, live)
	}
	return out
}

// nextToGo are the pods an explanation names first to go, one per signal.
func nextToGo(live Live) []string {
	var out []string
	for _, s := range live.Signals {
		if d := s.Decision; d != nil && d.Pod != "" {
			out = append(out, d.Pod[strings.LastIndex(d.Pod, "/")+1:])
		} else if len(s.Next) > 0 {
			out = append(out, s.Next[0].Name)
		}
	}
	return out
}

// signalOf is the explanation of s, failing the test when there is none.
func signalOf(t *testing.T, live Live, s thresholds.Signal) explain.Signal {
	t.Helper()
	for _, got := range live.Signals {
		if got.Signal == s {
			return got
		}
	}
	t.Fatalf("no %s in the explanation: %+v", s, live.Signals)
	return explain.Signal{}
}

// firstWhere is the first explanation of s for which ok holds.
func firstWhere(t *testing.T, lives []Live, s thresholds.Signal, what string, ok func(explain.Signal) bool) explain.Signal {
	t.Helper()
	for _, live := range lives {
		if sig := signalOf(t, live, s); ok(sig) {
			return sig
		}
	}
	var last []string
	for _, live := range lives[max(len(lives)-5, 0):] {
		sig := signalOf(t, live, s)
		last = append(last, fmt.Sprintf("measured %v, pods %+v, next %+v, decision %+v", sig.Measured, sig.Pods, sig.Next, sig.Decision))
	}
	t.Fatalf("no explanation of %s %s; the last ones' decisions:\n%s", s, what, strings.Join(last, "\n"))
	return explain.Signal{}
}

func decided(action, why string) func(explain.Signal) bool {
	return func(s explain.Signal) bool {
		return s.Decision != nil && s.Decision.Action == action && strings.Contains(s.Decision.Why, why)
	}
}

// While the first victim's memory is on its way back and covers the need,
// the agent waits for it, and explain says so, not "would evict" the next.
func TestExplainWaitsForReclaimInFlight(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	lives := n.explained(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 10*time.Second)
	if !eq(n.victims(), []string{"a"}) {
		t.Fatalf("calls %v, want [a]", n.victims())
	}
	s := firstWhere(t, lives, thresholds.MemoryAvailable, "waiting for the reclaim in flight", decided(explain.ActionWait, "waits for the reclaim in flight"))
	if d := s.Decision; d.InFlight != 1000*mi || d.Need != 250*mi {
		t.Errorf("decision %+v: want 250Mi to free, a's 1000Mi in flight", d)
	}
}

// Once the threshold has cleared, its minimum reclaim still holds it: the
// agent goes on evicting, and explain gives the need it acts on.
func TestExplainMinimumReclaimHold(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	lives := n.explained(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "1200Mi"))), 30*time.Second)
	if !eq(n.victims(), []string{"a", "b"}) {
		t.Fatalf("calls %v, want [a b]", n.victims())
	}
	s := firstWhere(t, lives, thresholds.MemoryAvailable, "held by its minimum reclaim", func(s explain.Signal) bool {
		return s.Decision != nil && s.Decision.HeldByMinReclaim && len(s.Thresholds) == 1 && !s.Thresholds[0].Met
	})
	if s.Need <= 0 || !s.Thresholds[0].HeldByMinReclaim || !strings.Contains(s.Decision.Why, "minimum reclaim holds") {
		t.Errorf("held by minimum reclaim: need %d, threshold %+v, decision %+v: want the need it still acts on", s.Need, s.Thresholds[0], s.Decision)
	}
}

// A predicted crossing: explain says the agent acts early, with the time
// left, before the threshold is met.
func TestExplainActEarly(t *testing.T) {
	n := newSimNode(t, 4096*mi, 4096*mi-1000*mi-900*mi,
		&simPod{name: "g", usage: 100 * mi, growth: 200 * mi, grace: 30, exitIn: time.Second},
		&simPod{name: "b", usage: 800 * mi, request: 1000 * mi, grace: 30, exitIn: time.Second})
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
	cfg.Adaptive, cfg.Decide.ActEarly, cfg.Decide.FitGrace = true, true, true
	lives := n.explained(t, cfg, 6*time.Second)
	if len(n.calls) == 0 || n.calls[0].pod != "g" || n.calls[0].avail < 300*mi {
		t.Fatalf("calls %+v, want g evicted early", n.calls)
	}
	s := firstWhere(t, lives, thresholds.MemoryAvailable, "predicting the crossing", func(s explain.Signal) bool {
		return s.Decision != nil && s.Decision.Early
	})
	if s.Thresholds[0].Met || s.Decision.TimeLeft == "" || s.Need <= 0 {
		t.Errorf("early: threshold %+v, need %d, decision %+v: want it unmet, a need and the time left", s.Thresholds[0], s.Need, s.Decision)
	}
}

// Unused images cover the disk's need: the agent leaves it to the
// kubelet's image garbage collection, and explain says so.
func TestExplainImageGCDeferral(t *testing.T) {
	const gi = 1 << 30
	node := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"docker.io/library/unused:a"}, SizeBytes: 10 * gi}}}}
	n := imageGCNode(t, node)
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"nodefs.available": "15%"}}))
	cfg.ExpectImageGC = true
	n.explained(t, cfg, 8*time.Minute) // the image listed long enough to count
	n.mu.Lock()
	n.diskBase = 80 * gi // 12 % available: 3 GiB short, the image covers it
	n.mu.Unlock()
	lives := n.explainedMore(t, 10*time.Second)
	if len(n.victims()) != 0 {
		t.Fatalf("calls %v, want none: the images cover the need", n.victims())
	}
	s := firstWhere(t, lives, thresholds.NodeFsAvailable, "deferring to the image collection", decided(explain.ActionWait, decide.ReasonImageGC))
	if s.Decision.NodeReclaim != 10*gi {
		t.Errorf("decision %+v: want the 10Gi of unused images counted", s.Decision)
	}
}

// A stall threshold: the stall family's signal is measured in a live
// explanation, its pods ranked, and the victim named before it goes;
// after it, explain says the agent waits a window.
func TestExplainStallFamily(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "big", usage: 900 * mi, request: 10 * mi, grace: 30},
		&simPod{name: "thrasher", usage: 60 * mi, request: 64 * mi, grace: 30, stall: 0.8, exitIn: time.Second},
		&simPod{name: "second", usage: 30 * mi, request: 64 * mi, grace: 30, stall: 0.5, exitIn: time.Second},
	)
	n.psi = true
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"memory.pressureSome": "40%", "memory.available": "300Mi"}}))
	cfg.StallWindow = 10 * time.Second
	lives := n.explained(t, cfg, 30*time.Second)
	if v := n.victims(); len(v) == 0 || v[0] != "thrasher" {
		t.Fatalf("calls %v, want thrasher first", v)
	}
	s := signalOf(t, lives[len(lives)-1], thresholds.MemoryPressureSome)
	if !s.Measured || len(s.Pods) == 0 {
		t.Errorf("stall signal %+v: want it measured, with its pods", s)
	}
	firstWhere(t, lives, thresholds.MemoryPressureSome, "waiting a stall window", decided(explain.ActionWait, "one victim per window"))
}

// A container stuck at memory.high: the family's signal is measured, and
// the pod named before it goes.
func TestExplainMemoryHighFamily(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "big", usage: 900 * mi, request: 10 * mi, grace: 30},
		&simPod{name: "jvm", usage: 300 * mi, request: 256 * mi, grace: 20, exitIn: 2 * time.Second},
	)
	mh := &memHighNode{n: n, highPerSec: map[string]uint64{"jvm": 200}}
	th := memhigh.Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: 10 * time.Second, Grace: 30 * time.Second}
	cfg := testLoopConfig(append(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}}),
		th.Threshold()))
	cfg.MemoryHigh = th
	// The family's threshold is met in the pass that evicts (its grace is
	// the family's own): no pass before it names the pod.
	n.explainNoNext = true
	lives := n.explained(t, cfg, 45*time.Second, family.NewMemHigh(th, mh.read, n.Pods, n.metrics, nil))
	if !eq(n.victims(), []string{"jvm"}) {
		t.Fatalf("calls %v, want jvm", n.victims())
	}
	for _, live := range lives {
		if s := signalOf(t, live, thresholds.MemoryHighStuck); !s.Measured {
			t.Fatalf("memory.high at %s: not measured", live.ObservedAt)
		}
	}
	firstWhere(t, lives, thresholds.MemoryHighStuck, "ranking jvm", func(s explain.Signal) bool {
		return slices.ContainsFunc(s.Pods, func(p explain.Pod) bool { return p.Name == "jvm" })
	})
}

// A soft threshold met: explain says how long it has held, of which grace,
// and when the agent acts.
func TestExplainSoftThresholdHeldFor(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	spec := thresholds.Spec{Soft: map[string]string{"memory.available": "300Mi"}, GracePeriod: map[string]string{"memory.available": "30s"}}
	lives := n.explained(t, testLoopConfig(mustThresholds(t, spec)), 12*time.Second)
	if len(n.victims()) != 0 {
		t.Fatalf("calls %v within the grace period", n.victims())
	}
	s := signalOf(t, lives[len(lives)-1], thresholds.MemoryAvailable)
	th := s.Thresholds[0]
	if th.Grace != "30s" || th.HeldFor == "" || th.HeldFor == "0s" || th.GraceLeft == "" || th.Since == nil {
		t.Errorf("soft threshold %+v: want its grace, how long it has held and what is left", th)
	}
	if d := s.Decision; d == nil || d.Action != explain.ActionNone || !strings.Contains(d.Why, "of its 30s grace period") {
		t.Errorf("decision %+v: want none yet, saying how much of the grace has passed", d)
	}
}

// While an eviction call is under way the agent asks nothing more for the
// resource: explain says it waits for that call's answer, naming the pod,
// and once the answer is in, that it waits for the pod's reclaim.
func TestExplainWaitsForTheCallUnderWay(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	var pending []func()
	l, err := NewLoop(testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), Deps{Observer: n, Waker: &simWaker{n: n}, Pods: n,
		Evictor: n, Metrics: n.metrics, Log: zaptest.NewLogger(t), Clock: n.clk, Go: func(f func()) { pending = append(pending, f) }})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	ctx := context.Background()
	l.Step(ctx, wakeup.Wakeup{Source: wakeup.SourcePoll, At: n.clk.Now()})
	if len(pending) != 1 {
		t.Fatalf("%d calls under way after the first pass, want 1 (a)", len(pending))
	}
	d := signalOf(t, l.Explain("node-1", false), thresholds.MemoryAvailable).Decision
	if d == nil || d.Action != explain.ActionWait || !strings.Contains(d.Why, "waits for the answer to the eviction call for ns/a") {
		t.Errorf("with a's call under way: decision %+v; want it waiting for that call's answer", d)
	}
	pending[0]()
	n.clk.Step(100 * time.Millisecond)
	l.Step(ctx, wakeup.Wakeup{Source: wakeup.SourceKick, Name: KickCallDone, At: n.clk.Now()})
	d = signalOf(t, l.Explain("node-1", false), thresholds.MemoryAvailable).Decision
	if d == nil || d.Action != explain.ActionWait || !strings.Contains(d.Why, "waits for the reclaim in flight") || len(pending) != 1 {
		t.Errorf("with a evicted and on its way out: decision %+v, %d calls; want it waiting for a's reclaim, no second call", d, len(pending))
	}
}
