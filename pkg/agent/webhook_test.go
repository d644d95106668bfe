// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kube/fromclientset"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

// These tests put a real *evict.Evictor between the scripted loop and a
// clientset fake whose eviction subresource answers with errors a real API
// server gives but cannot be made to give on demand here: the loop's
// reaction to the evictor's classification of them is what is tested.

// apiEvictor is the real evictor the scripted node's evictions go through.
type apiEvictor struct {
	t       *testing.T
	cs      *fake.Clientset
	events  *evict.EventWriter
	metrics *metrics.Metrics
	logs    *observer.ObservedLogs
}

// withAPIEvictor routes n's eviction calls through a real evictor on a
// clientset fake whose eviction subresource answers answer(pod name, time
// on n's clock); nil accepts, and the scripted kubelet then terminates the
// pod. Set it before n.run.
func withAPIEvictor(t *testing.T, n *simNode, answer func(pod string, now time.Time) error) *apiEvictor {
	t.Helper()
	a := &apiEvictor{t: t, cs: fake.NewClientset(), metrics: newMetrics(t)}
	a.metrics.InitSignals(thresholds.MemoryAvailable) // every result's series, at 0
	a.cs.PrependReactor("create", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := act.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		return true, nil, answer(ev.Name, n.clk.Now())
	})
	core, logs := observer.New(zapcore.InfoLevel)
	a.logs = logs
	client := fromclientset.Wrap(a.cs)
	a.events = evict.NewEventWriter(client, "evictd-node-a", zap.NewNop(), n.clk)
	t.Cleanup(func() { _ = a.events.Shutdown(context.Background()) })
	o := evict.Defaults()
	o.Rate, o.Burst, o.MaxPerEpisode = 1000, 1000, 1000
	ev, err := evict.New(evict.Config{Options: o, Client: client, NodeName: "node-a", Events: a.events, Metrics: a.metrics,
		Logger: zap.New(core), Clock: n.clk,
		// No retry within a call: its pause would be on the fake clock,
		// which only the loop's waits step. What follows a failed call is
		// the episode's back-off, which is what these tests look at.
		Backoff: wait.Backoff{Duration: time.Millisecond, Steps: 1}})
	if err != nil {
		t.Fatal(err)
	}
	n.metrics = a.metrics
	n.evictResult = func(_ *simPod, req evict.Request) (evict.Outcome, error) {
		return ev.Evict(context.Background(), req)
	}
	return a
}

// count is evictd_evictions_total{signal="memory.available", result}.
func (a *apiEvictor) count(result string) float64 {
	a.t.Helper()
	return metrictest.Value(a.t, a.metrics.Registry(), "evictd_evictions_total",
		map[string]string{"signal": "memory.available", "result": result})
}

// flushEvents waits for the queued Events and returns them as
// "Reason name: note".
func (a *apiEvictor) flushEvents() []string {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.events.Shutdown(ctx); err != nil {
		a.t.Fatal(err)
	}
	list, err := a.cs.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Reason, e.Regarding.Name, e.Note))
	}
	return out
}

// webhookDown is the API server's answer to an eviction when a validating
// admission webhook with failurePolicy Fail selects the pod and cannot be
// called: the dispatcher's apierrors.NewInternalError of a
// webhookutil.ErrCallingWebhook (k8s.io/apiserver).
func webhookDown(webhook string) error {
	return apierrors.NewInternalError(fmt.Errorf("failed calling webhook %q: failed to call webhook: "+
		`Post "https://127.0.0.1:9/validate?timeout=10s": dial tcp 127.0.0.1:9: connect: connection refused`, webhook))
}

// An admission webhook that cannot be called fails the eviction of the
// pods it selects, and only theirs: the next candidate goes in the same
// pass, with no back-off for the episode, and the log, an Event on the pod
// and the metric name the webhook. Before, the 500 was the API server's
// failure: the episode backed off and asked for the same pod again and
// again while the others could have gone.
func TestLoopWebhookFailureLetsTheNextGoAtOnce(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	api := withAPIEvictor(t, n, func(pod string, _ time.Time) error {
		if pod == "a" {
			return webhookDown("guard.example.com")
		}
		return nil
	})
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 20*time.Second)
	if !eq(n.victims(), []string{"a", "b"}) {
		t.Fatalf("calls %v, want [a b]: a's webhook failed, b in its place, nothing more", n.victims())
	}
	if gap := n.calls[1].at.Sub(n.calls[0].at); gap != 0 || n.calls[1].step != n.calls[0].step {
		t.Errorf("b asked %v (pass %d) after a's webhook failure (pass %d), want in the same pass", gap, n.calls[1].step, n.calls[0].step)
	}
	if got := n.evictedPods(); !eq(got, []string{"b"}) {
		t.Errorf("terminated %v, want [b]", got)
	}
	if got := api.count("webhook_failed"); got != 1 {
		t.Errorf("evictd_evictions_total{result=webhook_failed} = %v, want 1", got)
	}
	if got := api.count(metrics.ResultError); got != 0 {
		t.Errorf("evictd_evictions_total{result=error} = %v, want 0: a webhook's failure is not the API server's", got)
	}
	warned := api.logs.FilterLevelExact(zapcore.WarnLevel).FilterField(zap.String("pod", "ns/a")).FilterField(zap.String("webhook", "guard.example.com"))
	if warned.Len() != 1 {
		t.Errorf("%d warnings about ns/a naming webhook guard.example.com, want 1; logs: %v", warned.Len(), api.logs.All())
	}
	var onA []string
	for _, e := range api.flushEvents() {
		if strings.HasPrefix(e, "EvictionWebhookFailed a: ") {
			onA = append(onA, e)
		}
	}
	if len(onA) != 1 || !strings.Contains(onA[0], `"guard.example.com"`) || !strings.Contains(onA[0], "connection refused") {
		t.Errorf("EvictionWebhookFailed Events on a: %q, want one naming the webhook and quoting the server", onA)
	}
}

// With nobody else to evict, the pod whose webhook fails is asked again on
// its own recheck, the episode's longest failure back-off (30 s), sooner
// than a refusal's 2 minutes (the webhook comes back when its pods do, not
// when a person changes a policy), and goes once the webhook answers.
func TestLoopWebhookFailedPodIsAskedAgainAfterItsRecheck(t *testing.T) {
	n := newSimNode(t, 4096*mi, 4096*mi-250*mi-1000*mi, &simPod{name: "a", usage: 1000 * mi, grace: 30, exitIn: time.Second})
	back := t0.Add(75 * time.Second)
	withAPIEvictor(t, n, func(_ string, now time.Time) error {
		if now.Before(back) {
			return webhookDown("guard.example.com")
		}
		return nil
	})
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	cfg.RefusedRecheck = 2 * time.Minute
	n.run(t, cfg, 100*time.Second)
	// At 0, 30 and 60 s the webhook fails; at 90 s it answers.
	if len(n.calls) != 4 {
		t.Fatalf("%d calls for a in 100 s (at %v), want 4: at 0, 30, 60 and 90 s", len(n.calls), callTimes(n))
	}
	for i := 1; i < len(n.calls); i++ {
		if gap := n.calls[i].at.Sub(n.calls[i-1].at); gap < 30*time.Second || gap > 32*time.Second {
			t.Errorf("a asked again %v after its webhook failed, want after the 30s recheck", gap)
		}
	}
	if got := n.evictedPods(); !eq(got, []string{"a"}) {
		t.Errorf("terminated %v, want [a] once its webhook answers", got)
	}
}

// NamespaceLifecycle answers 403 "not yet ready to handle request" until its
// informer has synced, right after an API server starts. That is the API
// server's state, the same for every pod: the episode backs off briefly and
// asks for the same, best, pod again. Before, it was read as a refusal of
// that pod: the next candidate was evicted in its place, and every pod
// asked meanwhile was skipped for 2 minutes.
func TestLoopAdmissionNotYetReadyIsTheAPIServersState(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	ready := t0.Add(3 * time.Second)
	api := withAPIEvictor(t, n, func(pod string, now time.Time) error {
		if now.Before(ready) {
			// admission.NewForbidden(a, fmt.Errorf("not yet ready to handle
			// request")) for the pod's eviction.
			return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod, errors.New("not yet ready to handle request"))
		}
		return nil
	})
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 20*time.Second)
	if got := n.evictedPods(); !eq(got, []string{"a"}) {
		t.Fatalf("terminated %v (calls %v), want [a]: the first in rank, once admission is ready", got, n.victims())
	}
	for _, v := range n.victims() {
		if v != "a" {
			t.Errorf("calls %v: only a should be asked for; the 403 was not about a", n.victims())
			break
		}
	}
	if last := n.calls[len(n.calls)-1].at; last.Sub(ready) > 5*time.Second {
		t.Errorf("a evicted %v after admission was ready, want within the episode's short back-off", last.Sub(ready))
	}
	if got := api.count(metrics.ResultRefused); got != 0 {
		t.Errorf("evictd_evictions_total{result=refused} = %v, want 0", got)
	}
	if got := api.count(metrics.ResultError); got < 1 {
		t.Errorf("evictd_evictions_total{result=error} = %v, want the 403s counted as errors", got)
	}
}

func callTimes(n *simNode) []time.Duration {
	var out []time.Duration
	for _, c := range n.calls {
		out = append(out, c.at.Sub(t0))
	}
	return out
}
