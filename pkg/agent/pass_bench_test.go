// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/internal/benchcpu"
	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/explain"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// benchPods is the kubelet's default --max-pods.
const benchPods = 110

// BenchmarkPass is what one pass of the loop (Step) costs on the scripted
// node at 110 pods, with the trace on (as evictd runs by default), in two
// states: idle (no threshold met) and waiting (memory.available under its
// soft threshold, the victim in flight, the agent waiting for its memory).
// Per state:
//
//   - part=pass: the whole pass; readings/op is the clock readings it
//     recorded in the trace (passClock).
//   - part=pass-noreadings: the same pass with the readings not recorded
//     (Deps.PassClock): pass minus this is what recording them costs.
//   - part=explain: publishExplanation alone, on a view of the same state
//     with what act ranks already ranked: the explanation's share of a pass.
//   - part=sim: the scripted node's own Observe and Pods, which the pass
//     calls and which are no part of the agent's cost.
//
// hack/bench.sh (make bench) prints explain/pass and the readings' share.
func BenchmarkPass(b *testing.B) {
	for _, state := range []string{"idle", "waiting"} {
		for _, part := range []string{"pass", "pass-noreadings", "explain", "sim"} {
			b.Run(fmt.Sprintf("pods=%d/state=%s/part=%s", benchPods, state, part), func(b *testing.B) {
				n, w := benchNode(b, state, part == "pass-noreadings")
				ctx := context.Background()
				switch part {
				case "pass", "pass-noreadings":
					ct := n.trace.(*countingTracer)
					ct.readings = 0
					timeout := n.loop.cfg.Housekeeping
					b.ReportAllocs()
					cpu := benchcpu.Start(b)
					for b.Loop() {
						wk, err := w.Wait(ctx, timeout)
						if err != nil {
							b.Fatal(err)
						}
						timeout = n.loop.Step(ctx, wk)
					}
					cpu.Report(b)
					if (ct.readings == 0) != (part == "pass-noreadings") {
						b.Fatalf("%s: %d clock readings recorded over %d passes", part, ct.readings, b.N)
					}
					b.ReportMetric(float64(ct.readings)/float64(b.N), "readings/op")
				case "explain":
					v := benchView(b, n)
					b.ReportAllocs()
					cpu := benchcpu.Start(b)
					for b.Loop() {
						// A pass's view ranks each signal once: the
						// explanation's own rankings are not kept across
						// iterations.
						vc := *v
						vc.ranked = maps.Clone(v.ranked)
						n.loop.publishExplanation(&vc)
					}
					cpu.Report(b)
				case "sim":
					b.ReportAllocs()
					cpu := benchcpu.Start(b)
					for b.Loop() {
						if _, err := n.Observe(ctx); err != nil {
							b.Fatal(err)
						}
						n.Pods()
					}
					cpu.Report(b)
				}
				b.StopTimer()
				checkBenchState(b, n, state) // the state held over every pass timed
			})
		}
	}
}

// countingTracer counts the clock readings the passes record.
type countingTracer struct {
	*trace.Recorder
	readings int
}

func (c *countingTracer) Reading(t time.Time) {
	c.readings++
	c.Recorder.Reading(t)
}

// benchNode is the scripted node at 110 pods in state, its loop built and
// run until the state holds: idle, with memory.available far above its
// thresholds; waiting, with it under the soft one and its victim, a pod
// that never exits within the benchmark (its runtime hangs, its grace
// period is months), in flight.
func benchNode(b *testing.B, state string, noReadings bool) (*simNode, *simWaker) {
	b.Helper()
	pods := make([]*simPod, benchPods)
	var used int64
	for i := range pods {
		pods[i] = &simPod{name: fmt.Sprintf("p%03d", i), usage: 40 * mi, request: 64 * mi, grace: 30}
		used += pods[i].usage
	}
	const base = 2 << 30
	capacity := int64(32 << 30)
	if state == "waiting" {
		hog := pods[0]
		hog.usage, hog.request, hog.grace, hog.hang = 2<<30, 256*mi, 1<<24, true
		used += hog.usage - 40*mi
		capacity = base + used + 600*mi // under the soft threshold, above the hard one
	}
	n := newSimNode(b, capacity, base, pods...)
	n.lister = true
	n.log = zap.NewNop()
	m, err := metrics.New(buildinfo.Info{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	n.metrics = m
	n.trace = &countingTracer{Recorder: trace.NewRecorder(trace.Header{Node: "node-a"}, trace.DefaultBudget)}
	if noReadings {
		n.passClock = n.clk
	}
	cfg := testLoopConfig(mustThresholds(b, thresholds.Spec{
		Hard:        map[string]string{"memory.available": "100Mi"},
		Soft:        map[string]string{"memory.available": "1Gi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}))
	w := n.run(b, cfg, 10*time.Second)
	checkBenchState(b, n, state)
	return n, w
}

// checkBenchState fails the benchmark unless the node is in state: no
// eviction, and the explanation has nothing to do (idle); or one eviction,
// its pod in flight, and the explanation waits (waiting).
func checkBenchState(b *testing.B, n *simNode, state string) {
	b.Helper()
	es := n.loop.published.explained.Load()
	if es == nil {
		b.Fatal("no explanation published")
	}
	d := es.decisions[thresholds.MemoryAvailable]
	calls, inFlight := len(n.victims()), len(n.loop.InFlight())
	want := map[string][3]any{"idle": {0, 0, explain.ActionNone}, "waiting": {1, 1, explain.ActionWait}}[state]
	if calls != want[0] || inFlight != want[1] || d.Action != want[2] {
		b.Fatalf("state %s: %d eviction calls, %d pods in flight, memory.available's decision %q (%s); want %v",
			state, calls, inFlight, d.Action, d.Why, want)
	}
}

// benchView is the view a pass of n's loop explains: Step's up to act, and
// the rankings act makes for the open episodes (planNow is act's plan).
func benchView(b *testing.B, n *simNode) *view {
	b.Helper()
	w := wakeup.Wakeup{Source: wakeup.SourcePoll, At: n.clk.Now()}
	obs, ok := n.loop.observe(context.Background(), true)
	if !ok {
		b.Fatal("the scripted node cannot be observed")
	}
	v := n.loop.assess(obs, w)
	n.loop.settleVictims(v)
	n.loop.forgetUnlisted(v)
	for _, ep := range n.loop.episodes.All() {
		n.loop.planNow(ep, v)
	}
	return v
}
