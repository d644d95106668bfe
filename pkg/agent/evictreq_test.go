// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/kube/fromclientset"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

// softMemSpec is a soft memory.available threshold of 300Mi with a 1s
// grace period, the kind of eviction --eviction-request routes.
func softMemSpec() thresholds.Spec {
	return thresholds.Spec{
		Soft:        map[string]string{"memory.available": "300Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}
}

// requestAgent is the loop on the scripted node with --eviction-request:
// its Evictor is an *evictreq.Evictor, as cmd/evictd/app builds it, whose API is a
// clientset fake holding the node's pods (the wiring between the loop and
// the request path is what is tested; evictreq's own tests cover the API).
type requestAgent struct {
	n         *simNode
	cs        *fake.Clientset
	evictions atomic.Int32 // calls to the Eviction API
	w         *simWaker
	metrics   *metrics.Metrics
}

// runAlong runs the loop for d of simulated time in steps of 100ms, each
// followed by a real pause, so that the answers of eviction calls running
// on their own goroutines (in real time) reach it between passes.
func (a *requestAgent) runAlong(t *testing.T, d time.Duration) {
	t.Helper()
	for step := time.Duration(0); step < d; step += 100 * time.Millisecond {
		a.n.runMore(t, 100*time.Millisecond, a.w)
		time.Sleep(2 * time.Millisecond)
	}
}

// responderEvictions is evictd_evictions_total{result="responder_evicted"}
// for memory.available.
func (a *requestAgent) responderEvictions(t *testing.T) float64 {
	t.Helper()
	return metrictest.Value(t, a.metrics.Registry(), "evictd_evictions_total",
		map[string]string{"signal": "memory.available", "result": metrics.ResultResponderEvicted})
}

func newRequestAgent(t *testing.T) *requestAgent {
	t.Helper()
	return newRequestAgentWith(t, softMemSpec())
}

// newRequestAgentWith is newRequestAgent with the thresholds of spec.
func newRequestAgentWith(t *testing.T, spec thresholds.Spec) *requestAgent {
	t.Helper()
	a := &requestAgent{n: newSimNode(t, 4096*mi, base250, threePods()...)}
	var objs []runtime.Object
	for _, p := range a.n.Pods() {
		objs = append(objs, p)
	}
	a.cs = fake.NewClientset(objs...)
	a.cs.PrependReactor("create", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() == "eviction" {
			a.evictions.Add(1)
			return true, nil, nil
		}
		return false, nil, nil
	})
	client := fromclientset.Wrap(a.cs)
	o := evict.Defaults()
	o.Rate, o.Burst, o.MaxPerEpisode = 1000, 1000, 1000
	m, err := metrics.New(buildinfo.Info{})
	if err != nil {
		t.Fatal(err)
	}
	a.metrics = m
	imperative, err := evict.New(evict.Config{Options: o, Client: client, NodeName: "node-a", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	// The pod informer is the clientset's pods, where the responder below
	// marks a pod terminating.
	informer := func(ns, name string) *v1.Pod {
		p, err := a.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return p
	}
	ev, err := evictreq.New(evictreq.Config{Imperative: imperative, API: client, Pods: informer, ResponderWait: time.Hour,
		Poll: 5 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// Go nil: each eviction call runs on a goroutine of its own, as in
	// evictd, so that the loop goes on while a request waits for a
	// responder.
	a.w = &simWaker{n: a.n}
	l, err := NewLoop(testLoopConfig(mustThresholds(t, spec)),
		Deps{Observer: a.n, Waker: a.w, Pods: a.n, Evictor: ev, Log: zaptest.NewLogger(t), Clock: a.n.clk})
	if err != nil {
		t.Fatal(err)
	}
	a.n.loop = l
	return a
}

// request waits, in real time, for the EvictionRequest of pod name to
// satisfy cond, and returns it.
func (a *requestAgent) request(t *testing.T, name, what string, cond func(*lifecyclev1alpha1.EvictionRequest) bool) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	erName := evictreq.Name((&simPod{name: name}).uid())
	deadline := time.Now().Add(30 * time.Second)
	var last *lifecyclev1alpha1.EvictionRequest
	for time.Now().Before(deadline) {
		er, err := a.cs.LifecycleV1alpha1().EvictionRequests("ns").Get(context.Background(), erName, metav1.GetOptions{})
		if err == nil {
			last = er
			if cond(er) {
				return er
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("EvictionRequest ns/%s not %s within 30s; last %+v", erName, what, last)
	return nil
}

// withdrawnAndDeleted waits, in real time, for the EvictionRequest of pod
// name to be gone, and checks that it was made, set to intent Withdrawn,
// and deleted, in that order and nothing else.
func (a *requestAgent) withdrawnAndDeleted(t *testing.T, name string) {
	t.Helper()
	erName := evictreq.Name((&simPod{name: name}).uid())
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := a.cs.LifecycleV1alpha1().EvictionRequests("ns").Get(context.Background(), erName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("EvictionRequest ns/%s still there 30s after the memory episode ended: %v", erName, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var writes []string
	for _, act := range a.cs.Actions() {
		switch act := act.(type) {
		case k8stesting.UpdateAction: // a create is one too: its verb tells
			if er, ok := act.GetObject().(*lifecyclev1alpha1.EvictionRequest); ok && er.Name == erName {
				writes = append(writes, act.GetVerb()+" intent="+string(er.Spec.Intent))
			}
		case k8stesting.DeleteAction:
			if act.GetResource().Resource == "evictionrequests" && act.GetName() == erName {
				writes = append(writes, "delete")
			}
		}
	}
	if !slices.Equal(writes, []string{"create intent=Eviction", "update intent=Withdrawn", "delete"}) {
		t.Errorf("writes of ns/%s after its request %q; want it withdrawn, then deleted", erName, writes)
	}
}

// The pressure episode that asked for an EvictionRequest ends before any
// responder acted: the loop withdraws the request (intent Withdrawn) and
// deletes it, and nothing is evicted through the Eviction API.
func TestLoopWithdrawsRequestWhenEpisodeEnds(t *testing.T) {
	a := newRequestAgent(t)
	a.n.runMore(t, 3*time.Second, a.w)
	er := a.request(t, "a", "made with intent Eviction", func(er *lifecyclev1alpha1.EvictionRequest) bool {
		return er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
	})
	if er.Spec.Requester != evictreq.DefaultRequester || er.Spec.Target.Pod == nil || er.Spec.Target.Pod.Name != "a" {
		t.Fatalf("EvictionRequest spec %+v; want evictd's, for pod a (the first of the soft ranking)", er.Spec)
	}

	// The pressure ends (no transition period in the test config): the
	// episode ends at the next pass.
	a.n.mu.Lock()
	a.n.base -= 1000 * mi
	a.n.mu.Unlock()
	a.n.runMore(t, 3*time.Second, a.w)
	a.withdrawnAndDeleted(t, "a")
	if n := a.evictions.Load(); n != 0 {
		t.Errorf("%d call(s) to the Eviction API; want none, the request was withdrawn", n)
	}
}

// A responder evicts the pod (it turns terminating) while evictd's request
// is open: the loop takes the answer as an accepted eviction, counts the
// pod in flight and asks for nothing more while its memory is on its way
// back, so the responder's eviction is counted once, not asked for again
// after a failure back-off.
func TestLoopTakesAResponderEvictionAsAccepted(t *testing.T) {
	a := newRequestAgent(t)
	a.n.runMore(t, 3*time.Second, a.w)
	a.request(t, "a", "made with intent Eviction", func(er *lifecyclev1alpha1.EvictionRequest) bool {
		return er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
	})
	pod, err := a.cs.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.DeletionTimestamp = &now // the responder drained it
	if _, err := a.cs.CoreV1().Pods("ns").Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Well within a's 30s grace: its 1000Mi are in flight and cover the
	// 50Mi the soft threshold needs.
	a.runAlong(t, 10*time.Second)
	if got := a.responderEvictions(t); got != 1 {
		t.Errorf("evictd_evictions_total{result=responder_evicted} = %v after 10s; want 1", got)
	}
	for _, name := range []string{"b", "c"} {
		erName := evictreq.Name((&simPod{name: name}).uid())
		if _, err := a.cs.LifecycleV1alpha1().EvictionRequests("ns").Get(context.Background(), erName, metav1.GetOptions{}); err == nil {
			t.Errorf("an EvictionRequest for %s; want none while a's memory is on its way back", name)
		}
	}
	if n := a.evictions.Load(); n != 0 {
		t.Errorf("%d call(s) to the Eviction API; want none", n)
	}
}

// A soft request still waiting for its responders has evicted nothing: when
// the hard threshold is crossed meanwhile, the hard eviction goes at once,
// through the Eviction API, whatever grace the waiting pod would get.
func TestLoopWaitingRequestCoversNoHardThreshold(t *testing.T) {
	a := newRequestAgentWith(t, thresholds.Spec{
		Hard:        map[string]string{"memory.available": "100Mi"},
		Soft:        map[string]string{"memory.available": "300Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	})
	for _, p := range a.n.pods {
		p.grace = 2 // a grace within the hard horizon: the waiting request's deadline would count
	}
	a.n.runMore(t, 3*time.Second, a.w)
	a.request(t, "a", "made with intent Eviction", func(er *lifecyclev1alpha1.EvictionRequest) bool {
		return er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
	})
	if n := a.evictions.Load(); n != 0 {
		t.Fatalf("%d Eviction API calls while the soft request waits; want none", n)
	}
	a.n.mu.Lock()
	a.n.base += 200 * mi // 50Mi available: the hard threshold is met
	a.n.mu.Unlock()
	a.runAlong(t, 2*time.Second)
	if n := a.evictions.Load(); n < 1 {
		t.Errorf("%d Eviction API calls after the hard threshold was met while a's request waits; want the next pod evicted at once", n)
	}
}
