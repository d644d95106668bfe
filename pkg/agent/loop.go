// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/agent/leadtime"
	"github.com/evictd/evictd/pkg/agent/outrun"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// Loop is the agent: observe, decide, act, wait.
//
// Step, and everything it calls, runs on one goroutine; the state it shares
// with others is the in-flight set (the informer removes deleted pods), the
// queue of calls that came back, and the health figures.
type Loop struct {
	cfg  LoopConfig
	deps Deps
	// clk is what the loop's goroutine decides with (passClock); raw is
	// Deps.Clock, for the readings taken off the pass: an eviction call's
	// answer, a deletion, the pass's own start and end.
	clk clock.PassiveClock
	raw clock.Clock

	tracker  *thresholds.Tracker
	episodes *episode.Tracker
	inflight *inflight.Set
	// families are called at each step of a pass (observe, assess, rankFor,
	// decideInput, settleVictims): the loop knows no family's insides.
	families []family.Family
	// features follow the pass (package feature): outrun first, then
	// Deps.Features. They change no decision.
	features feature.Set
	// actuation is the actuator's side of the loop; nil when it is off.
	actuation *actuation

	learned learned
	held    held
	inbox   inbox
	tr      passTrace
	// published is what the loop shows other goroutines: its health and
	// its last explanation.
	published published
	// explainOff: the passes publish no explanation. Only the test that
	// holds observing free of effects sets it (observing_test.go), to run
	// the loop as it decides without one.
	explainOff bool
}

// NewLoop builds a loop.
func NewLoop(cfg LoopConfig, deps Deps) (*Loop, error) {
	switch {
	case deps.Observer == nil || deps.Waker == nil || deps.Pods == nil || deps.Evictor == nil:
		return nil, errors.New("agent: loop needs an observer, a waker, a pod source and an evictor")
	case cfg.Housekeeping <= 0:
		return nil, fmt.Errorf("agent: housekeeping interval %v must be positive", cfg.Housekeeping)
	}
	if err := cfg.Poll.Validate(); err != nil {
		return nil, err
	}
	if deps.Log == nil {
		deps.Log = zap.NewNop()
	}
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	if deps.Go == nil {
		deps.Go = func(f func()) { go f() }
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.FailureBackoff <= 0 {
		cfg.FailureBackoff = time.Second
	}
	if cfg.MaxFailureBackoff < cfg.FailureBackoff {
		cfg.MaxFailureBackoff = max(30*time.Second, cfg.FailureBackoff)
	}
	if cfg.RefusedRecheck <= 0 {
		cfg.RefusedRecheck = DefaultRefusedRecheck
	}
	if cfg.WarnEvery <= 0 {
		cfg.WarnEvery = time.Minute
	}
	clk := deps.PassClock
	switch {
	case clk != nil:
	case deps.Trace != nil:
		clk = passClock{PassiveClock: deps.Clock, tr: deps.Trace}
	default:
		clk = deps.Clock
	}
	act := newActuation(deps.Actuator, deps.PodEvents, deps.Metrics, deps.Log)
	if deps.Families == nil {
		deps.Families = family.Configured(family.Config{Thresholds: cfg.Thresholds, StallWindow: cfg.StallWindow,
			MemoryHigh: cfg.MemoryHigh, Pods: deps.Pods.Pods, Metrics: deps.Metrics, Relax: act.relaxer(),
			Protected: func(p *v1.Pod) string {
				opts := cfg.Rank
				opts.PriorityClasses = deps.Pods.PriorityClasses()
				opts.NamespaceLabels = deps.Pods.NamespaceLabels()
				opts.Node = rankNode(opts.Node, deps.Pods.Node())
				return rank.SkipReason(p, opts)
			}})
	}
	l := &Loop{
		families:  deps.Families,
		cfg:       cfg,
		deps:      deps,
		clk:       clk,
		raw:       deps.Clock,
		tracker:   thresholds.NewTracker(cfg.Thresholds, cfg.TransitionPeriod, clk),
		episodes:  episode.NewTracker(cfg.TransitionPeriod, deps.Evictor.NewBudget),
		inflight:  inflight.New(cfg.InFlight),
		actuation: act,
		features:  append(feature.Set{outrun.NewFeature(deps.Metrics.ThresholdOutrun, deps.Log)}, deps.Features...),
		learned: learned{estimates: map[thresholds.Signal]*predict.Estimator{}, lead: leadtime.New(cfg.Decide.Lead),
			imageGC: imagegc.NewChance()},
		held: held{refused: map[types.UID]time.Time{}},
	}
	if deps.Replay != nil {
		l.tr.calls = deps.Replay.FirstCall()
	}
	for _, s := range []thresholds.Signal{thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable} {
		e, err := predict.NewEstimator(predict.Options{})
		if err != nil {
			return nil, err
		}
		l.learned.estimates[s] = e
	}
	var resources []string
	for _, r := range episode.Resources() {
		resources = append(resources, string(r))
	}
	deps.Metrics.InitResources(resources...)
	return l, nil
}

const (
	// DefaultMaxAttempts bounds the eviction calls of one pass.
	DefaultMaxAttempts = 8
	// DefaultLead is the eviction-to-memory-back time assumed before any
	// eviction was measured: the Eviction API round trip, the kubelet's
	// reaction and a quick SIGTERM exit.
	DefaultLead = 2 * time.Second
	// DefaultRefusedRecheck is how long the API server's refusal of one
	// pod's eviction is trusted: an admission policy or webhook that denies
	// it changes when a person changes it, not as pods become ready, so it
	// is asked about less often than a PDB.
	DefaultRefusedRecheck = 2 * time.Minute
)

// Run loops until ctx ends. The first observation is taken at once. On the
// way out it waits for the eviction calls under way: SIGTERM must not leave
// an eviction half-made.
func (l *Loop) Run(ctx context.Context) error {
	defer l.inbox.calls.wait()
	timeout := time.Duration(0)
	for {
		w, err := l.deps.Waker.Wait(ctx, timeout)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("agent: waiting for a wake-up: %w", err)
		}
		timeout = l.Step(ctx, w)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// InFlight returns the pods in flight, for tests and debugging.
func (l *Loop) InFlight() []inflight.Entry { return l.inflight.Snapshot() }

// PodDeleted is the pod informer's delete handler: a pod in flight is gone
// from the API, and its reclaim has usually landed. The loop takes note at
// the start of its next pass, which the kick starts at once (and keeps
// counting the pod if its processes still run: settleVictims). Not in the
// middle of a pass: a pass decides on one view of what is in flight, and
// a replay must see each deletion where the recorded pass saw it.
func (l *Loop) PodDeleted(p *v1.Pod) {
	l.inbox.deleted.push(trace.Deletion{At: l.raw.Now(), UID: p.UID, Namespace: p.Namespace, Name: p.Name})
	if l.inflight.Contains(p.UID) {
		l.deps.Waker.Kick(KickPodGone)
	}
}

// takeDeletions applies the deletions the informer saw since the last
// pass: the pods in flight among them are gone.
func (l *Loop) takeDeletions() {
	for _, d := range l.inbox.deleted.drain() {
		if l.deps.Trace != nil {
			l.deps.Trace.Deleted(d)
		}
		if e, ok := l.inflight.Gone(d.UID); ok {
			l.inbox.gone.push(goneItem{e, d.At})
		}
	}
}

// Step is one pass: observe, decide, act, and return how long to wait for
// the next wake-up.
func (l *Loop) Step(ctx context.Context, w wakeup.Wakeup) time.Duration {
	l.traceBegin(w, l.raw.Now())
	defer func() {
		if l.deps.Trace != nil {
			l.deps.Trace.End()
		}
		l.published.health.passDone(l.raw.Now())
	}()
	l.learned.pace.woke(w, l.clk.Now(), l.cfg.Burst)
	l.deps.Metrics.WakeUp(string(w.Source))
	for _, r := range l.drainCalls() {
		l.answer(r)
	}
	l.takeDeletions()
	l.takeThresholds()

	// The one gate of acting: checked once a pass, before the families'
	// observations (the memory.high family's relaxes the actuator writes).
	acting := l.deps.Acting == nil || l.deps.Acting()
	l.rewalkDisk()
	obs, ok := l.observe(ctx, acting)
	if !ok {
		return l.cfg.Housekeeping
	}
	if !acting {
		// Standing by: the signals stay exported; the episodes, which leave
		// Events and lead to evictions, start once this agent acts.
		for s, o := range thresholds.Observe(obs.Summary) {
			l.deps.Metrics.SetSignal(s, o.Available, o.Capacity)
		}
		l.publishStandingBy(obs)
		return l.cfg.Housekeeping
	}
	v := l.assess(obs, w)
	l.learned.imageGC.Forget(v.status)
	l.settleVictims(v)
	l.forgetUnlisted(v)
	// Before deciding: what a disk victim wrote in its grace period, in this
	// observation, is what it will free. After: the usage of this pass's new
	// victims, while their cgroups are still measured.
	l.noteDiskUsage(v.ranked)
	for _, ep := range l.episodes.All() {
		l.act(ctx, ep, v)
	}
	l.noteDiskUsage(v.ranked)
	if !l.explainOff {
		l.publishExplanation(v)
	}
	return l.nextWait(v.signals)
}
