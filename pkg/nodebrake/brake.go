// SPDX-License-Identifier: Apache-2.0

package nodebrake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/backoff"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/logging"
)

// API is the part of the API client the Brake uses (*kube.Client).
type API interface {
	PatchNode(ctx context.Context, name string, pt types.PatchType, data []byte) (*v1.Node, error)
	PatchNodeStatus(ctx context.Context, name string, pt types.PatchType, data []byte) (*v1.Node, error)
	// ReadNode reads the Node fresh: at exit the informer has stopped.
	ReadNode(ctx context.Context, name string) (*v1.Node, error)
}

// Objects a brake writes, as Options.Wrote names them.
const (
	ObjectCondition = "condition"
	ObjectTaint     = "taint"
)

// DefaultHeartbeat is how often a condition that is on has its
// lastHeartbeatTime renewed, so that a stale one (an agent gone without
// lifting it) shows: every 5 minutes, as the kubelet renews its own node
// conditions (nodeStatusReportFrequency) and node-problem-detector its
// own. Each renewal is a write of the Node, which every agent in a
// zone-wide episode makes.
const DefaultHeartbeat = 5 * time.Minute

// recheck is how often Run compares the Node, as the informer last saw
// it, with the brake wanted, between the Syncs that change it: so that a
// heartbeat falls due on time and a brake someone lifted by hand is back
// within it. A recheck reads the informer's cache only; it writes only
// what differs.
const recheck = 30 * time.Second

// DefaultExitLimit bounds the lifting at exit when Options.ExitLimit is 0;
// the agent derives its own from the pod's termination grace.
const DefaultExitLimit = 10 * time.Second

// Retry bounds (package backoff: doubling, with jitter). A failed write is
// tried again after about retryInitial, then twice as long each time: up
// to maxRetry while the API server is away or busy (5xx, 429, no answer, a
// conflict, which the informer's catching up soon ends), up to
// maxRefusedRetry while it refuses the write (403, 422: the admission
// policy, a missing grant), which the same write will meet again until
// someone changes the policy, the grant or the token. A 403 right after an
// API server's restart (its authorization still loading) is retried within
// seconds all the same: the refusals' back-off takes minutes to reach its
// cap. At exit the lift backs off from minRetry to maxExitRetry, so that
// the last tries still fit in the exit's bound, and each try's calls end
// after exitAttempt, so that one call hung on a dead connection cannot use
// the whole bound.
const (
	retryInitial    = time.Second
	maxRetry        = 30 * time.Second
	maxRefusedRetry = 5 * time.Minute
	minRetry        = 500 * time.Millisecond
	maxExitRetry    = 4 * time.Second
	exitAttempt     = 10 * time.Second
)

// Options configure a Brake.
type Options struct {
	API  API
	Node string
	// Current is the Node as last seen by the informer (nil while unknown):
	// the brake reads nothing of its own.
	Current func() *v1.Node
	// Effect of the taints; "" sets the conditions only.
	Effect    v1.TaintEffect
	Heartbeat time.Duration
	// Acting reports whether this agent acts on the node (holds the node
	// lease); nil: always. An agent that does not act writes nothing, and
	// does not lift at exit what the one that acts has set.
	Acting func() bool
	Clock  clock.WithTicker
	Log    *zap.Logger
	// Wrote is told of every write (ObjectCondition or ObjectTaint) and
	// its error; Applied of every resource's brake after each round that
	// succeeded.
	Wrote   func(object string, err error)
	Applied func(r Resource, on bool)
	// WaitLimit bounds WaitOn (DefaultWaitLimit when 0).
	WaitLimit time.Duration
	// ExitLimit bounds the lifting at exit, retries included
	// (DefaultExitLimit when 0).
	ExitLimit time.Duration
	// Owns reports, from a fresh read of the node lease, whether no other
	// agent acts on the node now, and until when this agent's writes may
	// go on under the lease as read: asked before each try of the lift at
	// exit, and in LiftOnly before lifting a leftover, so that a brake
	// another agent holds (after a lease hand-over, or beside a dry run)
	// is never lifted, and no write goes out once the lease could have
	// passed to another agent. nil: the brake is this agent's to lift at
	// exit when its last round ran while it acted.
	Owns func(ctx context.Context) (Ownership, error)
	// TransitionPeriod is the pressure transition period
	// (--eviction-pressure-transition-period): a brake found on the Node
	// when this agent first judges it, which no episode of its own wants,
	// is kept on this long from then, as the kubelet keeps its pressure
	// condition this long after it last saw the pressure (0: lifted at
	// once). The agent that put it on may have seen the pressure up to
	// the moment it died, and a pressure that comes and goes must not
	// open the node to new pods at each restart.
	TransitionPeriod time.Duration
	// Install is the agent's install (its ID, package install): its
	// conditions' messages name it and its taints carry its mark, so that
	// the uninstall of another install leaves them alone.
	Install string
	// LiftOnly: the agent puts no brake on (--node-brake=false, dry run,
	// shadow mode) but still lifts what an earlier agent left on its Node,
	// once it acts: every evictd.io/ taint and Evictd condition goes.
	LiftOnly bool
}

// Ownership is what Options.Owns read of the node lease.
type Ownership struct {
	// Mine: no agent but this one acts on the node now.
	Mine bool
	// Until bounds this agent's writes when the lease as read is its own:
	// from then on another agent may hold it (nodelease.Hold.Until). Zero:
	// no bound, the lease is nobody's (or expired), so no lease of this
	// agent's can pass to another mid-write.
	Until time.Time
}

// Brake keeps evictd's conditions and taints on its Node in step with the
// pressure episodes the agent reports with Sync.
type Brake struct {
	o    Options
	kick chan struct{}

	mu     sync.Mutex
	want   map[Resource]Want
	synced bool
	// acted: the last round ran while this agent acted; only then is the
	// brake this agent's to lift at exit.
	acted bool
	// judged: the brake found on the Node has been looked at, in the
	// first round that judged the node while acting; kept is, per
	// resource found on then, until when it is kept on (TransitionPeriod).
	judged bool
	kept   map[Resource]time.Time
	err    error
	// failing is the run of failed writes under way (zero while writes
	// succeed): it is logged once, and once more when it ends.
	failing failureRun
	// last is the Node our last write returned: newer than the informer's
	// copy for a moment, and a patch on the older one would conflict.
	last *v1.Node
	// rounds is closed (and replaced) after each taint write and each
	// round, to wake WaitOn.
	rounds chan struct{}

	// Tests' hooks, nil in the agent: woke is called after each of Run's
	// wake-ups is done with (a round, or a recheck skipped while a retry
	// waits), waiting each time WaitOn is about to block for the taint. A
	// test waits for these events instead of sleeping and hoping the
	// brake's goroutine has run meanwhile.
	woke    func()
	waiting func()
}

// failureRun is a run of failed writes: when it began, how many, and
// whether (and as what) it has been logged.
type failureRun struct {
	since   time.Time
	tries   int
	said    bool
	refused bool
}

// New checks o and returns a Brake; Run starts it.
func New(o Options) (*Brake, error) {
	switch {
	case o.API == nil:
		return nil, errors.New("nodebrake: no API")
	case o.Node == "":
		return nil, errors.New("nodebrake: no node name")
	case o.Current == nil:
		return nil, errors.New("nodebrake: no Current")
	case o.Clock == nil:
		return nil, errors.New("nodebrake: no clock")
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Wrote == nil {
		o.Wrote = func(string, error) {}
	}
	if o.Applied == nil {
		o.Applied = func(Resource, bool) {}
	}
	if o.WaitLimit <= 0 {
		o.WaitLimit = DefaultWaitLimit
	}
	if o.ExitLimit <= 0 {
		o.ExitLimit = DefaultExitLimit
	}
	return &Brake{o: o, kick: make(chan struct{}, 1), rounds: make(chan struct{})}, nil
}

// DefaultWaitLimit bounds WaitOn: an eviction is held back this long at
// most for the brake's write, a round trip to the API server.
const DefaultWaitLimit = 2 * time.Second

// WaitOn waits until the brake of r, which the last Sync wants on, is on
// the Node, and reports whether it is. An eviction waits for it so that
// the evicted pod's replacement, which its ReplicaSet creates at once,
// finds the taint already there; otherwise the scheduler can place it
// right back here (the race the brake exists to stop). It returns false at
// once when nothing would keep pods away (no taint effect), when r is not
// wanted on, or while writes fail for a cause other than a conflict (the
// failure shows in Warning; evictions must not slow down for it), and
// false after Options.WaitLimit or when ctx ends.
func (b *Brake) WaitOn(ctx context.Context, r Resource) bool {
	if b.o.Effect == "" || b.o.LiftOnly {
		return false
	}
	limit := b.o.Clock.After(b.o.WaitLimit)
	for {
		b.mu.Lock()
		wanted, rounds := b.want[r].On, b.rounds
		failing := b.err != nil && !isConflict(b.err)
		b.mu.Unlock()
		// The newer of the informer's Node and our last write's answer.
		node := b.node()
		on := node != nil && slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == TaintKey(r) && t.Effect == b.o.Effect })
		switch {
		case on && wanted:
			return true
		case !wanted || failing:
			return false
		}
		if b.waiting != nil {
			b.waiting()
		}
		select {
		case <-rounds:
		case <-limit:
			b.o.Log.Warn("evicting before the node brake is on: its write takes longer than the limit, and the evicted pod's replacement may be placed here",
				zap.String("node", b.o.Node), zap.String("resource", string(r)), zap.Duration("limit", b.o.WaitLimit))
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Sync tells the brake which resources are in a pressure episode. The agent
// calls it after every pass; it never blocks, and nothing is written before
// the first call, so that a new agent lifts a dead one's brake only once it
// has judged the node itself.
func (b *Brake) Sync(want map[Resource]Want) {
	b.mu.Lock()
	changed := !b.synced || !maps.Equal(b.want, want)
	b.want, b.synced = maps.Clone(want), true
	b.mu.Unlock()
	if changed {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// Warning is the /readyz detail while the brake cannot be written ("" when
// it can): a missing grant or the admission policy refusing evictd's own
// writes must show, though the node is still protected by evictions.
func (b *Brake) Warning() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	// A conflict (another writer moved the Node on) is retried within a
	// second and is no failure: reported, it showed between the retry's
	// write and its answer (TestBrakeConflictRetried saw it once in CI).
	if b.err == nil || isConflict(b.err) {
		return ""
	}
	return "cannot write the node brake: " + b.err.Error()
}

// Run keeps the brake until ctx ends, then lifts it, if this agent acts.
// While writes fail, the next try waits for its back-off: the rechecks do
// not cut it short, and only a Sync that changes the brake wanted (an
// episode's start or end, a new reason to write) is tried at once.
func (b *Brake) Run(ctx context.Context) {
	tick := b.o.Clock.NewTicker(min(recheck, b.o.Heartbeat/2))
	defer tick.Stop()
	busy := backoff.Backoff{Initial: retryInitial, Max: maxRetry}
	refused := backoff.Backoff{Initial: retryInitial, Max: maxRefusedRetry}
	// retry is the next try's timer while writes fail, nil while they do
	// not; keep ends the first brake kept from the Node as found (at
	// keepAt), nil while none is.
	var retry, keep clock.Timer
	var keepAt time.Time
	for {
		var retryC, keepC <-chan time.Time
		if retry != nil {
			retryC = retry.C()
		}
		if keep != nil {
			keepC = keep.C()
		}
		select {
		case <-ctx.Done():
			if retry != nil {
				retry.Stop()
			}
			if keep != nil {
				keep.Stop()
			}
			b.lift()
			return
		case <-b.kick:
		case <-tick.C():
			if retry != nil {
				b.wokeUp()
				continue
			}
		case <-retryC:
		case <-keepC:
			keep, keepAt = nil, time.Time{}
		}
		if retry != nil {
			retry.Stop()
			retry = nil
		}
		err := b.round(ctx, false, time.Time{})
		b.mu.Lock()
		b.signalLocked()
		next := b.keptUntilLocked()
		b.mu.Unlock()
		// A kept brake is lifted when its time is up, not at the next
		// recheck.
		if !next.Equal(keepAt) {
			if keep != nil {
				keep.Stop()
				keep = nil
			}
			if keepAt = next; !next.IsZero() {
				keep = b.o.Clock.NewTimer(next.Sub(b.o.Clock.Now()))
			}
		}
		switch {
		case err == nil:
			busy.Reset()
			refused.Reset()
		case permanent(err):
			retry = b.o.Clock.NewTimer(refused.Next())
		default:
			retry = b.o.Clock.NewTimer(busy.Next())
		}
		b.wokeUp()
	}
}

func (b *Brake) wokeUp() {
	if b.woke != nil {
		b.woke()
	}
}

// errNotOurs: another agent acts on the node now; its brake is left on.
var errNotOurs = errors.New("another agent holds the node lease")

// errLeaseRunsOut: the node lease this agent holds, as last read, may pass
// to another agent before a write would be made; the brake is left to it.
var errLeaseRunsOut = errors.New("the node lease may pass to another agent before the write")

// lift takes the brake off at exit, retrying every failure that can pass
// (permanent) with backoff until Options.ExitLimit, which the agent keeps
// within its pod's termination grace: a brake left behind keeps new pods
// off the node with no agent to lift it.
func (b *Brake) lift() {
	if b.o.Owns == nil {
		b.mu.Lock()
		acted := b.acted
		b.mu.Unlock()
		if !acted {
			return
		}
	}
	if !b.onNode() {
		// Nothing of evictd's on the Node as last seen: no call at all, so
		// that an exit while the API server is away is not held up (an
		// agent with the brake off, most of all, has nothing to lift).
		return
	}
	deadline := b.o.Clock.Now().Add(b.o.ExitLimit)
	// Every agent of an uninstall lifts at once: jittered, they spread.
	wait := backoff.Backoff{Initial: minRetry, Max: maxExitRetry}
	for tries := 1; ; tries++ {
		err := b.liftOnce(deadline, tries > 1)
		if err == nil {
			return
		}
		if errors.Is(err, errNotOurs) {
			b.o.Log.Info("leaving the node brake on at exit: another evictd holds the node lease and acts here now",
				zap.String("node", b.o.Node))
			return
		}
		var out leaseRunsOut
		if errors.As(err, &out) {
			// Nothing renews the lease at exit: past its last renewal plus
			// its duration (less the spare of a renewal interval) another
			// agent may hold it and have put its own brake on, which a
			// write of ours would lift. That agent, or the next one, lifts
			// this brake once it has judged the node.
			b.o.Log.Warn("leaving the node brake on at exit: the node lease this agent holds may pass to another evictd before the lift's write; the next agent to act lifts it once it has judged the node",
				zap.String("node", b.o.Node), zap.Time("leaseActingUntil", out.until), zap.Int("tries", tries))
			return
		}
		next := wait.Next()
		if permanent(err) || !b.o.Clock.Now().Add(next).Before(deadline) {
			b.o.Log.Error("the node brake could not be lifted at exit: lift it by hand (docs/run.md, \"The node brake\")",
				zap.String("node", b.o.Node), zap.Int("tries", tries), zap.Bool("permanent", permanent(err)),
				zap.Duration("limit", b.o.ExitLimit), logging.Err(err))
			return
		}
		<-b.o.Clock.After(next)
	}
}

// onNode reports whether the Node as last seen carries any of evictd's
// taints or conditions (false while it is unknown: the informer never
// synced, so this agent never judged the node).
func (b *Brake) onNode() bool {
	node := b.node()
	if node == nil {
		return false
	}
	_, equal := Taints(node, nil, b.o.Effect, true, "")
	return !equal || ConditionPatch(node, nil, b.o.Clock.Now(), b.o.Heartbeat, true, "") != nil
}

// leaseRunsOut is errLeaseRunsOut with the bound it met.
type leaseRunsOut struct{ until time.Time }

func (e leaseRunsOut) Error() string        { return errLeaseRunsOut.Error() }
func (e leaseRunsOut) Is(target error) bool { return target == errLeaseRunsOut }

// beyond returns a leaseRunsOut when a write now would come at or after
// until (zero: no bound).
func (b *Brake) beyond(until time.Time) error {
	if !until.IsZero() && !b.o.Clock.Now().Before(until) {
		return leaseRunsOut{until: until}
	}
	return nil
}

// liftOnce is one try of the exit lift: who acts now (fresh), then the
// Node, read fresh after a failed try (the informer has stopped, and the
// kubelet's status updates move the Node's version on, which a taint patch
// conditional on the old one would meet as a conflict again and again).
// Its writes go out only while the lease, as read, is still this agent's
// (Ownership.Until), and a write under way is cut off then: nothing renews
// the lease at exit, and a write that lands after another agent took it
// over would lift that agent's brake.
func (b *Brake) liftOnce(deadline time.Time, reread bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), min(deadline.Sub(b.o.Clock.Now()), exitAttempt))
	defer cancel()
	var until time.Time
	if b.o.Owns != nil {
		own, err := b.o.Owns(ctx)
		if err != nil {
			return fmt.Errorf("node lease: %w", err)
		}
		if !own.Mine {
			return errNotOurs
		}
		until = own.Until
		if err := b.beyond(until); err != nil {
			return err
		}
		if !until.IsZero() {
			var cancelLease context.CancelFunc
			ctx, cancelLease = context.WithTimeout(ctx, until.Sub(b.o.Clock.Now()))
			defer cancelLease()
		}
	}
	if reread {
		// Best effort: if the read fails too, the write may still pass.
		if n, err := b.o.API.ReadNode(ctx, b.o.Node); err == nil {
			b.remember(n)
		} else if apierrors.IsNotFound(err) {
			return err
		}
	}
	return b.round(ctx, true, until)
}

// permanent reports whether err cannot pass by asking again with the same
// request and credentials within the exit's bound: the Node is gone
// (nothing to lift), the request is malformed or refused by the admission
// policy (the same patch meets the same rules), or the credentials are
// refused (a deleted ServiceAccount or RBAC: an uninstall, which its own
// clean-up handles). Everything else — 5xx, 429, timeouts, a refused or
// dropped connection, a conflict — is the API server or the network being
// busy or away for a moment, and is retried.
func permanent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsGone(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsMethodNotSupported(err) ||
		apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// round brings the Node to the wanted brake (or, final, lifts all of it).
// No write goes out at or after until (zero: no bound; see liftOnce).
func (b *Brake) round(ctx context.Context, final bool, until time.Time) error {
	b.mu.Lock()
	want, synced := b.want, b.synced
	b.mu.Unlock()
	acting := b.o.Acting == nil || b.o.Acting()
	exit := final
	if b.o.LiftOnly {
		// Never on: every round lifts whatever is there.
		want, final = nil, true
	}
	if !exit {
		b.mu.Lock()
		b.acted = acting && synced
		b.mu.Unlock()
		if !acting || !synced {
			return nil
		}
	}
	node := b.node()
	if node == nil {
		return b.failed(fmt.Errorf("node %s is not in the informer's cache", b.o.Node))
	}
	if !exit && !b.o.LiftOnly {
		want = b.keepFound(node, want)
	}
	taints, equal := Taints(node, want, b.o.Effect, final, install.Mark(b.o.Install))
	condPatch := ConditionPatch(node, want, b.o.Clock.Now(), b.o.Heartbeat, final, b.o.Install)
	if b.o.LiftOnly && !exit && (!equal || condPatch != nil) && b.o.Owns != nil {
		// A leftover to lift: only if no other agent acts here now (a dry
		// run beside an acting agent must leave that agent's brake on).
		own, err := b.o.Owns(ctx)
		switch {
		case err != nil:
			return b.failed(fmt.Errorf("node lease: %w", err))
		case !own.Mine:
			return nil
		}
		until = own.Until
	}
	var errs []error
	// Taints first: their patch is conditional on the resourceVersion
	// read, which our own condition write would change.
	if !equal {
		if err := b.beyond(until); err != nil {
			return b.outlived(err, exit)
		}
		out, err := b.o.API.PatchNode(ctx, node.Name, types.MergePatchType, TaintPatch(node, taints))
		b.o.Wrote(ObjectTaint, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("taint: %w", err))
		} else {
			b.remember(out)
			b.mu.Lock()
			b.signalLocked() // the taint is what WaitOn waits for
			b.mu.Unlock()
		}
	}
	if condPatch != nil {
		if err := b.beyond(until); err != nil {
			return b.outlived(err, exit)
		}
		out, err := b.o.API.PatchNodeStatus(ctx, node.Name, types.StrategicMergePatchType, condPatch)
		b.o.Wrote(ObjectCondition, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("condition: %w", err))
		} else {
			b.remember(out)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return b.failed(err)
	}
	b.succeeded(want, Applied(node, b.o.Effect), final)
	return nil
}

// outlived ends a round whose lease, as read, may have passed to another
// agent before a write: at exit the lift stops (lift logs it); a LiftOnly
// round leaves the leftover to the next round, which reads the lease
// again.
func (b *Brake) outlived(err error, exit bool) error {
	if exit {
		return err
	}
	return nil
}

// keepFound is want with the brake found on the Node kept on: the first
// round that judges the node while acting records, for each resource whose
// brake it finds on (its condition True or its taint there) and that no
// episode of this agent's wants, that it stays on until the transition
// period has passed, and logs it; each round until then wants it on, and
// the first round after lets it go. An episode of the resource that opens
// meanwhile takes over: it ends no sooner than a transition period after
// it opened, so never before the kept brake would have gone. b.mu is not
// held.
func (b *Brake) keepFound(node *v1.Node, want map[Resource]Want) map[Resource]Want {
	now := b.o.Clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.judged {
		b.judged = true
		if b.o.TransitionPeriod > 0 {
			for _, r := range Resources() {
				if !want[r].On && foundOn(node, r) {
					if b.kept == nil {
						b.kept = map[Resource]time.Time{}
					}
					b.kept[r] = now.Add(b.o.TransitionPeriod)
					b.o.Log.Info("keeping the node brake found on: the pressure it was put on for may still hold; lifted once no episode of the resource has been open for the pressure transition period",
						zap.String("node", b.o.Node), zap.String("resource", string(r)), zap.Duration("transitionPeriod", b.o.TransitionPeriod),
						zap.Time("until", b.kept[r]))
				}
			}
		}
	}
	if len(b.kept) == 0 {
		return want
	}
	out := maps.Clone(want)
	if out == nil {
		out = map[Resource]Want{}
	}
	for _, r := range Resources() {
		until, ok := b.kept[r]
		switch {
		case !ok:
		case !now.Before(until):
			delete(b.kept, r)
			if !want[r].On {
				b.o.Log.Info("the node brake found on is kept no longer: no episode of the resource for the pressure transition period",
					zap.String("node", b.o.Node), zap.String("resource", string(r)), zap.Duration("transitionPeriod", b.o.TransitionPeriod))
			}
		case !want[r].On:
			out[r] = Want{On: true, Message: fmt.Sprintf(
				"evictd: kept on since it started and found this brake on, as the %s pressure it was put on for may still hold; lifted at %s unless a %s pressure episode opens",
				r, until.UTC().Format(time.RFC3339), r)}
		}
	}
	return out
}

// keptUntilLocked is when the first brake kept from the Node as found
// is to go (zero: none is kept); b.mu is held.
func (b *Brake) keptUntilLocked() time.Time {
	var first time.Time
	for _, until := range b.kept {
		if first.IsZero() || until.Before(first) {
			first = until
		}
	}
	return first
}

// foundOn reports whether node carries r's brake: evictd's condition True,
// or its taint, of any effect.
func foundOn(node *v1.Node, r Resource) bool {
	if c := findCondition(node, ConditionType(r)); c != nil && c.Status == v1.ConditionTrue {
		return true
	}
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == TaintKey(r) })
}

// failed records a failed round. A run of failures is logged once, when
// its first failure other than a conflict comes, and once more if it turns
// from the server away into a refusal or back (its back-off changes with
// it): a write refused every few minutes for days says so once, not each
// time.
func (b *Brake) failed(err error) error {
	refused := permanent(err)
	b.mu.Lock()
	if b.err == nil {
		b.failing = failureRun{since: b.o.Clock.Now()}
	}
	b.failing.tries++
	say := !isConflict(err) && (!b.failing.said || b.failing.refused != refused)
	if say {
		b.failing.said, b.failing.refused = true, refused
	}
	b.err = err
	b.mu.Unlock()
	if say {
		backoffMax := maxRetry
		if refused {
			backoffMax = maxRefusedRetry
		}
		b.o.Log.Error("cannot write the node brake (evictd's condition and taint on its Node); evictions go on, but the scheduler may place new pods here",
			zap.String("node", b.o.Node), zap.Bool("refused", refused), zap.Duration("backoffMax", backoffMax), logging.Err(err))
	}
	return err
}

// succeeded logs what the round changed: had is the brake the Node had
// before it, which a dead agent may have left.
func (b *Brake) succeeded(want map[Resource]Want, had map[Resource]bool, final bool) {
	b.mu.Lock()
	run := b.failing
	recovered := b.err != nil && run.said
	b.err, b.failing = nil, failureRun{}
	b.mu.Unlock()
	var changed []Resource
	for _, r := range Resources() {
		if had[r] != (want[r].On && !final) {
			changed = append(changed, r)
		}
	}
	if recovered {
		b.o.Log.Info("the node brake is written again", zap.String("node", b.o.Node),
			zap.Int("failedTries", run.tries), zap.Duration("after", b.o.Clock.Since(run.since)))
	}
	for _, r := range Resources() {
		b.o.Applied(r, want[r].On && !final)
	}
	for _, r := range changed {
		fields := []zap.Field{zap.String("node", b.o.Node), zap.String("resource", string(r)),
			zap.String("condition", string(ConditionType(r)))}
		if b.o.Effect != "" {
			fields = append(fields, zap.String("taint", TaintKey(r)+":"+string(b.o.Effect)))
		}
		if want[r].On && !final {
			b.o.Log.Info("node brake on: new pods kept away until the episode ends", append(fields, zap.String("message", want[r].Message))...)
		} else {
			b.o.Log.Info("node brake lifted", fields...)
		}
	}
}

// node is the newer of the informer's Node and the one our last write
// returned.
func (b *Brake) node() *v1.Node {
	cur := b.o.Current()
	b.mu.Lock()
	last := b.last
	b.mu.Unlock()
	if last == nil || cur == nil {
		if cur == nil {
			return last
		}
		return cur
	}
	lv, err1 := strconv.ParseUint(last.ResourceVersion, 10, 64)
	cv, err2 := strconv.ParseUint(cur.ResourceVersion, 10, 64)
	if err1 == nil && err2 == nil && lv > cv {
		return last
	}
	return cur
}

// signalLocked wakes every WaitOn to look again; b.mu is held.
func (b *Brake) signalLocked() {
	close(b.rounds)
	b.rounds = make(chan struct{})
}

func (b *Brake) remember(n *v1.Node) {
	if n == nil {
		return
	}
	b.mu.Lock()
	b.last = n
	b.mu.Unlock()
}

// isConflict reports whether err is a conflict and nothing else: of a
// round's failures (errors.Join), every one. A round whose taint conflicts
// and whose condition is refused is a refusal.
func isConflict(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs := joined.Unwrap()
		for _, e := range errs {
			if !isConflict(e) {
				return false
			}
		}
		return len(errs) > 0
	}
	return apierrors.IsConflict(err)
}
