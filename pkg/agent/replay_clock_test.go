// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
)

// slowPods is the scripted node whose pod list takes a while to read: the
// clock moves on between a pass's observation and its decisions, as a
// real pass's does when its core is busy.
type slowPods struct {
	*simNode
	take time.Duration
}

func (s slowPods) Pods() []*v1.Pod {
	s.clk.Step(s.take)
	return s.simNode.Pods()
}

// TestReplayDecidesWithTheAgentsReadings: issue 48's case, made
// deterministic. The agent's first call is rate-limited for 90 ms; the next
// pass, woken 100 ms later by an event, observes before the token comes
// back and decides 30 ms later, after it: the agent calls again. Every
// time the pass itself recorded (its start, its observation's end) is
// before the token's return, so a replay that decides on them makes no
// call there; the replay decides with the agent's own readings, and makes
// the agent's calls, pass for pass.
func TestReplayDecidesWithTheAgentsReadings(t *testing.T) {
	args := []string{"--eviction-hard=memory.available<300Mi"}
	o := replayOptions(t, args...)
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	limited := false
	n.evictResult = func(_ *simPod, req evict.Request) (evict.Outcome, error) {
		if limited {
			return evict.Outcome{}, nil // the node's own answer
		}
		limited = true
		return evict.Outcome{Result: evict.RateLimited, RetryAfter: 90 * time.Millisecond, GracePeriodSeconds: 30},
			&evict.PodError{Pod: req.Pod.Namespace + "/" + req.Pod.Name, Result: evict.RateLimited, Err: evict.ErrRateLimited}
	}
	rec := NewTrace(o, nil, kubeletplace.View{}, o.Thresholds(), "test", t0)
	rank, err := o.Config.RankOptions()
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoop(ConfigFor(o, o.Thresholds(), rank), Deps{Observer: n, Waker: &simWaker{n: n}, Pods: slowPods{n, 30 * time.Millisecond},
		Evictor: n, Log: zaptest.NewLogger(t), Clock: n.clk, Go: syncCall, Trace: rec})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	for i := range 40 {
		n.clk.SetTime(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		l.Step(context.Background(), wakeup.Wakeup{Source: wakeup.SourcePSI, At: n.clk.Now()})
	}
	tr := readBack(t, rec)

	// The trace is issue 48's: a rate-limited call, then the agent's next
	// call in a pass that observed before the token came back and
	// launched after.
	recorded := play.RecordedCalls(tr)
	if len(recorded) < 2 || recorded[0].Result != string(evict.RateLimited) || recorded[1].Result != string(evict.Evicted) {
		t.Fatalf("the agent made the calls %v (%+v), want a rate-limited call, then an accepted one", callKeys(recorded), recorded)
	}
	var limitedCall trace.Call
	var second *trace.Pass
	for i, p := range tr.Passes {
		for _, d := range p.Drains {
			for _, c := range d.Calls {
				if c.Seq == 1 {
					limitedCall = c
				}
			}
		}
		if p.N == recorded[1].Pass {
			second = &tr.Passes[i]
		}
	}
	back := limitedCall.At.Add(limitedCall.RetryAfter)
	if second == nil || !second.ObservedAt.Before(back) || recorded[1].Launched.Before(back) {
		t.Fatalf("the rate token came back at %s; the agent's next call, in pass %d observed at %s, launched at %s: want the token back between",
			back.Format(time.StampMicro), recorded[1].Pass, second.ObservedAt.Format(time.StampMicro), recorded[1].Launched.Format(time.StampMicro))
	}

	res, err := Replay(context.Background(), replayOptions(t, args...), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := callKeys(res.Calls), callKeys(recorded); !eq(got, want) {
		t.Fatalf("the replay made the calls\n%v\nwant the agent's\n%v", got, want)
	}
	for i, c := range res.Calls {
		if !c.Same(recorded[i]) || !c.Recorded || c.Result != recorded[i].Result || !c.Launched.Equal(recorded[i].Launched) {
			t.Errorf("call %d: %+v, want the agent's %+v", i, c, recorded[i])
		}
	}
	if len(res.Differ) != 0 {
		t.Errorf("the replay of the agent's own trace took other readings than the agent in passes %+v", res.Differ)
	}
}
