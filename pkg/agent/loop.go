package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
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

// Evictor evicts pods (*evict.Evictor).
type Evictor interface {
	Evict(ctx context.Context, req evict.Request) (evict.Outcome, error)
	ForceDelete(ctx context.Context, req evict.Request) (evict.Outcome, error)
	ResetEpisode()
	NodeThresholdMet(s thresholds.Signal, hard bool, threshold, available int64)
}

// PodSource is the API server's view of the node (*podwatch.Watcher).
type PodSource interface {
	Pods() []*v1.Pod
	PriorityClasses() map[string]int32
	NamespaceLabels() map[string]map[string]string
}

// Arming keeps the event-driven wake-up sources armed (*fastpath.Manager).
type Arming interface {
	Sync(obs *pressure.Observation, sig map[thresholds.Signal]thresholds.Observation)
	// EventDriven reports whether an armed event source fires when s
	// crosses its hard threshold.
	EventDriven(s thresholds.Signal) bool
}

// KickPodGone is the name of the kick the loop gets when a pod in flight is
// deleted: the reclaim it waited for has landed, so look again at once
// rather than at the next poll (the kubelet, too, re-checks right after a
// victim's cleanup).
const KickPodGone = "pod_gone"

// LoopConfig is the loop's settings, already validated (Options.loopConfig).
type LoopConfig struct {
	Thresholds       []thresholds.Threshold
	TransitionPeriod time.Duration
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
	// MaxAttempts bounds the eviction calls of one pass (429s move on to the
	// next candidate).
	MaxAttempts int
	// PDBRecheck is how long a PodDisruptionBudget refusal is trusted before
	// the pod is asked about again.
	PDBRecheck time.Duration
	// FailureBackoff is the first pause after a failed eviction call,
	// doubling up to MaxFailureBackoff.
	FailureBackoff, MaxFailureBackoff time.Duration
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
}

// Loop is the agent: observe, decide, evict, wait.
type Loop struct {
	cfg  LoopConfig
	deps Deps
	log  *zap.Logger
	clk  clock.Clock

	tracker   *thresholds.Tracker
	inflight  *inflight.Set
	estimates map[thresholds.Signal]*predict.Estimator

	// State of the pressure episode.
	episode      bool
	episodeStart time.Time
	metEvents    map[string]bool
	blocked      map[types.UID]time.Time
	capReached   bool
	retryAt      time.Time
	failUntil    time.Time
	failBackoff  time.Duration
	lastNone     string
	earlyLogged  map[thresholds.Signal]bool
	prevPoll     time.Duration
	burstUntil   time.Time
	lastSignals  map[thresholds.Signal]thresholds.Observation

	leadMu sync.Mutex
	lead   time.Duration

	lastObservation atomic.Int64 // unix nanos of the last successful observation
	lastPass        atomic.Int64 // unix nanos of the end of the last pass
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
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.FailureBackoff <= 0 {
		cfg.FailureBackoff = time.Second
	}
	if cfg.MaxFailureBackoff < cfg.FailureBackoff {
		cfg.MaxFailureBackoff = max(30*time.Second, cfg.FailureBackoff)
	}
	l := &Loop{
		cfg:         cfg,
		deps:        deps,
		log:         deps.Log,
		clk:         deps.Clock,
		tracker:     thresholds.NewTracker(cfg.Thresholds, cfg.TransitionPeriod, deps.Clock),
		inflight:    inflight.New(cfg.InFlight),
		estimates:   map[thresholds.Signal]*predict.Estimator{},
		metEvents:   map[string]bool{},
		blocked:     map[types.UID]time.Time{},
		earlyLogged: map[thresholds.Signal]bool{},
		lead:        cfg.Decide.Lead,
	}
	for _, s := range []thresholds.Signal{thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable} {
		e, err := predict.NewEstimator(predict.Options{})
		if err != nil {
			return nil, err
		}
		l.estimates[s] = e
	}
	return l, nil
}

// DefaultMaxAttempts bounds the eviction calls of one pass.
const DefaultMaxAttempts = 8

// Run loops until ctx ends. The first observation is taken at once.
func (l *Loop) Run(ctx context.Context) error {
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

// LastObservation is when the last observation succeeded (zero if none).
func (l *Loop) LastObservation() time.Time { return unixNano(l.lastObservation.Load()) }

// LastPass is when the loop last finished a pass (zero if none).
func (l *Loop) LastPass() time.Time { return unixNano(l.lastPass.Load()) }

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// InFlight returns the pods in flight, for tests and debugging.
func (l *Loop) InFlight() []inflight.Entry { return l.inflight.Snapshot() }

// PodDeleted is the pod informer's delete handler: a pod in flight is gone,
// its reclaim has landed.
func (l *Loop) PodDeleted(p *v1.Pod) {
	e, ok := l.inflight.Gone(p.UID)
	if !ok {
		return
	}
	l.podGone(e, l.clk.Now())
	l.deps.Waker.Kick(KickPodGone)
}

func (l *Loop) podGone(e inflight.Entry, now time.Time) {
	took := now.Sub(e.Start)
	switch e.Origin {
	case inflight.Evicted:
		l.deps.Metrics.ObservePodGone(e.Signal, took)
		l.log.Info("evicted pod gone", zap.String("pod", e.Pod), zap.String("signal", string(e.Signal)), zap.Duration("took", took))
		l.leadMu.Lock()
		// A moving average of eviction-to-gone times: how early to act on a
		// predicted crossing.
		l.lead = min(max((7*l.lead+3*took)/10, 500*time.Millisecond), 30*time.Second)
		l.leadMu.Unlock()
	default:
		l.log.Debug("pod in flight gone", zap.String("pod", e.Pod), zap.String("origin", string(e.Origin)), zap.Duration("took", took))
	}
}

func (l *Loop) currentLead() time.Duration {
	l.leadMu.Lock()
	defer l.leadMu.Unlock()
	return l.lead
}

// Step is one pass: observe, update the threshold state and metrics, act,
// and return how long to wait for the next wake-up.
func (l *Loop) Step(ctx context.Context, w wakeup.Wakeup) time.Duration {
	defer func() { l.lastPass.Store(l.clk.Now().UnixNano()) }()
	m := l.deps.Metrics
	m.WakeUp(string(w.Source))
	if w.Source != wakeup.SourcePoll && w.Source != "" {
		l.burstUntil = l.clk.Now().Add(l.cfg.Burst)
	}

	start := l.clk.Now()
	obs, err := l.deps.Observer.Observe(ctx)
	end := l.clk.Now()
	m.ObservationDone(start, end, err)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("observation failed", logging.Err(err))
		}
		return l.cfg.Housekeeping
	}
	l.lastObservation.Store(end.UnixNano())
	m.SkippedFiles(obs.SkippedFiles)

	sig := thresholds.Observe(obs.Summary)
	l.lastSignals = sig
	for s, o := range sig {
		m.SetSignal(s, o.Available, o.Capacity)
	}
	for s, e := range l.estimates {
		if o, ok := sig[s]; ok {
			e.Push(o.Time, o.Available)
		}
	}
	status := l.tracker.Update(sig)
	l.thresholdMetrics(status)
	l.nodeEvents(status)
	if l.deps.Arming != nil {
		l.deps.Arming.Sync(obs, sig)
	}

	pods := l.deps.Pods.Pods()
	now := l.clk.Now()
	gone, expired := l.inflight.Sync(pods, now)
	for _, e := range gone {
		l.podGone(e, now)
	}
	for _, e := range expired {
		l.log.Warn("pod in flight not gone in time; its reclaim no longer counts",
			zap.String("pod", e.Pod), zap.String("origin", string(e.Origin)), zap.Time("reclaimBy", e.ReclaimBy))
	}
	l.act(ctx, obs, status, sig, pods, now)
	return l.nextWait(sig)
}

func (l *Loop) thresholdMetrics(st thresholds.Status) {
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
		l.deps.Metrics.SetThresholdMet(th.Signal, th.Hard(), met[k])
	}
}

// nodeEvents leaves an Event on the Node the first time each threshold is
// met while pressure lasts.
func (l *Loop) nodeEvents(st thresholds.Status) {
	if len(st.Met) == 0 && len(st.Active) == 0 {
		clear(l.metEvents)
		return
	}
	for _, th := range st.Met {
		k := th.String()
		if l.metEvents[k] {
			continue
		}
		l.metEvents[k] = true
		o := l.lastSignals[th.Signal]
		amount := th.Value.Amount(o.Capacity)
		l.log.Info("threshold met", zap.String("signal", string(th.Signal)), zap.String("threshold", th.String()),
			zap.Bool("hard", th.Hard()), zap.Int64("available", o.Available), zap.Int64("thresholdAmount", amount))
		l.deps.Evictor.NodeThresholdMet(th.Signal, th.Hard(), amount, o.Available)
	}
}

func (l *Loop) act(ctx context.Context, obs *pressure.Observation, st thresholds.Status, sig map[thresholds.Signal]thresholds.Observation, pods []*v1.Pod, now time.Time) {
	opts := l.cfg.Decide
	opts.Lead = l.currentLead()
	rates := make(map[thresholds.Signal]float64, len(l.estimates))
	sustained := make(map[thresholds.Signal]bool, len(l.estimates))
	for s, e := range l.estimates {
		rates[s] = e.Rate()
		sustained[s] = e.Sustained()
	}
	rankOpts := l.cfg.Rank
	rankOpts.PriorityClasses = l.deps.Pods.PriorityClasses()
	rankOpts.NamespaceLabels = l.deps.Pods.NamespaceLabels()
	ranked := map[thresholds.Signal][]rank.Candidate{}
	in := decide.Input{
		Now: now, Status: st, Thresholds: l.cfg.Thresholds, Observations: sig, Rates: rates, Sustained: sustained,
		Rank: func(s thresholds.Signal) []rank.Candidate {
			if c, ok := ranked[s]; ok {
				return c
			}
			c := rank.Rank(s, obs.Summary, pods, rankOpts).Candidates
			ranked[s] = c
			return c
		},
		InFlight: l.inflight.Snapshot(),
		Blocked:  l.freshBlocked(now),
		Tried:    map[types.UID]bool{},
	}
	targets := decide.Targets(opts, in)
	// A stale observation (no newer reading than the last pass) is not acted
	// on, but it does not end the episode either.
	acting := len(st.Active) > 0
	for _, t := range targets {
		acting = acting || t.Early
	}
	l.episodeTransition(acting, targets, st, now)
	if len(targets) == 0 {
		l.lastNone = ""
		return
	}
	for attempt := 0; attempt < l.cfg.MaxAttempts && ctx.Err() == nil; attempt++ {
		d := decide.Decide(opts, in)
		l.noteDiskUsage(ranked)
		if d.Action == decide.None {
			l.logNone(d)
			return
		}
		l.lastNone = ""
		if d.Target.Early && !l.earlyLogged[d.Target.Threshold.Signal] {
			l.earlyLogged[d.Target.Threshold.Signal] = true
			l.log.Info("acting early: threshold crossing predicted", zap.String("signal", string(d.Target.Threshold.Signal)),
				zap.String("threshold", d.Target.Threshold.String()), zap.Duration("timeLeft", d.Target.TimeLeft),
				zap.Float64("fillRateBytesPerSecond", rates[d.Target.Threshold.Signal]), zap.Duration("lead", opts.Lead))
		}
		if reason := l.deferred(now); reason != "" {
			l.log.Debug("eviction deferred", zap.String("pod", podKey(d.Candidate)), zap.String("reason", reason))
			return
		}
		if !l.attempt(ctx, d, &in) {
			return
		}
		now = l.clk.Now()
	}
}

// attempt makes one eviction call and reports whether the pass should try
// the next candidate.
func (l *Loop) attempt(ctx context.Context, d decide.Decision, in *decide.Input) bool {
	t := d.Target
	reason := d.Reason
	if d.GraceOverride != nil {
		reason += "; " + d.GraceReason
		l.log.Info("grace shortened", zap.String("pod", podKey(d.Candidate)), zap.String("signal", string(t.Threshold.Signal)),
			zap.Int64("gracePeriodSeconds", *d.GraceOverride), zap.String("reason", d.GraceReason))
	}
	req := evict.Request{
		Pod:           d.Candidate.Pod,
		Signal:        t.Threshold.Signal,
		Hard:          t.Hard(),
		Threshold:     t.Amount,
		Available:     t.Observation.Available,
		Usage:         d.Candidate.Usage,
		Request:       d.Candidate.Request,
		Rank:          d.Rank,
		Reason:        reason,
		GraceOverride: d.GraceOverride,
		GraceReason:   d.GraceReason,
		PressureSince: t.Since,
	}
	var out evict.Outcome
	var err error
	if d.Action == decide.ForceDelete {
		out, err = l.deps.Evictor.ForceDelete(ctx, req)
	} else {
		out, err = l.deps.Evictor.Evict(ctx, req)
	}
	now := l.clk.Now()
	uid := d.Candidate.Pod.UID
	add := func(origin inflight.Origin, at time.Time) {
		l.inflight.Add(inflight.Added{Pod: d.Candidate.Pod, Origin: origin, Signal: t.Threshold.Signal,
			At: at, GraceSeconds: out.GracePeriodSeconds, Usage: d.Candidate.Usage})
	}
	switch out.Result {
	case evict.Evicted, evict.ForcedDelete:
		at := out.Accepted
		if at.IsZero() {
			at = now
		}
		add(inflight.Evicted, at)
		l.failBackoff = 0
		return false
	case evict.DryRun:
		add(inflight.DryRun, now)
		return false
	case evict.PDBBlocked:
		l.blocked[uid] = now
		in.Blocked[uid] = true
		return true
	case evict.NotFound:
		add(inflight.Vanished, now)
		return false
	case evict.RateLimited:
		if errors.Is(err, evict.ErrEpisodeCap) {
			l.capReached = true
		} else {
			l.retryAt = now.Add(max(out.RetryAfter, 10*time.Millisecond))
		}
		return false
	default:
		in.Tried[uid] = true
		if ctx.Err() != nil {
			return false // shutting down: not a failure of the API
		}
		l.failBackoff = min(max(2*l.failBackoff, l.cfg.FailureBackoff), l.cfg.MaxFailureBackoff)
		l.failUntil = now.Add(l.failBackoff)
		l.log.Debug("pausing evictions after a failure", zap.Duration("backoff", l.failBackoff), logging.Err(err))
		return false
	}
}

// deferred says why no eviction call may be made now, or "".
func (l *Loop) deferred(now time.Time) string {
	switch {
	case l.capReached:
		return "eviction cap for this pressure episode reached"
	case now.Before(l.retryAt):
		return "rate limited"
	case now.Before(l.failUntil):
		return "backing off after a failed eviction"
	}
	return ""
}

func (l *Loop) freshBlocked(now time.Time) map[types.UID]bool {
	out := make(map[types.UID]bool, len(l.blocked))
	for uid, at := range l.blocked {
		if now.Sub(at) < l.cfg.PDBRecheck {
			out[uid] = true
		} else {
			delete(l.blocked, uid)
		}
	}
	return out
}

// noteDiskUsage remembers the disk usage of pods in flight while their
// cgroups are still measured.
func (l *Loop) noteDiskUsage(ranked map[thresholds.Signal][]rank.Candidate) {
	for s, cands := range ranked {
		if s == thresholds.MemoryAvailable || s == thresholds.AllocatableMemoryAvailable || s == thresholds.PIDAvailable {
			continue
		}
		for _, c := range cands {
			if c.HasUsage {
				l.inflight.NoteUsage(types.UID(c.UID), s, c.Usage)
			}
		}
	}
}

func (l *Loop) logNone(d decide.Decision) {
	if d.Reason == decide.ReasonCovered {
		l.log.Debug("no eviction", zap.String("signal", string(d.Target.Threshold.Signal)), zap.String("reason", d.Reason))
		return
	}
	if d.Reason == l.lastNone {
		return
	}
	l.lastNone = d.Reason
	l.log.Warn("no pod to evict", zap.String("signal", string(d.Target.Threshold.Signal)),
		zap.String("threshold", d.Target.Threshold.String()), zap.Int64("need", d.Target.Remaining()), zap.String("reason", d.Reason))
}

// episodeTransition starts a pressure episode when a threshold is first acted
// on and ends it when none is: the per-episode cap, the dry-run dedup and
// the PDB refusals start afresh.
func (l *Loop) episodeTransition(acting bool, targets []decide.Target, st thresholds.Status, now time.Time) {
	switch {
	case acting && !l.episode:
		l.episode, l.episodeStart = true, now
		var t decide.Target
		if len(targets) > 0 {
			t = targets[0]
		} else {
			a := st.Active[0]
			t = decide.Target{Threshold: a.Threshold, Observation: a.Observation}
		}
		l.log.Info("pressure episode started", zap.String("signal", string(t.Threshold.Signal)),
			zap.String("threshold", t.Threshold.String()), zap.Int64("available", t.Observation.Available), zap.Bool("predicted", t.Early))
	case !acting && l.episode:
		l.episode = false
		l.deps.Evictor.ResetEpisode()
		l.inflight.EndEpisode()
		clear(l.blocked)
		clear(l.earlyLogged)
		l.capReached = false
		l.lastNone = ""
		l.log.Info("pressure episode ended", zap.Duration("lasted", now.Sub(l.episodeStart)))
	}
}

// nextWait sizes the wait until the next observation.
func (l *Loop) nextWait(sig map[thresholds.Signal]thresholds.Observation) time.Duration {
	now := l.clk.Now()
	wait := l.cfg.Housekeeping
	if l.cfg.Adaptive {
		p := l.cfg.Poll
		if p.Max == 0 || p.Max > l.cfg.Housekeeping {
			p.Max = l.cfg.Housekeeping
		}
		for s, e := range l.estimates {
			o, ok := sig[s]
			if !ok {
				continue
			}
			ps := p
			if l.deps.Arming != nil && l.cfg.EventFillRate > 0 && l.deps.Arming.EventDriven(s) {
				ps.AssumedFillRate = l.cfg.EventFillRate
			}
			var amounts []int64
			for _, th := range l.cfg.Thresholds {
				if th.Signal == s {
					amounts = append(amounts, th.Value.Amount(o.Capacity))
				}
			}
			if len(amounts) == 0 {
				continue
			}
			next, ok := predict.Nearest(o.Available, amounts)
			if !ok {
				next = o.Available // below every threshold: poll fast
			}
			wait = min(wait, ps.Next(wakeup.PollInput{Available: o.Available, Threshold: next, FillRate: e.Rate(), Previous: l.prevPoll}))
		}
		if now.Before(l.burstUntil) {
			fast := p.Min
			if fast == 0 {
				fast = wakeup.DefaultPollMin
			}
			wait = min(wait, fast)
		}
		l.prevPoll = wait
	}
	if l.retryAt.After(now) && !l.capReached {
		wait = min(wait, max(l.retryAt.Sub(now), 10*time.Millisecond))
	}
	return wait
}

func podKey(c rank.Candidate) string { return c.Namespace + "/" + c.Name }
