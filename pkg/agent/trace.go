// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// Tracer records the loop's passes for a replay (*trace.Recorder).
type Tracer interface {
	Begin(n, calls uint64, at time.Time, w trace.Wakeup)
	// Deleted records a deletion the pass took note of.
	Deleted(d trace.Deletion)
	Drained(point int, calls []trace.Call)
	// Placed records the thresholds placed anew the pass switched to.
	Placed(p trace.Placement)
	// Launched records a call the pass made, its decision.
	Launched(c trace.Call)
	Observed(obs *pressure.Observation, err error, at time.Time, acting bool)
	PodState(pods []*v1.Pod, classes map[string]int32, nsLabels map[string]map[string]string, node *v1.Node)
	// Reading records a clock reading the pass took (passClock).
	Reading(t time.Time)
	End()
}

// passClock is the clock the loop's goroutine reads: each reading taken
// during a pass (the pacing, the observation's start and end, the
// threshold tracker, the rate limits, deadlines and back-offs a decision
// checks, a call's launch) goes into the pass's trace, so that a replay
// decides with the times the agent decided with (the player hands them
// back: Deps.PassClock). Readings taken elsewhere (an eviction call's
// answer, on the call's goroutine; a deletion, on the informer's) are not
// the pass's: they read Deps.Clock, and their times are in the trace
// with what they time.
type passClock struct {
	clock.PassiveClock
	tr Tracer
}

func (c passClock) Now() time.Time {
	t := c.PassiveClock.Now()
	c.tr.Reading(t)
	return t
}

func (c passClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// passTrace is the loop's side of the trace and the replay: the pass and
// call numbers, and the drain points within a pass.
type passTrace struct {
	pass  uint64
	calls uint64
	point int
}

// traceBegin starts pass n's record.
func (l *Loop) traceBegin(w wakeup.Wakeup, now time.Time) {
	l.tr.pass++
	if l.deps.Replay != nil {
		l.tr.pass = l.deps.Replay.PassNumber()
	}
	l.tr.point = 0
	if l.deps.Trace != nil {
		l.deps.Trace.Begin(l.tr.pass, l.tr.calls, now, trace.Wakeup{Source: string(w.Source), Name: w.Name, At: w.At})
	}
}

// drainCalls takes the eviction calls' answers that came back, and records
// them at this drain point of the pass.
func (l *Loop) drainCalls() []callResult {
	point := l.tr.point
	l.tr.point++
	if l.deps.Replay != nil {
		l.deps.Replay.BeforeDrain(point)
	}
	out := l.inbox.calls.drain()
	if l.deps.Trace != nil && len(out) > 0 {
		calls := make([]trace.Call, len(out))
		for i, r := range out {
			calls[i] = traceCall(r)
		}
		l.deps.Trace.Drained(point, calls)
	}
	return out
}

func traceCall(r callResult) trace.Call {
	c := trace.Call{Seq: r.seq, Decision: trace.DecisionOf(r.req, r.d.Action == decide.ForceDelete, r.pass, r.launched),
		At: r.at, Result: string(r.out.Result), GracePeriodSeconds: r.out.GracePeriodSeconds, Accepted: r.out.Accepted,
		RetryAfter: r.out.RetryAfter, Attempts: r.out.Attempts, Cached: r.out.Cached}
	if r.err != nil {
		c.Error = r.err.Error()
		switch {
		case errors.Is(r.err, evict.ErrEpisodeCap):
			c.ErrorKind = trace.ErrorEpisodeCap
		case errors.Is(r.err, context.Canceled):
			c.ErrorKind = trace.ErrorCanceled
		}
	}
	return c
}

// traceObserved records the observer's answer.
func (l *Loop) traceObserved(obs *pressure.Observation, err error, at time.Time, acting bool) {
	if l.deps.Trace != nil {
		l.deps.Trace.Observed(obs, err, at, acting)
	}
}

// tracePods records the pod list the pass decides on.
func (l *Loop) tracePods(v *view) {
	if l.deps.Trace != nil {
		l.deps.Trace.PodState(v.pods, v.rank.PriorityClasses, v.rank.NamespaceLabels, l.deps.Pods.Node())
	}
}

// NewTrace is the agent's trace recorder (nil with --trace-size=0). Its
// header keeps what the agent's start read to decide with: its flags and
// config file, and the placement above the kubelet's (placed, made with
// start) with the thresholds ths it got, so that a replay with the
// recorded configuration starts with the agent's thresholds and can check
// that it does.
func NewTrace(o *options.Options, placed *kubeletplace.Placement, start kubeletplace.View, ths []thresholds.Threshold, version string, now time.Time) *trace.Recorder {
	if o.TraceSize <= 0 {
		return nil
	}
	h := trace.Header{Node: o.NodeName, Version: version, Started: now, Args: o.Args}
	if path, data := o.Config.Source(); path != "" {
		h.Config = string(data)
	}
	h.Start = &trace.Placement{Thresholds: thresholdStrings(ths), Capacity: kubeletplace.TraceCapacity(start.Signals),
		DiskLayout: string(start.DiskLayout)}
	if placed != nil && placed.Known {
		h.Start.KubeletRead, h.Start.KubeletHard = true, placed.KubeletHard
		h.Start.ImageGCHigh, h.Start.ImageGCLow = placed.ImageGC.High, placed.ImageGC.Low
	}
	return trace.NewRecorder(h, o.TraceSize)
}
