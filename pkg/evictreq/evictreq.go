// SPDX-License-Identifier: Apache-2.0

// Package evictreq is --eviction-request: soft and disk evictions asked for
// through a lifecycle.k8s.io/v1alpha1 EvictionRequest (alpha in Kubernetes
// 1.37, feature gate EvictionRequestAPI), so that the responders a workload
// declares can move it gracefully, while hard memory evictions stay on the
// imperative Eviction API (pkg/evict). See docs/evictionrequest.md.
//
// Evictor wraps *evict.Evictor and has its methods, so the agent loop calls
// it as it calls the plain one and does not know which path a request took.
package evictreq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/thresholds"
)

// DefaultRequester is the spec.requester evictd writes.
const DefaultRequester = "evictd.io/node-agent"

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
}

// Config is what New needs.
type Config struct {
	// Imperative is the Eviction API client: hard memory evictions, the
	// fall-back, ForceDelete and the Events. Required.
	Imperative *evict.Evictor
	// API is required.
	API API
	// Requester is spec.requester; empty means DefaultRequester.
	Requester string
	// ResponderWait is how long a request may go without the pod
	// terminating before evictd falls back to the Eviction API. Required.
	ResponderWait time.Duration
	// Poll is how often the request and its pod are read while waiting;
	// zero means one second.
	Poll time.Duration
	// NotServed, when set, is told once that the API server does not serve
	// EvictionRequests (a metric and readiness, in evictd).
	NotServed func()
	Logger    *zap.Logger
	Clock     clock.Clock
}

// Evictor asks for soft and disk evictions with an EvictionRequest and
// hands everything else to the imperative Evictor it embeds.
type Evictor struct {
	*evict.Evictor
	api       API
	requester string
	wait      time.Duration
	poll      time.Duration
	notServed func()
	log       *zap.Logger
	clock     clock.Clock

	mu sync.Mutex
	// off: the API server answered 404 for the resource; every request
	// takes the Eviction API from then on.
	off bool
	// open are the requests with intent Eviction, by pod UID.
	open map[types.UID]*open
}

// open is one EvictionRequest evictd holds with intent Eviction.
type open struct {
	namespace, name string
	signal          thresholds.Signal
	withdrawn       chan struct{}
}

// New checks cfg and returns an Evictor.
func New(cfg Config) (*Evictor, error) {
	switch {
	case cfg.Imperative == nil:
		return nil, errors.New("evictreq: no imperative evictor")
	case cfg.API == nil:
		return nil, errors.New("evictreq: no API client")
	case cfg.ResponderWait <= 0:
		return nil, fmt.Errorf("evictreq: responder wait must be positive, got %s", cfg.ResponderWait)
	}
	e := &Evictor{Evictor: cfg.Imperative, api: cfg.API, requester: cfg.Requester, wait: cfg.ResponderWait, poll: cfg.Poll,
		notServed: cfg.NotServed, log: cfg.Logger, clock: cfg.Clock, open: map[types.UID]*open{}}
	if e.requester == "" {
		e.requester = DefaultRequester
	}
	if e.poll <= 0 {
		e.poll = time.Second
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

// Routed reports whether a request takes the EvictionRequest path: every
// soft eviction and every disk eviction. A hard memory (or PID) threshold
// leaves no time for a responder: the node is about to OOM-kill or fork-fail.
func Routed(req evict.Request) bool {
	return !req.Hard || req.Signal.Condition() == v1.NodeDiskPressure
}

// Build is the EvictionRequest evictd creates for pod.
func Build(pod *v1.Pod, requester string) *lifecyclev1alpha1.EvictionRequest {
	return &lifecyclev1alpha1.EvictionRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: Name(pod.UID)},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{
			Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: pod.Name, UID: pod.UID}},
			Requester: requester,
			Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
		},
	}
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
// with another UID under the same name is the old one gone.
func Assess(er *lifecyclev1alpha1.EvictionRequest, pod *v1.Pod, uid types.UID) Progress {
	if pod == nil || pod.UID != uid || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return Gone
	}
	if er == nil {
		return Waiting
	}
	if meta.IsStatusConditionTrue(er.Status.Conditions, conditionTargetEvicted) {
		return Gone
	}
	// Failed with reason AwaitingEviction is the controller's "not yet".
	if c := meta.FindStatusCondition(er.Status.Conditions, conditionFailed); c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason != string(lifecyclev1alpha1.EvictionConditionReasonAwaitingEviction) {
		return GaveUp
	}
	return Waiting
}

// Evict asks for req's eviction: through an EvictionRequest when Routed
// (and the API is served, and not in dry run), else through the Eviction
// API. A request returns Evicted once the pod terminates or is gone; when
// no responder got it there within the responder wait, or the request
// reports Failed, the Eviction API evicts the pod (the request stays, with
// intent Eviction, until the episode ends). A request whose episode ends
// first returns ErrWithdrawn.
func (e *Evictor) Evict(ctx context.Context, req evict.Request) (evict.Outcome, error) {
	if !Routed(req) || e.Options().DryRun || e.isOff() || req.Pod == nil || req.Pod.UID == "" {
		return e.Evictor.Evict(ctx, req)
	}
	pod := req.Pod
	key := pod.Namespace + "/" + pod.Name
	log := e.log.With(zap.String("pod", key), zap.String("signal", string(req.Signal)), zap.Bool("hard", req.Hard))
	o, err := e.ensure(ctx, req)
	if err != nil {
		if apierrors.IsNotFound(err) {
			e.switchOff(err)
		} else {
			log.Warn("cannot create the EvictionRequest; using the Eviction API for this pod", logging.Err(err))
		}
		return e.Evictor.Evict(ctx, req)
	}
	log.Info("eviction requested", zap.String("evictionRequest", o.name), zap.String("requester", e.requester), zap.Duration("responderWait", e.wait))
	start := e.clock.Now()
	grace := e.Options().GracePeriod(pod, req.Hard, req.GraceOverride)
	for {
		var er *lifecyclev1alpha1.EvictionRequest
		var live *v1.Pod
		got, gerr := e.api.GetPod(ctx, pod.Namespace, pod.Name)
		switch {
		case gerr == nil:
			live = got
		case apierrors.IsNotFound(gerr):
		default:
			live = pod // unknown: assume still there
		}
		if r, rerr := e.api.GetEvictionRequest(ctx, o.namespace, o.name); rerr == nil {
			er = r
		}
		switch Assess(er, live, pod.UID) {
		case Gone:
			log.Info("evicted pod through its EvictionRequest", zap.String("evictionRequest", o.name), zap.Duration("took", e.clock.Since(start)))
			return e.Evictor.RecordResponderEviction(req, o.namespace+"/"+o.name,
				evict.Outcome{GracePeriodSeconds: grace, Accepted: e.clock.Now(), Attempts: 1}), nil
		case GaveUp:
			log.Warn("EvictionRequest failed; using the Eviction API", zap.String("evictionRequest", o.name))
			return e.Evictor.Evict(ctx, req)
		}
		if e.clock.Since(start) >= e.wait {
			log.Warn("no responder evicted the pod within the responder wait; using the Eviction API",
				zap.String("evictionRequest", o.name), zap.Duration("responderWait", e.wait))
			return e.Evictor.Evict(ctx, req)
		}
		t := e.clock.NewTimer(e.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return evict.Outcome{Result: evict.Failed, GracePeriodSeconds: grace}, &evict.PodError{Pod: key, Result: evict.Failed, Err: ctx.Err()}
		case <-o.withdrawn:
			t.Stop()
			return evict.Outcome{Result: evict.Failed, GracePeriodSeconds: grace}, &evict.PodError{Pod: key, Result: evict.Failed, Err: ErrWithdrawn}
		case <-t.C():
		}
	}
}

// ensure creates the pod's EvictionRequest, or finds it and sets its intent
// back to Eviction, and records it as open.
func (e *Evictor) ensure(ctx context.Context, req evict.Request) (*open, error) {
	want := Build(req.Pod, e.requester)
	_, err := e.api.CreateEvictionRequest(ctx, want)
	if apierrors.IsAlreadyExists(err) {
		err = e.setIntent(ctx, want.Namespace, want.Name, lifecyclev1alpha1.EvictionRequestIntentEviction)
	}
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.open[req.Pod.UID]
	if o == nil {
		o = &open{namespace: want.Namespace, name: want.Name, withdrawn: make(chan struct{})}
		e.open[req.Pod.UID] = o
	}
	o.signal = req.Signal
	return o, nil
}

// setIntent sets an existing request's intent, reading it afresh on a
// conflict.
func (e *Evictor) setIntent(ctx context.Context, namespace, name string, intent lifecyclev1alpha1.EvictionRequestIntent) error {
	var err error
	for range 3 {
		var er *lifecyclev1alpha1.EvictionRequest
		er, err = e.api.GetEvictionRequest(ctx, namespace, name)
		if err != nil {
			return err
		}
		if er.Spec.Intent == intent {
			return nil
		}
		er.Spec.Intent = intent
		if _, err = e.api.UpdateEvictionRequest(ctx, er); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// EpisodeEnded withdraws the open requests for the signals ended matches
// (the resource whose pressure episode ended): intent Withdrawn, and a
// wait under way returns ErrWithdrawn.
func (e *Evictor) EpisodeEnded(ctx context.Context, ended func(thresholds.Signal) bool) {
	e.mu.Lock()
	var todo []*open
	for uid, o := range e.open {
		if ended(o.signal) {
			todo = append(todo, o)
			close(o.withdrawn)
			delete(e.open, uid)
		}
	}
	e.mu.Unlock()
	for _, o := range todo {
		err := e.setIntent(ctx, o.namespace, o.name, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
		switch {
		case err == nil:
			e.log.Info("eviction request withdrawn: pressure ended", zap.String("evictionRequest", o.namespace+"/"+o.name))
		case apierrors.IsNotFound(err):
			// Deleted by someone else: a deletion counts as a withdrawal.
		default:
			e.log.Warn("cannot withdraw the EvictionRequest", zap.String("evictionRequest", o.namespace+"/"+o.name), logging.Err(err))
		}
	}
}

func (e *Evictor) isOff() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.off
}

// switchOff latches the fall-back once the API server has said it does not
// serve EvictionRequests; said once, at Error, since the operator asked for
// a mode the cluster cannot give.
func (e *Evictor) switchOff(err error) {
	e.mu.Lock()
	first := !e.off
	e.off = true
	e.mu.Unlock()
	if !first {
		return
	}
	e.log.Error("the API server does not serve lifecycle.k8s.io/v1alpha1 evictionrequests (is the EvictionRequestAPI feature gate on, and --runtime-config=lifecycle.k8s.io/v1alpha1=true?); "+
		"--eviction-request is off until evictd restarts: every eviction uses the Eviction API", logging.Err(err))
	if e.notServed != nil {
		e.notServed()
	}
}
