// SPDX-License-Identifier: Apache-2.0

package evictreq

import (
	"context"
	"errors"
	"sync"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kube/fromclientset"
	"github.com/evictd/evictd/pkg/thresholds"
)

const uid = types.UID("0b4c5d6e-1f2a-4b3c-8d9e-0f1a2b3c4d5e")

var erResource = schema.GroupResource{Group: "lifecycle.k8s.io", Resource: "evictionrequests"}

func testPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart-0", UID: uid}, Status: v1.PodStatus{Phase: v1.PodRunning}}
}

// memAPI is the API server as the request path sees it: EvictionRequests
// and the pod, in memory.
type memAPI struct {
	mu      sync.Mutex
	pod     *v1.Pod
	ers     map[string]*lifecyclev1alpha1.EvictionRequest
	created chan struct{}
	// onPoll runs on every GetPod: a responder at work.
	onPoll func(p *v1.Pod)
}

func newMemAPI() *memAPI {
	return &memAPI{pod: testPod(), ers: map[string]*lifecyclev1alpha1.EvictionRequest{}, created: make(chan struct{}, 8)}
}

func (a *memAPI) GetPod(_ context.Context, ns, name string) (*v1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pod == nil || a.pod.Namespace != ns || a.pod.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	if a.onPoll != nil {
		a.onPoll(a.pod)
	}
	return a.pod.DeepCopy(), nil
}

func (a *memAPI) CreateEvictionRequest(_ context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := er.Namespace + "/" + er.Name
	if _, ok := a.ers[k]; ok {
		return nil, apierrors.NewAlreadyExists(erResource, er.Name)
	}
	a.ers[k] = er.DeepCopy()
	a.created <- struct{}{}
	return er.DeepCopy(), nil
}

func (a *memAPI) GetEvictionRequest(_ context.Context, ns, name string) (*lifecyclev1alpha1.EvictionRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	er, ok := a.ers[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(erResource, name)
	}
	return er.DeepCopy(), nil
}

func (a *memAPI) UpdateEvictionRequest(_ context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := er.Namespace + "/" + er.Name
	if _, ok := a.ers[k]; !ok {
		return nil, apierrors.NewNotFound(erResource, er.Name)
	}
	a.ers[k] = er.DeepCopy()
	return er.DeepCopy(), nil
}

func (a *memAPI) request(t *testing.T) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	er, err := a.GetEvictionRequest(context.Background(), "shop", Name(uid))
	if err != nil {
		t.Fatalf("no EvictionRequest %s: %v", Name(uid), err)
	}
	return er
}

// podAPI records the imperative evictions.
type podAPI struct {
	mu        sync.Mutex
	evictions []string
}

func (p *podAPI) Evict(_ context.Context, ev *policyv1.Eviction) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evictions = append(p.evictions, ev.Namespace+"/"+ev.Name)
	return nil
}

func (p *podAPI) DeletePod(context.Context, string, string, metav1.DeleteOptions) error { return nil }

func (p *podAPI) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.evictions)
}

func imperative(t *testing.T, client evict.PodAPI) *evict.Evictor {
	t.Helper()
	o := evict.Defaults()
	o.Rate, o.Burst, o.MaxPerEpisode = 1000, 1000, 1000
	ev, err := evict.New(evict.Config{Options: o, Client: client, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

type harness struct {
	api  *memAPI
	pods *podAPI
	ev   *Evictor
	logs *observer.ObservedLogs
}

func newHarness(t *testing.T, wait time.Duration) *harness {
	t.Helper()
	h := &harness{api: newMemAPI(), pods: &podAPI{}}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	ev, err := New(Config{Imperative: imperative(t, h.pods), API: h.api, ResponderWait: wait, Poll: 2 * time.Millisecond, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	h.ev = ev
	return h
}

func softMemory() evict.Request {
	return evict.Request{Pod: testPod(), Signal: thresholds.MemoryAvailable, Hard: false}
}

func TestRouted(t *testing.T) {
	for _, tc := range []struct {
		signal thresholds.Signal
		hard   bool
		want   bool
	}{
		{thresholds.MemoryAvailable, false, true},
		{thresholds.MemoryAvailable, true, false},
		{thresholds.AllocatableMemoryAvailable, true, false},
		{thresholds.PIDAvailable, true, false},
		{thresholds.NodeFsAvailable, true, true},
		{thresholds.ImageFsInodesFree, true, true},
		{thresholds.NodeFsAvailable, false, true},
	} {
		if got := Routed(evict.Request{Signal: tc.signal, Hard: tc.hard}); got != tc.want {
			t.Errorf("Routed(%s, hard=%v) = %v, want %v", tc.signal, tc.hard, got, tc.want)
		}
	}
}

// A soft memory eviction creates one EvictionRequest named after the pod's
// UID, with evictd's requester, and is done when a responder terminates the
// pod; the Eviction API is not called.
func TestSoftEvictionRequested(t *testing.T) {
	h := newHarness(t, time.Minute)
	h.api.onPoll = func(p *v1.Pod) {
		if _, ok := h.api.ers["shop/"+Name(uid)]; ok {
			now := metav1.Now()
			p.DeletionTimestamp = &now // a responder drained it
		}
	}
	out, err := h.ev.Evict(context.Background(), softMemory())
	if err != nil || out.Result != evict.ResponderEvicted {
		t.Fatalf("Evict = %v, %v; want responder_evicted", out.Result, err)
	}
	er := h.api.request(t)
	if er.Spec.Requester != DefaultRequester || er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction ||
		er.Spec.Target.Pod == nil || er.Spec.Target.Pod.UID != uid || er.Spec.Target.Pod.Name != "cart-0" {
		t.Errorf("EvictionRequest spec = %+v, want requester %s, intent Eviction, target cart-0/%s", er.Spec, DefaultRequester, uid)
	}
	if n := h.pods.count(); n != 0 {
		t.Errorf("%d imperative eviction(s), want none", n)
	}
}

// A hard memory eviction stays on the Eviction API: no request is made.
func TestHardMemoryImperative(t *testing.T) {
	h := newHarness(t, time.Minute)
	req := softMemory()
	req.Hard = true
	out, err := h.ev.Evict(context.Background(), req)
	if err != nil || out.Result != evict.Evicted {
		t.Fatalf("Evict = %v, %v; want evicted", out.Result, err)
	}
	if n := h.pods.count(); n != 1 {
		t.Errorf("%d imperative eviction(s), want 1", n)
	}
	if len(h.api.ers) != 0 {
		t.Errorf("EvictionRequests %v, want none", h.api.ers)
	}
}

// No responder: after the responder wait the Eviction API evicts the pod,
// and the request keeps its intent.
func TestNoResponderFallsBack(t *testing.T) {
	h := newHarness(t, 30*time.Millisecond)
	out, err := h.ev.Evict(context.Background(), softMemory())
	if err != nil || out.Result != evict.Evicted {
		t.Fatalf("Evict = %v, %v; want evicted", out.Result, err)
	}
	if n := h.pods.count(); n != 1 {
		t.Errorf("%d imperative eviction(s), want 1 after the responder wait", n)
	}
	if got := h.api.request(t).Spec.Intent; got != lifecyclev1alpha1.EvictionRequestIntentEviction {
		t.Errorf("intent %s after the fall-back, want Eviction", got)
	}
	if h.logs.FilterMessageSnippet("no responder evicted the pod").Len() != 1 {
		t.Errorf("want one log line saying no responder answered; got %v", h.logs.All())
	}
}

// A Failed condition (no further responder) falls back at once.
func TestFailedRequestFallsBack(t *testing.T) {
	h := newHarness(t, time.Hour)
	h.api.onPoll = func(*v1.Pod) {
		if er, ok := h.api.ers["shop/"+Name(uid)]; ok {
			er.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue,
				Reason: string(lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder)}}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.ev.Evict(context.Background(), softMemory())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Evict still waiting on a Failed EvictionRequest")
	}
	if n := h.pods.count(); n != 1 {
		t.Errorf("%d imperative eviction(s), want 1", n)
	}
}

// When the pressure episode ends before the pod is gone, the request is
// withdrawn and the call under way ends as cancelled, not failed.
func TestWithdrawnWhenPressureEnds(t *testing.T) {
	h := newHarness(t, time.Hour)
	errc := make(chan error, 1)
	go func() {
		_, err := h.ev.Evict(context.Background(), softMemory())
		errc <- err
	}()
	<-h.api.created
	h.ev.EpisodeEnded(context.Background(), func(s thresholds.Signal) bool { return s == thresholds.MemoryAvailable })
	select {
	case err := <-errc:
		if !errors.Is(err, ErrWithdrawn) || !errors.Is(err, context.Canceled) {
			t.Errorf("Evict error %v, want ErrWithdrawn (a cancellation)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Evict did not return after the withdrawal")
	}
	if got := h.api.request(t).Spec.Intent; got != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
		t.Errorf("intent %s, want Withdrawn", got)
	}
	if n := h.pods.count(); n != 0 {
		t.Errorf("%d imperative eviction(s), want none", n)
	}
}

// Another resource's episode ending leaves the request alone.
func TestOtherEpisodeKeepsRequest(t *testing.T) {
	h := newHarness(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = h.ev.Evict(ctx, softMemory()) }()
	<-h.api.created
	h.ev.EpisodeEnded(context.Background(), func(s thresholds.Signal) bool { return s == thresholds.NodeFsAvailable })
	if got := h.api.request(t).Spec.Intent; got != lifecyclev1alpha1.EvictionRequestIntentEviction {
		t.Errorf("intent %s after the nodefs episode ended, want Eviction", got)
	}
}

// A retry (or evictd after a restart) finds the request by its name and
// asks again.
func TestRetryFindsWithdrawnRequest(t *testing.T) {
	h := newHarness(t, 20*time.Millisecond)
	old := Build(testPod(), DefaultRequester)
	old.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	h.api.ers["shop/"+old.Name] = old
	if _, err := h.ev.Evict(context.Background(), softMemory()); err != nil {
		t.Fatal(err)
	}
	if len(h.api.ers) != 1 {
		t.Errorf("%d EvictionRequests, want the one found again", len(h.api.ers))
	}
	if got := h.api.request(t).Spec.Intent; got != lifecyclev1alpha1.EvictionRequestIntentEviction {
		t.Errorf("intent %s, want Eviction again", got)
	}
}

// The API server does not serve EvictionRequests (feature gate off): the
// Eviction API evicts, it is said once, and no request is tried again.
func TestNotServedFallsBackOnce(t *testing.T) {
	cs := fake.NewClientset(testPod())
	var creates int
	cs.PrependReactor("create", "evictionrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		return true, nil, apierrors.NewNotFound(erResource, "")
	})
	var evictions int
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			evictions++
			return true, nil, nil
		}
		return false, nil, nil
	})
	client := fromclientset.Wrap(cs)
	core, logs := observer.New(zapcore.DebugLevel)
	said := 0
	ev, err := New(Config{Imperative: imperative(t, client), API: client, ResponderWait: time.Hour, Logger: zap.New(core), NotServed: func() { said++ }})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := ev.Evict(context.Background(), softMemory())
		if err != nil || out.Result != evict.Evicted {
			t.Fatalf("Evict = %v, %v; want evicted through the Eviction API", out.Result, err)
		}
	}
	if creates != 1 || evictions != 2 || said != 1 {
		t.Errorf("creates %d, evictions %d, NotServed told %d times; want 1, 2, 1", creates, evictions, said)
	}
	if n := logs.FilterMessageSnippet("does not serve lifecycle.k8s.io/v1alpha1 evictionrequests").Len(); n != 1 {
		t.Errorf("%d log lines about the API not served, want 1", n)
	}
}

func TestAssess(t *testing.T) {
	now := metav1.Now()
	er := func(conds ...metav1.Condition) *lifecyclev1alpha1.EvictionRequest {
		return &lifecyclev1alpha1.EvictionRequest{Status: lifecyclev1alpha1.EvictionRequestStatus{Conditions: conds}}
	}
	running := testPod()
	terminating := testPod()
	terminating.DeletionTimestamp = &now
	replaced := testPod()
	replaced.UID = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	for _, tc := range []struct {
		name string
		er   *lifecyclev1alpha1.EvictionRequest
		pod  *v1.Pod
		want Progress
	}{
		{"no status yet", er(), running, Waiting},
		{"request not found", nil, running, Waiting},
		{"pod gone", er(), nil, Gone},
		{"pod terminating", er(), terminating, Gone},
		{"pod replaced under its name", er(), replaced, Gone},
		{"TargetEvicted", er(metav1.Condition{Type: "TargetEvicted", Status: metav1.ConditionTrue}), running, Gone},
		{"awaiting eviction", er(metav1.Condition{Type: "Failed", Status: metav1.ConditionFalse, Reason: "AwaitingEviction"}), running, Waiting},
		{"no further responder", er(metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, Reason: "NoFurtherResponder"}), running, GaveUp},
	} {
		if got := Assess(tc.er, tc.pod, uid); got != tc.want {
			t.Errorf("%s: Assess = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	pods := &podAPI{}
	if _, err := New(Config{Imperative: imperative(t, pods), API: newMemAPI()}); err == nil {
		t.Error("New accepted a zero responder wait")
	}
	if _, err := New(Config{API: newMemAPI(), ResponderWait: time.Second}); err == nil {
		t.Error("New accepted no imperative evictor")
	}
}
