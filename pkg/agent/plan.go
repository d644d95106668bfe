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
// Making a plan changes nothing act or a later pass decides on: it only
// forgets what has expired (a refusal past its recheck, the record of a
// victim with no usage figure once it is gone), which the next decision
// would forget the same way.
type plan struct {
	decide.Decision
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
// the node's refused ones, and the calls under way as tried.
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
	if p.Action == decide.None {
		return p
	}
	if p.Stale = l.staleDiskFigures(ep, v); p.Stale != nil {
		return p
	}
	p.Deferred = ep.Deferred(now, v.obs.Time, l.inflight.Contains, p.Target.Hard())
	return p
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
