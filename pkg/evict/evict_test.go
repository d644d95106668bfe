// SPDX-License-Identifier: Apache-2.0

package evict

// These tests use client-go's fake clientset only where a real API server
// cannot be made to answer on demand: 5xx, timeouts, 404 and UID races, and
// to count the calls the limits prevent. What the server itself decides
// (PDB verdicts, the grace period a pod gets, dry run leaving the pod alone)
// is tested against a real API server in test/e2e/evict.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/kube/fromclientset"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

const node = "node-a"

// harness is an Evictor on a fake clientset whose eviction and delete
// answers are scripted.
type harness struct {
	t       *testing.T
	client  *fake.Clientset
	ev      *Evictor
	events  *EventWriter
	metrics *metrics.Metrics
	logs    *observer.ObservedLogs

	mu        sync.Mutex
	answers   []error // next answers, in order; nil or empty means success
	evictions []*policyv1.Eviction
	deletes   []metav1.DeleteOptions
	onCall    func()
}

type harnessOpts struct {
	mutate func(*Options)
	clock  clock.Clock
}

func newHarness(t *testing.T, ho harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, client: fake.NewClientset()}
	h.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		h.mu.Lock()
		h.evictions = append(h.evictions, ev.DeepCopy())
		return true, nil, h.next()
	})
	h.client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		h.mu.Lock()
		h.deletes = append(h.deletes, a.(k8stesting.DeleteActionImpl).DeleteOptions)
		return true, nil, h.next()
	})

	o := Defaults()
	o.Rate, o.Burst, o.MaxPerEpisode = 1000, 1000, 1000 // out of the way unless a test sets them
	o.MaxPodGracePeriod = 30                            // a soft cap, to see it applied
	if ho.mutate != nil {
		ho.mutate(&o)
	}
	clk := ho.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	m, err := metrics.New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h.metrics = m
	h.events = NewEventWriter(fromclientset.Wrap(h.client), "evictd-"+node, zap.New(core), clk)
	t.Cleanup(func() { _ = h.events.Shutdown(context.Background()) })
	h.ev, err = New(Config{
		Options: o, Client: fromclientset.Wrap(h.client), NodeName: node, Events: h.events, Metrics: m,
		Logger: zap.New(core), Clock: clk,
		Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// next pops the next scripted answer; h.mu is held and released here.
func (h *harness) next() error {
	var err error
	if len(h.answers) > 0 {
		err, h.answers = h.answers[0], h.answers[1:]
	}
	cb := h.onCall
	h.mu.Unlock()
	if cb != nil {
		cb()
	}
	return err
}

func (h *harness) script(errs ...error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answers = errs
}

func (h *harness) calls() (evictions int, deletes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.evictions), len(h.deletes)
}

func (h *harness) lastEviction() *policyv1.Eviction {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.evictions) == 0 {
		h.t.Fatal("no eviction was sent")
	}
	return h.evictions[len(h.evictions)-1]
}

// counter reads evictd_evictions_total{signal,result}.
func (h *harness) counter(s thresholds.Signal, result Result) float64 {
	h.t.Helper()
	return metrictest.Value(h.t, h.metrics.Registry(), "evictd_evictions_total", map[string]string{"signal": string(s), "result": string(result)})
}

// flushEvents waits for queued Events and returns those the fake server got.
func (h *harness) flushEvents() []eventsv1.Event {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.events.Shutdown(ctx); err != nil {
		h.t.Fatal(err)
	}
	list, err := h.client.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func testPod(name string, grace *int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: grace},
	}
}

func memReq(pod *v1.Pod, hard bool) Request {
	return Request{
		Pod: pod, Signal: thresholds.MemoryAvailable, Hard: hard,
		Threshold: 100 << 20, Available: 92 << 20, Usage: 1 << 30, Request: 256 << 20,
		Rank: 1, Reason: "usage above request; priority 0",
	}
}

var (
	errPDB = pdbRefusal("The disruption budget web needs 2 healthy pods and has 2 currently")
	err404 = apierrors.NewNotFound(podsGR, "web-1")
	err500 = apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	err503 = apierrors.NewServiceUnavailable("apiserver is shutting down")
	// The authorizer's 403, in its own words.
	err403 = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `pods "web-1" is forbidden: User "system:serviceaccount:evictd-system:evictd" cannot create resource "pods/eviction" in API group "" in the namespace "shop"`}}
	errDenied = apierrors.NewForbidden(podsGR, "web-1",
		errors.New("ValidatingAdmissionPolicy 'keep-web' with binding 'keep-web' denied request: web-1 stays"))
	errUID = apierrors.NewConflict(podsGR, "web-1",
		errors.New("the UID in the precondition (uid-web-1) does not match the UID in record (new). The object might have been deleted and then recreated"))
)

func TestEvictResults(t *testing.T) {
	tests := []struct {
		name         string
		dryRun       bool
		answers      []error
		want         Result
		wantErr      error // errors.Is target; nil means no error
		wantAttempts int
	}{
		{"allowed", false, nil, Evicted, nil, 1},
		{"pod gone", false, []error{err404}, NotFound, nil, 1},
		{"PDB refuses", false, []error{errPDB}, PDBBlocked, ErrPDBBlocked, 1},
		{"transient 500s then allowed", false, []error{err500, err503, nil}, Evicted, nil, 3},
		{"500 then pod gone", false, []error{err500, err404}, NotFound, nil, 2},
		{"503 until retries run out", false, []error{err503, err503, err503, err503, err503}, Failed, err503, 4},
		{"403 of evictd's own RBAC is not retried", false, []error{err403}, Failed, err403, 1},
		{"403 of an admission policy: refused for this pod", false, []error{errDenied}, Refused, ErrRefused, 1},
		{"dry run refused", true, []error{errDenied}, Refused, ErrRefused, 1},
		{"UID changed", false, []error{errUID}, NotFound, nil, 1},
		{"dry run allowed", true, nil, DryRun, nil, 1},
		{"dry run PDB", true, []error{errPDB}, PDBBlocked, ErrPDBBlocked, 1},
		{"dry run pod gone", true, []error{err404}, NotFound, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.DryRun = tt.dryRun }})
			h.script(tt.answers...)
			pod := testPod("web-1", ptr[int64](45))
			out, err := h.ev.Evict(context.Background(), memReq(pod, false))

			if out.Result != tt.want || out.Attempts != tt.wantAttempts {
				t.Errorf("outcome %+v, want result %s after %d attempts", out, tt.want, tt.wantAttempts)
			}
			if tt.wantErr == nil && err != nil {
				t.Errorf("unexpected error %v", err)
			}
			if tt.wantErr != nil {
				var pe *PodError
				if !errors.Is(err, tt.wantErr) || !errors.As(err, &pe) || pe.Pod != "shop/web-1" || pe.Result != tt.want {
					t.Errorf("error %v: want a *PodError for shop/web-1 (%s) wrapping %v", err, tt.want, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "shop/web-1") {
					t.Errorf("error %q does not name the pod", err)
				}
			}
			if got := h.counter(thresholds.MemoryAvailable, tt.want); got != 1 {
				t.Errorf("evictd_evictions_total{result=%q} = %v, want 1", tt.want, got)
			}
			if (out.Result == Evicted) != !out.Accepted.IsZero() {
				t.Errorf("Accepted = %v for result %s", out.Accepted, out.Result)
			}

			// What was sent: this pod, its UID, the soft grace, dry run or not.
			ev := h.lastEviction()
			if ev.Name != "web-1" || ev.Namespace != "shop" {
				t.Errorf("evicted %s/%s, want shop/web-1", ev.Namespace, ev.Name)
			}
			do := ev.DeleteOptions
			if do == nil || do.GracePeriodSeconds == nil || *do.GracePeriodSeconds != 30 {
				t.Errorf("grace sent %v, want min(45, soft cap 30) = 30", do)
			}
			if do == nil || do.Preconditions == nil || do.Preconditions.UID == nil || *do.Preconditions.UID != pod.UID {
				t.Errorf("no UID precondition in %+v", do)
			}
			wantDry := tt.dryRun
			if gotDry := do != nil && len(do.DryRun) == 1 && do.DryRun[0] == metav1.DryRunAll; gotDry != wantDry {
				t.Errorf("DryRun sent %v, want dry run %v", do.DryRun, wantDry)
			}

			// Events: only for a real, accepted or refused eviction.
			evs := h.flushEvents()
			wantEvents := 0
			if out.Result == Evicted || out.Result == Refused && !tt.dryRun {
				wantEvents = 1
			}
			if len(evs) != wantEvents {
				t.Fatalf("%d events written, want %d: %+v", len(evs), wantEvents, evs)
			}
			if wantEvents == 1 && out.Result == Refused {
				e := evs[0]
				if e.Reason != ReasonEvictionRefused || e.Type != v1.EventTypeWarning || e.Regarding.UID != pod.UID ||
					!strings.Contains(e.Note, "the API server refused: pods \"web-1\" is forbidden: ValidatingAdmissionPolicy 'keep-web' with binding 'keep-web' denied request: web-1 stays. evictd evicts the next candidate") {
					t.Errorf("unexpected event %+v", e)
				}
			} else if wantEvents == 1 {
				e := evs[0]
				if e.Reason != ReasonEvicted || e.Type != v1.EventTypeWarning || e.Regarding.UID != pod.UID ||
					e.Namespace != "shop" || e.ReportingController != "evictd" || e.ReportingInstance != "evictd-"+node ||
					!strings.Contains(e.Note, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi. Pod was using 1Gi, request is 256Mi, has larger consumption of memory.") {
					t.Errorf("unexpected event %+v", e)
				}
				if e.EventTime.IsZero() || e.Action == "" {
					t.Errorf("event lacks eventTime or action (the API requires both): %+v", e)
				}
			}
		})
	}
}

func TestHardGraceAndOverride(t *testing.T) {
	tests := []struct {
		name     string
		grace    *int64
		hard     bool
		override *int64
		want     int64
	}{
		{"hard caps", ptr[int64](30), true, nil, 5},
		{"override shortens", ptr[int64](30), true, ptr[int64](2), 2},
		{"pod grace 0 is sent as 1", ptr[int64](0), false, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			req := memReq(testPod("db-0", tt.grace), tt.hard)
			req.GraceOverride = tt.override
			out, err := h.ev.Evict(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			sent := h.lastEviction().DeleteOptions.GracePeriodSeconds
			if out.GracePeriodSeconds != tt.want || sent == nil || *sent != tt.want {
				t.Errorf("grace: outcome %d, sent %v; want %d", out.GracePeriodSeconds, sent, tt.want)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, harnessOpts{clock: clk, mutate: func(o *Options) { o.Rate, o.Burst = 1, 1 }})
	ctx := context.Background()

	steps := []struct {
		advance    time.Duration
		pod        string
		answer     error
		want       Result
		wantRetry  time.Duration
		wantCalled bool
	}{
		{0, "a", nil, Evicted, 0, true},
		{0, "b", nil, RateLimited, time.Second, false},
		{500 * time.Millisecond, "c", nil, RateLimited, 500 * time.Millisecond, false},
		{500 * time.Millisecond, "d", nil, Evicted, 0, true},
		// A refusal costs no token, so the next candidate goes at once.
		{time.Second, "e", errPDB, PDBBlocked, 0, true},
		{0, "f", err404, NotFound, 0, true},
		{0, "g", nil, Evicted, 0, true},
		{0, "h", nil, RateLimited, time.Second, false},
	}
	for i, s := range steps {
		clk.Step(s.advance)
		h.script(s.answer)
		before, _ := h.calls()
		out, err := h.ev.Evict(ctx, memReq(testPod(s.pod, nil), true))
		after, _ := h.calls()
		if out.Result != s.want || (after > before) != s.wantCalled {
			t.Fatalf("step %d (%s): result %s, called %v; want %s, called %v (err %v)", i, s.pod, out.Result, after > before, s.want, s.wantCalled, err)
		}
		if s.want == RateLimited {
			if !errors.Is(err, ErrRateLimited) || out.RetryAfter != s.wantRetry {
				t.Errorf("step %d: err %v, RetryAfter %v; want ErrRateLimited and %v", i, err, out.RetryAfter, s.wantRetry)
			}
		}
	}
	if got := h.counter(thresholds.MemoryAvailable, RateLimited); got != 3 {
		t.Errorf("rate_limited counted %v times, want 3", got)
	}
}

func TestEpisodeCap(t *testing.T) {
	h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.MaxPerEpisode = 2 }})
	ctx := context.Background()
	for _, p := range []string{"a", "b"} {
		if out, err := h.ev.Evict(ctx, memReq(testPod(p, nil), true)); out.Result != Evicted {
			t.Fatalf("pod %s: %s %v", p, out.Result, err)
		}
	}
	for _, p := range []string{"c", "d"} {
		out, err := h.ev.Evict(ctx, memReq(testPod(p, nil), true))
		if out.Result != RateLimited || !errors.Is(err, ErrEpisodeCap) || out.Attempts != 0 {
			t.Fatalf("pod %s past the cap: %+v %v, want RateLimited with ErrEpisodeCap and no call", p, out, err)
		}
	}
	if n, _ := h.calls(); n != 2 {
		t.Errorf("%d eviction calls, want 2", n)
	}
	if warns := h.logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("cap").Len(); warns != 1 {
		t.Errorf("cap logged at Warn %d times, want once per episode", warns)
	}
	if h.ev.EpisodeEvictions() != 2 {
		t.Errorf("EpisodeEvictions = %d, want 2", h.ev.EpisodeEvictions())
	}
	h.ev.ResetEpisode()
	if out, err := h.ev.Evict(ctx, memReq(testPod("e", nil), true)); out.Result != Evicted {
		t.Fatalf("after ResetEpisode: %s %v, want Evicted", out.Result, err)
	}
}

func TestDryRunVerdictOncePerEpisode(t *testing.T) {
	h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.DryRun = true }})
	ctx := context.Background()
	a, b := testPod("a", nil), testPod("b", nil)
	h.script(nil, errPDB)

	type call struct {
		pod        *v1.Pod
		want       Result
		wantCached bool
	}
	for i, c := range []call{{a, DryRun, false}, {b, PDBBlocked, false}, {a, DryRun, true}, {b, PDBBlocked, true}, {a, DryRun, true}} {
		out, err := h.ev.Evict(ctx, memReq(c.pod, true))
		if out.Result != c.want || out.Cached != c.wantCached {
			t.Errorf("call %d (%s): %+v %v; want %s cached=%v", i, c.pod.Name, out, err, c.want, c.wantCached)
		}
		if c.want == PDBBlocked && !errors.Is(err, ErrPDBBlocked) {
			t.Errorf("call %d: cached PDB verdict lost its error: %v", i, err)
		}
	}
	if n, _ := h.calls(); n != 2 {
		t.Errorf("%d API calls, want 2 (one per pod per episode)", n)
	}
	would := h.logs.FilterMessage("would evict pod")
	if would.Len() != 2 {
		t.Errorf("%d 'would evict' lines, want 2: %v", would.Len(), would.All())
	}
	for _, e := range would.All() {
		f := e.ContextMap()
		for _, k := range []string{"pod", "signal", "rank", "reason", "verdict", "node"} {
			if _, ok := f[k]; !ok {
				t.Errorf("'would evict' line lacks %q: %v", k, f)
			}
		}
	}
	if got := h.counter(thresholds.MemoryAvailable, DryRun); got != 1 {
		t.Errorf("dry_run counted %v, want 1", got)
	}

	h.ev.ResetEpisode()
	if out, _ := h.ev.Evict(ctx, memReq(a, true)); out.Cached || out.Attempts != 1 {
		t.Errorf("after ResetEpisode the verdict must be asked again: %+v", out)
	}
	if evs := h.flushEvents(); len(evs) != 0 {
		t.Errorf("dry run wrote %d events", len(evs))
	}
}

func TestPDBRefusalLoggedOncePerEpisode(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	h.script(errPDB, errPDB, errPDB)
	for range 3 {
		if out, _ := h.ev.Evict(ctx, memReq(testPod("a", nil), true)); out.Result != PDBBlocked || out.Cached {
			t.Fatalf("got %+v, want a fresh PDBBlocked each time in real mode", out)
		}
	}
	info := h.logs.FilterLevelExact(zapcore.InfoLevel).FilterMessage("eviction blocked by PodDisruptionBudget").Len()
	debug := h.logs.FilterLevelExact(zapcore.DebugLevel).FilterMessage("eviction blocked by PodDisruptionBudget").Len()
	if info != 1 || debug != 2 {
		t.Errorf("PDB refusal logged %d times at Info and %d at Debug, want 1 and 2", info, debug)
	}
	if got := h.counter(thresholds.MemoryAvailable, PDBBlocked); got != 3 {
		t.Errorf("pdb_blocked counted %v, want 3", got)
	}
}

func TestCancelledContext(t *testing.T) {
	t.Run("before the call", func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out, err := h.ev.Evict(ctx, memReq(testPod("a", nil), true))
		if n, _ := h.calls(); n != 0 || out.Result != Failed || !errors.Is(err, context.Canceled) {
			t.Errorf("%d calls, %+v, %v; want no call and Failed wrapping context.Canceled", n, out, err)
		}
	})
	t.Run("stops retries", func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.script(err503, err503, err503, err503)
		h.onCall = cancel // SIGTERM arrives during the first call
		out, err := h.ev.Evict(ctx, memReq(testPod("a", nil), true))
		if out.Attempts != 1 || out.Result != Failed || !errors.Is(err, err503) {
			t.Errorf("%+v %v; want one attempt ending Failed with the 503", out, err)
		}
	})
}

func TestInvalidRequest(t *testing.T) {
	noUID := testPod("x", nil)
	noUID.UID = ""
	for _, req := range []Request{{}, {Pod: noUID}, {Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "y", UID: "u"}}}} {
		h := newHarness(t, harnessOpts{})
		out, err := h.ev.Evict(context.Background(), req)
		if n, _ := h.calls(); n != 0 || out.Result != Failed || !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("request %+v: %d calls, %+v, %v; want no call and ErrInvalidRequest", req, n, out, err)
		}
	}
}

func TestForceDelete(t *testing.T) {
	tests := []struct {
		name       string
		policy     PDBPolicy
		dryRun     bool
		answer     error
		want       Result
		wantErr    error
		wantCalls  int
		wantEvents int
	}{
		{"strict refuses", PDBStrict, false, nil, Failed, ErrStrictPDBPolicy, 0, 0},
		{"best effort deletes", PDBBestEffort, false, nil, ForcedDelete, nil, 1, 1},
		{"UID changed", PDBBestEffort, false, apierrors.NewConflict(podsGR, "a", errors.New("Precondition failed: UID in precondition: uid-a, UID in object meta: other")), NotFound, nil, 1, 0},
		{"dry run", PDBBestEffort, true, nil, DryRun, nil, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.PDBPolicy, o.DryRun = tt.policy, tt.dryRun }})
			h.script(tt.answer)
			pod := testPod("a", ptr[int64](60))
			out, err := h.ev.ForceDelete(context.Background(), memReq(pod, true))
			if out.Result != tt.want || (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("%+v %v; want %s, error %v", out, err, tt.want, tt.wantErr)
			}
			evictions, deletes := h.calls()
			if evictions != 0 || deletes != tt.wantCalls {
				t.Fatalf("%d evictions and %d deletes, want 0 and %d", evictions, deletes, tt.wantCalls)
			}
			if deletes == 1 {
				h.mu.Lock()
				do := h.deletes[0]
				h.mu.Unlock()
				if do.GracePeriodSeconds == nil || *do.GracePeriodSeconds != 5 {
					t.Errorf("delete grace %v, want the hard cap 5", do.GracePeriodSeconds)
				}
				if do.Preconditions == nil || do.Preconditions.UID == nil || *do.Preconditions.UID != pod.UID {
					t.Errorf("delete without the UID precondition: %+v", do)
				}
				if (len(do.DryRun) == 1) != tt.dryRun {
					t.Errorf("delete DryRun %v, want dry run %v", do.DryRun, tt.dryRun)
				}
			}
			evs := h.flushEvents()
			if len(evs) != tt.wantEvents {
				t.Fatalf("%d events, want %d", len(evs), tt.wantEvents)
			}
			if tt.want == ForcedDelete {
				if evs[0].Reason != ReasonEvictedDespitePDB || !strings.Contains(evs[0].Note, "--pdb-policy=best-effort") {
					t.Errorf("event %+v", evs[0])
				}
				if h.logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("despite its PodDisruptionBudget").Len() != 1 {
					t.Error("forced delete not logged at Warn")
				}
				if got := h.counter(thresholds.MemoryAvailable, ForcedDelete); got != 1 {
					t.Errorf("forced_delete counted %v, want 1", got)
				}
			}
		})
	}
}

func TestNodeThresholdMetEvent(t *testing.T) {
	for _, dry := range []bool{false, true} {
		h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.DryRun = dry }})
		h.ev.NodeThresholdMet(thresholds.MemoryAvailable, true, 100<<20, 80<<20)
		evs := h.flushEvents()
		if dry {
			if len(evs) != 0 {
				t.Errorf("dry run wrote %d node events", len(evs))
			}
			continue
		}
		if len(evs) != 1 {
			t.Fatalf("%d events, want 1", len(evs))
		}
		e := evs[0]
		if e.Reason != ReasonThresholdMet || e.Regarding.Kind != "Node" || e.Regarding.Name != node || e.Namespace != metav1.NamespaceDefault ||
			e.Note != "Attempting to reclaim memory: memory.available is 80Mi, below the hard threshold of 100Mi." {
			t.Errorf("node event %+v", e)
		}
	}
}

func TestLatencyMetric(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, harnessOpts{clock: clk})
	req := memReq(testPod("a", nil), true)
	req.PressureSince = clk.Now().Add(-1500 * time.Millisecond)
	out, err := h.ev.Evict(context.Background(), req)
	if err != nil || !out.Accepted.Equal(clk.Now()) {
		t.Fatalf("%+v %v", out, err)
	}
	mfs, err := h.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "evictd_eviction_latency_seconds" {
			hist := mf.GetMetric()[0].GetHistogram()
			found = hist.GetSampleCount() == 1 && hist.GetSampleSum() == 1.5
		}
	}
	if !found {
		t.Error("evictd_eviction_latency_seconds did not record one 1.5 s sample")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	bad := Defaults()
	bad.Burst = 0
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad options", Config{Options: bad, Client: fromclientset.Wrap(fake.NewClientset()), NodeName: node}, "--eviction-burst 0"},
		{"no client", Config{Options: Defaults(), NodeName: node}, "no API client"},
		{"no node", Config{Options: Defaults(), Client: fromclientset.Wrap(fake.NewClientset())}, "no node name"},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestResultValuesMatchMetricLabels(t *testing.T) {
	ours := []Result{Evicted, DryRun, PDBBlocked, NotFound, Failed, RateLimited, ForcedDelete, Refused, ResponderEvicted, WebhookFailed}
	if len(ours) != len(metrics.EvictionResults) {
		t.Fatalf("%d results here, %d in metrics.EvictionResults", len(ours), len(metrics.EvictionResults))
	}
	for i, r := range ours {
		if string(r) != metrics.EvictionResults[i] {
			t.Errorf("result %d is %q here and %q in metrics", i, r, metrics.EvictionResults[i])
		}
	}
}

func TestDryRunForceDeleteAfterPDBVerdict(t *testing.T) {
	h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.DryRun, o.PDBPolicy = true, PDBBestEffort }})
	pod := testPod("a", nil)
	h.script(errPDB)
	if out, _ := h.ev.Evict(context.Background(), memReq(pod, true)); out.Result != PDBBlocked {
		t.Fatalf("dry-run eviction: %+v, want PDBBlocked", out)
	}
	// The eviction's cached verdict must not answer for the delete.
	out, err := h.ev.ForceDelete(context.Background(), memReq(pod, true))
	if err != nil || out.Result != DryRun || out.Cached {
		t.Fatalf("dry-run ForceDelete: %+v, %v; want a fresh DryRun", out, err)
	}
	if ev, del := h.calls(); ev != 1 || del != 1 {
		t.Errorf("%d evictions and %d deletes sent, want 1 and 1", ev, del)
	}
	if h.logs.FilterMessage("would delete pod despite its PodDisruptionBudget").Len() != 1 {
		t.Error("no 'would delete' line")
	}
}

// Each pressure episode has its own budget: one resource using up its cap
// and tokens (disk pressure evictions cannot fix) leaves another's whole.
func TestBudgetsAreIndependent(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, harnessOpts{clock: clk, mutate: func(o *Options) { o.MaxPerEpisode, o.Rate, o.Burst = 2, 1, 1 }})
	ctx := context.Background()
	disk, mem := h.ev.NewBudget(), h.ev.NewBudget()
	req := func(name string, b *Budget) Request {
		r := memReq(testPod(name, nil), true)
		r.Signal, r.Budget = thresholds.NodeFsAvailable, b
		return r
	}
	for i, name := range []string{"d1", "d2"} {
		clk.Step(time.Second)
		if out, err := h.ev.Evict(ctx, req(name, disk)); out.Result != Evicted {
			t.Fatalf("disk eviction %d: %s %v", i, out.Result, err)
		}
	}
	clk.Step(time.Second)
	if out, err := h.ev.Evict(ctx, req("d3", disk)); out.Result != RateLimited || !errors.Is(err, ErrEpisodeCap) {
		t.Fatalf("third disk eviction: %s %v, want the disk episode's cap", out.Result, err)
	}
	// Same instant: the disk budget's token was just spent, the memory
	// budget's bucket is full.
	m := memReq(testPod("m1", nil), true)
	m.Budget = mem
	if out, err := h.ev.Evict(ctx, m); out.Result != Evicted {
		t.Fatalf("memory eviction after the disk cap: %s %v, want Evicted", out.Result, err)
	}
	if disk.Evictions() != 2 || mem.Evictions() != 1 || h.ev.EpisodeEvictions() != 0 {
		t.Errorf("charged disk %d, memory %d, shared %d; want 2, 1, 0", disk.Evictions(), mem.Evictions(), h.ev.EpisodeEvictions())
	}
}

// Calls of one budget may run at once (a hard call must not queue behind a
// slow soft one); the cap still holds exactly: a call under way is charged
// until it answers, and refunded if it is not accepted.
func TestBudgetChargesCallsUnderWay(t *testing.T) {
	h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.MaxPerEpisode = 1 }})
	b := h.ev.NewBudget()
	c, _, err := b.admit(time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.admit(time.Unix(1_700_000_000, 0)); !errors.Is(err, ErrEpisodeCap) {
		t.Fatalf("second admit while the first call is under way: %v, want the cap", err)
	}
	b.settle(c, false, time.Unix(1_700_000_000, 0)) // refused: refunded
	if _, _, err := b.admit(time.Unix(1_700_000_000, 0)); err != nil {
		t.Fatalf("admit after a refund: %v", err)
	}
}

// A refusal gives its token back even when the answer takes a while: the
// next candidate's eviction must not wait for the bucket to refill behind
// a call that evicted nothing. (rate.Reservation.CancelAt restores nothing
// once the reservation's time has passed, which it always has by the time
// an answer is in: the refund used to be lost.)
func TestBudgetRefundsATokenAfterASlowRefusal(t *testing.T) {
	h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.Rate, o.Burst = 0.1, 1 }})
	b := h.ev.NewBudget()
	t0 := time.Unix(1_700_000_000, 0)
	c, _, err := b.admit(t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, wait, err := b.admit(t0); !errors.Is(err, ErrRateLimited) || wait < 9*time.Second {
		t.Fatalf("second admit while the only token is held: %v (wait %v), want rate limited for ~10s", err, wait)
	}
	answered := t0.Add(50 * time.Millisecond)
	b.settle(c, false, answered)
	c, _, err = b.admit(answered)
	if err != nil {
		t.Fatalf("admit after a refused call gave its token back: %v", err)
	}
	b.settle(c, true, answered.Add(10*time.Millisecond)) // accepted: the token is spent
	if _, wait, err := b.admit(answered.Add(time.Second)); !errors.Is(err, ErrRateLimited) || wait < 8*time.Second {
		t.Fatalf("admit after an accepted eviction: %v (wait %v), want rate limited until the bucket refills", err, wait)
	}
}

// While a call hangs (a soft eviction's answer held up by a slow API
// server) the bucket refills: a hard call a few seconds later is admitted
// at once, not held back until the first one answers.
func TestBudgetRefillsWhileACallHangs(t *testing.T) {
	h := newHarness(t, harnessOpts{mutate: func(o *Options) { o.Rate, o.Burst = 1, 1 }})
	b := h.ev.NewBudget()
	t0 := time.Unix(1_700_000_000, 0)
	soft, _, err := b.admit(t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.admit(t0.Add(5 * time.Second)); err != nil {
		t.Fatalf("a second call 5s into the first one's hang: %v, want admitted (the bucket refills at 1/s)", err)
	}
	b.settle(soft, true, t0.Add(20*time.Second))
}

// A budget's records of pods no longer listed are dropped: an episode that
// never ends keeps none of the pods that went.
func TestBudgetRetainPods(t *testing.T) {
	b := (&Evictor{opts: Defaults()}).NewBudget()
	for _, uid := range []types.UID{"gone", "here"} {
		b.seen[seenKey{uid: uid, verb: verbEvict}] = seenEntry{}
	}
	b.RetainPods(func(uid types.UID) bool { return uid == "here" })
	if _, ok := b.seen[seenKey{uid: "here", verb: verbEvict}]; !ok || len(b.seen) != 1 {
		t.Errorf("records after RetainPods: %v; want only the listed pod's", b.seen)
	}
}
