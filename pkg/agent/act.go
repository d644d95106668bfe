// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// act decides for one resource's episode and starts its eviction call.
// Each episode has two lanes: while a hard threshold's call is under way
// nothing more is asked for the resource; while a soft one's is, only hard
// thresholds are considered, so a slow answer to a soft eviction never
// holds a hard one back.
func (l *Loop) act(ctx context.Context, ep *episode.Episode, v *view) {
	if ep.Busy(episode.Hard) {
		return
	}
	// What planning leaves as it is, the decision forgets: the refusals
	// past their recheck, a victim with no usage figure no longer in flight.
	episode.Forget(l.held.refused, v.now, l.cfg.RefusedRecheck)
	ep.ForgetUnknownReclaim(l.inflight.Contains)
	in := l.planInput(ep, v)
	l.noteInput(v, in)
	opts := l.decideOptions()
	for attempt := 0; attempt < l.cfg.MaxAttempts && ctx.Err() == nil; attempt++ {
		p := l.plan(ep, v, in, opts, l.clk.Now())
		if p.NewSweep {
			ep.StartSweep()
		}
		d := p.Decision
		if d.Action == decide.None {
			l.logNone(ep, d)
			return
		}
		ep.LastNone = ""
		if p.Stale != nil {
			l.rewalkStale(ep, p.Stale)
			return
		}
		l.noteEarly(ep, d, v, opts.Lead)
		if reason := p.Deferred; reason != "" {
			l.deps.Log.Debug("eviction deferred", zap.String("resource", string(ep.Resource)), zap.String("pod", podKey(d.Candidate)), zap.String("reason", reason))
			return
		}
		lane := l.launch(ctx, ep, d, v.cgroupOf(d.Candidate.UID))
		// Only the answer of the call just made says whether to try the
		// next candidate: an earlier call's refusal, drained here too,
		// must not start a second call in a lane whose call is under way
		// (its tracking would be lost, and its pod called for again).
		next := false
		for _, r := range l.drainCalls() {
			if l.answer(r) && r.ep == ep && r.lane == lane {
				next = true
			}
		}
		if !next || ep.Busy(lane) {
			return
		}
		// A PodDisruptionBudget or the API server refused it for this pod:
		// the next candidate, at once (the plan holds it back when the
		// refusals in a row call for a pause).
		in.Blocked = ep.FreshBlocked(l.clk.Now())
		in.Refused = episode.Fresh(l.held.refused, l.clk.Now(), l.cfg.RefusedRecheck)
		in.InFlight = l.inFlightView()
	}
}

func (l *Loop) noteEarly(ep *episode.Episode, d decide.Decision, v *view, lead time.Duration) {
	s := d.Target.Threshold.Signal
	if !d.Target.Early || ep.EarlyNoted[s] {
		return
	}
	ep.EarlyNoted[s] = true
	l.deps.Log.Info("acting early: threshold crossing predicted", zap.String("signal", string(s)),
		zap.String("threshold", d.Target.Threshold.String()), zap.Duration("timeLeft", d.Target.TimeLeft),
		zap.Float64("fillRateBytesPerSecond", v.rates[s]), zap.Duration("lead", lead))
}

func (l *Loop) logNone(ep *episode.Episode, d decide.Decision) {
	switch d.Reason {
	case decide.ReasonNoThreshold:
		return
	case decide.ReasonCovered:
		l.deps.Log.Debug("no eviction", zap.String("resource", string(ep.Resource)), zap.String("signal", string(d.Target.Threshold.Signal)), zap.String("reason", d.Reason))
		return
	}
	if d.Reason == ep.LastNone {
		return
	}
	ep.LastNone = d.Reason
	if d.Reason == decide.ReasonImageGC {
		// Not a problem: the kubelet deletes those images before it evicts
		// anyone for this, and evictd only for what they cannot cover.
		t := d.Target
		l.deps.Log.Info("no eviction: the kubelet's image garbage collection frees enough", zap.String("resource", string(ep.Resource)),
			zap.String("signal", string(t.Threshold.Signal)), zap.String("threshold", t.Threshold.String()),
			zap.Int64("need", t.Need), zap.Int64("inFlight", t.InFlight), zap.Int64("unusedImageBytes", t.NodeReclaim))
		return
	}
	l.deps.Log.Warn("no pod to evict", zap.String("resource", string(ep.Resource)), zap.String("signal", string(d.Target.Threshold.Signal)),
		zap.String("threshold", d.Target.Threshold.String()), zap.Int64("need", d.Target.Remaining()), zap.String("reason", d.Reason))
}

// call is an eviction call made for an episode.
type call struct {
	ep   *episode.Episode
	lane episode.Lane
	d    decide.Decision
	req  evict.Request
	// seq numbers the agent's calls from 1; pass and launched are the pass
	// that made it and when (for the trace).
	seq, pass uint64
	launched  time.Time
}

// callResult is a call's answer.
type callResult struct {
	call
	out evict.Outcome
	err error
	at  time.Time
}

// callQueue collects the answers of calls under way.
type callQueue struct {
	wg sync.WaitGroup
	queue[callResult]
}

// wait blocks until every call under way has answered.
func (q *callQueue) wait() { q.wg.Wait() }

// launch starts the eviction call d asks for, in its lane of ep, and
// returns the lane. cgroup is the candidate's pod cgroup, which the
// actuator contains once a hard memory eviction is accepted.
func (l *Loop) launch(ctx context.Context, ep *episode.Episode, d decide.Decision, cgroup string) episode.Lane {
	t := d.Target
	reason := d.Reason
	if d.GraceOverride != nil {
		reason += "; " + d.GraceReason
		l.deps.Log.Info("grace shortened", zap.String("pod", podKey(d.Candidate)), zap.String("signal", string(t.Threshold.Signal)),
			zap.Int64("gracePeriodSeconds", *d.GraceOverride), zap.String("reason", d.GraceReason))
	}
	c := call{ep: ep, lane: episode.LaneOf(t.Hard()), d: d, req: evict.Request{
		Pod:           d.Candidate.Pod,
		Signal:        t.Threshold.Signal,
		Hard:          t.Hard(),
		PredictedIn:   predictedIn(t),
		Threshold:     noteAmount(t.Threshold.Signal, t.Amount, t.Observation.Capacity),
		Available:     noteAmount(t.Threshold.Signal, t.Observation.Available, t.Observation.Capacity),
		Usage:         d.Candidate.Usage,
		Request:       d.Candidate.Request,
		Swap:          d.Candidate.Swap,
		Stall:         d.Candidate.Stall,
		MemoryHigh:    d.Candidate.MemoryHigh,
		Rank:          d.Rank,
		Reason:        reason,
		RunnerUpRank:  d.RunnerUpRank,
		GraceOverride: d.GraceOverride,
		GraceReason:   d.GraceReason,
		PressureSince: t.Since,
		Budget:        ep.Budget,
	}}
	if d.RunnerUpRank > 0 {
		c.req.RunnerUp, c.req.RunnerUpReason = podKey(d.RunnerUp), decide.RankReason(t, d.RunnerUp)
	}
	now := l.clk.Now()
	l.tr.calls++
	c.seq, c.pass, c.launched = l.tr.calls, l.tr.pass, now
	if l.deps.Trace != nil {
		l.deps.Trace.Launched(trace.Call{Seq: c.seq, Decision: trace.DecisionOf(c.req, d.Action == decide.ForceDelete, c.pass, now)})
	}
	grace := l.cfg.Decide.Evict.GracePeriod(d.Candidate.Pod, t.Hard(), d.GraceOverride)
	ep.Calls[c.lane] = &episode.Call{Pod: d.Candidate.Pod.UID, Key: podKey(d.Candidate), Start: now,
		Signal: t.Threshold.Signal, Hard: t.Hard(), ReclaimBy: now.Add(time.Duration(grace) * time.Second)}
	resource := string(ep.Resource)
	l.inbox.calls.wg.Add(1)
	l.deps.Go(func() {
		defer l.inbox.calls.wg.Done()
		// The node brake: the victim's replacement must find the node's
		// taint there.
		l.features.BeforeCall(ctx, resource)
		var r callResult
		r.call = c
		if d.Action == decide.ForceDelete {
			r.out, r.err = l.deps.Evictor.ForceDelete(ctx, c.req)
		} else {
			r.out, r.err = l.deps.Evictor.Evict(ctx, c.req)
		}
		r.at = l.raw.Now() // off the pass: the answer's time is in the trace
		// Here rather than when the loop takes the answer: a victim filling
		// the node at GiB/s must stop within milliseconds of its acceptance.
		if l.actuation != nil && containable(c.req, r.out) {
			l.actuation.contain(c.req.Pod, cgroup)
		}
		l.inbox.calls.push(r)
		l.deps.Waker.Kick(KickCallDone)
	})
	return c.lane
}

// answer applies a call's answer to its episode and the in-flight set, and
// reports whether the episode should try its next candidate at once.
func (l *Loop) answer(r callResult) bool {
	ep, d, out := r.ep, r.d, r.out
	ep.Calls[r.lane] = nil
	if l.episodes.Get(ep.Resource) != ep {
		l.lateAnswer(r)
		return false
	}
	uid := d.Candidate.Pod.UID
	l.features.Answered(feature.Answer{Resource: string(ep.Resource), Pod: d.Candidate.Namespace + "/" + d.Candidate.Name,
		UID: string(uid), Signal: string(d.Target.Threshold.Signal), Result: string(out.Result), At: r.at})
	add := func(origin inflight.Origin, at time.Time) { l.addInFlight(r, origin, at) }
	switch out.Result {
	case evict.Evicted, evict.ForcedDelete, evict.ResponderEvicted:
		add(inflight.Evicted, acceptedAt(r))
		ep.FailBackoff = 0
		ep.Accepted()
		ep.Evictions++
		if !d.Candidate.HasUsage {
			ep.UnknownReclaim, ep.UnknownReclaimHard = uid, r.req.Hard
		}
	case evict.DryRun:
		add(inflight.DryRun, r.at)
		ep.Accepted() // it would have been: its budget allows it
	case evict.PDBBlocked:
		ep.PDBRefused(uid, r.at, l.cfg.PDBRecheck)
		// The next candidate at once, unless this refusal ended a streak
		// of them: then the episode pauses (plan, episode.PDBPaused).
		return true
	case evict.Refused, evict.WebhookFailed:
		// This pod's answer, not the API server's state: no back-off for
		// the episode, so the node is not left to sink while the same pod
		// is asked again and again.
		l.noteRefused(r)
		return true
	case evict.NotFound:
		add(inflight.Vanished, r.at)
	case evict.RateLimited:
		if errors.Is(r.err, evict.ErrEpisodeCap) {
			ep.CapReached = true
			l.deps.Metrics.SetEpisodeCapReached(string(ep.Resource), true)
		} else {
			ep.RetryAt = r.at.Add(max(out.RetryAfter, 10*time.Millisecond))
		}
	default:
		if errors.Is(r.err, context.Canceled) {
			return false // shutting down: not a failure of the API
		}
		ep.Failed(r.at, l.cfg.FailureBackoff, l.cfg.MaxFailureBackoff)
		l.deps.Log.Debug("pausing evictions after a failure", zap.String("resource", string(ep.Resource)),
			zap.Duration("backoff", ep.FailBackoff), logging.Err(r.err))
	}
	return false
}

// lateAnswer takes the answer of a call whose episode ended while it was
// under way. What it says of the pod stands (an accepted eviction is a pod
// on its way out, whose reclaim counts for whatever episode comes next; a
// refusal is the pod's); what it says of the episode (its count, back-off,
// cap, blocked pods) has no episode left to apply to.
func (l *Loop) lateAnswer(r callResult) {
	live := l.held.ended[:0]
	for _, ep := range l.held.ended {
		if ep.Busy(episode.Soft) || ep.Busy(episode.Hard) {
			live = append(live, ep)
		}
	}
	clear(l.held.ended[len(live):])
	l.held.ended = live
	d, out := r.d, r.out
	switch out.Result {
	case evict.Evicted, evict.ForcedDelete, evict.ResponderEvicted:
		l.addInFlight(r, inflight.Evicted, acceptedAt(r))
	case evict.NotFound:
		l.addInFlight(r, inflight.Vanished, r.at)
	case evict.Refused, evict.WebhookFailed:
		l.noteRefused(r)
	}
	l.deps.Log.Info("eviction call answered after its pressure episode ended", zap.String("pod", podKey(d.Candidate)),
		zap.String("resource", string(r.ep.Resource)), zap.String("result", string(out.Result)), logging.Err(r.err))
}

// noteRefused records that r's pod was refused for itself. Kept for the
// node, not the episode: the next episode (or another resource's) would
// get the same answer. A webhook that could not be called (WebhookFailed)
// is the webhook's state, for its pods only: they are asked again after
// the episode's longest failure back-off (MaxFailureBackoff, 30 s), not a
// refusal's RefusedRecheck, since a webhook comes back when its backend
// does, not when a person changes a policy; recorded with the refusals,
// dated so that it expires that much sooner.
func (l *Loop) noteRefused(r callResult) {
	at := r.at
	if r.out.Result == evict.WebhookFailed {
		at = at.Add(min(l.cfg.MaxFailureBackoff, l.cfg.RefusedRecheck) - l.cfg.RefusedRecheck)
	}
	l.held.refused[r.d.Candidate.Pod.UID] = at
}

// addInFlight records the pod of r's call in flight, from at.
func (l *Loop) addInFlight(r callResult, origin inflight.Origin, at time.Time) {
	l.inflight.Add(inflight.Added{Pod: r.d.Candidate.Pod, Origin: origin, Signal: r.d.Target.Threshold.Signal, Hard: r.req.Hard,
		At: at, GraceSeconds: r.out.GracePeriodSeconds, Usage: r.d.Candidate.Usage})
}

// acceptedAt is when the API server accepted r's eviction (when the call
// returned, if the outcome does not say).
func acceptedAt(r callResult) time.Time {
	if r.out.Accepted.IsZero() {
		return r.at
	}
	return r.out.Accepted
}

// inFlightView is what a decision counts as in flight: the pods on their way
// out, and the pods whose eviction call is under way in any episode (as
// Pending entries). One view for every episode: a pod called for one signal
// covers what it frees for every signal of its resource, and is never
// called for twice.
//
// A pod both in flight and called for again (a terminating pod evicted anew
// with the hard grace) is one entry, the call's: it is what counts now, and
// counting both would count the pod twice.
func (l *Loop) inFlightView() []inflight.Entry {
	var pending []inflight.Entry
	for _, ep := range append(l.episodes.All(), l.held.ended...) {
		for _, c := range ep.Calls {
			if c != nil {
				pending = append(pending, inflight.Entry{UID: c.Pod, Pod: c.Key, Origin: inflight.Pending, Signal: c.Signal,
					Hard: c.Hard, Start: c.Start, ReclaimBy: c.ReclaimBy, LastUsage: map[thresholds.Signal]int64{}, MemorySeen: -1})
			}
		}
	}
	entries := l.inflight.Snapshot()
	if len(pending) == 0 {
		return entries
	}
	called := make(map[types.UID]bool, len(pending))
	for _, e := range pending {
		called[e.UID] = true
	}
	out := entries[:0]
	for _, e := range entries {
		if !called[e.UID] {
			out = append(out, e)
		}
	}
	return append(out, pending...)
}

// noteDiskUsage remembers the disk usage of pods in flight while their
// cgroups are still measured.
func (l *Loop) noteDiskUsage(ranked map[thresholds.Signal][]rank.Candidate) {
	for s, cands := range ranked {
		if s.Condition() != v1.NodeDiskPressure {
			continue
		}
		for _, c := range cands {
			if c.HasUsage {
				l.inflight.NoteUsage(types.UID(c.UID), s, c.Usage)
			}
		}
	}
}

func podKey(c rank.Candidate) string { return c.Namespace + "/" + c.Name }

// predictedIn is how soon an early target's crossing is predicted, at least
// a millisecond so that it reads as predicted; 0 for a threshold met.
func predictedIn(t decide.Target) time.Duration {
	if !t.Early {
		return 0
	}
	return max(t.TimeLeft, time.Millisecond)
}
