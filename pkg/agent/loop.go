// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/agent/leadtime"
	"github.com/evictd/evictd/pkg/agent/outrun"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
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
	// Features are the optional parts that follow the pass (package
	// feature): the node brake, shadow mode. The outrun warning is every
	// agent's, and registered here (NewLoop).
	Features []feature.Feature
	// Trace, when not nil, records each pass for a replay (pkg/trace).
	Trace Tracer
	// Replay, when not nil, is a replay's player (pkg/trace/play): it
	// numbers the passes and calls as the recorded agent's were, and
	// delivers the recorded answers where the recorded pass took them.
	Replay Replayer
}

// Replayer drives a loop through a recorded trace (*play.Player).
type Replayer interface {
	// FirstCall is the number of the last call made before the trace
	// began: the loop's calls are numbered on from it.
	FirstCall() uint64
	// PassNumber is the number of the pass about to run.
	PassNumber() uint64
	// BeforeDrain delivers, before the loop's drain at point of the pass,
	// the answers the recorded pass took there.
	BeforeDrain(point int)
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
	// imageGC is the kubelet's chance at each disk signal's unused
	// images, counted as its reclaim while the threshold holds
	// (nodeReclaim).
	imageGC *imagegc.Chance
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
	lead      *leadtime.Lead
	// features follow the pass: outrun first, then Deps.Features.
	features feature.Set
	pace     pacing
	health   health
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
		lead:      leadtime.New(cfg.Decide.Lead),
		refused:   map[types.UID]time.Time{},
		actuation: act,
		features:  append(feature.Set{outrun.NewFeature(deps.Metrics.ThresholdOutrun, deps.Log)}, deps.Features...),

		imageGC: imagegc.NewChance(),
	}
	if deps.Replay != nil {
		l.tr.calls = deps.Replay.FirstCall()
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
	l.imageGC.Forget(v.status)
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
