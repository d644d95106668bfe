// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/kube/fromclientset"
)

// writerWith returns an EventWriter on a fake clientset whose event creates
// go through react first (nil: plain success).
func writerWith(t *testing.T, react func(n int64) error) (*EventWriter, *fake.Clientset, *observer.ObservedLogs) {
	t.Helper()
	client := fake.NewClientset()
	var n atomic.Int64
	if react != nil {
		client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			if err := react(n.Add(1)); err != nil {
				return true, nil, err
			}
			return false, nil, nil // let the tracker store it
		})
	}
	core, logs := observer.New(zapcore.DebugLevel)
	w := NewEventWriter(fromclientset.Wrap(client), "evictd-"+node, zap.New(core), nil)
	return w, client, logs
}

func countEvents(t *testing.T, client *fake.Clientset) int {
	t.Helper()
	list, err := client.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestEventWriterFlushesOnShutdown(t *testing.T) {
	w, client, _ := writerWith(t, func(int64) error { time.Sleep(2 * time.Millisecond); return nil })
	for i := range 20 {
		w.Emit(podRef(testPod("p"+string(rune('a'+i)), nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "note")
	}
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countEvents(t, client); got != 20 {
		t.Errorf("%d events written before Shutdown returned, want 20", got)
	}
}

// hangingAPI is an API server that answers no create: each call ends only
// when its context does, with the context's error, as a real client's does.
type hangingAPI struct {
	started chan struct{} // closed when the first call is in flight
	once    sync.Once
	mu      sync.Mutex
	ended   int // calls that have returned
}

func (a *hangingAPI) CreateEvent(ctx context.Context, _ *eventsv1.Event) error {
	a.once.Do(func() { close(a.started) })
	<-ctx.Done()
	a.mu.Lock()
	a.ended++
	a.mu.Unlock()
	return ctx.Err()
}

// Shutdown past its deadline cancels the call in flight, waits for it to
// return, and counts the Events still queued. The verdict rests on events
// only: the first call is seen in flight before Shutdown is called with a
// context already ended, and the writer's clock never moves, so that a
// back-off (should a stalled host let the call's own timeout pass first)
// lasts until Shutdown.
func TestEventWriterShutdownDeadline(t *testing.T) {
	api := &hangingAPI{started: make(chan struct{})}
	core, logs := observer.New(zapcore.DebugLevel)
	w := NewEventWriter(api, "evictd-"+node, zap.New(core), clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)))
	for _, name := range []string{"a", "b", "c"} {
		w.Emit(podRef(testPod(name, nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "note")
	}
	select {
	case <-api.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer made no call within 30s of three Emits")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Shutdown's deadline has passed
	shut := make(chan error, 1)
	go func() { shut <- w.Shutdown(ctx) }()
	var err error
	select {
	case err = <-shut:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown past its deadline had not returned 30s later: the call in flight was not cancelled")
	}
	if err == nil || !strings.Contains(err.Error(), "2 events unwritten") || !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown past its deadline: %v, want an error counting 2 unwritten events", err)
	}
	api.mu.Lock()
	ended := api.ended
	api.mu.Unlock()
	if ended == 0 {
		t.Error("Shutdown returned before the call in flight did")
	}
	failed := logs.FilterMessage("could not write event").All()
	if len(failed) != 1 || !strings.Contains(failed[0].ContextMap()["object"].(string), "/a") ||
		!strings.Contains(fmt.Sprint(failed[0].ContextMap()), context.Canceled.Error()) {
		t.Errorf("logged %v, want one 'could not write event' for the call in flight, a, cancelled", failed)
	}
}

func TestEventWriterRetriesTransientErrors(t *testing.T) {
	w, client, logs := writerWith(t, func(n int64) error {
		switch n {
		case 1:
			return err503 // transient: retried
		case 3:
			return err403 // a refusal: final, logged
		}
		return nil
	})
	w.Emit(podRef(testPod("a", nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "first")
	w.Emit(podRef(testPod("b", nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "second")
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countEvents(t, client); got != 1 {
		t.Errorf("%d events written, want 1 (the retried one)", got)
	}
	if n := logs.FilterMessage("could not write event").Len(); n != 1 {
		t.Errorf("%d 'could not write event' logs, want 1", n)
	}
}

func TestEventWriterAfterShutdown(t *testing.T) {
	w, client, logs := writerWith(t, nil)
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Emit(podRef(testPod("late", nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "too late")
	if err := w.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if countEvents(t, client) != 0 || logs.FilterMessageSnippet("writer shut down").Len() != 1 {
		t.Error("an event emitted after Shutdown must be dropped and logged")
	}
}

// eventsAPI is an API server's events endpoint: it answers each create
// with fail (nil: stores the Event, as the server would), counting the
// calls.
type eventsAPI struct {
	mu      sync.Mutex
	fail    error
	calls   int
	written []*eventsv1.Event
}

func (a *eventsAPI) CreateEvent(_ context.Context, ev *eventsv1.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.fail != nil {
		return a.fail
	}
	a.written = append(a.written, ev.DeepCopy())
	return nil
}

func (a *eventsAPI) count() (calls, written int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls, len(a.written)
}

func (a *eventsAPI) set(err error) {
	a.mu.Lock()
	a.fail = err
	a.mu.Unlock()
}

// waitClock is the writer's fake clock; it remembers how many waits the
// writer has begun and when the last one ends, so that a test moves the
// clock to the end of each wait and no further.
type waitClock struct {
	*clocktesting.FakeClock
	mu    sync.Mutex
	waits int
	until time.Time
}

func (c *waitClock) After(d time.Duration) <-chan time.Time {
	at := c.Now().Add(d)
	ch := c.FakeClock.After(d) // registered before the test can see the wait
	c.mu.Lock()
	c.waits, c.until = c.waits+1, at
	c.mu.Unlock()
	return ch
}

// passHour runs the writer's clock for an hour, one back-off wait at a
// time: each step waits until the writer has begun its next wait, then
// ends it. It returns with the writer waiting again, the hour past, or
// early once the API has had more than most calls.
func passHour(t *testing.T, clk *waitClock, api *eventsAPI, most int) {
	t.Helper()
	start, seen := clk.Now(), 0
	for {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if calls, _ := api.count(); calls > most {
				return
			}
			clk.mu.Lock()
			waits := clk.waits
			clk.mu.Unlock()
			if waits > seen {
				seen = waits
				break
			}
			if time.Now().After(deadline) {
				calls, _ := api.count()
				t.Fatalf("after %d calls in %v of its clock, the writer neither calls again nor waits", calls, clk.Since(start))
			}
			time.Sleep(time.Millisecond)
		}
		if clk.Since(start) >= time.Hour {
			return
		}
		clk.mu.Lock()
		clk.SetTime(clk.until)
		clk.mu.Unlock()
	}
}

// queued fills the writer's queue as a long outage would: an Event for
// each of n pods.
func queued(w *EventWriter, n int) {
	for i := range n {
		w.Emit(podRef(testPod(fmt.Sprintf("p%03d", i), nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "note")
	}
}

// drained waits until the API holds want Events.
func drained(t *testing.T, api *eventsAPI, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, written := api.count(); written == want {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%d Events written once the API server answered again, want %d", written, want)
		}
	}
}

// While the API server is away, the Events queued cost it a call per
// back-off of the writer's, not three per Event in a second and a half:
// over an hour of the writer's own clock, at most one call per
// eventRetryMax/2 (the shortest wait at the cap) after the back-off's
// ramp, and at least one per eventRetryMax. Back, it writes what it still
// holds at once.
func TestEventWriterBacksOffWhileTheServerIsAway(t *testing.T) {
	api := &eventsAPI{fail: apierrors.NewServiceUnavailable("apiserver is shutting down")}
	clk := &waitClock{FakeClock: clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))}
	core, logs := observer.New(zapcore.InfoLevel)
	w := NewEventWriter(api, "evictd-"+node, zap.New(core), clk)
	const events = 200
	queued(w, events)
	// The first call, five while the wait doubles from 1 s to 30 s (15.5 s
	// at the least), then one per 15 s at the most.
	most := 1 + 5 + int(time.Hour/(eventRetryMax/2))
	passHour(t, clk, api, most)
	calls, _ := api.count()
	if calls > most {
		t.Fatalf("%d calls to create Events in %v of the writer's clock while the API server was away; want at most %d in an hour",
			calls, clk.Since(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)), most)
	}
	t.Logf("%d calls in an hour of the server away", calls)
	if least := int(time.Hour / eventRetryMax); calls < least {
		t.Errorf("%d calls in an hour while the API server was away; want at least one per %v (%d)", calls, eventRetryMax, least)
	}
	given := logs.FilterMessage("could not write event").Len()
	if given != calls/eventTries {
		t.Errorf("%d Events given up after %d calls; want one per %d calls", given, calls, eventTries)
	}
	api.set(nil)
	clk.mu.Lock()
	clk.SetTime(clk.until) // the wait under way
	clk.mu.Unlock()
	drained(t, api, events-given)
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A write the API server refuses (403: a missing grant, the admission
// policy) is dropped, and the writer backs off to minutes before its next
// call, saying so once: over an hour of its clock at most one call per
// eventRefusedRetryMax/2 after the ramp, not one per Event queued. Once
// the refusal ends, it says so once and writes the rest.
func TestEventWriterRefusedBacksOffToMinutes(t *testing.T) {
	api := &eventsAPI{fail: apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "",
		errors.New(`User "system:serviceaccount:evictd-system:evictd" cannot create resource "events" in API group "events.k8s.io" in the namespace "default"`))}
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clk := &waitClock{FakeClock: clocktesting.NewFakeClock(start)}
	core, logs := observer.New(zapcore.InfoLevel)
	w := NewEventWriter(api, "evictd-"+node, zap.New(core), clk)
	const events = 200
	queued(w, events)
	// The first call, nine while the wait doubles from 1 s to 5 minutes
	// (4¼ minutes at the least), then one per 2½ minutes at the most.
	most := 1 + 9 + int(time.Hour/(eventRefusedRetryMax/2))
	passHour(t, clk, api, most)
	calls, _ := api.count()
	if calls > most {
		t.Fatalf("%d calls to create Events in %v of the writer's clock while the API server refused them; want at most %d in an hour",
			calls, clk.Since(start), most)
	}
	t.Logf("%d calls in an hour of refusals", calls)
	if least := int(time.Hour / eventRefusedRetryMax); calls < least {
		t.Errorf("%d calls in an hour of refusals; want at least one per %v (%d)", calls, eventRefusedRetryMax, least)
	}
	if n := logs.FilterMessage("could not write event").Len(); n != 1 {
		t.Errorf("%d 'could not write event' logs over %d refusals; want 1", n, calls)
	}
	api.set(nil)
	clk.mu.Lock()
	clk.SetTime(clk.until)
	clk.mu.Unlock()
	drained(t, api, events-calls)
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessage("events are written again").Len(); n != 1 {
		t.Errorf("%d 'events are written again' logs; want 1", n)
	}
}
