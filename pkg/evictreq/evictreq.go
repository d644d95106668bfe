// SPDX-License-Identifier: Apache-2.0

// Package evictreq is --eviction-request: soft evictions asked for through
// a lifecycle.k8s.io/v1alpha1 EvictionRequest (alpha in Kubernetes 1.37,
// feature gate EvictionRequestAPI), so that the responders a workload
// declares can move it gracefully, while hard evictions and pods already
// terminating stay on the imperative Eviction API (pkg/evict). See
// docs/evictionrequest.md.
//
// Evictor wraps *evict.Evictor and has its methods, so the agent loop calls
// it as it calls the plain one and does not know which path a request took.
package evictreq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/thresholds"
)

// DefaultRequester is the spec.requester evictd writes.
const DefaultRequester = "evictd.io/node-agent"

// DefaultReprobe is how long the request path stays off after the API
// server answered that it does not serve EvictionRequests, before evictd
// asks again (a feature gate turned on, an API server upgraded).
const DefaultReprobe = 5 * time.Minute

// DefaultStatusReadMax caps the back-off between two reads of an open
// request's status (Config.StatusReadMax).
const DefaultStatusReadMax = 30 * time.Second

// Condition types of an EvictionRequest's status (types.go of
// k8s.io/api/lifecycle/v1alpha1 names them; no constant is exported for the
// EvictionRequest itself).
const (
	conditionFailed        = "Failed"
	conditionTargetEvicted = "TargetEvicted"
)

// ErrWithdrawn ends a request whose pressure episode ended first. It wraps
// context.Canceled: the agent takes it as "no longer wanted", not as an API
// failure to back off from.
var ErrWithdrawn = fmt.Errorf("eviction request withdrawn: pressure ended (%w)", context.Canceled)

// API is the part of the API server the request path calls; *kube.Client
// has it, tests use a clientset fake through fromclientset.
type API interface {
	GetPod(ctx context.Context, namespace, name string) (*v1.Pod, error)
	CreateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error)
	GetEvictionRequest(ctx context.Context, namespace, name string) (*lifecyclev1alpha1.EvictionRequest, error)
	UpdateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error)
	ListEvictionRequests(ctx context.Context, namespace string, opts metav1.ListOptions) (*lifecyclev1alpha1.EvictionRequestList, error)
	DeleteEvictionRequest(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// Config is what New needs.
type Config struct {
	// Imperative is the Eviction API client: hard evictions, the
	// fall-back, ForceDelete, the Events and the budgets. Required.
	Imperative *evict.Evictor
	// API is required.
	API API
	// Requester is spec.requester; empty means DefaultRequester.
	Requester string
	// Install is the agent's install (its ID, package install): each
	// request carries its mark (install.Label), so that the uninstall of
	// another install leaves it alone, and the start-up sweep ends only
	// this install's leftovers (and unmarked ones, an older evictd's).
	Install string
	// ResponderWait is how long a request may go without the pod
	// terminating before evictd falls back to the Eviction API. Required.
	ResponderWait time.Duration
	// Pods is the agent's pod informer: the pod of that namespace and name
	// as its cache holds it, nil when it holds none (deleted). While a
	// request is open the pod's state is read from it, at no cost to the
	// API server. Required.
	Pods func(namespace, name string) *v1.Pod
	// Poll is how often the pod is looked up in Pods while waiting, and
	// the first wait before the request's status is read; zero means one
	// second.
	Poll time.Duration
	// StatusReadMax caps the wait between two reads of the request's
	// status, which doubles from Poll (spread by up to 20 %); zero means
	// DefaultStatusReadMax.
	StatusReadMax time.Duration
	// CallTimeout bounds each API call of the request path; zero means the
	// imperative evictor's (--eviction-api-timeout).
	CallTimeout time.Duration
	// Reprobe is how long the path stays off after a 404 before a request
	// is tried again; zero means DefaultReprobe.
	Reprobe time.Duration
	// Served, when set, is told whether the API server serves
	// EvictionRequests: false when it answered 404, true when a later
	// request succeeded again (a metric, in evictd).
	Served func(bool)
	Logger *zap.Logger
	Clock  clock.Clock
}

// Evictor asks for soft evictions with an EvictionRequest and hands
// everything else to the imperative Evictor it embeds.
type Evictor struct {
	*evict.Evictor
	api         API
	pods        func(namespace, name string) *v1.Pod
	requester   string
	mark        string
	wait        time.Duration
	poll        time.Duration
	statusMax   time.Duration
	callTimeout time.Duration
	reprobe     time.Duration
	served      func(bool)
	log         *zap.Logger
	clock       clock.Clock

	mu sync.Mutex
	// off: the API server answered 404 for the resource; every request
	// takes the Eviction API until probeAt, when one request tries again.
	off     bool
	probeAt time.Time
	// open are the requests with intent Eviction a call is waiting on, by
	// pod UID.
	open map[types.UID]*open
	// waitedOut are the pods whose responder wait ran out (or whose request
	// failed) in the episode of their signal: asked again in it (a retry of
	// a failed fall-back), they go to the Eviction API at once.
	waitedOut map[types.UID]thresholds.Signal
	// Until the start-up sweep (WithdrawLeftovers) is done: touched are the
	// pods asked for since start, which it leaves alone, and claims the
	// pods whose leftover it is withdrawing, which a new request waits for.
	swept   bool
	touched map[types.UID]bool
	claims  map[types.UID]chan struct{}
}

// open is one EvictionRequest evictd holds with intent Eviction.
type open struct {
	namespace, name string
	signal          thresholds.Signal
	withdrawn       chan struct{}
	// made: its create (or its asking again) returned; endRemoves: the
	// episode's end found it made and removes it. A request still being
	// made when its episode ends is Evict's to remove once it is made, and
	// only then: removed by both, it was withdrawn and deleted twice.
	// Guarded by the Evictor's mu.
	made, endRemoves bool
}

func (o *open) key() string { return o.namespace + "/" + o.name }

// New checks cfg and returns an Evictor.
func New(cfg Config) (*Evictor, error) {
	switch {
	case cfg.Imperative == nil:
		return nil, errors.New("evictreq: no imperative evictor")
	case cfg.API == nil:
		return nil, errors.New("evictreq: no API client")
	case cfg.Pods == nil:
		return nil, errors.New("evictreq: no pod informer")
	case cfg.ResponderWait <= 0:
		return nil, fmt.Errorf("evictreq: responder wait must be positive, got %s", cfg.ResponderWait)
	}
	e := &Evictor{Evictor: cfg.Imperative, api: cfg.API, pods: cfg.Pods, requester: cfg.Requester, mark: install.Mark(cfg.Install), wait: cfg.ResponderWait, poll: cfg.Poll,
		statusMax:   cfg.StatusReadMax,
		callTimeout: cfg.CallTimeout, reprobe: cfg.Reprobe, served: cfg.Served, log: cfg.Logger, clock: cfg.Clock,
		open: map[types.UID]*open{}, waitedOut: map[types.UID]thresholds.Signal{},
		touched: map[types.UID]bool{}, claims: map[types.UID]chan struct{}{}}
	if e.requester == "" {
		e.requester = DefaultRequester
	}
	if e.poll <= 0 {
		e.poll = time.Second
	}
	if e.statusMax <= 0 {
		e.statusMax = DefaultStatusReadMax
	}
	e.statusMax = max(e.statusMax, e.poll)
	if e.callTimeout <= 0 {
		e.callTimeout = cfg.Imperative.Options().CallTimeout
	}
	if e.callTimeout <= 0 {
		e.callTimeout = 10 * time.Second
	}
	if e.reprobe <= 0 {
		e.reprobe = DefaultReprobe
	}
	if e.log == nil {
		e.log = zap.NewNop()
	}
	if e.clock == nil {
		e.clock = clock.RealClock{}
	}
	return e, nil
}

// Name is the EvictionRequest's name for a pod: derived from its UID only,
// so that a retry, or evictd after a restart, finds the one it made.
func Name(uid types.UID) string { return "evictd-" + string(uid) }

// Routed reports whether a request takes the EvictionRequest path: a soft
// eviction of a pod not yet terminating. A hard threshold (memory, disk or
// PIDs) leaves no time for a responder; a pod already terminating is being
// evicted already, and the Eviction API only shortens its grace period.
func Routed(req evict.Request) bool {
	return !req.Hard && req.Pod != nil && req.Pod.DeletionTimestamp == nil
}

// NodeLabel on each EvictionRequest evictd makes names the node of the
// agent that made it (its pod's node): the admission policy
// evictd-eviction-requests lets an agent's token write only requests
// labelled with its own node, and update or delete only those stored so.
const NodeLabel = "evictd.io/node"

// Build is the EvictionRequest evictd creates for pod: owned by the pod,
// so that the garbage collector removes it with the pod if evictd does not,
// and labelled with the pod's node (NodeLabel), the agent's own. The
// Evictor adds its install's mark (install.Label).
func Build(pod *v1.Pod, requester string) *lifecyclev1alpha1.EvictionRequest {
	return &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: Name(pod.UID), OwnerReferences: []metav1.OwnerReference{ownerRef(pod)},
			Labels: map[string]string{NodeLabel: pod.Spec.NodeName}},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: requester,
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
}

func ownerRef(pod *v1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
}

// Owned reports whether er is a request of requester that the install of
// mark made (install.Label), or that an evictd older than the install
// marks made (no install label): the install's to take back. Another
// install's is left alone.
func Owned(er *lifecyclev1alpha1.EvictionRequest, requester, mark string) bool {
	if er.Spec.Requester != requester {
		return false
	}
	of, marked := er.Labels[install.Label]
	return !marked || of == mark
}

// Progress is what a request's status and its pod say.
type Progress int

const (
	// Waiting: nothing has happened yet, or a responder is still at work.
	Waiting Progress = iota
	// Gone: the pod is terminating or gone, or the request says
	// TargetEvicted.
	Gone
	// GaveUp: the request says Failed (no further responder, invalid):
	// nobody will evict the pod through it.
	GaveUp
)

// Assess reads a request's status and its pod (nil when not found). A pod
// with another UID under the same name is the old one gone. The request's
// conditions count only when they speak for its present spec
// (Current): a request asked again still carries what its last withdrawal
// led to.
func Assess(er *lifecyclev1alpha1.EvictionRequest, pod *v1.Pod, uid types.UID) Progress {
	if pod == nil || pod.UID != uid || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return Gone
	}
	if er == nil {
		return Waiting
	}
	if c := Condition(er, conditionTargetEvicted); c != nil && c.Status == metav1.ConditionTrue {
		return Gone
	}
	// Failed with reason AwaitingEviction is the controller's "not yet".
	if c := Condition(er, conditionFailed); c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason != string(lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction) {
		return GaveUp
	}
	return Waiting
}

// Current reports whether er's status was written for its present spec:
// status.observedGeneration (the generation the evictionrequest-controller
// last acted on; the API server bumps metadata.generation on every change
// of the spec, such as the intent) equals metadata.generation. A status
// with no observedGeneration has been written for no generation in
// particular and is not trusted either.
func Current(er *lifecyclev1alpha1.EvictionRequest) bool {
	g := er.Status.ObservedGeneration
	return g != nil && *g == er.Generation
}

// Condition is er's condition of type t if its status is Current and the
// condition does not say, with an observedGeneration of its own, that it
// was set for another generation; else nil.
func Condition(er *lifecyclev1alpha1.EvictionRequest, t string) *metav1.Condition {
	if !Current(er) {
		return nil
	}
	c := meta.FindStatusCondition(er.Status.Conditions, t)
	if c == nil || (c.ObservedGeneration != 0 && c.ObservedGeneration != er.Generation) {
		return nil
	}
	return c
}

// Evict asks for req's eviction: through an EvictionRequest when Routed
// (and the API is served, and not in dry run), else through the Eviction
// API. The request is charged to req's budget (episode cap and rate
// limit) before it is made, as an eviction is. It returns
// ResponderEvicted once the pod terminates or is gone; when no responder
// got it there within the responder wait, or the request reports Failed,
// the Eviction API evicts the pod. Every way out ends the request: deleted
// once the pod is on its way out; withdrawn (intent Withdrawn), then
// deleted, otherwise, so that no responder evicts a pod evictd gave up on.
// A request whose episode ends first returns ErrWithdrawn (EpisodeEnded
// withdraws and deletes that one).
//
// Every API call is bounded by the call timeout: with a hung API server a
// call returns within the responder wait plus seven call timeouts, plus
// the Eviction API's own retries.
func (e *Evictor) Evict(ctx context.Context, req evict.Request) (evict.Outcome, error) {
	if !Routed(req) || e.Options().DryRun || req.Pod.UID == "" || e.hasWaitedOut(req.Pod.UID) || e.offNow() {
		return e.Evictor.Evict(ctx, req)
	}
	pod := req.Pod
	key := pod.Namespace + "/" + pod.Name
	log := e.log.With(zap.String("pod", key), zap.String("signal", string(req.Signal)), zap.Bool("hard", req.Hard))
	e.touch(ctx, pod.UID)

	// The pod as it is now: one already terminating or gone (the informer
	// had not seen it yet) is the Eviction API's, as a terminating pod is,
	// and its end is never reported as a responder's.
	live, gerr := e.getPod(ctx, pod)
	if apierrors.IsNotFound(gerr) || (gerr == nil && Assess(nil, live, pod.UID) == Gone) {
		log.Debug("pod already terminating or gone; using the Eviction API")
		return e.Evictor.Evict(ctx, req)
	}

	res, out, err := e.Reserve(req)
	if res == nil {
		return out, err
	}
	probe, ask := e.takeProbe()
	if !ask {
		res.Settle(false)
		return e.Evictor.Evict(ctx, req)
	}
	if probe {
		log.Info("asking the API server again whether it serves lifecycle.k8s.io/v1alpha1 evictionrequests")
	}
	o, err := e.ensure(ctx, req)
	if err != nil {
		res.Settle(false)
		if apierrors.IsNotFound(err) {
			e.switchOff(err)
		} else {
			log.Warn("cannot create the EvictionRequest; using the Eviction API for this pod", logging.Err(err))
		}
		return e.Evictor.Evict(ctx, req)
	}
	e.switchOn()
	log.Info("eviction requested", zap.String("evictionRequest", o.key()), zap.String("requester", e.requester), zap.Duration("responderWait", e.wait))
	start := e.clock.Now()
	grace := e.Options().GracePeriod(pod, req.Hard, req.GraceOverride)
	select {
	case <-o.withdrawn:
		// The episode ended while the request was being made, or at once
		// after: what it found made, it removes itself.
		res.Settle(false)
		e.mu.Lock()
		mine := !o.endRemoves
		e.mu.Unlock()
		if mine {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*e.callTimeout)
			e.remove(rctx, o, true, "pressure ended while it was made")
			cancel()
		}
		return evict.Outcome{Result: evict.Failed, GracePeriodSeconds: grace}, &evict.PodError{Pod: key, Result: evict.Failed, Err: ErrWithdrawn}
	default:
	}
	// The pod's end, the way a wait usually ends, is in the informer's
	// cache: looked up every poll, it costs the API server nothing. The
	// request's status is the API server's, and tells only what the pod
	// does not: Failed (no responder left; in Kubernetes 1.37 no
	// controller writes it at all) or TargetEvicted. It is read on a
	// back-off from the poll to StatusReadMax (30 s), spread so that the
	// requests of a zone's nodes do not come in step: about a dozen GETs
	// in a five-minute wait, and a Failed noticed within 36 s. A watch
	// field-selected to the one request would notice it at once, but
	// holds a connection (an etcd watch where the alpha type has no watch
	// cache) per open request, to be opened again at each timeout, for a
	// condition that may never come: the reads are simpler and cheaper.
	status := wait.Backoff{Duration: e.poll, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: e.statusMax}
	statusAt := start.Add(status.Step())
	for {
		var er *lifecyclev1alpha1.EvictionRequest
		if !e.clock.Now().Before(statusAt) {
			er = e.readRequest(ctx, o)
			statusAt = e.clock.Now().Add(status.Step())
		}
		p := Assess(er, e.pods(pod.Namespace, pod.Name), pod.UID)
		if p == Gone {
			res.Settle(true)
			log.Info("evicted pod through its EvictionRequest", zap.String("evictionRequest", o.key()), zap.Duration("took", e.clock.Since(start)))
			out := e.RecordResponderEviction(req, o.key(), evict.Outcome{GracePeriodSeconds: grace, Accepted: e.clock.Now(), Attempts: 1})
			e.close(ctx, pod.UID, o, false)
			return out, nil
		}
		if p == GaveUp {
			c := Condition(er, conditionFailed)
			log.Warn("EvictionRequest failed; using the Eviction API", zap.String("evictionRequest", o.key()), zap.String("reason", c.Reason))
			return e.fallBack(ctx, req, res, o)
		}
		left := e.wait - e.clock.Since(start)
		if left <= 0 {
			log.Warn("no responder evicted the pod within the responder wait; using the Eviction API",
				zap.String("evictionRequest", o.key()), zap.Duration("responderWait", e.wait))
			return e.fallBack(ctx, req, res, o)
		}
		t := e.clock.NewTimer(max(min(e.poll, left, statusAt.Sub(e.clock.Now())), time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			res.Settle(false)
			// Shutting down: the next evictd would withdraw it at start
			// (WithdrawLeftovers); withdrawn now, no responder acts on it
			// meanwhile, nor after evictd is gone for good.
			e.close(ctx, pod.UID, o, true)
			return evict.Outcome{Result: evict.Failed, GracePeriodSeconds: grace}, &evict.PodError{Pod: key, Result: evict.Failed, Err: ctx.Err()}
		case <-o.withdrawn:
			t.Stop()
			res.Settle(false)
			return evict.Outcome{Result: evict.Failed, GracePeriodSeconds: grace}, &evict.PodError{Pod: key, Result: evict.Failed, Err: ErrWithdrawn}
		case <-t.C():
		}
	}
}

// fallBack evicts req's pod through the Eviction API once its request has
// had its chance, and ends the request: deleted once the pod is on its
// way out, withdrawn first when the eviction was not accepted (PDB,
// refusal, cap, error), so that no responder evicts later a pod evictd
// gave up on, on top of the next victim. A retry of the pod in the same
// episode goes to the Eviction API at once.
func (e *Evictor) fallBack(ctx context.Context, req evict.Request, res *evict.Reservation, o *open) (evict.Outcome, error) {
	res.Settle(false) // the Eviction API charges its own call
	e.mu.Lock()
	e.waitedOut[req.Pod.UID] = req.Signal
	e.mu.Unlock()
	out, err := e.Evictor.Evict(ctx, req)
	e.close(ctx, req.Pod.UID, o, !out.Result.Accepted() && out.Result != evict.NotFound)
	return out, err
}

// readRequest is o's request as the API server has it, nil when it
// cannot be read; the call bounded.
func (e *Evictor) readRequest(ctx context.Context, o *open) *lifecyclev1alpha1.EvictionRequest {
	cctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	er, err := e.api.GetEvictionRequest(cctx, o.namespace, o.name)
	if err != nil {
		return nil
	}
	return er
}

func (e *Evictor) getPod(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	cctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	return e.api.GetPod(cctx, pod.Namespace, pod.Name)
}

// ensure creates the pod's EvictionRequest, or finds it and asks again
// (intent Eviction, owned by the pod), and records it as open. It takes
// at most two call timeouts.
func (e *Evictor) ensure(ctx context.Context, req evict.Request) (*open, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*e.callTimeout)
	defer cancel()
	want := Build(req.Pod, e.requester)
	if e.mark != "" {
		want.Labels[install.Label] = e.mark
	}
	// Open before it is made: an episode that ends while the create is
	// under way finds it and closes withdrawn, and Evict withdraws what
	// was made (EpisodeEnded, run first, found nothing to withdraw and left
	// the request live for a responder to act on after the pressure).
	e.mu.Lock()
	o, had := e.open[req.Pod.UID], true
	if o == nil {
		o, had = &open{namespace: want.Namespace, name: want.Name, withdrawn: make(chan struct{})}, false
		e.open[req.Pod.UID] = o
	}
	o.signal, o.made = req.Signal, false
	e.mu.Unlock()
	var err error
	for range 2 {
		cctx, ccancel := context.WithTimeout(ctx, e.callTimeout)
		_, err = e.api.CreateEvictionRequest(cctx, want)
		ccancel()
		if !apierrors.IsAlreadyExists(err) {
			break
		}
		_, err = e.update(ctx, want.Namespace, want.Name, func(er *lifecyclev1alpha1.EvictionRequest) bool {
			changed := er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction
			er.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentEviction
			if !hasOwner(er, req.Pod.UID) {
				er.OwnerReferences = append(er.OwnerReferences, ownerRef(req.Pod))
				changed = true
			}
			if e.mark != "" && er.Labels[install.Label] != e.mark {
				// This install asks now: its uninstall withdraws it.
				if er.Labels == nil {
					er.Labels = map[string]string{}
				}
				er.Labels[install.Label] = e.mark
				changed = true
			}
			return changed
		})
		if !apierrors.IsNotFound(err) {
			break // found and asked again, or failed; not found: deleted meanwhile, create it afresh
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		if !had && e.open[req.Pod.UID] == o {
			delete(e.open, req.Pod.UID)
		}
		return nil, err
	}
	o.made = true
	return o, nil
}

func hasOwner(er *lifecyclev1alpha1.EvictionRequest, uid types.UID) bool {
	for _, r := range er.OwnerReferences {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// update reads a request and writes it back if change changed it, reading
// it afresh on a conflict; each call bounded.
func (e *Evictor) update(ctx context.Context, namespace, name string, change func(*lifecyclev1alpha1.EvictionRequest) bool) (*lifecyclev1alpha1.EvictionRequest, error) {
	var err error
	for range 3 {
		var er *lifecyclev1alpha1.EvictionRequest
		cctx, cancel := context.WithTimeout(ctx, e.callTimeout)
		er, err = e.api.GetEvictionRequest(cctx, namespace, name)
		cancel()
		if err != nil {
			return nil, err
		}
		if !change(er) {
			return er, nil
		}
		cctx, cancel = context.WithTimeout(ctx, e.callTimeout)
		er, err = e.api.UpdateEvictionRequest(cctx, er)
		cancel()
		if !apierrors.IsConflict(err) {
			return er, err
		}
	}
	return nil, err
}

// close ends the request o of pod uid, unless EpisodeEnded took it first:
// withdrawn first (intent Withdrawn) when asked, then deleted. It goes on
// after ctx ends (shutdown), for at most two call timeouts.
func (e *Evictor) close(ctx context.Context, uid types.UID, o *open, withdraw bool) {
	e.mu.Lock()
	mine := e.open[uid] == o
	if mine {
		delete(e.open, uid)
	}
	e.mu.Unlock()
	if !mine {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*e.callTimeout)
	defer cancel()
	e.remove(ctx, o, withdraw, "given up")
}

// remove withdraws (when asked) and deletes a request. A request already
// gone counts as removed; an error is logged: the pod's garbage collection
// removes the request with the pod.
func (e *Evictor) remove(ctx context.Context, o *open, withdraw bool, why string) {
	field := zap.String("evictionRequest", o.key())
	if withdraw {
		_, err := e.update(ctx, o.namespace, o.name, func(er *lifecyclev1alpha1.EvictionRequest) bool {
			if er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
				return false
			}
			er.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
			return true
		})
		switch {
		case err == nil:
			e.log.Info("eviction request withdrawn: "+why, field)
		case apierrors.IsNotFound(err):
			return // deleted by someone else: a deletion counts as a withdrawal
		default:
			e.log.Warn("cannot withdraw the EvictionRequest", field, logging.Err(err))
		}
	}
	cctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	if err := e.api.DeleteEvictionRequest(cctx, o.namespace, o.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		e.log.Warn("cannot delete the EvictionRequest; the garbage collector removes it with its pod", field, logging.Err(err))
	}
}

// EpisodeEnded withdraws and deletes the open requests for the signals
// ended matches (the resource whose pressure episode ended), and a wait
// under way returns ErrWithdrawn. The pods whose wait ran out in the
// episode may be asked for again in the next one.
func (e *Evictor) EpisodeEnded(ctx context.Context, ended func(thresholds.Signal) bool) {
	e.mu.Lock()
	var todo []*open
	for uid, o := range e.open {
		if ended(o.signal) {
			// One still being made is left to Evict (open.made).
			if o.made {
				o.endRemoves = true
				todo = append(todo, o)
			}
			close(o.withdrawn)
			delete(e.open, uid)
		}
	}
	for uid, s := range e.waitedOut {
		if ended(s) {
			delete(e.waitedOut, uid)
		}
	}
	e.mu.Unlock()
	for _, o := range todo {
		e.remove(ctx, o, true, "pressure ended")
	}
}

func (e *Evictor) hasWaitedOut(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.waitedOut[uid]
	return ok
}

// RetainPods forgets the responder waits of pods no longer listed, which an
// episode that never ends would otherwise keep for ever.
func (e *Evictor) RetainPods(listed func(types.UID) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for uid := range e.waitedOut {
		if !listed(uid) {
			delete(e.waitedOut, uid)
		}
	}
}

// offNow reports whether the path is off and no probe is due.
func (e *Evictor) offNow() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.off && e.clock.Now().Before(e.probeAt)
}

// takeProbe says whether a request may be made: always while the path is
// on (probe false); while it is off, by one caller (probe true) once the
// probe is due, the next probe then due a reprobe later.
func (e *Evictor) takeProbe() (probe, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.off {
		return false, true
	}
	now := e.clock.Now()
	if now.Before(e.probeAt) {
		return false, false
	}
	e.probeAt = now.Add(e.reprobe)
	return true, true
}

// switchOff takes the Eviction API for every request until the next probe,
// once the API server has said it does not serve EvictionRequests; said at
// Error the first time, since the operator asked for a mode the cluster
// cannot give, and at Warn at each probe answered alike.
func (e *Evictor) switchOff(err error) {
	e.mu.Lock()
	first := !e.off
	e.off = true
	e.probeAt = e.clock.Now().Add(e.reprobe)
	e.mu.Unlock()
	if !first {
		e.log.Warn("the API server still does not serve lifecycle.k8s.io/v1alpha1 evictionrequests; every eviction keeps using the Eviction API",
			zap.Duration("askingAgainIn", e.reprobe), logging.Err(err))
		return
	}
	e.log.Error("the API server does not serve lifecycle.k8s.io/v1alpha1 evictionrequests (is the EvictionRequestAPI feature gate on, and --runtime-config=lifecycle.k8s.io/v1alpha1=true?); "+
		"--eviction-request is off: every eviction uses the Eviction API until a request, tried again after askingAgainIn, succeeds",
		zap.Duration("askingAgainIn", e.reprobe), logging.Err(err))
	if e.served != nil {
		e.served(false)
	}
}

// switchOn puts the path back on after a probe succeeded.
func (e *Evictor) switchOn() {
	e.mu.Lock()
	was := e.off
	e.off = false
	e.mu.Unlock()
	if !was {
		return
	}
	e.log.Info("the API server serves lifecycle.k8s.io/v1alpha1 evictionrequests again: --eviction-request is back on")
	if e.served != nil {
		e.served(true)
	}
}

// touch records, until the start-up sweep is done, that uid is asked for
// (the sweep leaves its request alone), and waits for the sweep's writes
// on uid under way.
func (e *Evictor) touch(ctx context.Context, uid types.UID) {
	e.mu.Lock()
	if e.swept {
		e.mu.Unlock()
		return
	}
	e.touched[uid] = true
	ch := e.claims[uid]
	e.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}
