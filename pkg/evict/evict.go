// SPDX-License-Identifier: Apache-2.0

// Package evict is evictd's client of the policy/v1 Eviction API: it picks
// the grace period, asks the API server to evict (or, in dry run, whether it
// would allow it), classifies the answer, rate-limits, and reports each
// attempt in one place (log, Event, metric).
//
// What to evict is not its business: the agent loop ranks candidates and
// calls Evict on them in order, moving on to the next candidate on
// PDBBlocked, and calls ResetEpisode when pressure ends.
//
// The zero grace period is never sent (see Options.GracePeriod), every
// error names its pod, and an API failure is returned, never a panic.
package evict

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Request is one pod to evict and why; the agent fills it from the ranked
// candidate (rank.Candidate) and the threshold state.
type Request struct {
	// Pod is the pod to evict, as last seen by the informer. Required,
	// with namespace, name and UID.
	Pod *v1.Pod
	// Signal is the starved signal the eviction relieves.
	Signal thresholds.Signal
	// Hard: the threshold met is a hard one (else soft); picks the grace cap.
	Hard bool
	// PredictedIn, when positive, says the threshold is not met yet: its
	// crossing is predicted that soon (act-early), as the pod's Event says.
	PredictedIn time.Duration
	// Threshold and Available are the threshold quantity (percentages
	// already resolved against capacity) and the observed available amount,
	// in the signal's unit (bytes, or a count for inodes and PIDs); they
	// appear in the pod's Event.
	Threshold, Available int64
	// For a stall signal the unit of Threshold and Available is the
	// millionth of the stall window stalled (StallPPM), and the threshold
	// is met above, not below.
	//
	// Usage and Request are the pod's usage and request of the signal's
	// resource (rank.Candidate.Usage and .Request; bytes for the stall
	// signals), Swap the part of Usage in swap.
	Usage, Request, Swap int64
	// Stall is, for a stall signal, the share of time the pod's own tasks
	// stalled on memory.
	Stall float64
	// MemoryHigh is, for the memory.high signal, the pod's container stuck
	// at its memory.high and why (rank.Candidate.MemoryHigh).
	MemoryHigh string
	// Rank is the pod's 1-based place in the eviction order, and Reason
	// why it ranks there; both are logged.
	Rank   int
	Reason string
	// RunnerUp is the pod that would have been evicted in this one's place
	// (namespace/name; "" when none could have been), RunnerUpRank its
	// place in the order and RunnerUpReason why it ranks there; the log and
	// the Event name it.
	RunnerUp       string
	RunnerUpRank   int
	RunnerUpReason string
	// GraceOverride, when set, shortens the grace period further (the fast
	// path fits it to the time the node has left); see Options.GracePeriod.
	GraceOverride *int64
	// GraceReason says why GraceOverride shortened the grace period; it is
	// added to the pod's Event so the owner learns why the pod got less time.
	GraceReason string
	// PressureSince is when pressure on Signal was first noticed; when set,
	// an accepted eviction records the time since then in
	// evictd_eviction_latency_seconds.
	PressureSince time.Time
	// Budget is the pressure episode the eviction is charged to; nil charges
	// the evictor's shared one (ResetEpisode).
	Budget *Budget
}

func (r Request) podKey() string {
	if r.Pod == nil {
		return "<nil>"
	}
	return r.Pod.Namespace + "/" + r.Pod.Name
}

func (r Request) validate() error {
	switch {
	case r.Pod == nil:
		return fmt.Errorf("%w: no pod", ErrInvalidRequest)
	case r.Pod.Name == "" || r.Pod.Namespace == "":
		return fmt.Errorf("%w: pod %q has no namespace or name", ErrInvalidRequest, r.podKey())
	case r.Pod.UID == "":
		return fmt.Errorf("%w: pod %s has no UID", ErrInvalidRequest, r.podKey())
	}
	return nil
}

// DefaultBackoff paces retries of transient API errors within one Evict call:
// 0.5 s, 1 s, 2 s (±10%), then the call gives up with Failed and the agent's
// next pass tries again. Never a tight loop.
var DefaultBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 4, Cap: 5 * time.Second}

// PodAPI is the part of the API the Evictor calls: the policy/v1 Eviction
// subresource and, for ForceDelete only, a pod's DELETE. *kube.Client
// satisfies it; tests use a clientset fake through fromclientset.
type PodAPI interface {
	Evict(ctx context.Context, ev *policyv1.Eviction) error
	DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// Config is what New needs.
type Config struct {
	// Options are the flags; they must pass Validate.
	Options Options
	// Client talks to the API server. Required.
	Client PodAPI
	// NodeName is this node, for logs and its Events. Required.
	NodeName string
	// Events writes Events; nil writes none. In dry-run mode none are
	// written whatever this is.
	Events *EventWriter
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Logger may be nil (no logs).
	Logger *zap.Logger
	// Clock may be nil (the real clock); it drives the rate limit, the
	// latency metric and the retry waits.
	Clock clock.Clock
	// Backoff paces retries; the zero value means DefaultBackoff.
	Backoff wait.Backoff
}

// Evictor evicts pods of one node. Its methods are safe for concurrent use:
// a slow API server must not hold a hard threshold's eviction behind a soft
// one's, so calls run side by side, each charged to its request's Budget.
type Evictor struct {
	opts    Options
	client  PodAPI
	node    string
	events  *EventWriter
	metrics *metrics.Metrics
	log     *zap.Logger
	clock   clock.Clock
	backoff wait.Backoff

	// budget is charged by requests that name none (one shared episode).
	budget *Budget
}

// New checks cfg and returns an Evictor.
func New(cfg Config) (*Evictor, error) {
	if err := cfg.Options.Validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		return nil, errors.New("evict: no API client")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("evict: no node name")
	}
	e := &Evictor{
		opts:    cfg.Options,
		client:  cfg.Client,
		node:    cfg.NodeName,
		events:  cfg.Events,
		metrics: cfg.Metrics,
		log:     cfg.Logger,
		clock:   cfg.Clock,
		backoff: cfg.Backoff,
	}
	if e.opts.DryRun {
		e.events = nil // dry run writes nothing to the cluster, Events included
	}
	if e.log == nil {
		e.log = zap.NewNop()
	}
	e.log = e.log.With(zap.String("node", e.node))
	if e.clock == nil {
		e.clock = clock.RealClock{}
	}
	if e.backoff.Steps == 0 {
		e.backoff = DefaultBackoff
	}
	e.budget = e.NewBudget()
	return e, nil
}

// Options returns the options the Evictor runs with.
func (e *Evictor) Options() Options { return e.opts }

// ResetEpisode starts the shared budget afresh (requests with no Budget of
// their own): the cap counts from zero again and dry-run verdicts and PDB
// refusals are logged afresh.
func (e *Evictor) ResetEpisode() { e.budget.reset() }

// EpisodeEvictions is the number of accepted evictions charged to the
// shared budget.
func (e *Evictor) EpisodeEvictions() int { return e.budget.Evictions() }

// Evict asks the API server to evict req.Pod with the grace period
// Options.GracePeriod gives, through the policy/v1 Eviction subresource (as
// a server-side dry run in dry-run mode).
//
// Switch on Outcome.Result:
//   - Evicted, DryRun: done; err is nil. Count the pod's usage as reclaim
//     in flight until it is gone.
//   - NotFound: the pod was already gone; err is nil.
//   - PDBBlocked: err wraps ErrPDBBlocked with the server's reason; try the
//     next candidate.
//   - Refused: err wraps ErrRefused with the server's words (an admission
//     policy or webhook denied this pod's eviction, or several PDBs cover
//     it); the same answer would come again for this pod: try the next
//     candidate, and this one again only much later.
//   - RateLimited: err wraps ErrRateLimited (Outcome.RetryAfter says when a
//     token is free) or ErrEpisodeCap; no call was made.
//   - Failed: err says why, after up to Backoff.Steps attempts for
//     transient errors; try again on a later pass.
//
// Every non-nil err is a *PodError naming the pod. In dry-run mode each pod's
// verdict is asked once per episode; later calls return it again with
// Outcome.Cached set, without an API call, log line or metric.
//
// A call under way is not cut short when ctx is cancelled (SIGTERM must not
// stop an eviction half-way); ctx only stops retries and new calls.
func (e *Evictor) Evict(ctx context.Context, req Request) (Outcome, error) {
	return e.do(ctx, req, verbEvict)
}

// ForceDelete is --pdb-policy=best-effort's last resort: a graceful DELETE
// of req.Pod with the grace period Evict would use and a precondition on its
// UID, bypassing its PodDisruptionBudget. The caller decides when: only
// while a hard threshold is met and every eligible candidate was
// PDBBlocked. It is logged at Warn, leaves an EvictedDespitePDB Event on
// the pod and counts as forced_delete. With --pdb-policy=strict it refuses
// (Failed, ErrStrictPDBPolicy) without a call. In dry-run mode it sends a
// server-side dry-run delete and reports DryRun. Results otherwise as Evict
// (a changed UID is NotFound).
func (e *Evictor) ForceDelete(ctx context.Context, req Request) (Outcome, error) {
	return e.do(ctx, req, verbDelete)
}

// verb is the API call: an eviction, or ForceDelete's DELETE.
type verb int

const (
	verbEvict verb = iota
	verbDelete
)

func (e *Evictor) do(ctx context.Context, req Request, v verb) (Outcome, error) {
	if err := req.validate(); err != nil {
		return Outcome{Result: Failed}, &PodError{Pod: req.podKey(), Result: Failed, Err: err}
	}
	key := req.podKey()
	if v == verbDelete && e.opts.PDBPolicy != PDBBestEffort {
		return Outcome{Result: Failed}, &PodError{Pod: key, Result: Failed, Err: ErrStrictPDBPolicy}
	}
	b := req.Budget
	if b == nil {
		b = e.budget
	}
	grace := e.opts.GracePeriod(req.Pod, req.Hard, req.GraceOverride)
	out := Outcome{GracePeriodSeconds: grace}

	if e.opts.DryRun {
		if s, ok := b.lookup(seenKey{req.Pod.UID, v}); ok {
			s.outcome.Cached = true
			s.outcome.Attempts = 0
			return s.outcome, s.err
		}
	}
	if err := ctx.Err(); err != nil {
		// Shutting down: not an attempt, so neither counted nor logged.
		return Outcome{Result: Failed, GracePeriodSeconds: grace}, &PodError{Pod: key, Result: Failed, Err: fmt.Errorf("not attempted: %w", err)}
	}
	c, wait, err := b.admit(e.clock.Now())
	if err != nil {
		out.Result, out.RetryAfter = RateLimited, wait
		return e.finish(req, b, v, out, err)
	}

	var apiErr error
	var retry bool
	bo := e.backoff
	for {
		out.Attempts++
		apiErr = e.send(ctx, req, v, grace)
		out.Result, retry = classify(apiErr)
		if !retry || bo.Steps <= 1 || ctx.Err() != nil {
			break
		}
		e.log.Debug("eviction call failed, retrying", zap.String("pod", key), zap.Int("attempt", out.Attempts), logging.Err(apiErr))
		t := e.clock.NewTimer(bo.Step())
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
		if ctx.Err() != nil {
			break
		}
	}

	if out.Result == Evicted {
		switch {
		case e.opts.DryRun:
			out.Result = DryRun
		case v == verbDelete:
			out.Result = ForcedDelete
			out.Accepted = e.clock.Now()
		default:
			out.Accepted = e.clock.Now()
		}
	}
	b.settle(c, out.Result.Accepted(), e.clock.Now())
	err = nil
	switch out.Result {
	case PDBBlocked:
		err = fmt.Errorf("%w: %s", ErrPDBBlocked, pdbMessage(apiErr))
	case Refused:
		err = fmt.Errorf("%w: %s", ErrRefused, refusalMessage(apiErr))
	case WebhookFailed:
		// apiErr stays in the chain: WebhookName reads the webhook from it.
		err = fmt.Errorf("%w: %w", ErrWebhookFailed, apiErr)
	case Failed:
		err = fmt.Errorf("after %d attempt(s): %w", out.Attempts, apiErr)
	}
	return e.finish(req, b, v, out, err)
}

// send makes one API call. It runs under a context of its own so that a
// cancelled ctx (SIGTERM) cannot abort it half-way; CallTimeout bounds it.
func (e *Evictor) send(ctx context.Context, req Request, v verb, grace int64) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.CallTimeout)
	defer cancel()
	opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
	if e.opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	// The UID precondition makes sure a pod recreated under the same name
	// (a StatefulSet's) is not evicted in place of the one that was ranked.
	pod := req.Pod
	uid := pod.UID
	opts.Preconditions = &metav1.Preconditions{UID: &uid}
	if v == verbDelete {
		return e.client.DeletePod(cctx, pod.Namespace, pod.Name, opts)
	}
	return e.client.Evict(cctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace,
		},
		DeleteOptions: &opts,
	})
}

// finish records an attempt in one place: limits, metric, log, Event.
func (e *Evictor) finish(req Request, b *Budget, v verb, out Outcome, err error) (Outcome, error) {
	key := req.podKey()
	if err != nil {
		err = &PodError{Pod: key, Result: out.Result, Err: err}
	}
	seenBefore, firstCap := b.remember(seenKey{req.Pod.UID, v}, out, err, errors.Is(err, ErrEpisodeCap))

	e.metrics.IncEviction(req.Signal, string(out.Result))
	if (out.Result == Evicted || out.Result == ForcedDelete) && !req.PressureSince.IsZero() {
		e.metrics.ObserveEvictionLatency(req.Signal, out.Accepted.Sub(req.PressureSince))
	}

	fields := []zap.Field{
		zap.String("pod", key),
		zap.String("signal", string(req.Signal)),
		zap.String("kind", kindWord(req.Hard)),
		zap.Int("rank", req.Rank),
		zap.String("reason", req.Reason),
	}
	if req.RunnerUp != "" {
		fields = append(fields, zap.String("runnerUp", req.RunnerUp), zap.Int("runnerUpRank", req.RunnerUpRank),
			zap.String("runnerUpReason", req.RunnerUpReason))
	}
	fields = append(fields,
		zap.Int64("gracePeriodSeconds", out.GracePeriodSeconds),
		zap.String("result", string(out.Result)),
	)
	if err != nil {
		fields = append(fields, logging.Err(err))
	}
	if out.Attempts > 1 {
		fields = append(fields, zap.Int("attempts", out.Attempts))
	}
	switch out.Result {
	case Evicted:
		e.log.Info("evicted pod", fields...)
		if e.events != nil {
			e.events.Emit(podRef(req.Pod), v1.EventTypeWarning, ReasonEvicted, actionEvict, evictionNote(req, out.GracePeriodSeconds))
		}
	case ForcedDelete:
		e.log.Warn("deleted pod despite its PodDisruptionBudget (--pdb-policy=best-effort)", fields...)
		if e.events != nil {
			e.events.Emit(podRef(req.Pod), v1.EventTypeWarning, ReasonEvictedDespitePDB, actionDelete, forcedNote(req, out.GracePeriodSeconds))
		}
	case DryRun:
		msg := "would evict pod"
		if v == verbDelete {
			msg = "would delete pod despite its PodDisruptionBudget"
		}
		e.log.Info(msg, append(fields, zap.String("verdict", "allowed"))...)
	case PDBBlocked:
		lvl := zap.InfoLevel
		if seenBefore {
			lvl = zap.DebugLevel
		}
		msg := "eviction blocked by PodDisruptionBudget"
		if e.opts.DryRun {
			msg = "would evict pod"
			fields = append(fields, zap.String("verdict", "blocked by PodDisruptionBudget"))
		}
		e.log.Log(lvl, msg, fields...)
	case Refused:
		// Once an episode at Warn, with an Event on the pod: someone's policy
		// protects it, and whoever owns it should see that evictd asked.
		e.podRefused(req, seenBefore, fields, podRefusal{debug: "eviction refused", warn: "eviction refused for this pod; trying the next candidate",
			verdict: "refused", reason: ReasonEvictionRefused, note: refusedNote(req, err)})
	case WebhookFailed:
		// As a refusal, the Event naming the webhook, whose owners can mend it.
		webhook := WebhookName(err)
		e.podRefused(req, seenBefore, append(fields, zap.String("webhook", webhook)), podRefusal{debug: "admission webhook failed",
			warn: "admission webhook failed on this pod's eviction; trying the next candidate", verdict: "admission webhook failed",
			reason: ReasonEvictionWebhookFailed, note: webhookFailedNote(req, webhook, err)})
	case NotFound:
		e.log.Info("pod already gone", fields...)
	case RateLimited:
		if firstCap {
			e.log.Warn("eviction cap for this pressure episode reached; evicting no more until pressure ends", fields...)
		} else {
			e.log.Debug("eviction held back by rate limit", fields...)
		}
	default:
		e.log.Error("eviction failed", fields...)
	}
	return out, err
}

// RecordResponderEviction records req's pod as evicted by an eviction
// responder acting on evictd's EvictionRequest evictionRequest
// (namespace/name): pkg/evictreq calls it once, when the pod is terminating
// or gone. It is recorded as an eviction is: the evictions counter (result
// responder_evicted), the eviction latency from req.PressureSince to
// accepted, and an Evicted Event on the pod that says a responder acted.
// No API call is made and no line logged (the caller logs it); the
// budget is charged by the Reservation (Reserve) the caller took before it
// asked and settles as accepted. It returns out with that Result.
func (e *Evictor) RecordResponderEviction(req Request, evictionRequest string, out Outcome) Outcome {
	out.Result = ResponderEvicted
	e.metrics.IncEviction(req.Signal, string(out.Result))
	if !req.PressureSince.IsZero() && !out.Accepted.IsZero() {
		e.metrics.ObserveEvictionLatency(req.Signal, out.Accepted.Sub(req.PressureSince))
	}
	if e.events != nil && req.Pod != nil {
		e.events.Emit(podRef(req.Pod), v1.EventTypeWarning, ReasonEvicted, actionEvict, responderNote(req, evictionRequest))
	}
	return out
}

// NodeThresholdMet leaves an EvictionThresholdMet Event on the node; call it
// when a threshold is first met in an episode. Threshold and available are in
// the signal's unit. Nothing is written in dry-run mode.
func (e *Evictor) NodeThresholdMet(s thresholds.Signal, hard bool, threshold, available int64) {
	if e.events == nil {
		return
	}
	e.events.Emit(nodeRef(e.node), v1.EventTypeWarning, ReasonThresholdMet, actionNotice, thresholdNote(s, hard, threshold, available))
}

// VictimStuck leaves an EvictionStuck Event on a pod that was evicted or
// found terminating and is still there past its grace period and the wait
// after it. Nothing is written in dry-run mode.
func (e *Evictor) VictimStuck(namespace, name string, uid types.UID, note string) {
	if e.events == nil {
		return
	}
	ref := v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name, UID: uid}
	e.events.Emit(ref, v1.EventTypeWarning, ReasonVictimStuck, actionNotice, note)
}

// PressureEnded leaves an EvictionPressureEnded Event on the node when a
// resource's pressure episode ends. Nothing is written in dry-run mode.
func (e *Evictor) PressureEnded(note string) {
	if e.events == nil {
		return
	}
	e.events.Emit(nodeRef(e.node), v1.EventTypeNormal, ReasonPressureEnded, actionNotice, note)
}

// podRefusal is how a pod's own refusal is said: the log lines, the dry
// run's verdict, and the Event.
type podRefusal struct {
	debug, warn, verdict, reason, note string
}

// podRefused says a refusal of the pod itself: once an episode at Warn with
// an Event on the pod, at Debug after that.
func (e *Evictor) podRefused(req Request, seenBefore bool, fields []zap.Field, r podRefusal) {
	if seenBefore {
		e.log.Debug(r.debug, fields...)
		return
	}
	msg := r.warn
	if e.opts.DryRun {
		msg = "would evict pod"
		fields = append(fields, zap.String("verdict", r.verdict))
	}
	e.log.Warn(msg, fields...)
	if e.events != nil {
		e.events.Emit(podRef(req.Pod), v1.EventTypeWarning, r.reason, actionEvict, r.note)
	}
}
