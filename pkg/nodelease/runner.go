// SPDX-License-Identifier: Apache-2.0

package nodelease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/backoff"
	"github.com/evictd/evictd/pkg/exitgrace"
	"github.com/evictd/evictd/pkg/logging"
)

// API is the part of the API client the Runner uses (*kube.Client).
type API interface {
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
	UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
	DeleteLease(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	WatchLeases(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// Options configure a Runner.
type Options struct {
	API       API
	Namespace string
	Node      string
	// Identity is this agent's holder identity (Identity()).
	Identity string
	// Install is this agent's install (its ID, package install), which
	// the lease names (install.Annotation); "" names none.
	Install string
	// Duration is the lease's duration near pressure, IdleDuration its
	// duration at idle (0: Duration, one pace).
	Duration     time.Duration
	IdleDuration time.Duration
	// Jitter returns a number in [0, 1) for the renewals' and retries'
	// jitter (nil: math/rand/v2's Float64).
	Jitter func() float64
	// Synced reports whether Pods lists every pod of the node: only then
	// does a holder's pod missing from it show the holder gone (nil: never
	// synced, no holder is seen gone by its pod).
	Synced func() bool
	// Pods lists the node's pods (the pod informer), to find the pods of
	// the agents involved in a handover; nil: no handovers.
	Pods func() []*v1.Pod
	// NodeUID is the Node's UID ("" while unknown), for the ownerReference.
	NodeUID func() types.UID
	Clock   clock.WithTicker
	Log     *zap.Logger
	// Held is told, after each round, whether the agent acts (the metric);
	// Failed counts each failed call to the Lease API.
	Held   func(bool)
	Failed func()
}

// Runner keeps the node lease: it acquires, renews, waits, hands over and
// releases it, and tells the agent whether to act.
type Runner struct {
	o    Options
	name string
	kick chan struct{}

	mu sync.Mutex
	el *Elector
	// cached is the Lease as last read, written or watched; nil: read it.
	cached *coordinationv1.Lease
	// err is the last round's failure (nil once a round succeeds).
	err error
	// tried: a round has finished.
	tried bool
	// said is the last reason logged, so each change is logged once.
	said string
	// acquired is closed the first time the agent acts.
	acquired chan struct{}
	// unsure: the last write failed without an answer from the API server
	// (the context ended, the connection dropped), so it may have been
	// stored: the agent may hold the lease without knowing it.
	unsure bool
	// retry spaces the rounds that fail in a row; rounds counts every
	// round (tests wait on it).
	retry  backoff.Backoff
	rounds int
	// rounded is closed when a round ends, and replaced (WaitActive).
	rounded chan struct{}
	// processGone reports whether a process of this host is gone
	// (processExited; replaced in tests).
	processGone func(pid int) bool
}

// Identity is the holder identity: the pod's "namespace/name" from the
// downward API (POD_NAMESPACE, POD_NAME), or outside a pod the host name
// and process ID. A restarted container of the same pod keeps its identity,
// so it takes its lease back at once.
func Identity() string {
	ns, pod := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns != "" && pod != "" {
		return ns + "/" + pod
	}
	host, _ := os.Hostname()
	return host + "_" + strconv.Itoa(os.Getpid())
}

// NewRunner checks o and returns a Runner.
func NewRunner(o Options) (*Runner, error) {
	if o.API == nil || o.Clock == nil {
		return nil, errors.New("nodelease: a Runner needs an API and a clock")
	}
	el, err := NewElector(o.Namespace, o.Node, o.Identity, o.Duration)
	if err != nil {
		return nil, err
	}
	el.SetInstall(o.Install)
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Pods == nil {
		o.Pods = func() []*v1.Pod { return nil }
	}
	if o.NodeUID == nil {
		o.NodeUID = func() types.UID { return "" }
	}
	if o.Held == nil {
		o.Held = func(bool) {}
	}
	if o.Failed == nil {
		o.Failed = func() {}
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.Synced == nil {
		o.Synced = func() bool { return false }
	}
	if o.IdleDuration == 0 {
		o.IdleDuration = o.Duration
	}
	if err := el.SetIdle(o.IdleDuration, o.Jitter); err != nil {
		return nil, err
	}
	jitter := o.Jitter
	retry := backoff.Backoff{Initial: retryMin, Rand: func(n int64) int64 { return int64(jitter() * float64(n)) }}
	return &Runner{o: o, name: Name(o.Node), el: el, kick: make(chan struct{}, 1), acquired: make(chan struct{}),
		rounded: make(chan struct{}), processGone: processExited, retry: retry}, nil
}

// SetNear tells the runner whether pressure is near on the node (a signal
// in its band, an episode open): near, the lease is renewed at once at the
// active pace; once pressure is gone, it returns to the idle pace at its
// next renewal. Safe for concurrent use.
func (r *Runner) SetNear(near bool) {
	r.mu.Lock()
	was := r.el.near
	r.el.SetNear(near)
	r.mu.Unlock()
	if near && !was {
		r.Kick()
	}
}

// Kick asks for a round now: a change the watch cannot show, such as a
// pod deleted from the node, may let a waiting agent take over.
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// WaitActive waits until the agent acts under a lease of the active pace
// (Elector.Active), at most until ctx ends, and reports whether it does.
// An eviction call waits here: pressure near, the lease's renewal at the
// active pace is one write, made as the pressure came.
func (r *Runner) WaitActive(ctx context.Context) bool {
	r.SetNear(true)
	for {
		r.mu.Lock()
		active := r.el.Active(r.o.Clock.Now())
		rounded := r.rounded
		r.mu.Unlock()
		if active {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-rounded:
		}
	}
}

// Acting reports whether the agent holds the lease and may act now.
func (r *Runner) Acting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.el.Acting(r.o.Clock.Now())
}

// Acquired is closed the first time the agent acts.
func (r *Runner) Acquired() <-chan struct{} { return r.acquired }

// Check is the readiness check: nil while the agent acts, else why not.
func (r *Runner) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Clock.Now()
	if r.el.Acting(now) {
		return nil
	}
	return errors.New(r.reasonLocked(now))
}

// reasonLocked says why the agent does not act.
func (r *Runner) reasonLocked(now time.Time) string {
	st := r.el.State(now)
	lease := r.o.Namespace + "/" + r.name
	switch {
	case st.Acting:
		return ""
	case r.err != nil:
		msg := fmt.Sprintf("node lease %s: %v: not acting (only the holder of the node's lease acts)", lease, r.err)
		if apierrors.IsForbidden(r.err) {
			msg += fmt.Sprintf("; evictd's Role in namespace %s must grant leases get, create, update, delete and watch (docs/install.md)", r.o.Namespace)
		}
		return msg
	case st.Foreign:
		return fmt.Sprintf("the Lease %s is held by %q, not an evictd agent (a pod's namespace/name): not evictd's, left alone; not acting "+
			"(a kubelet's heartbeat Lease? --node-lease-namespace must name a namespace of evictd's own)", lease, st.ForeignHolder)
	case st.HandedTo != "":
		return fmt.Sprintf("handed the node lease %s over to %s, a newer pod of this DaemonSet: not acting", lease, st.HandedTo)
	case st.Holder != "":
		msg := fmt.Sprintf("another evictd (%s) acts on this node; waiting for its lease %s, held until %s", st.Holder, lease, st.Until.UTC().Format(time.RFC3339))
		if st.Asked {
			msg += "; asked it to hand over (a newer pod of the same DaemonSet)"
		}
		return msg
	case r.tried:
		return fmt.Sprintf("the node lease %s was not renewed in time: not acting until it is", lease)
	}
	return fmt.Sprintf("the node lease %s is not acquired yet", lease)
}

// Run keeps the lease until ctx ends. It does not release it: the agent
// calls Release once it has stopped acting.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.watch(ctx)
	}()
	defer wg.Wait()
	for {
		wait := r.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-r.o.Clock.After(wait):
		}
	}
}

// maxRetries bounds the immediate re-reads of one round after conflicts.
const maxRetries = 4

// The back-off of failed rounds (package backoff: doubling, with jitter):
// from retryMin to retryMax (the kubelet's own lease backs off to 7 s), or
// to refusedMax when the API server refused the write itself (403, 422):
// asking again every few seconds would not change its answer. Never past
// the renewal interval of the active pace, so that a holder still renews
// in time.
const (
	retryMin   = time.Second
	retryMax   = 8 * time.Second
	refusedMax = 5 * time.Minute
)

// retryLimit is the longest wait after a round that failed with err.
func retryLimit(err error, renew time.Duration) time.Duration {
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return refusedMax
	}
	return min(retryMax, renew)
}

// round reads the lease when it must, plans, writes, and returns how long
// to wait for the next round.
func (r *Runner) round(ctx context.Context) time.Duration {
	wait := RenewInterval(r.o.Duration)
	var err error
	for range maxRetries {
		var retry bool
		wait, retry, err = r.try(ctx)
		if !retry {
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		close(r.rounded)
		r.rounded = make(chan struct{})
	}()
	r.tried = true
	r.rounds++
	r.err = err
	now := r.o.Clock.Now()
	acting := r.el.Acting(now)
	r.o.Held(acting)
	if acting {
		select {
		case <-r.acquired:
		default:
			close(r.acquired)
		}
	}
	r.sayLocked(now, acting)
	if err != nil {
		r.retry.Max = retryLimit(err, RenewInterval(r.o.Duration))
		return r.retry.Next()
	}
	r.retry.Reset()
	return wait
}

// try is one read-plan-write; retry asks for another at once (a conflict:
// another agent wrote).
func (r *Runner) try(ctx context.Context) (time.Duration, bool, error) {
	r.mu.Lock()
	cur := r.cached
	r.mu.Unlock()
	// Only a holder renews from the lease it knows (a conflict tells it of
	// any other write); a waiter reads, as its rounds are rare.
	if cur == nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != r.o.Identity {
		cur = nil
		got, err := r.o.API.GetLease(ctx, r.o.Namespace, r.name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			r.o.Failed()
			return 0, false, fmt.Errorf("get: %w", err)
		default:
			cur = got
		}
	}
	r.mu.Lock()
	p := r.el.Plan(Input{Now: r.o.Clock.Now(), Current: cur, Peer: r.peer, NodeUID: r.o.NodeUID()})
	r.mu.Unlock()
	var got *coordinationv1.Lease
	var err error
	switch p.Write {
	case None:
		r.mu.Lock()
		r.cached = cur
		r.mu.Unlock()
		return p.Wait, false, nil
	case Create:
		got, err = r.o.API.CreateLease(ctx, p.Lease)
	case Update:
		got, err = r.o.API.UpdateLease(ctx, p.Lease)
	}
	r.mu.Lock()
	r.el.Wrote(p, got, err)
	var status apierrors.APIStatus
	r.unsure = err != nil && !errors.As(err, &status)
	if err == nil {
		r.cached = got
	} else {
		r.cached = nil
	}
	r.mu.Unlock()
	if p.HandOver != "" && err == nil {
		r.o.Log.Info("handed the node lease over to a newer pod of this DaemonSet; not acting", zap.String("to", p.HandOver))
	}
	switch {
	case err == nil:
		return p.Wait, false, nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err):
		// Another agent wrote first: read again and decide again.
		return p.Wait, true, nil
	}
	r.o.Failed()
	verb := "update"
	if p.Write == Create {
		verb = "create"
	}
	return p.Wait, false, fmt.Errorf("%s: %w", verb, err)
}

// sayLocked logs the agent's lease state once per change.
func (r *Runner) sayLocked(now time.Time, acting bool) {
	st := r.el.State(now)
	var key string
	switch {
	case acting:
		key = "acting"
	case r.err != nil:
		key = "error " + r.err.Error()
	case st.Foreign:
		key = "foreign " + st.ForeignHolder
	case st.HandedTo != "":
		key = "handed " + st.HandedTo
	case st.Holder != "":
		key = fmt.Sprintf("waiting %s %t", st.Holder, st.Asked)
	default:
		key = "stale"
	}
	if key == r.said {
		return
	}
	r.said = key
	lease := zap.String("lease", r.o.Namespace+"/"+r.name)
	switch {
	case acting:
		r.o.Log.Info("acting on this node: holding its lease", lease, zap.String("identity", r.o.Identity))
	case r.err != nil:
		r.o.Log.Error("the node lease cannot be read or written: not acting", lease, logging.Err(r.err),
			zap.String("reason", r.reasonLocked(now)))
	case st.Foreign:
		r.o.Log.Error("the node lease's name is taken by a Lease no agent wrote: not acting", lease,
			zap.String("holder", st.ForeignHolder), zap.String("reason", r.reasonLocked(now)))
	case st.HandedTo != "":
		// Logged by try, where the handover is made.
	case st.Holder != "":
		r.o.Log.Warn("not acting: another evictd acts on this node", lease, zap.String("holder", st.Holder),
			zap.Time("heldUntil", st.Until), zap.String("identity", r.o.Identity), zap.String("reason", r.reasonLocked(now)))
	default:
		r.o.Log.Warn("not acting: the node lease was not renewed in time", lease, zap.String("reason", r.reasonLocked(now)))
	}
}

// peer finds an agent's pod in the informer by its identity, and whether
// the agent is gone: its pod, once the informer lists the node's pods, is
// not there or has ended; or, an agent outside a pod on this host like this
// one, its process has exited.
func (r *Runner) peer(identity string) Peer {
	p := PodPeer(r.o.Pods(), identity)
	if host, pid, ok := hostIdentity(identity); ok {
		self, _, selfOK := hostIdentity(r.o.Identity)
		p.Gone = selfOK && host == self && r.processGone(pid)
	} else if !p.Known && strings.Contains(identity, "/") {
		p.Gone = r.o.Synced()
	}
	return p
}

// hostIdentity splits an identity of an agent outside a pod ("host_pid").
func hostIdentity(identity string) (host string, pid int, ok bool) {
	i := strings.LastIndexByte(identity, '_')
	if i <= 0 || strings.Contains(identity, "/") {
		return "", 0, false
	}
	pid, err := strconv.Atoi(identity[i+1:])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	return identity[:i], pid, true
}

// processExited reports whether process pid is gone from this host's PID
// namespace: signal 0 checks it exists and sends nothing. A process that
// exists but may not be signalled (EPERM) is there.
func processExited(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// PodPeer is identity's pod ("namespace/name") among pods.
func PodPeer(pods []*v1.Pod, identity string) Peer {
	for _, p := range pods {
		if p.Namespace+"/"+p.Name != identity {
			continue
		}
		ended := p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
		peer := Peer{Known: true, Created: p.CreationTimestamp.Time, Gone: ended}
		if c := metav1.GetControllerOf(p); c != nil {
			peer.Controller = c.UID
		}
		return peer
	}
	return Peer{}
}

// watchTimeout ends each watch; the next starts at once.
const watchTimeout = 5 * time.Minute

// watch feeds the Lease's changes to the rounds, so that a waiting agent
// takes over the moment the holder releases it, and a holder sees a
// handover request at once.
func (r *Runner) watch(ctx context.Context) {
	said := ""
	for ctx.Err() == nil {
		w, err := r.o.API.WatchLeases(ctx, r.o.Namespace, metav1.ListOptions{
			FieldSelector: "metadata.name=" + r.name, TimeoutSeconds: ptr(int64(watchTimeout / time.Second)),
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.o.Failed()
			if err.Error() != said {
				said = err.Error()
				// The rounds still poll: slower, not wrong.
				r.o.Log.Warn("the node lease cannot be watched; a release is seen at the next poll", logging.Err(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-r.o.Clock.After(RenewInterval(r.o.Duration)):
			}
			continue
		}
		said = ""
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue // a watch error (410 Gone): start again
			}
			r.mu.Lock()
			if ev.Type == watch.Deleted {
				r.cached = nil
			} else if ev.Type == watch.Added || ev.Type == watch.Modified {
				r.cached = l
			}
			r.mu.Unlock()
			r.Kick()
		}
		w.Stop()
	}
}

// Release deletes the lease if the agent holds it, so that the next agent
// takes over at once (a rollout, an uninstall). Call it once the agent has
// stopped acting. The deletion is conditional on the version the agent
// wrote: a lease another agent has taken meanwhile is left alone.
func (r *Runner) Release() {
	r.mu.Lock()
	held, unsure := r.el.held, r.unsure
	cur := r.cached
	r.unsure = false
	r.el.Released()
	r.o.Held(false)
	r.mu.Unlock()
	if !held && !unsure {
		return
	}
	if !held {
		// A write cut short, as a SIGTERM's cancel does to an acquisition
		// in flight, may have taken the lease: read who holds it, or the
		// next agent would wait the lease out.
		cur = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), exitgrace.LeaseRelease)
	defer cancel()
	for range 2 {
		if cur == nil {
			got, err := r.o.API.GetLease(ctx, r.o.Namespace, r.name)
			if err != nil {
				if !apierrors.IsNotFound(err) {
					r.releaseFailed(err)
				}
				return
			}
			cur = got
		}
		if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != r.o.Identity {
			return
		}
		// Logged before the delete: from here on another agent may act, and
		// its "acting" line may come before this one's "released" line.
		r.o.Log.Info("releasing the node lease", zap.String("lease", r.o.Namespace+"/"+r.name))
		uid, rv := cur.UID, cur.ResourceVersion
		err := r.o.API.DeleteLease(ctx, r.o.Namespace, r.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			r.o.Log.Info("released the node lease", zap.String("lease", r.o.Namespace+"/"+r.name))
			return
		case apierrors.IsConflict(err):
			// Written since (a handover request): read it and try again.
			cur = nil
			continue
		}
		r.releaseFailed(err)
		return
	}
}

// LeaseGetter reads a Lease (*kube.Client).
type LeaseGetter interface {
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
}

func (r *Runner) releaseFailed(err error) {
	r.o.Failed()
	r.o.Log.Warn("the node lease was not released; another agent takes over when it expires", logging.Err(err),
		zap.Duration("leaseDuration", r.o.Duration))
}
