// SPDX-License-Identifier: Apache-2.0

package evictreq

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
// and the pod, in memory, kept as kube-apiserver keeps them: a create sets
// metadata.generation to 1 and a change of the spec bumps it, an update
// keeps the status, every write bumps the resourceVersion, an update or a
// delete with a stale resourceVersion is a conflict.
type memAPI struct {
	mu      sync.Mutex
	pod     *v1.Pod
	ers     map[string]*lifecyclev1alpha1.EvictionRequest
	rv      int
	created chan struct{}
	// onPoll runs on every GetPod and every look in the informer: a
	// responder at work.
	onPoll func(p *v1.Pod)
	// beforeCreate runs as a create arrives, before it is made.
	beforeCreate func()
	// writes are the writes made, in order: "create NAME", "update NAME
	// intent=INTENT", "delete NAME".
	writes []string
	// gets counts the EvictionRequest reads, podGets the pod's.
	gets, podGets int
}

func newMemAPI() *memAPI {
	return &memAPI{pod: testPod(), ers: map[string]*lifecyclev1alpha1.EvictionRequest{}, created: make(chan struct{}, 8)}
}

func (a *memAPI) nextRV() string {
	a.rv++
	return strconv.Itoa(a.rv)
}

func (a *memAPI) GetPod(_ context.Context, ns, name string) (*v1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.podGets++
	if a.pod == nil || a.pod.Namespace != ns || a.pod.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	if a.onPoll != nil {
		a.onPoll(a.pod)
	}
	return a.pod.DeepCopy(), nil
}

// informer is the agent's pod informer over this API (Config.Pods): the
// pod as the API server holds it, as its watch would have delivered it,
// read at no cost to the server.
func (a *memAPI) informer(ns, name string) *v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pod == nil || a.pod.Namespace != ns || a.pod.Name != name {
		return nil
	}
	if a.onPoll != nil {
		a.onPoll(a.pod)
	}
	return a.pod.DeepCopy()
}

// clientsetInformer is the agent's pod informer over a clientset fake
// (Config.Pods).
func clientsetInformer(cs *fake.Clientset) func(ns, name string) *v1.Pod {
	return func(ns, name string) *v1.Pod {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return p
	}
}

func (a *memAPI) CreateEvictionRequest(_ context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	if a.beforeCreate != nil {
		a.beforeCreate()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := er.Namespace + "/" + er.Name
	if _, ok := a.ers[k]; ok {
		return nil, apierrors.NewAlreadyExists(erResource, er.Name)
	}
	er = er.DeepCopy()
	er.Generation, er.ResourceVersion, er.UID = 1, a.nextRV(), types.UID("er-"+strconv.Itoa(a.rv))
	er.Status = lifecyclev1alpha1.EvictionRequestStatus{}
	a.ers[k] = er
	a.writes = append(a.writes, "create "+er.Name)
	select {
	case a.created <- struct{}{}:
	default:
	}
	return er.DeepCopy(), nil
}

func (a *memAPI) GetEvictionRequest(_ context.Context, ns, name string) (*lifecyclev1alpha1.EvictionRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gets++
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
	old, ok := a.ers[k]
	if !ok {
		return nil, apierrors.NewNotFound(erResource, er.Name)
	}
	if er.ResourceVersion != "" && er.ResourceVersion != old.ResourceVersion {
		return nil, apierrors.NewConflict(erResource, er.Name, errors.New("the object has been modified"))
	}
	er = er.DeepCopy()
	er.Status = old.Status
	er.Generation = old.Generation
	if !equality.Semantic.DeepEqual(er.Spec, old.Spec) {
		er.Generation++
	}
	er.ResourceVersion = a.nextRV()
	a.ers[k] = er
	a.writes = append(a.writes, "update "+er.Name+" intent="+string(er.Spec.Intent))
	return er.DeepCopy(), nil
}

func (a *memAPI) ListEvictionRequests(_ context.Context, ns string, _ metav1.ListOptions) (*lifecyclev1alpha1.EvictionRequestList, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := &lifecyclev1alpha1.EvictionRequestList{}
	for _, er := range a.ers {
		if ns == "" || er.Namespace == ns {
			list.Items = append(list.Items, *er.DeepCopy())
		}
	}
	return list, nil
}

func (a *memAPI) DeleteEvictionRequest(_ context.Context, ns, name string, opts metav1.DeleteOptions) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := ns + "/" + name
	old, ok := a.ers[k]
	if !ok {
		return apierrors.NewNotFound(erResource, name)
	}
	if p := opts.Preconditions; p != nil && ((p.ResourceVersion != nil && *p.ResourceVersion != old.ResourceVersion) || (p.UID != nil && *p.UID != old.UID)) {
		return apierrors.NewConflict(erResource, name, errors.New("precondition failed"))
	}
	delete(a.ers, k)
	a.writes = append(a.writes, "delete "+name)
	return nil
}

// setStatus writes a request's status as the evictionrequest-controller
// would, having observed its present generation.
func (a *memAPI) setStatus(name string, conds ...metav1.Condition) {
	a.mu.Lock()
	defer a.mu.Unlock()
	er, ok := a.ers["shop/"+name]
	if !ok {
		return
	}
	g := er.Generation
	er.Status = lifecyclev1alpha1.EvictionRequestStatus{ObservedGeneration: &g, Conditions: conds}
	er.ResourceVersion = a.nextRV()
}

// writesMade is a copy of the writes made so far.
func (a *memAPI) writesMade() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.writes)
}

// exists reports whether the request named for the test pod exists.
func (a *memAPI) exists() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.ers["shop/"+Name(uid)]
	return ok
}

func (a *memAPI) request(t *testing.T) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	er, err := a.GetEvictionRequest(context.Background(), "shop", Name(uid))
	if err != nil {
		t.Fatalf("no EvictionRequest %s: %v", Name(uid), err)
	}
	return er
}

// podAPI records the imperative evictions and gives answer's answer (nil:
// accepted).
type podAPI struct {
	mu        sync.Mutex
	evictions []string
	answer    func() error
}

func (p *podAPI) Evict(_ context.Context, ev *policyv1.Eviction) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evictions = append(p.evictions, ev.Namespace+"/"+ev.Name)
	if p.answer != nil {
		return p.answer()
	}
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
	ev, err := New(Config{Imperative: imperative(t, h.pods), API: h.api, Pods: h.api.informer, ResponderWait: wait, Poll: 2 * time.Millisecond, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	h.ev = ev
	return h
}

func softMemory() evict.Request {
	return evict.Request{Pod: testPod(), Signal: thresholds.MemoryAvailable, Hard: false}
}

// Only a soft eviction of a pod not yet terminating takes the request
// path: every hard threshold (disk too) and a pod already terminating use
// the Eviction API.
func TestRouted(t *testing.T) {
	now := metav1.Now()
	terminating := testPod()
	terminating.DeletionTimestamp = &now
	for _, tc := range []struct {
		signal thresholds.Signal
		hard   bool
		pod    *v1.Pod
		want   bool
	}{
		{thresholds.MemoryAvailable, false, testPod(), true},
		{thresholds.NodeFsAvailable, false, testPod(), true},
		{thresholds.MemoryAvailable, true, testPod(), false},
		{thresholds.AllocatableMemoryAvailable, true, testPod(), false},
		{thresholds.PIDAvailable, true, testPod(), false},
		{thresholds.NodeFsAvailable, true, testPod(), false},
		{thresholds.ImageFsInodesFree, true, testPod(), false},
		{thresholds.MemoryAvailable, false, terminating, false},
		{thresholds.NodeFsAvailable, false, terminating, false},
		{thresholds.MemoryAvailable, false, nil, false},
	} {
		pod := "running"
		switch {
		case tc.pod == nil:
			pod = "none"
		case tc.pod.DeletionTimestamp != nil:
			pod = "terminating"
		}
		if got := Routed(evict.Request{Pod: tc.pod, Signal: tc.signal, Hard: tc.hard}); got != tc.want {
			t.Errorf("Routed(%s, hard=%v, pod %s) = %v, want %v", tc.signal, tc.hard, pod, got, tc.want)
		}
	}
}

// A soft memory eviction creates one EvictionRequest named after the pod's
// UID, with evictd's requester, owned by the pod, and is done when a
// responder terminates the pod; the Eviction API is not called, and the
// request, done, is deleted.
func TestSoftEvictionRequested(t *testing.T) {
	h := newHarness(t, time.Minute)
	var seen *lifecyclev1alpha1.EvictionRequest
	h.api.onPoll = func(p *v1.Pod) {
		if er, ok := h.api.ers["shop/"+Name(uid)]; ok {
			seen = er.DeepCopy()
			now := metav1.Now()
			p.DeletionTimestamp = &now // a responder drained it
		}
	}
	out, err := h.ev.Evict(context.Background(), softMemory())
	if err != nil || out.Result != evict.ResponderEvicted {
		t.Fatalf("Evict = %v, %v; want responder_evicted", out.Result, err)
	}
	if seen == nil {
		t.Fatal("no EvictionRequest while the pod was asked for")
	}
	if seen.Spec.Requester != DefaultRequester || seen.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction ||
		seen.Spec.Target.Pod == nil || seen.Spec.Target.Pod.UID != uid || seen.Spec.Target.Pod.Name != "cart-0" {
		t.Errorf("EvictionRequest spec = %+v, want requester %s, intent Eviction, target cart-0/%s", seen.Spec, DefaultRequester, uid)
	}
	if refs := seen.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].APIVersion != "v1" || refs[0].UID != uid || refs[0].Name != "cart-0" {
		t.Errorf("ownerReferences %+v; want the pod cart-0 (%s)", refs, uid)
	}
	if n := h.pods.count(); n != 0 {
		t.Errorf("%d imperative eviction(s), want none", n)
	}
	if h.api.exists() {
		t.Errorf("the EvictionRequest is still there after the responder evicted the pod; want it deleted (writes %q)", h.api.writesMade())
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
	if w := h.api.writesMade(); len(w) != 0 {
		t.Errorf("EvictionRequest writes %q, want none", w)
	}
}

// No responder: after the responder wait the Eviction API evicts the pod;
// the pod on its way out, the request is deleted (not withdrawn: the pod
// goes anyway).
func TestNoResponderFallsBack(t *testing.T) {
	h := newHarness(t, 30*time.Millisecond)
	out, err := h.ev.Evict(context.Background(), softMemory())
	if err != nil || out.Result != evict.Evicted {
		t.Fatalf("Evict = %v, %v; want evicted", out.Result, err)
	}
	if n := h.pods.count(); n != 1 {
		t.Errorf("%d imperative eviction(s), want 1 after the responder wait", n)
	}
	if w := h.api.writesMade(); !slices.Equal(w, []string{"create " + Name(uid), "delete " + Name(uid)}) {
		t.Errorf("EvictionRequest writes %q; want it created, then deleted once the Eviction API evicted the pod", w)
	}
	if h.logs.FilterMessageSnippet("no responder evicted the pod").Len() != 1 {
		t.Errorf("want one log line saying no responder answered; got %v", h.logs.All())
	}
}

// A Failed condition (no further responder) the controller set for the
// request's present generation falls back at once.
func TestFailedRequestFallsBack(t *testing.T) {
	h := newHarness(t, time.Hour)
	h.api.onPoll = func(*v1.Pod) {
		if er, ok := h.api.ers["shop/"+Name(uid)]; ok && er.Status.ObservedGeneration == nil {
			g := er.Generation
			er.Status = lifecyclev1alpha1.EvictionRequestStatus{ObservedGeneration: &g, Conditions: []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue,
				Reason: string(lifecyclev1alpha1.EvictionConditionReasonNoFurtherResponder)}}}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.ev.Evict(context.Background(), softMemory())
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Evict still waiting on a Failed EvictionRequest")
	}
	if n := h.pods.count(); n != 1 {
		t.Errorf("%d imperative eviction(s), want 1", n)
	}
}

// When the pressure episode ends before the pod is gone, the request is
// withdrawn, then deleted, and the call under way ends as cancelled, not
// failed.
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
	case <-time.After(30 * time.Second):
		t.Fatal("Evict did not return after the withdrawal")
	}
	want := []string{"create " + Name(uid), "update " + Name(uid) + " intent=Withdrawn", "delete " + Name(uid)}
	if w := h.api.writesMade(); !slices.Equal(w, want) {
		t.Errorf("EvictionRequest writes %q, want %q", w, want)
	}
	if n := h.pods.count(); n != 0 {
		t.Errorf("%d imperative eviction(s), want none", n)
	}
}

// The episode ends while the request is being made: EpisodeEnded comes
// before the object exists, so it has nothing to withdraw yet; what was
// made is withdrawn and deleted all the same, and no responder is left a
// request for a pressure that is over (seen: TestLoopWithdrawsRequest-
// WhenEpisodeEnds on a loaded machine left the request live).
//
// Only Evict removes it: the episode's end leaves a request still being
// made alone. Both removing it, a late removal by the episode's end (its
// goroutine slow on a loaded machine) withdrew and deleted it a second
// time (seen: the same loop test, at go test -p 4).
func TestWithdrawnWhenPressureEndsDuringTheCreate(t *testing.T) {
	h := newHarness(t, time.Hour)
	h.api.beforeCreate = func() {
		h.api.mu.Lock()
		gets := h.api.gets
		h.api.mu.Unlock()
		h.ev.EpisodeEnded(context.Background(), func(s thresholds.Signal) bool { return s == thresholds.MemoryAvailable })
		h.api.mu.Lock()
		defer h.api.mu.Unlock()
		if h.api.gets != gets {
			t.Errorf("the episode's end read the request still being made %d time(s); want it left to Evict", h.api.gets-gets)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := h.ev.Evict(ctx, softMemory())
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrWithdrawn) {
			t.Errorf("Evict error %v, want ErrWithdrawn", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Evict still waits for a responder 30s after its episode ended; writes %q", h.api.writesMade())
	}
	want := []string{"create " + Name(uid), "update " + Name(uid) + " intent=Withdrawn", "delete " + Name(uid)}
	if w := h.api.writesMade(); !slices.Equal(w, want) {
		t.Errorf("EvictionRequest writes %q, want %q", w, want)
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
// asks again, on the same object.
func TestRetryFindsWithdrawnRequest(t *testing.T) {
	h := newHarness(t, 20*time.Millisecond)
	old := Build(testPod(), DefaultRequester)
	old.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	old.OwnerReferences = nil // made by an evictd that set none
	if _, err := h.api.CreateEvictionRequest(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	var asked *lifecyclev1alpha1.EvictionRequest
	h.api.onPoll = func(*v1.Pod) {
		if er, ok := h.api.ers["shop/"+old.Name]; ok && asked == nil && er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction {
			asked = er.DeepCopy()
		}
	}
	if _, err := h.ev.Evict(context.Background(), softMemory()); err != nil {
		t.Fatal(err)
	}
	if asked == nil {
		t.Fatalf("the request was never asked again; writes %q", h.api.writesMade())
	}
	if !hasOwner(asked, uid) {
		t.Errorf("ownerReferences %+v after asking again; want the pod added", asked.OwnerReferences)
	}
	if w := h.api.writesMade(); len(w) < 2 || w[1] != "update "+old.Name+" intent=Eviction" || slices.Contains(w[2:], "create "+old.Name) {
		t.Errorf("writes %q; want the same object set back to intent Eviction", w)
	}
}

// The API server does not serve EvictionRequests (feature gate off): the
// Eviction API evicts, it is said once, and no request is tried again
// before the probe is due.
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
	var said []bool
	ev, err := New(Config{Imperative: imperative(t, client), API: client, Pods: clientsetInformer(cs), ResponderWait: time.Hour, Logger: zap.New(core),
		Served: func(on bool) { said = append(said, on) }})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := ev.Evict(context.Background(), softMemory())
		if err != nil || out.Result != evict.Evicted {
			t.Fatalf("Evict = %v, %v; want evicted through the Eviction API", out.Result, err)
		}
	}
	if creates != 1 || evictions != 2 || !slices.Equal(said, []bool{false}) {
		t.Errorf("creates %d, evictions %d, Served told %v; want 1, 2, [false]", creates, evictions, said)
	}
	if n := logs.FilterMessageSnippet("does not serve lifecycle.k8s.io/v1alpha1 evictionrequests").Len(); n != 1 {
		t.Errorf("%d log lines about the API not served, want 1", n)
	}
}

func TestAssess(t *testing.T) {
	now := metav1.Now()
	gen := func(g int64) *int64 { return &g }
	// er is a request at generation 3 whose status the controller wrote
	// at generation observed (nil: never).
	er := func(observed *int64, conds ...metav1.Condition) *lifecyclev1alpha1.EvictionRequest {
		return &lifecyclev1alpha1.EvictionRequest{ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: lifecyclev1alpha1.EvictionRequestStatus{ObservedGeneration: observed, Conditions: conds}}
	}
	failed := func(reason string, observed int64) metav1.Condition {
		return metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: observed}
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
		{"no status yet", er(nil), running, Waiting},
		{"request not found", nil, running, Waiting},
		{"pod gone", er(nil), nil, Gone},
		{"pod terminating", er(nil), terminating, Gone},
		{"pod replaced under its name", er(nil), replaced, Gone},
		{"TargetEvicted", er(gen(3), metav1.Condition{Type: "TargetEvicted", Status: metav1.ConditionTrue}), running, Gone},
		{"awaiting eviction", er(gen(3), metav1.Condition{Type: "Failed", Status: metav1.ConditionFalse, Reason: "AwaitingEviction"}), running, Waiting},
		{"no further responder", er(gen(3), failed("NoFurtherResponder", 0)), running, GaveUp},
		{"no further responder, the condition's generation too", er(gen(3), failed("NoFurtherResponder", 3)), running, GaveUp},
		// Asked again (generation 3) after a withdrawal the controller
		// answered at generation 2: its Failed is the withdrawal's.
		{"Failed left by the last withdrawal", er(gen(2), failed("CanceledDueToNoRequesters", 2)), running, Waiting},
		{"Failed, status of no generation", er(nil, failed("NoFurtherResponder", 0)), running, Waiting},
		{"Failed, the condition of an older generation", er(gen(3), failed("NoFurtherResponder", 2)), running, Waiting},
		{"TargetEvicted left by an earlier generation", er(gen(2), metav1.Condition{Type: "TargetEvicted", Status: metav1.ConditionTrue}), running, Waiting},
	} {
		if got := Assess(tc.er, tc.pod, uid); got != tc.want {
			t.Errorf("%s: Assess = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	pods := &podAPI{}
	api := newMemAPI()
	if _, err := New(Config{Imperative: imperative(t, pods), API: api, Pods: api.informer}); err == nil {
		t.Error("New accepted a zero responder wait")
	}
	if _, err := New(Config{API: api, Pods: api.informer, ResponderWait: time.Second}); err == nil {
		t.Error("New accepted no imperative evictor")
	}
	if _, err := New(Config{Imperative: imperative(t, pods), API: api, ResponderWait: time.Second}); err == nil {
		t.Error("New accepted no pod informer")
	}
}

// The responder waits of pods no longer listed are dropped.
func TestRetainPodsForgetsWaits(t *testing.T) {
	e := &Evictor{waitedOut: map[types.UID]thresholds.Signal{"gone": thresholds.MemoryAvailable, "here": thresholds.MemoryAvailable}}
	e.RetainPods(func(uid types.UID) bool { return uid == "here" })
	if _, ok := e.waitedOut["here"]; !ok || len(e.waitedOut) != 1 {
		t.Errorf("waits after RetainPods: %v; want only the listed pod's", e.waitedOut)
	}
}

// TestBuildLabelsTheNode: every request evictd makes carries its pod's
// node (the agent's own) in NodeLabel, which evictd-eviction-requests
// holds to the token's node-name claim.
func TestBuildLabelsTheNode(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}, Spec: v1.PodSpec{NodeName: "node-a"}}
	er := Build(pod, DefaultRequester)
	if got := er.Labels[NodeLabel]; got != "node-a" {
		t.Errorf("label %s = %q, want the pod's node node-a (labels %v)", NodeLabel, got, er.Labels)
	}
}
