// SPDX-License-Identifier: Apache-2.0

package evictreq

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kube/fromclientset"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

// responds makes a responder of the API: the pod turns terminating once a
// request names it.
func (a *memAPI) responds() {
	a.onPoll = func(p *v1.Pod) {
		if _, ok := a.ers[p.Namespace+"/"+Name(p.UID)]; ok && p.DeletionTimestamp == nil {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
	}
}

// A request asked again (intent set back to Eviction: a new generation)
// still carries the status the controller wrote for its withdrawal, Failed
// with CanceledDueToNoRequesters. That Failed is not this request's: the
// responder wait runs in full before the Eviction API is used.
func TestAskedAgainIgnoresTheWithdrawalsFailed(t *testing.T) {
	const wait = 150 * time.Millisecond
	h := newHarness(t, wait)
	ctx := context.Background()
	er := Build(testPod(), DefaultRequester)
	if _, err := h.api.CreateEvictionRequest(ctx, er); err != nil { // generation 1
		t.Fatal(err)
	}
	got := h.api.request(t)
	got.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	if _, err := h.api.UpdateEvictionRequest(ctx, got); err != nil { // generation 2
		t.Fatal(err)
	}
	h.api.setStatus(er.Name, metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, ObservedGeneration: 2,
		Reason: string(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters), LastTransitionTime: metav1.Now()})

	start := time.Now()
	out, err := h.ev.Evict(ctx, softMemory())
	took := time.Since(start)
	if err != nil || out.Result != evict.Evicted {
		t.Fatalf("Evict = %v, %v; want evicted through the Eviction API after the wait", out.Result, err)
	}
	if n := h.logs.FilterMessageSnippet("EvictionRequest failed").Len(); n != 0 {
		t.Errorf("evictd took the withdrawal's Failed for the request asked again (%d log lines)", n)
	}
	if took < wait {
		t.Errorf("the Eviction API was used %s after asking again, before the responder wait %s", took, wait)
	}
}

// pdbRefusal is the eviction subresource's answer for a pod its
// PodDisruptionBudget protects.
func pdbRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget shop-pdb needs 1 healthy pods and has 1 currently"})
	return err
}

// Once evictd gives up on a pod (its fall-back eviction refused or blocked
// by a PodDisruptionBudget), its request is withdrawn and deleted, so that
// no responder evicts it later on top of the next victim. Asked for again
// in the same episode, the pod goes to the Eviction API at once; the next
// episode asks a responder again.
func TestGivenUpRequestWithdrawn(t *testing.T) {
	for name, answer := range map[string]error{
		"pdb_blocked": pdbRefusal(),
		"refused":     &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 400, Message: `admission webhook "deny.example.com" denied the request`}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 20*time.Millisecond)
			h.pods.answer = func() error { return answer }
			out, _ := h.ev.Evict(context.Background(), softMemory())
			if string(out.Result) != name {
				t.Fatalf("Evict = %v; want %s", out.Result, name)
			}
			want := []string{"create " + Name(uid), "update " + Name(uid) + " intent=Withdrawn", "delete " + Name(uid)}
			if w := h.api.writesMade(); !slices.Equal(w, want) {
				t.Errorf("EvictionRequest writes %q; want %q: withdrawn and deleted once evictd gave up", w, want)
			}

			out, _ = h.ev.Evict(context.Background(), softMemory())
			if string(out.Result) != name || h.pods.count() != 2 {
				t.Errorf("the retry: %v, %d imperative evictions; want %s, 2", out.Result, h.pods.count(), name)
			}
			if n := h.logs.FilterMessage("eviction requested").Len(); n != 1 {
				t.Errorf("%d requests made; want 1: the retry in the same episode goes to the Eviction API at once", n)
			}

			h.ev.EpisodeEnded(context.Background(), func(s thresholds.Signal) bool { return s == thresholds.MemoryAvailable })
			_, _ = h.ev.Evict(context.Background(), softMemory())
			if n := h.logs.FilterMessage("eviction requested").Len(); n != 2 {
				t.Errorf("%d requests made; want 2: a new episode asks again", n)
			}
		})
	}
}

// evictd shutting down while it waits withdraws and deletes the request:
// no responder acts on it for an evictd that is gone.
func TestShutdownWithdrawsRequest(t *testing.T) {
	h := newHarness(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := h.ev.Evict(ctx, softMemory())
		errc <- err
	}()
	<-h.api.created
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Evict error %v, want a cancellation", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Evict did not return on shutdown")
	}
	want := []string{"create " + Name(uid), "update " + Name(uid) + " intent=Withdrawn", "delete " + Name(uid)}
	if w := h.api.writesMade(); !slices.Equal(w, want) {
		t.Errorf("EvictionRequest writes %q, want %q", w, want)
	}
}

// budgetHarness is a harness whose imperative evictor has opts' cap and
// rate, and whose API is a responder.
func budgetHarness(t *testing.T, rate float64, burst, maxPerEpisode int) *harness {
	t.Helper()
	h := &harness{api: newMemAPI(), pods: &podAPI{}}
	h.api.responds()
	o := evict.Defaults()
	o.Rate, o.Burst, o.MaxPerEpisode = rate, burst, maxPerEpisode
	imp, err := evict.New(evict.Config{Options: o, Client: h.pods, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	h.ev, err = New(Config{Imperative: imp, API: h.api, Pods: h.api.informer, ResponderWait: time.Minute, Poll: 2 * time.Millisecond, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// secondPod puts another pod on the API and returns a soft request for it.
func (h *harness) secondPod(b *evict.Budget) evict.Request {
	p := testPod()
	p.Name, p.UID = "cart-1", "5e4d3c2b-1a0f-4e9d-8c7b-6a5f4e3d2c1b"
	h.api.mu.Lock()
	h.api.pod = p
	h.api.mu.Unlock()
	return evict.Request{Pod: p.DeepCopy(), Signal: thresholds.MemoryAvailable, Budget: b}
}

// A responder's eviction counts against the episode's cap: with a cap of
// one, the second soft victim is not asked for (RateLimited, the cap).
func TestResponderEvictionsCountAgainstTheCap(t *testing.T) {
	h := budgetHarness(t, 1000, 1000, 1)
	b := h.ev.NewBudget()
	req := softMemory()
	req.Budget = b
	if out, err := h.ev.Evict(context.Background(), req); err != nil || out.Result != evict.ResponderEvicted {
		t.Fatalf("Evict = %v, %v; want responder_evicted", out.Result, err)
	}
	if n := b.Evictions(); n != 1 {
		t.Errorf("%d eviction(s) charged to the episode after a responder's; want 1", n)
	}
	out, err := h.ev.Evict(context.Background(), h.secondPod(b))
	if out.Result != evict.RateLimited || !errors.Is(err, evict.ErrEpisodeCap) {
		t.Errorf("second victim: %v, %v; want rate_limited by the episode cap", out.Result, err)
	}
	if n := h.logs.FilterMessage("eviction requested").Len(); n != 1 {
		t.Errorf("%d requests made; want 1, none past the cap", n)
	}
}

// A responder's eviction takes a token of the rate limit.
func TestResponderEvictionsCountAgainstTheRateLimit(t *testing.T) {
	h := budgetHarness(t, 0.001, 1, 100)
	b := h.ev.NewBudget()
	req := softMemory()
	req.Budget = b
	if out, err := h.ev.Evict(context.Background(), req); err != nil || out.Result != evict.ResponderEvicted {
		t.Fatalf("Evict = %v, %v; want responder_evicted", out.Result, err)
	}
	out, err := h.ev.Evict(context.Background(), h.secondPod(b))
	if out.Result != evict.RateLimited || !errors.Is(err, evict.ErrRateLimited) || out.RetryAfter <= 0 {
		t.Errorf("second victim: %v (retry after %s), %v; want rate_limited with a wait for the next token", out.Result, out.RetryAfter, err)
	}
}

// A request given up (the wait over) gives its charge back: the Eviction
// API's own call is charged instead, once.
func TestFallbackChargedOnce(t *testing.T) {
	h := budgetHarness(t, 1000, 1000, 1)
	h.api.onPoll = nil // no responder
	h.ev.wait = 20 * time.Millisecond
	b := h.ev.NewBudget()
	req := softMemory()
	req.Budget = b
	if out, err := h.ev.Evict(context.Background(), req); err != nil || out.Result != evict.Evicted {
		t.Fatalf("Evict = %v, %v; want evicted by the fall-back, within the cap of one", out.Result, err)
	}
	if n := b.Evictions(); n != 1 {
		t.Errorf("%d eviction(s) charged; want 1", n)
	}
}

// A 404 switches the request path off for a while, not for good: once the
// probe is due a request is tried again, said in the log; served again,
// the path is back on and Served is told.
func TestNotServedProbesAgain(t *testing.T) {
	cs := fake.NewClientset(testPod())
	var served, made atomic.Bool
	var creates atomic.Int32
	cs.PrependReactor("create", "evictionrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		if !served.Load() {
			return true, nil, apierrors.NewNotFound(erResource, "")
		}
		made.Store(true)
		return false, nil, nil
	})
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !made.Load() {
			return false, nil, nil
		}
		p := testPod()
		now := metav1.Now()
		p.DeletionTimestamp = &now // a responder drained it
		return true, p, nil
	})
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "eviction", nil, nil
	})
	client := fromclientset.Wrap(cs)
	clk := testingclock.NewFakeClock(time.Now())
	core, logs := observer.New(zapcore.DebugLevel)
	var said []bool
	ev, err := New(Config{Imperative: imperative(t, client), API: client, Pods: clientsetInformer(cs), ResponderWait: time.Hour, Logger: zap.New(core), Clock: clk,
		Served: func(on bool) { said = append(said, on) }})
	if err != nil {
		t.Fatal(err)
	}
	evictOnce := func(want evict.Result) {
		t.Helper()
		if out, err := ev.Evict(context.Background(), softMemory()); err != nil || out.Result != want {
			t.Fatalf("Evict = %v, %v; want %s", out.Result, err, want)
		}
	}
	evictOnce(evict.Evicted)
	clk.Step(time.Minute)
	evictOnce(evict.Evicted) // off: no request
	if n := creates.Load(); n != 1 {
		t.Fatalf("%d creates within a minute of the 404; want 1", n)
	}
	clk.Step(DefaultReprobe)
	evictOnce(evict.Evicted) // the probe: still 404
	clk.Step(DefaultReprobe)
	served.Store(true)
	evictOnce(evict.ResponderEvicted) // the next probe: served
	if n := creates.Load(); n != 3 {
		t.Errorf("%d creates; want 3: the first, and one probe after each reprobe period", n)
	}
	if !slices.Equal(said, []bool{false, true}) {
		t.Errorf("Served told %v; want [false true]", said)
	}
	if n := logs.FilterMessageSnippet("asking the API server again whether it serves").Len(); n != 2 {
		t.Errorf("%d log lines about probing again; want 2", n)
	}
	if n := logs.FilterMessageSnippet("evictionrequests again: --eviction-request is back on").Len(); n != 1 {
		t.Errorf("%d log lines saying the mode is back on; want 1", n)
	}
}

// hungAPI is an API server that answers the calls hang names only when
// their context ends.
type hungAPI struct {
	*memAPI
	hang map[string]*atomic.Bool

	mu sync.Mutex
	// hung are the calls that hung, each with how long its context gave
	// it when it came (zero: no deadline).
	hung []hungCall
}

type hungCall struct {
	call string
	left time.Duration
}

func (a *hungAPI) hungCalls() []hungCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.hung)
}

func newHungAPI() *hungAPI {
	a := &hungAPI{memAPI: newMemAPI(), hang: map[string]*atomic.Bool{}}
	for _, c := range []string{"getPod", "create", "get", "update", "delete"} {
		a.hang[c] = &atomic.Bool{}
	}
	return a
}

func (a *hungAPI) block(ctx context.Context, call string) error {
	if !a.hang[call].Load() {
		return nil
	}
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = max(time.Until(d), time.Nanosecond)
	}
	a.mu.Lock()
	a.hung = append(a.hung, hungCall{call, left})
	a.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (a *hungAPI) GetPod(ctx context.Context, ns, name string) (*v1.Pod, error) {
	if err := a.block(ctx, "getPod"); err != nil {
		return nil, err
	}
	return a.memAPI.GetPod(ctx, ns, name)
}

func (a *hungAPI) CreateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	if err := a.block(ctx, "create"); err != nil {
		return nil, err
	}
	out, err := a.memAPI.CreateEvictionRequest(ctx, er)
	if err == nil {
		// Hangs from the request on: the wait and the clean-up.
		a.hang["getPod"].Store(true)
		a.hang["get"].Store(true)
		a.hang["update"].Store(true)
		a.hang["delete"].Store(true)
	}
	return out, err
}

func (a *hungAPI) GetEvictionRequest(ctx context.Context, ns, name string) (*lifecyclev1alpha1.EvictionRequest, error) {
	if err := a.block(ctx, "get"); err != nil {
		return nil, err
	}
	return a.memAPI.GetEvictionRequest(ctx, ns, name)
}

func (a *hungAPI) UpdateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	if err := a.block(ctx, "update"); err != nil {
		return nil, err
	}
	return a.memAPI.UpdateEvictionRequest(ctx, er)
}

func (a *hungAPI) DeleteEvictionRequest(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	if err := a.block(ctx, "delete"); err != nil {
		return err
	}
	return a.memAPI.DeleteEvictionRequest(ctx, ns, name, opts)
}

// A hung API server never holds a request beyond the responder wait and a
// few call timeouts: each call has its own. Hung from the create on, and
// hung at the create. Each hung call must come with a deadline no further
// than the call timeout, and there are few of them: wait + 7 call timeouts in all, as the clock would
// say without the vagaries of a loaded machine.
func TestHungAPIServerBounded(t *testing.T) {
	const (
		wait        = 100 * time.Millisecond
		callTimeout = 50 * time.Millisecond
		maxCalls    = 7
	)
	for _, hungAt := range []string{"after the create", "create"} {
		t.Run(hungAt, func(t *testing.T) {
			api := newHungAPI()
			if hungAt == "create" {
				api.hang["create"].Store(true)
			}
			pods := &podAPI{}
			ev, err := New(Config{Imperative: imperative(t, pods), API: api, Pods: api.informer, ResponderWait: wait, Poll: 5 * time.Millisecond,
				CallTimeout: callTimeout, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				out evict.Outcome
				err error
			}
			done := make(chan answer, 1)
			go func() {
				out, err := ev.Evict(context.Background(), softMemory())
				done <- answer{out, err}
			}()
			select {
			case a := <-done:
				if a.err != nil || a.out.Result != evict.Evicted {
					t.Errorf("Evict = %v, %v; want evicted through the Eviction API", a.out.Result, a.err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Evict still waiting on a hung API server after 30s")
			}
			hung := api.hungCalls()
			if len(hung) == 0 || len(hung) > maxCalls {
				t.Errorf("%d hung calls %v; want 1 to %d", len(hung), hung, maxCalls)
			}
			for _, c := range hung {
				if c.left <= 0 || c.left > callTimeout {
					t.Errorf("hung call %s had %v left; want a deadline within %v", c.call, c.left, callTimeout)
				}
			}
		})
	}
}

// A pod already terminating when evictd asks (the informer had not seen it
// yet) is the Eviction API's: no request is made, and its end is never
// recorded as a responder's (no responder_evicted, no Event saying so).
func TestAlreadyTerminatingNeverResponderEvicted(t *testing.T) {
	r := newRecorder(t, time.Minute)
	now := metav1.Now()
	r.api.pod.DeletionTimestamp = &now // the informer's copy (softMemory) does not show it yet
	out, err := r.ev.Evict(context.Background(), softMemory())
	if err != nil || out.Result == evict.ResponderEvicted {
		t.Errorf("Evict = %v, %v; want the Eviction API's answer, not responder_evicted", out.Result, err)
	}
	if got := r.evictions(t, "memory.available"); got[metrics.ResultResponderEvicted] != 0 {
		t.Errorf("evictd_evictions_total{signal=memory.available} = %v; want no responder_evicted", got)
	}
	if w := r.api.writesMade(); len(w) != 0 {
		t.Errorf("EvictionRequest writes %q for a pod already terminating; want none", w)
	}
}

// A terminating pod known as such goes to the Eviction API without
// reading anything.
func TestTerminatingPodImperative(t *testing.T) {
	h := newHarness(t, time.Minute)
	req := softMemory()
	now := metav1.Now()
	req.Pod.DeletionTimestamp = &now
	if out, err := h.ev.Evict(context.Background(), req); err != nil || out.Result != evict.Evicted {
		t.Fatalf("Evict = %v, %v; want evicted through the Eviction API", out.Result, err)
	}
	if w := h.api.writesMade(); len(w) != 0 {
		t.Errorf("EvictionRequest writes %q; want none", w)
	}
}
