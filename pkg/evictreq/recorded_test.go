// SPDX-License-Identifier: Apache-2.0

package evictreq

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kube/fromclientset"
	"github.com/evictd/evictd/pkg/metrics"
)

// recorder is an Evictor whose imperative half writes Events (to a
// clientset fake, as pure wiring) and counts in a registry of its own.
type recorder struct {
	*harness
	events  *fake.Clientset
	writer  *evict.EventWriter
	metrics *metrics.Metrics
}

func newRecorder(t *testing.T, wait time.Duration) *recorder {
	t.Helper()
	r := &recorder{harness: &harness{api: newMemAPI(), pods: &podAPI{}}, events: fake.NewClientset()}
	m, err := metrics.New(buildinfo.Info{})
	if err != nil {
		t.Fatal(err)
	}
	r.metrics = m
	r.writer = evict.NewEventWriter(fromclientset.Wrap(r.events), "evictd-node-a", nil, nil)
	o := evict.Defaults()
	o.Rate, o.Burst, o.MaxPerEpisode = 1000, 1000, 1000
	imp, err := evict.New(evict.Config{Options: o, Client: r.pods, NodeName: "node-a", Events: r.writer, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	r.ev, err = New(Config{Imperative: imp, API: r.api, Pods: r.api.informer, ResponderWait: wait, Poll: 2 * time.Millisecond, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// evictions is evictd_evictions_total by result, for one signal.
func (r *recorder) evictions(t *testing.T, signal string) map[string]float64 {
	t.Helper()
	mfs, err := r.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "evictd_evictions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "signal") == signal && m.GetCounter().GetValue() != 0 {
				got[label(m, "result")] = m.GetCounter().GetValue()
			}
		}
	}
	return got
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// podEvents are the Events written on the test pod, after the writer has
// flushed them.
func (r *recorder) podEvents(t *testing.T) []string {
	t.Helper()
	if err := r.writer.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	list, err := r.events.EventsV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "Pod" && ev.Regarding.Name == "cart-0" {
			out = append(out, ev.Reason+": "+ev.Note)
		}
	}
	return out
}

// A pod a responder evicts, acting on evictd's request, is recorded as an
// eviction is: one Evicted Event on the pod saying a responder acted on
// evictd's EvictionRequest, and one count in evictd_evictions_total with
// result responder_evicted (no evicted: the Eviction API was not called).
func TestResponderEvictionRecorded(t *testing.T) {
	r := newRecorder(t, time.Minute)
	r.api.onPoll = func(p *v1.Pod) {
		if _, ok := r.api.ers["shop/"+Name(uid)]; ok {
			now := metav1.Now()
			p.DeletionTimestamp = &now // a responder drained it
		}
	}
	out, err := r.ev.Evict(context.Background(), softMemory())
	if err != nil || !out.Result.Accepted() {
		t.Fatalf("Evict = %v, %v; want the pod counted as on its way out", out.Result, err)
	}
	if got := r.evictions(t, "memory.available"); len(got) != 1 || got[metrics.ResultResponderEvicted] != 1 {
		t.Errorf("evictd_evictions_total{signal=memory.available} = %v; want responder_evicted 1 and nothing else", got)
	}
	events := r.podEvents(t)
	if len(events) != 1 || !strings.HasPrefix(events[0], evict.ReasonEvicted+": ") ||
		!strings.Contains(events[0], "eviction responder acting on evictd's EvictionRequest shop/"+Name(uid)) {
		t.Errorf("Events on the pod %q; want one Evicted Event saying a responder acted on evictd's EvictionRequest", events)
	}
}

// No responder: the fall-back's eviction is recorded once, as the
// Eviction API's (evicted), never also as a responder's.
func TestFallbackRecordedOnce(t *testing.T) {
	r := newRecorder(t, 20*time.Millisecond)
	if _, err := r.ev.Evict(context.Background(), softMemory()); err != nil {
		t.Fatal(err)
	}
	if got := r.evictions(t, "memory.available"); len(got) != 1 || got[metrics.ResultEvicted] != 1 {
		t.Errorf("evictd_evictions_total{signal=memory.available} = %v; want evicted 1 and nothing else", got)
	}
	if events := r.podEvents(t); len(events) != 1 || strings.Contains(events[0], "responder") {
		t.Errorf("Events on the pod %q; want one, evictd's own", events)
	}
}
