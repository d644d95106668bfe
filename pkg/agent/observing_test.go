// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/agent/feature/shadowmode"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// Observing is free of effects. The explanation (/explain and its debug
// line), the metrics, the trace and shadow mode read what a pass decided;
// none of them may change what a later pass decides. Each scenario runs
// with none of them, with each alone and with all of them, its calls
// answered a round trip after the pass that made them (as in evictd, so a
// call is under way when the pass publishes), and every run must make the
// same eviction calls at the same passes. Publishing the explanation once
// planned every resource through the stall family's settle step, which
// moved its window: a memory eviction refused by its PodDisruptionBudget,
// seen under way by the explanation alone, put the stall's eviction off
// by a whole window.
func TestObservingChangesNoDecision(t *testing.T) {
	variants := []observers{
		{explain: true}, {metrics: true}, {trace: true}, {shadow: true},
		{explain: true, metrics: true, trace: true, shadow: true},
	}
	for _, sc := range observedScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			base := runObserved(t, sc, observers{})
			if got := base.pods(); !eq(got, sc.want) {
				t.Fatalf("with no observer: eviction calls %v, want %v (the scenario no longer does what it is for)\n%s", got, sc.want, base)
			}
			for _, o := range variants {
				got := runObserved(t, sc, o)
				if i, diff := firstDiff(base, got); diff {
					t.Errorf("with %s the calls differ from call %d on:\nwith no observer:\n%swith %s:\n%s", o, i+1, base.from(i), o, got.from(i))
				}
			}
		})
	}
}

// observers says which observers run beside the loop.
type observers struct {
	explain, metrics, trace, shadow bool
}

func (o observers) String() string {
	var on []string
	for _, x := range []struct {
		on   bool
		name string
	}{{o.explain, "/explain"}, {o.metrics, "metrics"}, {o.trace, "the trace"}, {o.shadow, "shadow mode"}} {
		if x.on {
			on = append(on, x.name)
		}
	}
	if len(on) == 0 {
		return "no observer"
	}
	return strings.Join(on, ", ")
}

// observedScenario is a node, its thresholds and what happens to it.
type observedScenario struct {
	name string
	// node builds the node, and the observer the loop reads it through
	// (nil: the node itself).
	node func(t *testing.T) (*simNode, Observer)
	spec thresholds.Spec
	tune func(*LoopConfig)
	// events change the node at their time from t0, before the pass that
	// first sees that time.
	events []simEvent
	d      time.Duration
	// want are the pods the calls name with no observer, in order.
	want []string
}

type simEvent struct {
	at time.Duration
	do func(n *simNode)
}

func observedScenarios() []observedScenario {
	const gi = 1 << 30
	// Each run builds its own pods: a run changes them.
	plain := func(capacity, base int64, pods func() []*simPod) func(*testing.T) (*simNode, Observer) {
		return func(t *testing.T) (*simNode, Observer) { return newSimNode(t, capacity, base, pods()...), nil }
	}
	return []observedScenario{{
		// The finding of issue 59: memory.available is met for a moment
		// and its victim's eviction is refused by a PodDisruptionBudget;
		// the memory comes back by itself, the stall goes on. The refusal
		// freed nothing: the stall's victim goes once 40 % of its window
		// has stalled, not a window after the refused call.
		name: "memory eviction refused by its PDB, then the stall",
		node: func(t *testing.T) (*simNode, Observer) {
			n := newSimNode(t, 4096*mi, 4096*mi-250*mi-960*mi, // 250Mi available
				&simPod{name: "guarded", usage: 900 * mi, request: 10 * mi, grace: 30, pdb: true},
				&simPod{name: "thrasher", usage: 60 * mi, request: 64 * mi, grace: 30, stall: 0.8, exitIn: time.Second})
			n.psi = true
			return n, nil
		},
		spec: thresholds.Spec{Hard: map[string]string{"memory.pressureSome": "40%", "memory.available": "300Mi"}},
		tune: func(c *LoopConfig) { c.StallWindow = 10 * time.Second },
		// A cache dropped before the refusal came back: no next candidate.
		events: []simEvent{{10 * time.Millisecond, func(n *simNode) { n.base -= 500 * mi }}},
		d:      20 * time.Second,
		want:   []string{"guarded", "thrasher"},
	}, {
		// An accepted memory victim settles the stall: the stall's own
		// victim waits a window after it went.
		name: "memory victim, then the stall",
		node: func(t *testing.T) (*simNode, Observer) {
			n := newSimNode(t, 4096*mi, 4096*mi-250*mi-960*mi,
				&simPod{name: "big", usage: 900 * mi, request: 10 * mi, grace: 30, exitIn: time.Second},
				&simPod{name: "thrasher", usage: 60 * mi, request: 64 * mi, grace: 30, stall: 0.8, exitIn: time.Second})
			n.psi = true
			return n, nil
		},
		spec: thresholds.Spec{Hard: map[string]string{"memory.pressureSome": "40%", "memory.available": "300Mi"}},
		tune: func(c *LoopConfig) { c.StallWindow = 10 * time.Second },
		d:    30 * time.Second,
		want: []string{"big", "thrasher"},
	}, {
		// Every pod held by a PodDisruptionBudget: refusals, pauses and
		// sweeps, until one pod's budget lets it go.
		name:   "PDB refusals, pauses and sweeps",
		node:   func(t *testing.T) (*simNode, Observer) { return pdbNode(t, pdbPods(4)), nil },
		spec:   memSpec("300Mi", ""),
		events: []simEvent{{60 * time.Second, func(n *simNode) { n.pod("p01").pdb = false }}},
		d:      100 * time.Second,
		want:   []string{"p00", "p01", "p02", "p03", "p00", "p02", "p01", "p03", "p01"},
	}, {
		// A soft threshold acts once its grace period has passed.
		name: "soft threshold with a grace period",
		node: plain(4096*mi, base250, threePods),
		spec: thresholds.Spec{
			Soft:        map[string]string{"memory.available": "500Mi"},
			GracePeriod: map[string]string{"memory.available": "5s"},
			Hard:        map[string]string{"memory.available": "100Mi"},
		},
		d:    20 * time.Second,
		want: []string{"a"},
	}, {
		// A victim with no usage figure: nothing more until it is gone
		// and a newer observation shows what it freed.
		name: "a victim with no usage figure",
		node: plain(4096*mi, 4096*mi-250*mi-1100*mi, func() []*simPod {
			return []*simPod{
				{name: "c", usage: 100 * mi, grace: 30, exitIn: 3 * time.Second},
				{name: "a", usage: 500 * mi, grace: 30, exitIn: 4 * time.Second, noStats: true},
				{name: "d", usage: 500 * mi, grace: 30, exitIn: time.Second, noStats: true},
			}
		}),
		spec: memSpec("300Mi", "200Mi"),
		d:    20 * time.Second,
		want: []string{"c", "a"},
	}, {
		// A one-disk node whose unused images cover part of the need: the
		// kubelet's chance at them, then the writer, its figures walked
		// again first.
		name: "disk, with the kubelet's image collection",
		node: func(t *testing.T) (*simNode, Observer) {
			n := newSimNode(t, 4096*mi, base250,
				&simPod{name: "writer", usage: 10 * mi, grace: 30, exitIn: time.Second, disk: 8 * gi, diskRate: 10 * mi},
				&simPod{name: "quiet", usage: 10 * mi, grace: 30, disk: gi})
			n.diskCapacity, n.diskBase, n.diskRefresh = 100*gi, 60*gi, 10*time.Second
			n.node = &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"docker.io/library/unused:a"}, SizeBytes: gi}}}}
			return n, nil
		},
		spec: thresholds.Spec{Hard: map[string]string{"nodefs.available": "15%", "imagefs.available": "15%"}},
		tune: func(c *LoopConfig) { c.ExpectImageGC = true },
		// Listed long enough for the kubelet to delete it; then 12 %
		// available.
		events: []simEvent{{8 * time.Minute, func(n *simNode) { n.diskBase = 80 * gi }}},
		d:      9 * time.Minute,
		want:   []string{"writer"},
	}, {
		// pid.available: the pod with the most processes goes.
		name: "pids",
		node: func(t *testing.T) (*simNode, Observer) {
			n := newSimNode(t, 4096*mi, base250+2400*mi,
				&simPod{name: "forker", usage: 10 * mi, grace: 30, exitIn: time.Second},
				&simPod{name: "quiet", usage: 10 * mi, grace: 30, exitIn: time.Second})
			return n, &pidNode{simNode: n, maxPID: 1000, base: 850, procs: map[string]int64{"forker": 120, "quiet": 10}}
		},
		spec: thresholds.Spec{Hard: map[string]string{"pid.available": "10%"}},
		d:    10 * time.Second,
		want: []string{"forker"},
	}, {
		// Shadow mode's dry run: the would-be evictions, as in flight.
		name: "dry run",
		node: func(t *testing.T) (*simNode, Observer) {
			n := newSimNode(t, 4096*mi, base250, threePods()...)
			n.evictResult = func(*simPod, evict.Request) (evict.Outcome, error) {
				return evict.Outcome{Result: evict.DryRun, GracePeriodSeconds: 5, Attempts: 1}, nil
			}
			return n, nil
		},
		spec: memSpec("300Mi", "1200Mi"),
		d:    20 * time.Second,
		want: []string{"a", "b"},
	}}
}

// pidNode gives a simulated node's observations PID figures: the node's
// limit and running processes (base outside the pods), and each running
// pod's process count.
type pidNode struct {
	*simNode
	maxPID, base int64
	procs        map[string]int64
}

func (p *pidNode) Observe(ctx context.Context) (*pressure.Observation, error) {
	obs, err := p.simNode.Observe(ctx)
	if err != nil {
		return nil, err
	}
	running, limit := p.base, p.maxPID
	for i := range obs.Summary.Pods {
		ps := &obs.Summary.Pods[i]
		c := uint64(p.procs[ps.PodRef.Name])
		ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: &c}
		running += int64(c)
	}
	obs.Summary.Node.Rlimit = &statsapi.RlimitStats{Time: metav1.NewTime(obs.Time), MaxPID: &limit, NumOfRunningProcesses: &running}
	return obs, nil
}

// observedCall is an eviction call as the API server got it, and the pass
// that made it.
type observedCall struct {
	pass   int
	at     time.Duration // from t0
	pod    string
	signal thresholds.Signal
	hard   bool
	force  bool
	grace  string
	rank   int
	reason string
}

func (c observedCall) String() string {
	return fmt.Sprintf("pass %d (t0+%v): %s for %s (hard %v, force %v, grace %s, rank %d): %s",
		c.pass, c.at, c.pod, c.signal, c.hard, c.force, c.grace, c.rank, c.reason)
}

type observedCalls []observedCall

func (cs observedCalls) pods() []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.pod)
	}
	return out
}

func (cs observedCalls) String() string { return cs.from(0) }

// from lists the calls from the i-th on.
func (cs observedCalls) from(i int) string {
	var b strings.Builder
	for _, c := range cs[min(i, len(cs)):] {
		b.WriteString("  " + c.String() + "\n")
	}
	if i >= len(cs) {
		b.WriteString("  (no more calls)\n")
	}
	return b.String()
}

// firstDiff is the index of the first call a and b differ in.
func firstDiff(a, b observedCalls) (int, bool) {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i, true
		}
	}
	return 0, false
}

// callRecorder is the node's evictor, noting each call with the pass that
// made it.
type callRecorder struct {
	*simNode
	pass  *int
	calls observedCalls
}

func (r *callRecorder) note(req evict.Request, force bool) {
	grace := "-"
	if req.GraceOverride != nil {
		grace = fmt.Sprint(*req.GraceOverride)
	}
	r.calls = append(r.calls, observedCall{pass: *r.pass, at: r.clk.Now().Sub(t0), pod: req.Pod.Name, signal: req.Signal, hard: req.Hard,
		force: force, grace: grace, rank: req.Rank, reason: req.Reason})
}

func (r *callRecorder) Evict(ctx context.Context, req evict.Request) (evict.Outcome, error) {
	r.note(req, false)
	return r.simNode.Evict(ctx, req)
}

func (r *callRecorder) ForceDelete(ctx context.Context, req evict.Request) (evict.Outcome, error) {
	r.note(req, true)
	return r.simNode.ForceDelete(ctx, req)
}

// runObserved runs sc with the observers o, and returns its calls. Each
// observer is read after every pass, as a scrape, a GET or an export
// would read it: reading must change nothing either.
func runObserved(t *testing.T, sc observedScenario, o observers) observedCalls {
	t.Helper()
	n, observer := sc.node(t)
	if observer == nil {
		observer = n
	}
	cfg := testLoopConfig(mustThresholds(t, sc.spec))
	if sc.tune != nil {
		sc.tune(&cfg)
	}
	pass := 0
	rec := &callRecorder{simNode: n, pass: &pass}
	w := &asyncWaker{n: n, rtt: 20 * time.Millisecond}
	deps := Deps{Observer: observer, Waker: w, Pods: n, Evictor: rec, Log: zap.NewNop(), Clock: n.clk, Go: w.run}
	var reads []func()
	if o.explain {
		// Debug level: the pass also logs what it explained (logExplained).
		deps.Log = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.DebugLevel))
	}
	if o.metrics || o.trace {
		m, err := metrics.New(buildinfo.Info{})
		if err != nil {
			t.Fatal(err)
		}
		deps.Metrics = m
		reads = append(reads, func() {
			if _, err := m.Registry().Gather(); err != nil {
				t.Fatalf("gathering the metrics: %v", err)
			}
		})
	}
	if o.trace {
		tr := trace.NewRecorder(trace.Header{Node: "node-a", Started: t0}, trace.MinBudget)
		deps.Trace = tr
		deps.Metrics.SetTrace(tr)
		reads = append(reads, func() {
			if _, err := tr.WriteTo(io.Discard); err != nil {
				t.Fatalf("exporting the trace: %v", err)
			}
		})
	}
	if o.shadow {
		sr := shadow.NewRecorder(func() (int64, error) { return 0, nil }, nil)
		deps.Features = append(deps.Features, shadowmode.New(sr))
		reads = append(reads, func() { _ = sr.Reports() })
	}
	l, err := NewLoop(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	if o.metrics {
		deps.Metrics.SetReadiness(l.Problem)
	}
	l.explainOff = !o.explain
	if o.explain {
		h := ExplainHandler(l, "node-a", false)
		reads = append(reads, func() {
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/explain", nil))
			if rr.Code != http.StatusOK {
				t.Fatalf("GET /explain: %d %s", rr.Code, rr.Body)
			}
		})
	}
	events := sc.events
	ctx := context.Background()
	timeout := time.Duration(0)
	end := t0.Add(sc.d)
	for i := 0; n.clk.Now().Before(end); i++ {
		if i > 1000000 {
			t.Fatal("the loop does not advance the clock")
		}
		wk, err := w.Wait(ctx, timeout)
		if err != nil {
			t.Fatal(err)
		}
		for len(events) > 0 && !n.clk.Now().Before(t0.Add(events[0].at)) {
			n.mu.Lock()
			events[0].do(n)
			n.mu.Unlock()
			events = events[1:]
		}
		pass++
		n.steps++
		timeout = l.Step(ctx, wk)
		for _, read := range reads {
			read()
		}
	}
	return rec.calls
}
