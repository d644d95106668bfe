// SPDX-License-Identifier: Apache-2.0

package nodebrake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// node is a Node the API double keeps, applying the brake's patches as
// the API server would (only the fields the brake writes); fail, when
// set, answers every call instead. The real server is in
// test/e2e/agent's TestNodeBrake; this double only injects errors.
type node struct {
	mu     sync.Mutex
	n      *v1.Node
	fail   error
	writes []string
	// hold, when set, holds every taint write until it is closed.
	hold chan struct{}
	// flaky answers the next calls, one error each, before fail applies.
	flaky []error
	// onTaint, when set, is called as each taint write arrives, before it
	// is applied: time passing while a write is under way; onRead likewise
	// for each read.
	onTaint, onRead func()
	// failStatus, when set, answers every condition write.
	failStatus error
}

// failing is the error the next call answers (f.mu held).
func (f *node) failing() error {
	if len(f.flaky) > 0 {
		err := f.flaky[0]
		f.flaky = f.flaky[1:]
		return err
	}
	return f.fail
}

func (f *node) ReadNode(context.Context, string) (*v1.Node, error) {
	f.mu.Lock()
	onRead := f.onRead
	f.mu.Unlock()
	if onRead != nil {
		onRead()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, "read")
	if err := f.failing(); err != nil {
		return nil, err
	}
	return f.n.DeepCopy(), nil
}

func (f *node) get() *v1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n.DeepCopy()
}

func (f *node) bump() {
	rv, _ := strconv.Atoi(f.n.ResourceVersion)
	f.n.ResourceVersion = strconv.Itoa(rv + 1)
}

func (f *node) PatchNode(_ context.Context, _ string, pt types.PatchType, data []byte) (*v1.Node, error) {
	f.mu.Lock()
	hold, onTaint := f.hold, f.onTaint
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if onTaint != nil {
		onTaint()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, "taint")
	if err := f.failing(); err != nil {
		return nil, err
	}
	var p struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
		Spec     struct{ Taints []v1.Taint }      `json:"spec"`
	}
	if err := json.Unmarshal(data, &p); err != nil || pt != types.MergePatchType {
		return nil, apierrors.NewBadRequest("bad patch")
	}
	if p.Metadata.ResourceVersion != f.n.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, f.n.Name, nil)
	}
	f.n.Spec.Taints = p.Spec.Taints
	f.bump()
	return f.n.DeepCopy(), nil
}

func (f *node) PatchNodeStatus(_ context.Context, _ string, pt types.PatchType, data []byte) (*v1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, "condition")
	if err := f.failing(); err != nil {
		return nil, err
	}
	if f.failStatus != nil {
		return nil, f.failStatus
	}
	var p struct {
		Status struct{ Conditions []condition } `json:"status"`
	}
	if err := json.Unmarshal(data, &p); err != nil || pt != types.StrategicMergePatchType {
		return nil, apierrors.NewBadRequest("bad patch")
	}
	for _, c := range p.Status.Conditions {
		kept := f.n.Status.Conditions[:0]
		for _, have := range f.n.Status.Conditions {
			if have.Type != c.Type {
				kept = append(kept, have)
			}
		}
		f.n.Status.Conditions = kept
		if c.Patch != "delete" {
			f.n.Status.Conditions = append(f.n.Status.Conditions, v1.NodeCondition{Type: c.Type, Status: c.Status,
				Reason: c.Reason, Message: c.Message, LastHeartbeatTime: *c.LastHeartbeatTime, LastTransitionTime: *c.LastTransitionTime})
		}
	}
	f.bump()
	return f.n.DeepCopy(), nil
}

func (f *node) wrote() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

type harness struct {
	api    *node
	b      *Brake
	clk    *clocktesting.FakeClock
	acting bool
	mu     sync.Mutex
	errs   int
	cancel context.CancelFunc
	done   chan struct{}
	// rounds counts Run's finished wake-ups (a round, or a recheck skipped
	// while a retry waits); waits has a value each time WaitOn blocks for
	// the taint (the Brake's test hooks).
	rounds atomic.Int64
	waits  chan struct{}
	// written is every write, as Options.Wrote hears it, with the time on
	// the brake's clock.
	written []write
}

// write is one write of the brake's: its object, when, and its answer.
type write struct {
	object string
	at     time.Time
	err    error
}

func start(t *testing.T, acting bool) *harness { return startWith(t, acting, nil, nil) }

// startWith is start on a Node n (nil: a bare one), with set changing the
// Options.
func startWith(t *testing.T, acting bool, n *v1.Node, set func(*Options)) *harness {
	t.Helper()
	if n == nil {
		n = nodeWith(nil)
	}
	h := &harness{api: &node{n: n}, clk: clocktesting.NewFakeClock(t0), acting: acting, done: make(chan struct{}), waits: make(chan struct{}, 1)}
	o := Options{API: h.api, Node: "a", Current: h.api.get, Effect: v1.TaintEffectNoSchedule, Clock: h.clk,
		Acting: func() bool { return h.acting },
		Log:    zaptest.NewLogger(t),
		Wrote: func(object string, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.written = append(h.written, write{object: object, at: h.clk.Now(), err: err})
			if err != nil {
				h.errs++
			}
		}}
	if set != nil {
		set(&o)
	}
	var err error
	if h.b, err = New(o); err != nil {
		t.Fatal(err)
	}
	h.b.woke = func() { h.rounds.Add(1) }
	h.b.waiting = func() {
		select {
		case h.waits <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		h.b.Run(ctx)
	}()
	t.Cleanup(func() { h.stop() })
	return h
}

// refuseWrites makes the API refuse every write (a missing grant), asks for
// the memory brake and waits until its failure shows in Warning.
func (h *harness) refuseWrites(t *testing.T) {
	t.Helper()
	h.api.mu.Lock()
	h.api.fail = apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "a", nil)
	h.api.mu.Unlock()
	h.b.Sync(map[Resource]Want{Memory: {On: true}})
	eventually(t, "a warning", func() bool { return strings.Contains(h.b.Warning(), "forbidden") })
}

// waitRounds waits until Run has finished n rounds in all.
func (h *harness) waitRounds(t *testing.T, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("round %d of the brake", n), func() bool { return h.rounds.Load() >= n })
}

// tick fires Run's heartbeat ticker once and waits for the round it starts.
func (h *harness) tick(t *testing.T) {
	t.Helper()
	// Run makes its ticker when it starts: a step before that fires nothing.
	eventually(t, "Run's ticker", h.clk.HasWaiters)
	n := h.rounds.Load()
	h.clk.Step(DefaultHeartbeat)
	h.waitRounds(t, n+1)
}

// step moves the brake's clock on by one recheck, which fires its ticker,
// and waits until Run is done with that wake-up; while writes fail, until
// the next try's timer is set as well (the ticker and it: two waiters),
// so that the try the step was due for has been made.
func (h *harness) step(t *testing.T, failing bool) {
	t.Helper()
	n := h.rounds.Load()
	h.clk.Step(recheck)
	eventually(t, "Run done with the recheck", func() bool {
		return h.rounds.Load() > n && (!failing || h.clk.Waiters() >= 2)
	})
}

// mark is where the writes made from now on begin (writes' since).
func (h *harness) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.written)
}

// writes returns the writes of object made since mark, by their time on
// the brake's clock after from.
func (h *harness) writes(object string, since int, from time.Time) (at []time.Duration, failed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.written[since:] {
		if w.object == object {
			at = append(at, w.at.Sub(from))
			if w.err != nil {
				failed++
			}
		}
	}
	return at, failed
}

// sync is Sync, and waits for the round it starts.
func (h *harness) sync(t *testing.T, want map[Resource]Want) {
	t.Helper()
	n := h.rounds.Load()
	h.b.Sync(want)
	h.waitRounds(t, n+1)
}

// exit cancels Run and steps the brake's clock until Run has returned
// from its exit lift, which waits on the clock between its tries.
func (h *harness) exit(t *testing.T) {
	t.Helper()
	h.cancel()
	eventually(t, "the exit lift to end", func() bool {
		select {
		case <-h.done:
			return true
		default:
			h.clk.Step(minRetry)
			return false
		}
	})
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

// eventually polls cond for a second of real time: the brake runs on its
// own goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: never", what)
}

func braked(n *v1.Node) bool { return Applied(n, v1.TaintEffectNoSchedule)[Memory] }

func TestBrakeOnOffAndLiftedAtExit(t *testing.T) {
	h := start(t, true)
	h.tick(t) // a round before any Sync: nothing written
	if w := h.api.wrote(); len(w) != 0 {
		t.Fatalf("wrote %v before the first Sync; want nothing until the agent has judged the node", w)
	}
	h.b.Sync(map[Resource]Want{Memory: {On: true, Message: "m"}})
	eventually(t, "brake on", func() bool { return braked(h.api.get()) })
	h.b.Sync(nil)
	eventually(t, "brake lifted", func() bool {
		n := h.api.get()
		c := findCondition(n, "EvictdMemoryPressure")
		return len(n.Spec.Taints) == 0 && c != nil && c.Status == v1.ConditionFalse
	})
	h.stop()
	if n := h.api.get(); len(n.Status.Conditions) != 0 || len(n.Spec.Taints) != 0 {
		t.Errorf("after exit the node has %v and %v; want evictd's condition deleted and no taint", n.Status.Conditions, n.Spec.Taints)
	}
}

// TestBrakeNotActingWritesNothing: an agent that does not hold the node
// lease leaves the acting agent's brake alone, in the round its Sync
// starts, in a heartbeat's and at exit.
func TestBrakeNotActingWritesNothing(t *testing.T) {
	h := startWith(t, false, nodeWith([]v1.Taint{{Key: TaintKey(Memory), Effect: v1.TaintEffectNoSchedule}}), nil) // the acting agent's
	h.sync(t, nil)
	h.tick(t)
	h.stop()
	if w := h.api.wrote(); len(w) != 0 {
		t.Errorf("an agent that does not hold the node lease wrote %v; want nothing, not even at exit", w)
	}
}

func TestBrakeFailureShowsAndRecovers(t *testing.T) {
	h := start(t, true)
	h.refuseWrites(t)
	h.mu.Lock()
	errs := h.errs
	h.mu.Unlock()
	if errs == 0 {
		t.Error("a refused write was not counted")
	}
	h.api.mu.Lock()
	h.api.fail = nil
	h.api.mu.Unlock()
	// The retry waits on the clock (backoff), not on the next Sync.
	eventually(t, "the retry", func() bool {
		h.clk.Step(maxRetry)
		return braked(h.api.get())
	})
	if w := h.b.Warning(); w != "" {
		t.Errorf("Warning after a successful write = %q; want none", w)
	}
}

func TestBrakeConflictRetried(t *testing.T) {
	h := start(t, true)
	// Another writer moved the Node on: the brake's read is stale once.
	h.api.mu.Lock()
	stale := h.api.n.DeepCopy()
	h.api.bump()
	h.api.mu.Unlock()
	calls := 0
	h.b.o.Current = func() *v1.Node {
		calls++
		if calls == 1 {
			return stale
		}
		return h.api.get()
	}
	h.b.Sync(map[Resource]Want{Memory: {On: true}})
	eventually(t, "brake on after the conflict", func() bool {
		h.clk.Step(minRetry)
		return braked(h.api.get())
	})
	if w := h.b.Warning(); w != "" {
		t.Errorf("Warning = %q; a conflict is retried, not reported", w)
	}
}

// holdTaints makes the API hold every taint write until the returned
// release is called (the test's cleanup calls it too).
func (h *harness) holdTaints(t *testing.T) (release func()) {
	t.Helper()
	held := make(chan struct{})
	h.api.mu.Lock()
	h.api.hold = held
	h.api.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return release
}

// blocked starts WaitOn(Memory) and returns its answer's channel once it
// blocks for the taint; it fails the test if WaitOn answers first.
func (h *harness) blocked(t *testing.T) chan bool {
	t.Helper()
	done := make(chan bool, 1)
	go func() { done <- h.b.WaitOn(context.Background(), Memory) }()
	select {
	case on := <-done:
		t.Fatalf("WaitOn = %v at once, while the taint's write is held: it must wait for the taint", on)
	case <-h.waits:
	case <-time.After(30 * time.Second):
		t.Fatal("WaitOn neither answered nor waited for the taint")
	}
	return done
}

// An eviction waits for its episode's brake: WaitOn returns once the taint
// is on the Node, and at once when there is nothing to wait for.
func TestBrakeWaitOn(t *testing.T) {
	h := start(t, true)
	ctx := context.Background()
	if h.b.WaitOn(ctx, Memory) {
		t.Error("WaitOn before any Sync wanting the brake = true")
	}
	// The taint's write held: WaitOn must block (the hook says so) and
	// answer only once the write has landed.
	release := h.holdTaints(t)
	h.b.Sync(map[Resource]Want{Memory: {On: true, Message: "m"}})
	done := h.blocked(t)
	release()
	select {
	case on := <-done:
		if !on {
			t.Fatal("WaitOn = false; want true once the brake is written")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitOn did not answer once the taint was written")
	}
	// The taint alone: WaitOn waits for it, and the condition's write
	// follows it in the same round, so it may not have landed yet.
	if n := h.api.get(); !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool {
		return t.Key == TaintKey(Memory) && t.Effect == v1.TaintEffectNoSchedule
	}) {
		t.Errorf("WaitOn returned before the taint was on the Node: taints %v", n.Spec.Taints)
	}
	if h.b.WaitOn(ctx, Disk) {
		t.Error("WaitOn(Disk) = true while only the memory brake is wanted")
	}
}

// A write that takes longer than the limit holds the eviction back no
// longer than the limit.
func TestBrakeWaitOnLimit(t *testing.T) {
	h := start(t, true)
	h.holdTaints(t)
	h.b.Sync(map[Resource]Want{Memory: {On: true}})
	done := h.blocked(t)
	// WaitOn set its timer before it blocked: one step passes it.
	h.clk.Step(DefaultWaitLimit)
	select {
	case on := <-done:
		if on {
			t.Error("WaitOn = true while the write was still held")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitOn did not give up at its limit")
	}
}

// While writes fail (a missing grant), evictions do not wait: the failure
// shows in Warning, and the node is still protected by evictions.
func TestBrakeWaitOnFailing(t *testing.T) {
	h := start(t, true)
	h.refuseWrites(t)
	done := make(chan bool)
	go func() { done <- h.b.WaitOn(context.Background(), Memory) }()
	select {
	case on := <-done:
		if on {
			t.Error("WaitOn = true while writes fail")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitOn waited while the brake's writes fail")
	}
}

// With no taint effect nothing keeps pods away, so nothing is awaited.
func TestBrakeWaitOnNoTaint(t *testing.T) {
	b, err := New(Options{API: &node{n: nodeWith(nil)}, Node: "a", Current: func() *v1.Node { return nil }, Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	b.Sync(map[Resource]Want{Memory: {On: true}})
	if b.WaitOn(context.Background(), Memory) {
		t.Error("WaitOn = true with no taint effect")
	}
}

// exitWith puts the memory brake on, makes the API answer errs (one per
// call) and then fail (nil: succeed), cancels Run and steps the fake clock
// until Run has returned from its exit lift.
func exitWith(t *testing.T, h *harness, fail error, errs ...error) (calls []string) {
	t.Helper()
	h.b.Sync(map[Resource]Want{Memory: {On: true, Message: "m"}})
	eventually(t, "brake on", func() bool { return braked(h.api.get()) })
	before := len(h.api.wrote())
	defer func() { calls = h.api.wrote()[before:] }()
	h.api.mu.Lock()
	h.api.flaky, h.api.fail = errs, fail
	h.api.mu.Unlock()
	h.exit(t)
	return calls
}

// TestBrakeExitLiftRetries: the exit lift retries what can pass (an API
// server restarting, overloaded or unreachable for a moment), within its
// bound, and stops at once on what cannot (the Node gone).
func TestBrakeExitLiftRetries(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	transient := []error{
		unavailable,
		apierrors.NewTimeoutError("request timed out", 1),
		apierrors.NewTooManyRequests("slow down", 1),
		apierrors.NewInternalError(errors.New("boom")),
		&url.Error{Op: "Patch", URL: "https://apiserver/api/v1/nodes/a", Err: syscall.ECONNREFUSED},
		context.DeadlineExceeded,
	}
	t.Run("transient", func(t *testing.T) {
		h := start(t, true)
		exitWith(t, h, nil, transient...)
		if n := h.api.get(); braked(n) || len(n.Spec.Taints) != 0 || len(n.Status.Conditions) != 0 {
			t.Errorf("after %d transient failures the exit left taints %v and conditions %v; want the brake lifted", len(transient), n.Spec.Taints, n.Status.Conditions)
		}
		if left := len(h.api.flaky); left != 0 {
			t.Errorf("%d failures not met: the lift stopped early", left)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		h := start(t, true)
		from := h.clk.Now()
		calls := exitWith(t, h, unavailable)
		if took := h.clk.Since(from); took > DefaultExitLimit+minRetry {
			t.Errorf("the exit lift retried for %s of the clock; want it to stop within its limit %s", took, DefaultExitLimit)
		}
		if tries := strings.Count(strings.Join(calls, " "), "taint"); tries < 3 {
			t.Errorf("the exit lift tried %d times in %s; want it to retry", tries, DefaultExitLimit)
		}
	})
	t.Run("gone on the re-read", func(t *testing.T) {
		h := start(t, true)
		calls := exitWith(t, h, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "a"), unavailable, unavailable)
		if want := []string{"taint", "condition", "read"}; !slices.Equal(calls, want) {
			t.Errorf("with the Node gone by the retry's re-read the exit lift made calls %v; want %v: nothing left to lift, no write", calls, want)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		h := start(t, true)
		if got := exitWith(t, h, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "a")); len(got) != 2 {
			t.Errorf("with the Node gone the exit lift made calls %v; want one try (taint and condition) and no retry", got)
		}
	})
}

// leftover is the memory brake an earlier agent left on the Node.
func leftover() *v1.Node {
	return nodeWith([]v1.Taint{{Key: TaintKey(Memory), Effect: v1.TaintEffectNoSchedule}, {Key: "other", Effect: v1.TaintEffectNoSchedule}},
		cond(ConditionType(Memory), v1.ConditionTrue, ReasonPressure, "left", t0, t0))
}

// TestBrakeLeftoverLiftedOnceJudged: a new agent that acts finds the
// brake a dead agent left (its taint and condition) and lifts nothing
// before its first Sync, whatever its heartbeat; then, the pressure still
// on, it keeps the taint (never removed and put back); it lifts it once
// its Sync says the episode has ended.
func TestBrakeLeftoverLiftedOnceJudged(t *testing.T) {
	h := startWith(t, true, leftover(), nil)
	h.tick(t)
	if w := h.api.wrote(); len(w) != 0 {
		t.Fatalf("wrote %v before the first Sync, over a dead agent's brake; want nothing until the agent has judged the node", w)
	}
	if n := h.api.get(); !braked(n) {
		t.Fatalf("the dead agent's brake went before the first Sync: taints %v", n.Spec.Taints)
	}
	// A round writes the taint list once at most (here it puts the other
	// taint first), so the Node after it shows what every write did.
	h.sync(t, map[Resource]Want{Memory: {On: true, Message: "m"}})
	if n := h.api.get(); !braked(n) {
		t.Errorf("after the first Sync, the pressure still on, the brake is off: taints %v, writes %v", n.Spec.Taints, h.api.wrote())
	}
	h.sync(t, nil)
	n := h.api.get()
	if c := findCondition(n, ConditionType(Memory)); len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "other" || c == nil || c.Status != v1.ConditionFalse {
		t.Errorf("after the episode the Node has taints %v and condition %+v; want only the other taint, and evictd's condition False", n.Spec.Taints, c)
	}
}

// TestBrakeLiftOnly: with the brake off (LiftOnly) an acting agent lifts a
// leftover once it has judged the node, puts nothing on however much its
// episodes want it, and leaves a brake alone while another agent holds
// the node lease: in its rounds and at exit.
func TestBrakeLiftOnly(t *testing.T) {
	var others atomic.Bool
	var asked atomic.Int32
	h := startWith(t, true, leftover(), func(o *Options) {
		o.LiftOnly = true
		o.Owns = func(context.Context) (Ownership, error) {
			asked.Add(1)
			return Ownership{Mine: !others.Load()}, nil
		}
	})
	h.b.Sync(map[Resource]Want{Memory: {On: true, Message: "m"}})
	eventually(t, "the leftover lifted", func() bool {
		n := h.api.get()
		return len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == "other" && len(n.Status.Conditions) == 0
	})
	if h.b.WaitOn(context.Background(), Memory) {
		t.Error("WaitOn = true with the brake off")
	}
	// Another agent's brake, while that agent holds the lease: left on.
	// It is newer than the brake's last write (as the other agent's write
	// is), so that the brake sees it and its rounds reach the lease check;
	// an older one would be hidden behind the brake's own last answer.
	h.api.mu.Lock()
	newer := leftover()
	newer.ResourceVersion = h.api.n.ResourceVersion
	h.api.n = newer
	h.api.bump()
	others.Store(true)
	h.api.mu.Unlock()
	before, checks := len(h.api.wrote()), asked.Load()
	h.tick(t)
	if asked.Load() == checks {
		t.Fatal("the round after another agent's brake appeared did not ask who holds the lease: the test does not reach the check")
	}
	checks = asked.Load()
	h.stop()
	if asked.Load() == checks {
		t.Error("the exit did not ask who holds the lease before lifting the brake found on")
	}
	if w := h.api.wrote()[before:]; len(w) != 0 || !braked(h.api.get()) {
		t.Errorf("with another agent holding the lease the brake-off agent wrote %v (the brake is on: %v); want nothing written", w, braked(h.api.get()))
	}
}

// TestBrakeExitLeavesNewHolders: at exit the brake asks who holds the
// lease now, not what its last round saw: after a hand-over it leaves the
// new holder's brake on, though its own last round ran while it acted.
func TestBrakeExitLeavesNewHolders(t *testing.T) {
	var handedOver atomic.Bool
	h := startWith(t, true, nil, func(o *Options) {
		o.Owns = func(context.Context) (Ownership, error) { return Ownership{Mine: !handedOver.Load()}, nil }
	})
	h.b.Sync(map[Resource]Want{Memory: {On: true, Message: "m"}})
	eventually(t, "brake on", func() bool { return braked(h.api.get()) })
	handedOver.Store(true)
	h.stop()
	if !braked(h.api.get()) {
		t.Error("the exit lifted the brake of the agent that holds the lease now")
	}
}

// TestBrakeExitNothingToLift: with nothing of evictd's on the Node the
// exit makes no call, so an exit while the API server is away is not held
// up by retries (the brake off, most of all).
func TestBrakeExitNothingToLift(t *testing.T) {
	var asked atomic.Int32
	h := startWith(t, true, nil, func(o *Options) {
		o.LiftOnly = true
		o.Owns = func(context.Context) (Ownership, error) { asked.Add(1); return Ownership{Mine: true}, nil }
	})
	h.b.Sync(nil)
	h.api.mu.Lock()
	h.api.fail = apierrors.NewServiceUnavailable("away")
	h.api.mu.Unlock()
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the exit waits (retries) with nothing to lift")
	}
	if w := h.api.wrote(); len(w) != 0 || asked.Load() != 0 {
		t.Errorf("the exit with nothing to lift made calls %v and asked the lease %d times; want none", w, asked.Load())
	}
}

// TestBrakeWritesPerHeartbeat counts the brake's writes over half an hour
// of its own clock, stepped one recheck at a time, the fake API echoing
// each write back into the Node the brake reads (Current, the informer's
// copy, as the real API server's watch does): the episode's start writes
// the taint and the condition once, then only the condition's heartbeat,
// once per DefaultHeartbeat (5 minutes, as the kubelet's own conditions):
// 1 + 6 writes in 30 minutes, not one a minute. Its end writes each once
// more, and then nothing at all.
func TestBrakeWritesPerHeartbeat(t *testing.T) {
	h := start(t, true)
	from := h.clk.Now()
	h.sync(t, map[Resource]Want{Memory: {On: true, Message: "m"}})
	mark := 0
	for h.clk.Since(from) < 30*time.Minute {
		h.step(t, false)
	}
	var want []time.Duration
	for beat := time.Duration(0); beat <= 30*time.Minute; beat += 5 * time.Minute {
		want = append(want, beat)
	}
	if got, _ := h.writes(ObjectCondition, mark, from); !slices.Equal(got, want) {
		t.Errorf("over 30 minutes of an episode the condition was written %d times, at %v; want once per 5-minute heartbeat, %d times, at %v",
			len(got), got, len(want), want)
	}
	if got, _ := h.writes(ObjectTaint, mark, from); len(got) != 1 {
		t.Errorf("the taint was written %d times in the episode, at %v; want once, at its start", len(got), got)
	}
	end, mark := h.clk.Now(), h.mark()
	h.sync(t, nil)
	for h.clk.Since(end) < 30*time.Minute {
		h.step(t, false)
	}
	cond, _ := h.writes(ObjectCondition, mark, end)
	taint, _ := h.writes(ObjectTaint, mark, end)
	if len(cond) != 1 || len(taint) != 1 {
		t.Errorf("after the episode the condition was written at %v and the taint at %v; want each once, when it ended, and nothing after", cond, taint)
	}
	if n := h.api.get(); braked(n) || len(n.Spec.Taints) != 0 {
		t.Errorf("the brake is still on after the episode: taints %v, conditions %v", n.Spec.Taints, n.Status.Conditions)
	}
}

// TestBrakeRefusedWriteBacksOffToMinutes: a Node write the admission
// policy refuses (403) is tried again with a back-off that doubles to 5
// minutes (maxRefusedRetry), which the rechecks do not cut short: over an
// hour of the brake's clock at most one try per 2½ minutes after the
// ramp, not two a minute, yet at least one in every 10 minutes, so that
// EvictdNodeBrakeFailing (errors within 10 minutes) and the /readyz
// warning still show it. It is logged once, and its end once.
func TestBrakeRefusedWriteBacksOffToMinutes(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := startWith(t, true, nil, func(o *Options) { o.Log = zap.New(core) })
	h.api.mu.Lock()
	h.api.fail = apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "a", errors.New(
		"ValidatingAdmissionPolicy 'evictd-node-writes' with binding 'evictd-node-writes' denied request: evictd writes only its own node's brake"))
	h.api.mu.Unlock()
	from := h.clk.Now()
	h.sync(t, map[Resource]Want{Memory: {On: true, Message: "m"}})
	for h.clk.Since(from) < time.Hour {
		h.step(t, true)
	}
	tries, failed := h.writes(ObjectTaint, 0, from)
	// The first try, nine while the back-off doubles from 1 s to 5
	// minutes (4¼ minutes at the least), then one per 2½ minutes at most.
	most := 1 + 9 + int(time.Hour/(maxRefusedRetry/2))
	t.Logf("%d tries of the refused taint in an hour, at %v", len(tries), tries)
	if len(tries) > most || failed != len(tries) {
		t.Errorf("the refused taint was tried %d times (%d refused) in an hour of the brake's clock; want at most %d", len(tries), failed, most)
	}
	for window := time.Duration(0); window < time.Hour; window += 10 * time.Minute {
		if !slices.ContainsFunc(tries, func(at time.Duration) bool { return at >= window && at < window+10*time.Minute }) {
			t.Errorf("no try in the 10 minutes from %v: the failure would not show in EvictdNodeBrakeFailing's window", window)
		}
	}
	if w := h.b.Warning(); !strings.Contains(w, "denied request") {
		t.Errorf("Warning after an hour of refusals = %q; want the refusal", w)
	}
	if n := logs.FilterMessageSnippet("cannot write the node brake").Len(); n != 1 {
		t.Errorf("%d 'cannot write the node brake' logs in an hour of refusals; want 1", n)
	}
	h.api.mu.Lock()
	h.api.fail = nil
	h.api.mu.Unlock()
	for !braked(h.api.get()) {
		if h.clk.Since(from) > time.Hour+maxRefusedRetry {
			t.Fatalf("the brake is not on %v after the refusals ended", h.clk.Since(from)-time.Hour)
		}
		h.step(t, false)
	}
	if n := logs.FilterMessage("the node brake is written again").Len(); n != 1 {
		t.Errorf("%d 'the node brake is written again' logs; want 1", n)
	}
}

// TestBrakeExitLiftWithinTheLease: nothing renews the node lease at exit,
// so the lift's writes go out only while the lease, as its ownership check
// read it, is still this agent's (Ownership.Until): past that another
// agent may have taken it over and put its own brake on, which a late
// write would lift. The agent is frozen past the bound after the check (a
// GC pause, a starved CPU), or the bound passes while its taint write is
// under way: either way no further write goes out, the brake stays on for
// the next agent, and the lift does not retry.
func TestBrakeExitLiftWithinTheLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		// frozen: the clock passes the bound right after the check;
		// otherwise during the taint write.
		frozen bool
		want   []string
	}{
		{"frozen after the check", true, nil},
		{"bound passes during the taint write", false, []string{"taint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			var exiting atomic.Bool
			var checks atomic.Int32
			h = startWith(t, true, nil, func(o *Options) {
				o.Owns = func(context.Context) (Ownership, error) {
					checks.Add(1)
					// The lease as read: renewed now, this agent's for a
					// second more.
					own := Ownership{Mine: true, Until: h.clk.Now().Add(time.Second)}
					if exiting.Load() && tc.frozen {
						h.clk.Step(2 * time.Second)
					}
					return own, nil
				}
			})
			h.b.Sync(map[Resource]Want{Memory: {On: true, Message: "m"}})
			eventually(t, "brake on", func() bool { return braked(h.api.get()) })
			before := len(h.api.wrote())
			h.api.mu.Lock()
			// The Node moves on under the write (a kubelet's status
			// update), so the taint write conflicts and the lift would
			// try again.
			h.api.onTaint = func() {
				if !tc.frozen {
					h.clk.Step(2 * time.Second)
				}
				h.api.mu.Lock()
				h.api.bump()
				h.api.mu.Unlock()
			}
			h.api.mu.Unlock()
			exiting.Store(true)
			h.exit(t) // a lift that retries waits on the clock
			got := h.api.wrote()[before:]
			if !slices.Equal(got, tc.want) {
				t.Errorf("the exit lift made calls %v after the ownership check's lease ran out; want %v", got, tc.want)
			}
			if !braked(h.api.get()) {
				t.Errorf("the exit lifted the brake after the lease it read ran out (another agent may hold it): taints %v, conditions %v",
					h.api.get().Spec.Taints, h.api.get().Status.Conditions)
			}
			if n := checks.Load(); n != 1 {
				t.Errorf("the lease was checked %d times at exit; want one, and no retry once it may have passed", n)
			}
		})
	}
}

// TestBrakeFoundKeptForTransitionPeriod: a new agent that finds the memory
// brake on (an agent killed mid-episode) and sees no pressure at its first
// pass keeps the brake on for the pressure transition period from then,
// as the kubelet keeps its condition after it last saw the pressure, and
// lifts it when the period is up, not at the next recheck. An episode that
// opens meanwhile takes the brake over, and ends it.
func TestBrakeFoundKeptForTransitionPeriod(t *testing.T) {
	const period = 5 * time.Minute
	t.Run("no pressure", func(t *testing.T) {
		h := startWith(t, true, leftover(), func(o *Options) { o.TransitionPeriod = period })
		from := h.clk.Now()
		h.sync(t, nil)
		for {
			n := h.api.get()
			if !braked(n) {
				t.Fatalf("the brake found on was lifted %s after the agent first judged the node; want it kept for the transition period %s (taints %v, conditions %v)",
					h.clk.Since(from), period, n.Spec.Taints, n.Status.Conditions)
			}
			if h.clk.Since(from)+recheck >= period {
				break
			}
			h.step(t, false)
		}
		if c := findCondition(h.api.get(), ConditionType(Memory)); c == nil || !strings.Contains(c.Message, "kept on") {
			t.Errorf("the kept condition says %+v; want why it is kept on", c)
		}
		// The kept brake's own timer ends it at the period.
		eventually(t, "the kept brake's end timer", func() bool { return h.clk.Waiters() >= 2 })
		h.clk.SetTime(from.Add(period))
		eventually(t, "the kept brake lifted at the end of the transition period", func() bool {
			n := h.api.get()
			c := findCondition(n, ConditionType(Memory))
			return len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == "other" && c != nil && c.Status == v1.ConditionFalse
		})
	})
	t.Run("episode at the first judgement", func(t *testing.T) {
		// The brake found on is the one this agent's own episode wants:
		// that episode's end lifts it, not the transition period.
		h := startWith(t, true, leftover(), func(o *Options) { o.TransitionPeriod = period })
		h.sync(t, map[Resource]Want{Memory: {On: true, Message: "episode"}})
		h.sync(t, nil)
		if n := h.api.get(); braked(n) {
			t.Errorf("the brake of an episode that was on when the agent first judged the node was kept after the episode ended: taints %v, conditions %v",
				n.Spec.Taints, n.Status.Conditions)
		}
	})
	t.Run("episode takes over", func(t *testing.T) {
		h := startWith(t, true, leftover(), func(o *Options) { o.TransitionPeriod = period })
		from := h.clk.Now()
		h.sync(t, nil)
		h.step(t, false)
		h.sync(t, map[Resource]Want{Memory: {On: true, Message: "episode"}})
		for h.clk.Since(from) < period+recheck {
			h.step(t, false)
		}
		if n := h.api.get(); !braked(n) {
			t.Fatalf("the episode's brake was lifted when the kept one's time was up: taints %v", n.Spec.Taints)
		}
		h.sync(t, nil)
		if n := h.api.get(); braked(n) {
			t.Errorf("the brake stayed on after the episode ended, past the transition period: taints %v", n.Spec.Taints)
		}
	})
}

// TestBrakeConflictIsNoFailure: while the brake's taint write conflicts
// (another writer moved the Node on, and the informer has not caught up)
// nothing has failed: no warning, no error log, and WaitOn waits for the
// retry, instead of answering at once as it does while writes are
// refused; the retry on the caught-up Node puts the brake on.
func TestBrakeConflictIsNoFailure(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	n := nodeWith(nil)
	old := n.DeepCopy()
	n.ResourceVersion = "43" // another writer's, which the informer has not seen
	var stale atomic.Bool
	stale.Store(true)
	var h *harness
	h = startWith(t, true, n, func(o *Options) {
		o.Log = zap.New(core)
		o.Current = func() *v1.Node {
			if stale.Load() {
				return old.DeepCopy()
			}
			return h.api.get()
		}
	})
	h.sync(t, map[Resource]Want{Memory: {On: true, Message: "m"}})
	if _, failed := h.writes(ObjectTaint, 0, t0); failed != 1 {
		t.Fatalf("%d taint writes failed; want the one on the stale Node to conflict", failed)
	}
	if w := h.b.Warning(); w != "" {
		t.Errorf("Warning while the taint write conflicts = %q; want none: a conflict is retried, not reported", w)
	}
	if n := logs.FilterMessageSnippet("cannot write the node brake").Len(); n != 0 {
		t.Errorf("%d 'cannot write the node brake' logs for a conflict; want none", n)
	}
	done := h.blocked(t)
	stale.Store(false)
	h.clk.Step(retryInitial)
	select {
	case on := <-done:
		if !on {
			t.Error("WaitOn = false; want true once the retry put the brake on")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitOn did not answer once the retry was due")
	}
}

// TestBrakeExitRereadsTheNode: at exit the informer has stopped, so the
// Node the brake last saw goes stale as the kubelet writes its status; a
// lift whose taint patch conflicts reads the Node fresh before it tries
// again, and lifts the taint. Its condition writes fail meanwhile (the
// API server sheds them), so the answer of its own write brings no newer
// Node: only the re-read does.
func TestBrakeExitRereadsTheNode(t *testing.T) {
	var frozen atomic.Pointer[v1.Node]
	var h *harness
	h = startWith(t, true, nil, func(o *Options) {
		o.Current = func() *v1.Node {
			if n := frozen.Load(); n != nil {
				return n.DeepCopy()
			}
			return h.api.get()
		}
	})
	h.b.Sync(map[Resource]Want{Memory: {On: true, Message: "m"}})
	eventually(t, "brake on", func() bool { return braked(h.api.get()) && len(h.api.wrote()) == 2 })
	frozen.Store(h.api.get()) // the informer stops
	h.api.mu.Lock()
	h.api.bump() // the kubelet's status update
	h.api.failStatus = apierrors.NewTooManyRequests("slow down", 1)
	h.api.mu.Unlock()
	before := len(h.api.wrote())
	h.exit(t)
	if n := h.api.get(); len(n.Spec.Taints) != 0 {
		t.Errorf("the exit left taints %v (calls %v); want the taint lifted after reading the Node again", n.Spec.Taints, h.api.wrote()[before:])
	}
}

// TestBrakeExitLiftRereadWithinTheLease: the bound the ownership check
// read holds on the lift's retry too: a re-read of the Node that returns
// after it (a slow API server) is followed by no write.
func TestBrakeExitLiftRereadWithinTheLease(t *testing.T) {
	var h *harness
	h = startWith(t, true, nil, func(o *Options) {
		o.Owns = func(context.Context) (Ownership, error) {
			return Ownership{Mine: true, Until: h.clk.Now().Add(time.Second)}, nil
		}
	})
	h.api.mu.Lock()
	h.api.onRead = func() { h.clk.Step(2 * time.Second) }
	h.api.mu.Unlock()
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	calls := exitWith(t, h, nil, unavailable, unavailable)
	if want := []string{"taint", "condition", "read"}; !slices.Equal(calls, want) {
		t.Errorf("the exit lift made calls %v; want %v: no write once the re-read returned past the lease's bound", calls, want)
	}
	if !braked(h.api.get()) {
		t.Error("the exit lifted the brake after the lease it read ran out (another agent may hold it)")
	}
}

// TestBrakeLiftOnlyLeaseBounds: a brake-off agent lifts a leftover only
// under a lease it has read as its own, and only while that lease is
// still its own: a lease it cannot read, or whose time is up as read, is
// no leave to lift (another agent may act here, and have put its brake
// on); the failure to read shows.
func TestBrakeLiftOnlyLeaseBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		owns func(now time.Time) (Ownership, error)
		warn string
	}{
		{"lease unreadable", func(time.Time) (Ownership, error) { return Ownership{}, apierrors.NewServiceUnavailable("away") }, "node lease"},
		{"lease runs out now", func(now time.Time) (Ownership, error) { return Ownership{Mine: true, Until: now}, nil }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			h = startWith(t, true, leftover(), func(o *Options) {
				o.LiftOnly = true
				o.Owns = func(context.Context) (Ownership, error) { return tc.owns(h.clk.Now()) }
			})
			h.sync(t, nil)
			if w := h.api.wrote(); len(w) != 0 || !braked(h.api.get()) {
				t.Errorf("the brake-off agent wrote %v (the brake is on: %v); want nothing written", w, braked(h.api.get()))
			}
			if w := h.b.Warning(); (tc.warn == "") != (w == "") || !strings.Contains(w, tc.warn) {
				t.Errorf("Warning = %q; want %q", w, tc.warn)
			}
			h.exit(t)
		})
	}
}
