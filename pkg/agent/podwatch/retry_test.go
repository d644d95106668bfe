// SPDX-License-Identifier: Apache-2.0

package podwatch

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/evictd/evictd/pkg/kube/fromclientset"
)

func TestRetryable(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tt := range []struct {
		name   string
		err    error
		synced bool
		want   bool
	}{
		{"connection refused", &netErr{syscall.ECONNREFUSED}, false, true},
		{"503", apierrors.NewServiceUnavailable("starting"), false, true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true, true},
		{"timeout", apierrors.NewTimeoutError("slow", 1), true, true},
		{"403 before the sync: a missing grant", apierrors.NewForbidden(pods, "", errors.New("no")), false, false},
		{"403 after it: RBAC still loading", apierrors.NewForbidden(pods, "", errors.New("no")), true, true},
		{"410: the reflector lists again", apierrors.NewResourceExpired("too old"), true, false},
		{"400: the reflector falls back to a list", apierrors.NewBadRequest("no sendInitialEvents"), true, false},
	} {
		if got := retryable(tt.err, tt.synced); got != tt.want {
			t.Errorf("%s: retryable(%v, synced %v) = %v, want %v", tt.name, tt.err, tt.synced, got, tt.want)
		}
	}
}

type netErr struct{ errno syscall.Errno }

func (e *netErr) Error() string { return "dial tcp 127.0.0.1:6443: " + e.errno.Error() }
func (e *netErr) Unwrap() error { return e.errno }

func TestServerAnswered(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, true},
		{apierrors.NewNotFound(pods, "gone"), true},
		{apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0), true},
		{pdbRefusal(0), true},
		{pdbRefusal(10), true},
		{loadShed(), false},
		{apierrors.NewTooManyRequests("slow down", 5), false},
		{apierrors.NewTooManyRequests("slow down", 0), false},
		{apierrors.NewConflict(pods, "p", errors.New("changed")), true},
		{apierrors.NewForbidden(pods, "p", errors.New("RBAC not loaded")), false},
		{apierrors.NewUnauthorized("token"), false},
		{apierrors.NewServiceUnavailable("starting"), false},
		{apierrors.NewInternalError(errors.New("etcd")), false},
		{&netErr{syscall.ECONNREFUSED}, false},
		{context.DeadlineExceeded, false},
	} {
		if got := ServerAnswered(tt.err); got != tt.want {
			t.Errorf("ServerAnswered(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// pdbRefusal is the eviction subresource's 429 for a pod its
// PodDisruptionBudget holds, as the API server words it: a DisruptionBudget
// cause, and a Retry-After of 10 s while the budget is still being
// processed (0: none).
func pdbRefusal(retryAfter int) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", retryAfter)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 2 healthy pods and has 2 currently"})
	return err
}

// loadShed is API Priority and Fairness's 429 as client-go hands it on:
// the server answers plain text with a Retry-After header, which the
// client turns into a generic TooManyRequests status.
func loadShed() error {
	return apierrors.NewGenericServerResponse(http.StatusTooManyRequests, "POST",
		schema.GroupResource{Resource: "pods"}, "p", "Too many requests, please try again later.", 1, true)
}

// An answered call ends the informers' back-off only when it shows a
// serving API server: a PodDisruptionBudget's 429 does (the eviction was
// weighed against the budget), a 429 of a server shedding load does not,
// with a Retry-After or without.
func TestAnsweredLoadSheddingKeepsTheBackOff(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		ends bool
	}{
		{"API Priority and Fairness's 429, Retry-After 1 s", loadShed(), false},
		{"a 429 with Retry-After 5 s", apierrors.NewTooManyRequests("slow down", 5), false},
		{"a 429 without Retry-After", apierrors.NewTooManyRequests("slow down", 0), false},
		{"a PodDisruptionBudget's 429", pdbRefusal(0), true},
		{"a PodDisruptionBudget's 429 with Retry-After 10 s", pdbRefusal(10), true},
	} {
		w := &Watcher{log: zaptest.NewLogger(t), retryNow: make(chan struct{})}
		// The channel a waiting list or watch selects on: closed, its
		// back-off ends.
		waiting := w.retryChan()
		w.Answered(tt.err)
		ended := false
		select {
		case <-waiting:
			ended = true
		default:
		}
		if ended != tt.ends {
			t.Errorf("%s: Answered ended the back-off: %v, want %v", tt.name, ended, tt.ends)
		}
	}
}

// failingLists is a clientset whose pod lists fail with err until ok is
// set, counting the calls.
func failingLists(err error) (*fake.Clientset, *atomic.Bool, *atomic.Int32) {
	cs := fake.NewClientset()
	var ok atomic.Bool
	var calls atomic.Int32
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		if ok.Load() {
			return false, nil, nil
		}
		return true, nil, err
	})
	return cs, &ok, &calls
}

// A list failing for a passing reason is tried again by podwatch, backing
// off; Answered (another call of evictd's answered) ends the wait at once.
func TestAnsweredEndsTheBackOff(t *testing.T) {
	cs, ok, calls := failingLists(apierrors.NewServiceUnavailable("restarting"))
	w, _ := startWatcher(t, Options{Client: fromclientset.Wrap(cs), SyncTimeout: time.Minute, RetryMin: time.Hour, RetryMax: time.Hour})
	// The other informers' answers end the wait too (by design: a list and
	// a watch answered for each, so at most two more tries each): once they
	// have all synced, the lists stop.
	waitFor(t, "the other informers to sync", func() bool { return syncedBut(w, "pods") })
	most := int32(1 + 2*(len(w.informers)-1))
	n0 := calls.Load()
	time.Sleep(200 * time.Millisecond)
	if n := calls.Load(); n > most {
		t.Fatalf("%d lists once the others synced, then %d, in an hour's back-off; want at most %d", n0, n, most)
	}
	n0 = calls.Load()
	ok.Store(true)
	w.Answered(apierrors.NewServiceUnavailable("still down")) // not an answer
	time.Sleep(100 * time.Millisecond)
	if n := calls.Load(); n != n0 {
		t.Fatalf("a 503 elsewhere ended the back-off: %d lists", n)
	}
	start := time.Now()
	w.Answered(pdbRefusal(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatalf("WaitForSync after Answered: %v", err)
	}
	t.Logf("synced %v after Answered, %d lists", time.Since(start).Round(time.Millisecond), calls.Load())
}

// Without an answer elsewhere the tries back off: once the other informers
// have synced (their answers end a wait), the lists come at least RetryMin
// apart, never in a busy loop.
func TestRetryBacksOff(t *testing.T) {
	const retryMin = 50 * time.Millisecond
	cs, _, calls := failingLists(&netErr{syscall.ECONNREFUSED})
	var mu sync.Mutex
	var at []time.Time
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return false, nil, nil // on to failingLists'
	})
	w, cancel := startWatcher(t, Options{Client: fromclientset.Wrap(cs), SyncTimeout: time.Minute,
		RetryMin: retryMin, RetryMax: 200 * time.Millisecond})
	waitFor(t, "the other informers to sync", func() bool { return syncedBut(w, "pods") })
	from := calls.Load()
	// The first list after the others synced may still be one their last
	// answer set off; the ones after it are the back-off's alone.
	const gaps = 3
	waitFor(t, "more lists", func() bool { return calls.Load() >= from+2+gaps })
	cancel()
	w.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	for i := int(from) + 1; i < int(from)+1+gaps; i++ {
		if gap := at[i+1].Sub(at[i]); gap < retryMin {
			t.Errorf("list %d came %v after the one before, want at least RetryMin %v", i+1, gap, retryMin)
		}
	}
	if w.Synced() {
		t.Error("synced while every list failed")
	}
}

// A list or watch the server sheds (429) is tried again no sooner than its
// Retry-After, however short the back-off.
func TestRetryWaitsOutRetryAfter(t *testing.T) {
	w := &Watcher{log: zaptest.NewLogger(t), retryMin: time.Millisecond, retryMax: time.Millisecond,
		retryNow: make(chan struct{}), failed: make(chan struct{})}
	var at []time.Time
	err := w.withRetry(context.Background(), &informer{resource: "pods"}, "list", func() error {
		at = append(at, time.Now())
		if len(at) == 1 {
			return loadShed() // Retry-After: 1 s
		}
		return nil
	})
	if err != nil || len(at) != 2 {
		t.Fatalf("withRetry = %v after %d calls, want success after two", err, len(at))
	}
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Errorf("tried again %v after a 429 with Retry-After 1 s, want at least 1 s", gap)
	}
}

// A 410 (the reflector must list afresh) is the reflector's, at once.
func TestExpiredIsNotRetriedHere(t *testing.T) {
	calls := 0
	w := &Watcher{log: zaptest.NewLogger(t), retryMin: time.Hour, retryMax: time.Hour, retryNow: make(chan struct{}), failed: make(chan struct{})}
	err := w.withRetry(context.Background(), &informer{resource: "pods"}, "watch", func() error {
		calls++
		return apierrors.NewResourceExpired("too old resource version")
	})
	if !apierrors.IsResourceExpired(err) || calls != 1 {
		t.Errorf("withRetry = %v after %d calls, want the 410 after one", err, calls)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
