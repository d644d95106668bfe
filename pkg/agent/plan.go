// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/thresholds"
)

// plan is what act does first for an episode: the decision, and whether a
// call is made for it or what holds it back. act makes it before it acts,
// and the explanation (/explain, evictd explain) at the end of each pass:
// one function, so that what evictd says it would do is what it does.
//
// Making a plan changes nothing: the explanation plans every resource
// after the pass's calls went out (one of them may be under way, and then
// refused), so anything a plan wrote would be written by observing alone,
// and move a later decision. What a decision changes, act commits from
// the plan: the families' record of the victims it saw (noteInput), a new
// sweep (NewSweep), the expired refusals and records it forgets.
type plan struct {
	decide.Decision
	// NewSweep: every candidate was held, and the plan decided in a new
	// sweep of them (episode.SweepDue), which act starts.
	NewSweep bool
	// Busy is the hard call under way for the episode: while it is,
	// nothing more is asked for the resource, and nothing is decided.
	Busy *episode.Call
	// SoftBusy is the soft call under way: only hard thresholds were
	// considered.
	SoftBusy *episode.Call
	// Stale are the pods whose disk figures predate the episode: the
	// decision waits until they are walked again (staleDiskFigures).
	Stale []string
	// Deferred is why the episode may make no call now (episode.Deferred);
	// "" when it may.
	Deferred string
}

// planInput is the decision's input for ep: its resource's thresholds
// (only the hard ones while a soft call is under way), its blocked pods,
// the node's refused ones, and the calls under way as tried. Like the
// plan, it changes nothing.
func (l *Loop) planInput(ep *episode.Episode, v *view) decide.Input {
	softBusy := ep.Busy(episode.Soft)
	in := l.decideInput(v, func(th thresholds.Threshold) bool {
		return episode.Of(th.Signal) == ep.Resource && (!softBusy || th.Hard())
	})
	in.Blocked = ep.FreshBlocked(v.now)
	in.Refused = episode.Fresh(l.held.refused, v.now, l.cfg.RefusedRecheck)
	for _, e := range in.InFlight {
		if e.Origin == inflight.Pending {
			in.Tried[e.UID] = true // under way, for this episode or another
		}
	}
	return in
}

// plan decides for ep on in at now: what act does with the decision.
func (l *Loop) plan(ep *episode.Episode, v *view, in decide.Input, opts decide.Options, now time.Time) plan {
	p := plan{Decision: decide.Decide(opts, in), SoftBusy: ep.Calls[episode.Soft]}
	if heldEverywhere(p.Decision) && ep.SweepDue(now) {
		// Every pod was asked in this sweep, and one of them may be asked
		// again: a new sweep, ranked from the first (a forced delete, too,
		// comes only after the pods past their recheck were asked again).
		p.NewSweep = true
		in.Blocked = ep.NextSweepBlocked(now)
		p.Decision = decide.Decide(opts, in)
	}
	if p.Action == decide.None {
		return p
	}
	if p.Stale = l.staleDiskFigures(ep, v); p.Stale != nil {
		return p
	}
	p.Deferred = ep.Deferred(now, v.obs.Time, l.inflight.Contains, p.Target.Hard())
	if p.Deferred == "" && mayBeRefusedByPDB(opts, p.Decision) {
		p.Deferred = ep.PDBPaused(now)
	}
	return p
}

// heldEverywhere reports whether d found every candidate held (by a
// PodDisruptionBudget, or the API server's refusal), or forces past them.
func heldEverywhere(d decide.Decision) bool {
	return d.Action == decide.ForceDelete ||
		d.Action == decide.None && (d.Reason == decide.ReasonAllBlocked || d.Reason == decide.ReasonAllRefused)
}

// mayBeRefusedByPDB reports whether d's call is one the episode's pause
// after PodDisruptionBudget refusals holds back: an eviction of a pod not
// yet terminating (the API server checks no budget for one that is), and
// not for a target --pdb-policy=best-effort may force, whose pods are all
// asked at once so that the forced delete, if it comes to that, is not
// held back by the pauses.
func mayBeRefusedByPDB(opts decide.Options, d decide.Decision) bool {
	return d.Action == decide.Evict && d.Candidate.Pod != nil && d.Candidate.Pod.DeletionTimestamp == nil && !decide.MayForce(opts, d.Target)
}

// planNow is what act would do first for ep at the end of the pass that
// made v: the same input and decision act makes, from the episode's state
// as the pass left it.
func (l *Loop) planNow(ep *episode.Episode, v *view) plan {
	if c := ep.Calls[episode.Hard]; c != nil {
		return plan{Busy: c, Decision: decide.Decision{Action: decide.None}}
	}
	return l.plan(ep, v, l.planInput(ep, v), l.decideOptions(), v.now)
}
