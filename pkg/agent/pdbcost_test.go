// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/evictd/evictd/pkg/pressure/wakeup"
)

// What a node whose pods are all held by PodDisruptionBudgets costs the API
// server: evictd runs on every node, so a zone of such nodes under pressure
// multiplies whatever one agent asks. The bounds below hold whatever the
// number of pods: at most pdbProbes eviction calls refused back to back,
// then a pause that grows (with jitter) to pdbPauseMax.
const (
	// maxCallsPerPass: the refused calls of one pass.
	maxCallsPerPass = 3
	// maxCallsFirstMinute: the first rounds come at 0, ~5, ~15 and ~35 s.
	maxCallsFirstMinute = 12
	// maxCallsPerMinute: once the pause has grown to a minute (±20 %), two
	// rounds at most fall in any later minute.
	maxCallsPerMinute = 6
)

// pdbPods are n pods, every one protected by a PodDisruptionBudget but
// those named in free, ranked p00 first (each uses a little less than the
// one before), each alone enough to end the node's pressure.
func pdbPods(n int, free ...string) []*simPod {
	pods := make([]*simPod, n)
	for i := range pods {
		pods[i] = &simPod{name: fmt.Sprintf("p%02d", i), usage: int64(300-i) * mi, grace: 30, exitIn: time.Second, pdb: true}
		for _, f := range free {
			if pods[i].name == f {
				pods[i].pdb = false
			}
		}
	}
	return pods
}

// pdbNode is a 16Gi node left with 250Mi available by the pods, under a hard
// memory.available threshold of 300Mi.
func pdbNode(t *testing.T, pods []*simPod) *simNode {
	var used int64
	for _, p := range pods {
		used += p.usage
	}
	return newSimNode(t, 16384*mi, 16384*mi-250*mi-used, pods...)
}

// asyncWaker plays evictd's own runner of eviction calls: each call runs off
// the pass that made it and is answered a round trip later, and its answer
// kicks the next pass, which takes it (KickCallDone). simWaker's synchronous
// calls are all answered within their pass; here a refusal's next candidate
// is asked by the next pass.
type asyncWaker struct {
	n    *simNode
	rtt  time.Duration
	mu   sync.Mutex
	held []func()
	kick []string
}

func (w *asyncWaker) run(f func()) {
	w.mu.Lock()
	w.held = append(w.held, f)
	w.mu.Unlock()
}

func (w *asyncWaker) Wait(ctx context.Context, timeout time.Duration) (wakeup.Wakeup, error) {
	if err := ctx.Err(); err != nil {
		return wakeup.Wakeup{}, err
	}
	w.mu.Lock()
	held := w.held
	w.held = nil
	w.mu.Unlock()
	if len(held) > 0 {
		w.n.clk.Step(min(w.rtt, timeout))
		for _, f := range held {
			f() // the answer, and its kick
		}
	}
	w.mu.Lock()
	if len(w.kick) > 0 {
		k := w.kick[0]
		w.kick = w.kick[1:]
		w.mu.Unlock()
		return wakeup.Wakeup{Source: wakeup.SourceKick, Name: k, At: w.n.clk.Now()}, nil
	}
	w.mu.Unlock()
	if len(held) == 0 {
		w.n.clk.Step(timeout)
	}
	return wakeup.Wakeup{Source: wakeup.SourcePoll, At: w.n.clk.Now()}, nil
}

func (w *asyncWaker) Kick(name string) {
	w.mu.Lock()
	w.kick = append(w.kick, name)
	w.mu.Unlock()
}

// runPDBNode runs the loop on n for d of simulated time, its calls answered
// in the pass (sync) or a round trip later, each answer kicking a pass
// (async), as in evictd.
func runPDBNode(t *testing.T, n *simNode, async bool, d time.Duration) {
	t.Helper()
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
	if !async {
		n.run(t, cfg, d)
		return
	}
	w := &asyncWaker{n: n, rtt: 20 * time.Millisecond}
	l, err := NewLoop(cfg, Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Log: zaptest.NewLogger(t), Clock: n.clk, Go: w.run})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	end := n.clk.Now().Add(d)
	ctx := context.Background()
	timeout := time.Duration(0)
	for i := 0; n.clk.Now().Before(end); i++ {
		if i > 1000000 {
			t.Fatal("the loop does not advance the clock")
		}
		wk, err := w.Wait(ctx, timeout)
		if err != nil {
			t.Fatal(err)
		}
		n.steps++
		timeout = l.Step(ctx, wk)
	}
}

// callsPerPass and callsPerMinute count the Evictor's calls by the pass that
// made them, and by minute of simulated time from t0.
func (n *simNode) callsPerPass() map[int]int {
	out := map[int]int{}
	for _, c := range n.calls {
		out[c.step]++
	}
	return out
}

func (n *simNode) callsPerMinute() []int {
	var out []int
	for _, c := range n.calls {
		m := int(c.at.Sub(t0) / time.Minute)
		for len(out) <= m {
			out = append(out, 0)
		}
		out[m]++
	}
	return out
}

// A node whose every pod a PodDisruptionBudget holds, under hard memory
// pressure that nothing evictd may evict can end: what it asks of the API
// server must be bounded per pass and per minute, and not grow with the
// number of pods. Every pod is still asked in time: one whose budget
// allows it would be found. Before, a pass asked up to 8 pods back to back
// (and, with calls answered off the pass as in evictd, each refusal's kick
// asked the next one at once: every pod within a second), and every pod
// was asked again 30 s later, and every 4 minutes for ever after.
func TestLoopPDBHeldNodeCostsBoundedCalls(t *testing.T) {
	for _, tc := range []struct {
		pods int
		run  time.Duration
	}{
		{12, 10 * time.Minute},
		{40, 30 * time.Minute},
	} {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d pods, async %v", tc.pods, async), func(t *testing.T) {
				n := pdbNode(t, pdbPods(tc.pods))
				runPDBNode(t, n, async, tc.run)
				perMinute := n.callsPerMinute()
				t.Logf("%d calls in %v; per minute %v", len(n.calls), tc.run, perMinute)
				if len(n.calls) == 0 {
					t.Fatal("no eviction call: no pressure?")
				}
				if got := n.evictedPods(); len(got) != 0 {
					t.Fatalf("evicted %v past their PodDisruptionBudgets", got)
				}
				for step, c := range n.callsPerPass() {
					if c > maxCallsPerPass {
						t.Errorf("pass %d made %d eviction calls, want at most %d", step, c, maxCallsPerPass)
					}
				}
				for m, c := range perMinute {
					limit := maxCallsPerMinute
					if m == 0 {
						limit = maxCallsFirstMinute
					}
					if c > limit {
						t.Errorf("minute %d: %d eviction calls, want at most %d", m, c, limit)
					}
				}
				asked := map[string]bool{}
				for _, c := range n.calls {
					asked[c.pod] = true
				}
				if len(asked) != tc.pods {
					t.Errorf("%d of %d pods asked in %v: each must be asked in turn", len(asked), tc.pods, tc.run)
				}
			})
		}
	}
}

// The first pod whose budget allows it still goes at once: the third in
// rank, evicted in the first pass (sync) or as soon as the two refusals
// before it came back (async), and nothing more is asked. The fifth goes
// with the second round, after the first pause (5 s ±20 %).
func TestLoopPDBHeldNodeEvictsTheFirstFreePod(t *testing.T) {
	for _, tc := range []struct {
		free   string
		calls  []string
		within time.Duration
	}{
		{"p02", []string{"p00", "p01", "p02"}, time.Second},
		{"p04", []string{"p00", "p01", "p02", "p03", "p04"}, 7 * time.Second},
	} {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s free, async %v", tc.free, async), func(t *testing.T) {
				n := pdbNode(t, pdbPods(12, tc.free))
				runPDBNode(t, n, async, time.Minute)
				if !eq(n.victims(), tc.calls) {
					t.Fatalf("calls %v, want %v: those before %s refused, %s evicted, nothing more", n.victims(), tc.calls, tc.free, tc.free)
				}
				if got := n.evictedPods(); !eq(got, []string{tc.free}) {
					t.Errorf("evicted %v, want [%s]", got, tc.free)
				}
				if took := n.calls[len(n.calls)-1].at.Sub(n.calls[0].at); took > tc.within {
					t.Errorf("%s asked %v after the first refusal, want within %v", tc.free, took, tc.within)
				}
			})
		}
	}
}
