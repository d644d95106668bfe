// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/podreads"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/thresholds"
)

// podReadingObserver is an Observer that can leave the pods' cgroups
// unread in a pass (*pressure.Observer).
type podReadingObserver interface {
	ObserveWith(ctx context.Context, reads pressure.PodReads) (*pressure.Observation, error)
}

// podReads decides, once a pass has read the node, whether it reads the
// pods too (package podreads), and notes in decided that it was asked: the
// observer reads without asking on its first pass, after the pods could not
// be listed and while kubepods cannot be read.
func (l *Loop) podReads(decided *bool) pressure.PodReads {
	// A family reads each pod's figures every pass (memory.high's
	// counters, each pod's stall), and an episode or a victim in flight
	// follows pods through their cgroups: a victim whose deletion the
	// informer has just seen is settled by its cgroup in this pass too.
	busy := len(l.families) > 0 || len(l.episodes.All()) > 0 || l.inflight.Len() > 0 || len(l.held.ended) > 0 || l.inbox.gone.len() > 0
	return func(node *pressure.Observation, last time.Time) bool {
		*decided = true
		r := podreads.Decide(podreads.Input{Now: node.Time, Last: last, Busy: busy,
			Signals: thresholds.Observe(node.Summary), Thresholds: l.cfg.Thresholds})
		l.deps.Metrics.PodReads(string(r))
		return r != podreads.Reuse
	}
}

// ephemeralRemeasurer is an Observer that can walk chosen pods'
// ephemeral storage at the next pass (*pressure.Observer).
type ephemeralRemeasurer interface {
	RemeasureEphemeral(uids []string)
}

// rewalkDisk has the observer walk, in this pass, the pods in flight for a
// disk signal and those whose figures a disk decision found stale (rewalk).
// A victim may go on writing through its grace period, and it frees that
// too: a cached figure would leave the fall of the node's available space
// to no pod, and have another evicted for it.
func (l *Loop) rewalkDisk() {
	r, ok := l.deps.Observer.(ephemeralRemeasurer)
	if !ok {
		return
	}
	uids := l.held.rewalk
	l.held.rewalk = nil
	for _, e := range l.inflight.Snapshot() {
		if e.Signal != "" && e.Signal.Condition() == v1.NodeDiskPressure {
			uids = append(uids, string(e.UID))
		}
	}
	r.RemeasureEphemeral(uids)
}

// podRetainer is an Evictor that keeps per-pod records beyond an episode's
// (*evictreq.Evictor: the pods whose responder wait ran out).
type podRetainer interface {
	RetainPods(listed func(types.UID) bool)
}

// forgetUnlisted drops the per-pod records of pods no longer listed, which
// an episode that never ends would keep for ever: its PodDisruptionBudget
// refusals and budget records, the node's API refusals, and the request
// path's waits.
func (l *Loop) forgetUnlisted(v *view) {
	var listed map[types.UID]bool
	isListed := func(uid types.UID) bool {
		if listed == nil {
			listed = make(map[types.UID]bool, len(v.pods))
			for _, p := range v.pods {
				listed[p.UID] = true
			}
		}
		return listed[uid]
	}
	for _, ep := range l.episodes.All() {
		if len(ep.Blocked) > 0 {
			ep.RetainBlocked(isListed)
		}
		if ep.Budget != nil {
			ep.Budget.RetainPods(isListed)
		}
	}
	if r, ok := l.deps.Evictor.(podRetainer); ok {
		r.RetainPods(isListed)
	}
	for uid := range l.held.refused {
		if !isListed(uid) {
			delete(l.held.refused, uid)
		}
	}
}

// observe takes an observation and records what it says about the loop's
// health; false means there is nothing to act on.
func (l *Loop) observe(ctx context.Context, acting bool) (*pressure.Observation, bool) {
	m := l.deps.Metrics
	start := l.clk.Now()
	var obs *pressure.Observation
	var err error
	if po, ok := l.deps.Observer.(podReadingObserver); ok {
		decided := false
		obs, err = po.ObserveWith(ctx, l.podReads(&decided))
		if err == nil && !decided {
			m.PodReads(string(podreads.Forced))
		}
	} else {
		obs, err = l.deps.Observer.Observe(ctx)
	}
	end := l.clk.Now()
	l.traceObserved(obs, err, end, acting)
	m.ObservationDone(start, end, err)
	if err != nil {
		if ctx.Err() == nil {
			l.published.health.observed(end, err, nil)
			if l.published.health.shouldWarn("observation", err.Error(), end, l.cfg.WarnEvery) {
				l.deps.Log.Warn("observation failed; not acting until it succeeds", zap.Error(err))
			}
		}
		return nil, false
	}
	m.SkippedFiles(obs.SkippedFiles)
	families := l.families
	if !acting {
		families = nil // their observations may write (memory.high relaxes)
	}
	for _, f := range families {
		err := f.Observe(obs, end)
		if err == nil {
			continue
		}
		why, lost := family.Lost(f.Name(), err)
		obs.SignalErrors = append(obs.SignalErrors, lost...)
		if l.published.health.shouldWarn(f.Name(), lost[0].Error(), end, l.cfg.WarnEvery) {
			l.deps.Log.Warn(why, zap.Errors("signals", signalErrs(lost)))
		}
	}
	for _, se := range obs.SignalErrors {
		m.SignalReadError(se.Signal)
	}
	// The observer logs each unreadable signal itself (rate-limited);
	// readiness reports it until it reads again.
	l.published.health.observed(end, nil, obs.SignalErrors)
	return obs, true
}
