// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/agent/outrun"
	"github.com/evictd/evictd/pkg/agent/podreads"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// Observer takes one observation of the node (*pressure.Observer).
type Observer interface {
	Observe(ctx context.Context) (*pressure.Observation, error)
}

// Waker says when to look again (*wakeup.Set).
type Waker interface {
	Wait(ctx context.Context, timeout time.Duration) (wakeup.Wakeup, error)
	Kick(name string)
}

// Evictor evicts pods (*evict.Evictor). Its methods are called from several
// goroutines at once: one per eviction call under way.
type Evictor interface {
	Evict(ctx context.Context, req evict.Request) (evict.Outcome, error)
	ForceDelete(ctx context.Context, req evict.Request) (evict.Outcome, error)
	NewBudget() *evict.Budget
	NodeThresholdMet(s thresholds.Signal, hard bool, threshold, available int64)
	PressureEnded(note string)
	VictimStuck(namespace, name string, uid types.UID, note string)
}

// PodSource is the API server's view of the node (*podwatch.Watcher).
type PodSource interface {
	Pods() []*v1.Pod
	PriorityClasses() map[string]int32
	NamespaceLabels() map[string]map[string]string
	// Node is this node's object (its status.images); nil when unknown.
	Node() *v1.Node
}

// Arming keeps the event-driven wake-up sources armed (*fastpath.Manager).
type Arming interface {
	Sync(obs *pressure.Observation, sig map[thresholds.Signal]thresholds.Observation)
	// EventDriven reports whether an armed event source fires when s
	// crosses its hard threshold.
	EventDriven(s thresholds.Signal) bool
}

// Kicks the loop gets besides the wake-up sources.
const (
	// KickPodGone: a pod in flight was deleted; the reclaim it waited for
	// has landed, so look again at once rather than at the next poll (the
	// kubelet, too, re-checks right after a victim's cleanup).
	KickPodGone = "pod_gone"
	// KickCallDone: an eviction call came back; its answer may let the
	// next candidate go (a PodDisruptionBudget refusal) at once.
	KickCallDone = "call_done"
	// KickDiskFigures: a disk decision was put off until the pods' disk
	// figures are walked again; the next pass walks them, at once.
	KickDiskFigures = "disk_figures"
)

// LoopConfig is the loop's settings, already validated (Options.loopConfig).
type LoopConfig struct {
	Thresholds []thresholds.Threshold
	// TransitionPeriod is how long a resource's pressure episode lasts after
	// its last threshold cleared (the kubelet's pressure transition period).
	TransitionPeriod time.Duration
	// StallWindow is the window of the stall signals' shares (0:
	// config.DefaultStallWindow), for the stall family.
	StallWindow time.Duration
	// MemoryHigh are the memory.high family's thresholds (off when none;
	// Thresholds then holds family.MemHighThreshold of them).
	MemoryHigh memhigh.Thresholds
	// Rank holds the configured part of the ranking options; the loop adds
	// PriorityClasses and NamespaceLabels from the PodSource on each pass.
	Rank   rank.Options
	Decide decide.Options
	// Housekeeping is the longest wait between observations.
	Housekeeping time.Duration
	// Adaptive shrinks the wait near thresholds (Poll) and after event
	// wake-ups; off, the loop observes every Housekeeping (the kubelet's way).
	Adaptive bool
	Poll     wakeup.PollPolicy
	// EventFillRate replaces Poll.AssumedFillRate for a signal whose hard
	// threshold crossing an event source reports (Arming.EventDriven): the
	// poll then only has to catch the slower fills the event would not.
	EventFillRate float64
	// Burst is how long the loop polls at Poll.Min after an event wake-up.
	Burst    time.Duration
	InFlight inflight.Options
	// MaxAttempts bounds the eviction calls of one pass for one resource
	// (429s move on to the next candidate).
	MaxAttempts int
	// PDBRecheck is how long a PodDisruptionBudget refusal is trusted before
	// the pod is asked about again the first time; it doubles with each
	// refusal in an episode, up to 8× (episode.PDBRefused).
	PDBRecheck time.Duration
	// RefusedRecheck is how long the API server's refusal of a pod's
	// eviction (an admission policy or webhook) is trusted; zero means
	// DefaultRefusedRecheck.
	RefusedRecheck time.Duration
	// FailureBackoff is the first pause after a failed eviction call,
	// doubling up to MaxFailureBackoff.
	FailureBackoff, MaxFailureBackoff time.Duration
	// WarnEvery is the least time between two Warn lines about the same
	// observation problem.
	WarnEvery time.Duration
	// ExpectImageGC counts the node's unused images as node-level reclaim
	// on the image filesystem's bytes signals (decide.Input.NodeReclaim).
	ExpectImageGC bool
}

// Deps are the loop's collaborators.
type Deps struct {
	Observer Observer
	Waker    Waker
	Pods     PodSource
	Evictor  Evictor
	// Arming may be nil (no event-driven sources).
	Arming  Arming
	Metrics *metrics.Metrics
	Log     *zap.Logger
	Clock   clock.Clock
	// PassClock, when not nil, is the clock the loop's goroutine reads
	// during a pass (a replay's recorded readings); nil: Clock, each
	// reading recorded in Trace (passClock).
	PassClock clock.PassiveClock
	// Families are the signal families the loop evaluates beside the
	// Summary's signals; nil: those the thresholds name
	// (family.Configured).
	Families []family.Family
	// Actuator, when not nil, contains hard memory victims once their
	// eviction is accepted and relaxes containers stuck at memory.high
	// (--actuator); PodEvents leaves its Events (nil: none).
	Actuator  Actuator
	PodEvents PodEventer
	// Go runs an eviction call; nil runs it on a goroutine of its own, so
	// that observing and deciding go on while the API server is slow.
	// Tests pass a synchronous runner for scripted, repeatable passes.
	Go func(func())
	// Acting reports whether this agent may act on the node (it holds the
	// node lease: pkg/nodelease); nil: always. While it may not, the loop
	// only observes: no eviction, no EvictionRequest, no actuator write, no
	// Event.
	Acting func() bool
	// Brake, when not nil, is told the open episodes after every acting
	// pass (the node brake: pkg/nodebrake).
	Brake Braker
	// Shadow, when not nil, is told each episode and each dry-run eviction
	// (shadow mode: pkg/shadow).
	Shadow ShadowRecorder
	// Trace, when not nil, records each pass for a replay (pkg/trace).
	Trace Tracer
}

// ShadowRecorder follows a dry run's episodes and would-be evictions
// (*shadow.Recorder).
type ShadowRecorder interface {
	EpisodeStarted(resource string, at time.Time)
	WouldEvict(resource string, a shadow.Action)
	EpisodeEnded(resource string, at time.Time)
}

// Loop is the agent: observe, decide, act, wait.
//
// Step, and everything it calls, runs on one goroutine; the state it shares
// with others is the in-flight set (the informer removes deleted pods), the
// queue of calls that came back, and the health figures.
type Loop struct {
	cfg  LoopConfig
	deps Deps
	log  *zap.Logger
	// clk is what the loop's goroutine decides with (passClock); raw is
	// Deps.Clock, for the readings taken off the pass: an eviction call's
	// answer, a deletion, the pass's own start and end.
	clk clock.PassiveClock
	raw clock.Clock

	tracker *thresholds.Tracker
	// families are called at each step of a pass (observe, assess, rankFor,
	// decideInput, settleVictims): the loop knows no family's insides.
	families []family.Family
	// refused are the pods whose eviction the API server refused for the
	// pod itself (an admission policy or webhook, several PDBs), and when.
	refused map[types.UID]time.Time
	// imageGCSince is when each disk signal's unused images were first
	// counted as the kubelet's reclaim while its threshold held, and
	// imageGCGaveUp which signals have stopped counting them (nodeReclaim).
	imageGCSince  map[thresholds.Signal]time.Time
	imageGCGaveUp map[thresholds.Signal]bool
	// imageAges is when each of the node's images was first listed (with
	// ExpectImageGC): the kubelet keeps young ones.
	imageAges imagegc.Ages
	episodes  *episode.Tracker
	// ended are the episodes that ended with a call under way (a
	// withdrawn EvictionRequest, a slow API server): until it answers, its
	// pod stays in the in-flight view, so that no later episode calls it
	// again (lateAnswer).
	ended    []*episode.Episode
	inflight *inflight.Set
	// rewalk are the pods whose disk figures a disk decision found older
	// than its episode: the next pass walks them first (rewalkDisk).
	rewalk    []string
	estimates map[thresholds.Signal]*predict.Estimator
	calls     callQueue
	tr        passTrace
	gone      goneQueue
	deleted   queue[trace.Deletion]
	lead      leadTime
	outrun    outrun.Tracker
	pace      pacing
	health    health
	// actuation is the actuator's side of the loop; nil when it is off.
	actuation *actuation
	// explained is the last pass's explanation for /explain (publishExplanation).
	explained atomic.Pointer[explainState]
	// explainedLine is the last explanation logged (logExplained).
	explainedLine string
	// swap brings thresholds placed anew into the loop (retune.go).
	swap thresholdSwap
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
				return rank.SkipReason(p, opts)
			}})
	}
	l := &Loop{
		families:  deps.Families,
		cfg:       cfg,
		deps:      deps,
		log:       deps.Log,
		clk:       clk,
		raw:       deps.Clock,
		tracker:   thresholds.NewTracker(cfg.Thresholds, cfg.TransitionPeriod, clk),
		episodes:  episode.NewTracker(cfg.TransitionPeriod, deps.Evictor.NewBudget),
		inflight:  inflight.New(cfg.InFlight),
		estimates: map[thresholds.Signal]*predict.Estimator{},
		lead:      leadTime{value: cfg.Decide.Lead},
		refused:   map[types.UID]time.Time{},
		actuation: act,

		imageGCSince:  map[thresholds.Signal]time.Time{},
		imageGCGaveUp: map[thresholds.Signal]bool{},
	}
	for _, s := range []thresholds.Signal{thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable} {
		e, err := predict.NewEstimator(predict.Options{})
		if err != nil {
			return nil, err
		}
		l.estimates[s] = e
	}
	var resources []string
	for _, r := range episode.Resources() {
		resources = append(resources, string(r))
	}
	deps.Metrics.InitResources(resources...)
	return l, nil
}

// DefaultMaxAttempts bounds the eviction calls of one pass.
const DefaultMaxAttempts = 8

// Run loops until ctx ends. The first observation is taken at once. On the
// way out it waits for the eviction calls under way: SIGTERM must not leave
// an eviction half-made.
func (l *Loop) Run(ctx context.Context) error {
	defer l.calls.wait()
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
	l.deleted.push(trace.Deletion{At: l.raw.Now(), UID: p.UID, Namespace: p.Namespace, Name: p.Name})
	if l.inflight.Contains(p.UID) {
		l.deps.Waker.Kick(KickPodGone)
	}
}

// takeDeletions applies the deletions the informer saw since the last
// pass: the pods in flight among them are gone.
func (l *Loop) takeDeletions() {
	for _, d := range l.deleted.drain() {
		if l.deps.Trace != nil {
			l.deps.Trace.Deleted(d)
		}
		if e, ok := l.inflight.Gone(d.UID); ok {
			l.gone.push(goneItem{e, d.At})
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
		l.health.passDone(l.raw.Now())
	}()
	l.pace.woke(w, l.clk.Now(), l.cfg.Burst)
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
	l.forgetImageGCWaits(v.status)
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
	l.publishExplanation(v)
	return l.nextWait(v.signals)
}

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
	busy := len(l.families) > 0 || len(l.episodes.All()) > 0 || l.inflight.Len() > 0 || len(l.ended) > 0 || l.gone.len() > 0
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
	uids := l.rewalk
	l.rewalk = nil
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
	for uid := range l.refused {
		if !isListed(uid) {
			delete(l.refused, uid)
		}
	}
}

// view is what one pass sees: the observation and what it means.
type view struct {
	obs     *pressure.Observation
	signals map[thresholds.Signal]thresholds.Observation
	status  thresholds.Status
	// targets are every threshold to act on, all resources, in action order.
	targets []decide.Target
	pods    []*v1.Pod
	rates   map[thresholds.Signal]float64
	trends  map[thresholds.Signal]bool
	rank    rank.Options
	ranked  map[thresholds.Signal][]rank.Candidate
	byUID   map[types.UID]*statsapi.PodStats
	// families rank the pods for their own signals.
	families []family.Family
	now      time.Time
	// woke is the wake-up that started the pass.
	woke wakeup.Wakeup
	// unusedImages is the bytes of the node's unused images, -1 until
	// needed in this pass.
	unusedImages int64
}

// podStats is the observation's figures for a pod, nil when it has none.
func (v *view) podStats(uid types.UID) *statsapi.PodStats {
	if v.byUID == nil {
		v.byUID = make(map[types.UID]*statsapi.PodStats, len(v.obs.Summary.Pods))
		for i := range v.obs.Summary.Pods {
			ps := &v.obs.Summary.Pods[i]
			v.byUID[types.UID(ps.PodRef.UID)] = ps
		}
	}
	return v.byUID[uid]
}

// cgroupOf is a pod's cgroup in the observation, "" when it has none.
func (v *view) cgroupOf(uid string) string {
	for i := range v.obs.Pods {
		if v.obs.Pods[i].UID == uid {
			return v.obs.Pods[i].Cgroup
		}
	}
	return ""
}

// rankFor ranks the pods for a signal once per pass.
func (v *view) rankFor(s thresholds.Signal) []rank.Candidate {
	if c, ok := v.ranked[s]; ok {
		return c
	}
	if s.Condition() == v1.NodeDiskPressure && v.rank.DiskParts == nil {
		// Built on the first disk ranking of a pass: memory passes do not pay for it.
		v.rank.DiskLayout = v.obs.Node.DiskLayout
		v.rank.DiskParts = rank.DiskPartsOf(v.obs)
	}
	for _, f := range v.families {
		if c, ok := f.Targets(s, v.obs.Summary, v.pods, v.rank); ok {
			v.ranked[s] = c
			return c
		}
	}
	c := rank.Rank(s, v.obs.Summary, v.pods, v.rank).Candidates
	v.ranked[s] = c
	return c
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
			l.health.observed(end, err, nil)
			if l.health.shouldWarn("observation", err.Error(), end, l.cfg.WarnEvery) {
				l.log.Warn("observation failed; not acting until it succeeds", zap.Error(err))
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
		if l.health.shouldWarn(f.Name(), lost[0].Error(), end, l.cfg.WarnEvery) {
			l.log.Warn(why, zap.Errors("signals", signalErrs(lost)))
		}
	}
	for _, se := range obs.SignalErrors {
		m.SignalReadError(se.Signal)
	}
	// The observer logs each unreadable signal itself (rate-limited);
	// readiness reports it until it reads again.
	l.health.observed(end, nil, obs.SignalErrors)
	return obs, true
}

// assess turns an observation into the pass's view: signals, fill rates,
// the threshold state and the episodes it starts or ends.
func (l *Loop) assess(obs *pressure.Observation, w wakeup.Wakeup) *view {
	m := l.deps.Metrics
	v := &view{obs: obs, woke: w, signals: thresholds.Observe(obs.Summary), ranked: map[thresholds.Signal][]rank.Candidate{}, unusedImages: -1,
		families: l.families}
	for _, f := range l.families {
		f.Assess(v.signals)
	}
	for s, o := range v.signals {
		m.SetSignal(s, o.Available, o.Capacity)
	}
	v.rates = make(map[thresholds.Signal]float64, len(l.estimates))
	v.trends = make(map[thresholds.Signal]bool, len(l.estimates))
	for s, e := range l.estimates {
		if o, ok := v.signals[s]; ok {
			e.Push(o.Time, o.Available)
		}
		v.rates[s] = e.Rate()
		v.trends[s] = e.Sustained()
	}
	v.status = l.tracker.Update(v.signals)
	l.thresholdMetrics(v.status, v.signals)
	l.checkOutrun(v)
	if l.deps.Arming != nil {
		l.deps.Arming.Sync(obs, v.signals)
	}
	v.pods = l.deps.Pods.Pods()
	v.now = l.clk.Now()
	if l.cfg.ExpectImageGC {
		l.imageAges.Observe(l.deps.Pods.Node(), v.now)
	}
	v.rank = l.cfg.Rank
	v.rank.PriorityClasses = l.deps.Pods.PriorityClasses()
	v.rank.NamespaceLabels = l.deps.Pods.NamespaceLabels()
	l.tracePods(v)
	v.targets = decide.Targets(l.decideOptions(), l.decideInput(v, nil))
	l.trackEpisodes(v)
	return v
}

func (l *Loop) decideOptions() decide.Options {
	opts := l.cfg.Decide
	opts.Lead = l.lead.get()
	return opts
}

// decideInput is the decision's input for the thresholds keep admits (all
// when nil).
func (l *Loop) decideInput(v *view, keep func(thresholds.Threshold) bool) decide.Input {
	st := v.status
	ths := l.cfg.Thresholds
	if keep != nil {
		st = thresholds.Status{Time: st.Time}
		for _, a := range v.status.Active {
			if keep(a.Threshold) {
				st.Active = append(st.Active, a)
			}
		}
		ths = nil
		for _, th := range l.cfg.Thresholds {
			if keep(th) {
				ths = append(ths, th)
			}
		}
	}
	in := decide.Input{
		Now: v.now, Status: st, Thresholds: ths, Observations: v.signals, Rates: v.rates, Sustained: v.trends,
		Rank: v.rankFor, InFlight: l.inFlightView(), Tried: map[types.UID]bool{},
		NodeReclaim: l.nodeReclaim(v, st),
	}
	for _, f := range l.families {
		f.Settle(&in)
	}
	return in
}

func signalErrs(lost []pressure.SignalError) []error {
	out := make([]error, len(lost))
	for i := range lost {
		out[i] = lost[i]
	}
	return out
}

// nodeReclaim is what the kubelet's image garbage collection frees toward
// each active bytes signal of the filesystem holding the images: imagefs,
// and nodefs when the image store is on it. nil when no such signal is
// active, or ExpectImageGC is off.
//
// The kubelet gets a bounded chance: its image collection runs every
// imagegc.GCPeriod (and its eviction manager's node-level reclaim within
// its 10 s loop once its own threshold is met), so a signal whose unused
// images have been counted for imagegc.Patience without the pressure
// ending stops counting them, and evictd says so.
func (l *Loop) nodeReclaim(v *view, st thresholds.Status) map[thresholds.Signal]int64 {
	if !l.cfg.ExpectImageGC {
		return nil
	}
	var out map[thresholds.Signal]int64
	for _, a := range st.Active {
		s := a.Signal
		if (s != thresholds.ImageFsAvailable && s != thresholds.NodeFsAvailable) ||
			!fslayout.ImagesOn(v.obs.Node.DiskLayout, s.Filesystem()) {
			continue
		}
		if out == nil {
			if v.unusedImages < 0 {
				v.unusedImages, _ = imagegc.Unused(l.deps.Pods.Node(), v.pods, func(img v1.ContainerImage) bool { return l.imageAges.OldEnough(img, v.now) })
			}
			out = map[thresholds.Signal]int64{}
		}
		out[s] = l.imageGCChance(s, v.unusedImages, v.now)
	}
	return out
}

// forgetImageGCWaits drops the kubelet's chance of the disk signals no
// longer active in st (the whole pass's status): the next time their
// threshold holds, the wait starts afresh.
func (l *Loop) forgetImageGCWaits(st thresholds.Status) {
	if len(l.imageGCSince) == 0 {
		return
	}
	active := map[thresholds.Signal]bool{}
	for _, a := range st.Active {
		active[a.Signal] = true
	}
	for s := range l.imageGCSince {
		if !active[s] {
			delete(l.imageGCSince, s)
			delete(l.imageGCGaveUp, s)
		}
	}
}

// imageGCChance is what the unused images count toward s now: all of them
// until the kubelet has had imagegc.Patience to delete them, then nothing.
func (l *Loop) imageGCChance(s thresholds.Signal, unused int64, now time.Time) int64 {
	if unused <= 0 {
		return unused
	}
	since, ok := l.imageGCSince[s]
	if !ok {
		l.imageGCSince[s] = now
		return unused
	}
	if now.Sub(since) < imagegc.Patience {
		return unused
	}
	if !l.imageGCGaveUp[s] {
		l.imageGCGaveUp[s] = true
		l.log.Info("no longer deferring to the kubelet's image garbage collection: the unused images stayed",
			zap.String("signal", string(s)), zap.Int64("unusedImageBytes", unused), zap.Duration("waited", now.Sub(since).Round(time.Second)))
	}
	return 0
}

func (l *Loop) thresholdMetrics(st thresholds.Status, signals map[thresholds.Signal]thresholds.Observation) {
	type key struct {
		s    thresholds.Signal
		hard bool
	}
	met := map[key]bool{}
	for _, th := range st.Met {
		met[key{th.Signal, th.Hard()}] = true
	}
	for _, th := range l.cfg.Thresholds {
		k := key{th.Signal, th.Hard()}
		if share, ok := th.Value.Stalled(); ok {
			l.deps.Metrics.SetStallThreshold(th.Signal, th.Hard(), met[k], share)
			continue
		}
		amount := int64(-1)
		if o, ok := signals[th.Signal]; ok {
			amount = th.Value.Amount(o.Capacity)
		}
		l.deps.Metrics.SetThreshold(th.Signal, th.Hard(), met[k], amount)
	}
}

// leadTime is the time from an accepted eviction to the victim's memory
// being back: how early to act on a predicted crossing.
type leadTime struct {
	mu    sync.Mutex
	value time.Duration
	// last is the last sample as measured, 0 until one is: the evidence of
	// what an eviction takes on this node now (package outrun), which the
	// average, starting from an assumed 2 s, is not.
	last time.Duration
}

func (t *leadTime) lastTook() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *leadTime) get() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// sample folds one measured eviction-to-memory-back time into a moving
// average, kept within bounds so one odd sample cannot make act-early
// reckless or useless.
func (t *leadTime) sample(took time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = took
	t.value = min(max((7*t.value+3*took)/10, 500*time.Millisecond), 30*time.Second)
	return t.value
}

// health is what /readyz and /healthz are told by the loop.
type health struct {
	lastObservation atomic.Int64 // unix nanos of the last successful observation
	lastPass        atomic.Int64 // unix nanos of the end of the last pass

	mu      sync.Mutex
	problem error // why the last observation cannot be acted on (fully)
	// stuck are evictd's own victims still there past their wait: the node
	// cannot stop pods (a hung runtime, a stuck unmount), which an operator
	// must hear of even though evictd moved on to the next candidate.
	stuck  map[types.UID]string
	warned map[string]warnState
}

type warnState struct {
	msg string
	at  time.Time
}

func (h *health) passDone(t time.Time) { h.lastPass.Store(t.UnixNano()) }

// observed records the outcome of an observation: err when it failed, or
// the signals it could not read.
func (h *health) observed(t time.Time, err error, lost []pressure.SignalError) {
	var errs []error
	if err == nil {
		h.lastObservation.Store(t.UnixNano())
		for _, se := range lost {
			errs = append(errs, se)
		}
		err = errors.Join(errs...)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.problem = err
}

// shouldWarn rate-limits Warn lines per topic: a new message, or the same
// one after every.
func (h *health) shouldWarn(topic, msg string, now time.Time, every time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.warned == nil {
		h.warned = map[string]warnState{}
	}
	w, ok := h.warned[topic]
	if ok && w.msg == msg && now.Sub(w.at) < every {
		return false
	}
	h.warned[topic] = warnState{msg: msg, at: now}
	return true
}

// setStuck records an evicted pod that outlived its wait (desc says which),
// or forgets it (desc "").
func (h *health) setStuck(uid types.UID, desc string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stuck == nil {
		h.stuck = map[types.UID]string{}
	}
	if desc == "" {
		delete(h.stuck, uid)
	} else {
		h.stuck[uid] = desc
	}
}

func (h *health) stuckUIDs() []types.UID {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]types.UID, 0, len(h.stuck))
	for uid := range h.stuck {
		out = append(out, uid)
	}
	return out
}

// LastObservation is when the last observation succeeded (zero if none).
func (l *Loop) LastObservation() time.Time { return unixNano(l.health.lastObservation.Load()) }

// LastPass is when the loop last finished a pass (zero if none).
func (l *Loop) LastPass() time.Time { return unixNano(l.health.lastPass.Load()) }

// Problem is what keeps evictd from protecting the node as it should: the
// last observation failed (no kubepods cgroup, say) or could not read a node
// signal, or a pod evictd evicted is stuck terminating. Nil when all is well.
func (l *Loop) Problem() error {
	l.health.mu.Lock()
	defer l.health.mu.Unlock()
	errs := []error{l.health.problem, l.actuation.problem()}
	descs := make([]string, 0, len(l.health.stuck))
	for _, d := range l.health.stuck {
		descs = append(descs, d)
	}
	slices.Sort(descs)
	for _, d := range descs {
		errs = append(errs, errors.New(d))
	}
	return errors.Join(errs...)
}

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
