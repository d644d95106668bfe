// SPDX-License-Identifier: Apache-2.0

package nodelease

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const idle = 6 * time.Minute

// rounds is how many rounds r has finished.
func rounds(r *Runner) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rounds
}

// waitRounds waits until r has finished n rounds in all; a deadline only
// for a runner that stopped for good.
func waitRounds(t *testing.T, r *Runner, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for rounds(r) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds finished, waited for %d", rounds(r), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitWaiting waits until r's Run waits on the clock, so that a step of
// the fake clock reaches its timer.
func (h *harness) waitWaiting() {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !h.clk.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("the runner never waited on its clock")
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) writes() int {
	h.api.mu.Lock()
	defer h.api.mu.Unlock()
	return h.api.writes
}

// TestIdleHolderWritesOncePerRenewal runs a holder for real (its rounds,
// its watch) against a store whose watch echoes every write back, as the
// API server's does, over ten renewal intervals of its own clock: one
// write each, and none for the echo of its own renewal. A holder that took
// its own renewal's echo as a reason to renew again would write without
// end, bounded only by the API client's rate limit.
func TestIdleHolderWritesOncePerRenewal(t *testing.T) {
	for _, tc := range []struct {
		name string
		idle time.Duration
	}{{"one pace", 0}, {"idle pace", idle}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.api.echo, h.idle, h.jitter = true, tc.idle, func() float64 { return 0.5 }
			r := h.runner("evictd/a")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.Run(ctx)
			}()
			defer func() {
				cancel()
				<-done
			}()
			// The acquisition, then the round its echo kicks.
			waitRounds(t, r, 2)
			pace := tc.idle
			if pace == 0 {
				pace = dur
			}
			const intervals = 10
			for i := 1; i <= intervals; i++ {
				h.waitWaiting()
				n := rounds(r)
				h.clk.Step(RenewInterval(pace))
				// The renewal, then the round its echo kicks.
				waitRounds(t, r, n+2)
			}
			h.waitWaiting()
			if got, want := h.writes(), 1+intervals; got != want {
				t.Errorf("%d lease writes over %d renewal intervals of %v, want %d: one a renewal, none for a renewal's own echo", got, intervals, RenewInterval(pace), want)
			}
			if !r.Acting() {
				t.Errorf("not acting after its renewals: %v", r.Check())
			}
			if got := *h.api.lease.Spec.LeaseDurationSeconds; time.Duration(got)*time.Second != pace {
				t.Errorf("lease duration %ds at idle, want %v", got, pace)
			}
		})
	}
}

// TestNearPressureRenewsAtTheActivePace: idle, the lease lasts the idle
// duration; pressure near, it is renewed at once at the active pace, and
// renewed every active interval; once pressure is gone it returns to the
// idle pace at its next renewal, not before.
func TestNearPressureRenewsAtTheActivePace(t *testing.T) {
	h := newHarness(t)
	h.idle, h.jitter = idle, func() float64 { return 0 }
	a := h.runner("evictd/a")
	h.round(a)
	wantDuration := func(d time.Duration) {
		t.Helper()
		if got := time.Duration(*h.api.lease.Spec.LeaseDurationSeconds) * time.Second; got != d {
			t.Fatalf("lease duration %v, want %v", got, d)
		}
	}
	wantDuration(idle)
	wantActing(t, a, true)
	if a.el.Active(h.clk.Now()) {
		t.Fatal("active at the idle pace")
	}
	// Echoes and rounds before the renewal is due write nothing.
	h.clk.Step(RenewInterval(idle) / 2)
	h.round(a)
	if got := h.writes(); got != 1 {
		t.Fatalf("%d writes before the idle renewal was due, want 1", got)
	}
	a.SetNear(true)
	h.round(a)
	wantDuration(dur)
	if !a.el.Active(h.clk.Now()) || h.writes() != 2 {
		t.Fatalf("near pressure: active %v after %d writes, want active after 2", a.el.Active(h.clk.Now()), h.writes())
	}
	waitCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if !a.WaitActive(waitCtx) {
		t.Fatal("WaitActive false under an active lease")
	}
	for i := range 3 {
		h.clk.Step(RenewInterval(dur))
		h.round(a)
		if got := h.writes(); got != 3+i {
			t.Fatalf("%d writes after %d active renewals, want %d", got, i+1, 3+i)
		}
	}
	a.SetNear(false)
	h.round(a)
	wantDuration(dur)
	h.clk.Step(RenewInterval(dur))
	h.round(a)
	wantDuration(idle)
	wantActing(t, a, true)
}

// TestWaitActiveWaitsForTheRenewal: an eviction call waits for the lease's
// renewal at the active pace, and gives up when its context ends while the
// API server refuses it.
func TestWaitActiveWaitsForTheRenewal(t *testing.T) {
	h := newHarness(t)
	h.idle = idle
	a := h.runner("evictd/a")
	h.round(a)
	h.api.fail = apierrors.NewServiceUnavailable("etcd down")
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan bool)
	a.SetNear(true) // as WaitActive does, before the rounds below
	go func() { got <- a.WaitActive(ctx) }()
	// Its rounds fail: still waiting.
	deadline := time.Now().Add(30 * time.Second)
	for rounds(a) < 3 {
		h.round(a)
		if time.Now().After(deadline) {
			t.Fatal("rounds stuck")
		}
	}
	h.api.fail = nil
	h.round(a)
	if !<-got {
		t.Fatal("WaitActive false after the active renewal")
	}
	cancel()
}

// TestGoneHolderIsTakenOverAfterTheActiveDuration: a waiting agent takes
// an idle lease over from a holder that is gone — its pod no longer on the
// node once the pod list is complete, or ended; its process exited — one
// active duration after the holder's last renewal, as it would have taken
// over a crashed holder's lease before the idle pace existed. A holder
// that is there keeps its idle lease to the end.
func TestGoneHolderIsTakenOverAfterTheActiveDuration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		holder string
		gone   func(h *harness, r *Runner)
	}{
		{"pod deleted", "evictd/a", func(h *harness, _ *Runner) { h.pods = h.pods[:0] }},
		{"pod ended", "evictd/a", func(h *harness, _ *Runner) { h.pods[0].Status.Phase = "Failed" }},
		{"process exited", "host_41", func(_ *harness, r *Runner) { r.processGone = func(pid int) bool { return pid == 41 } }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.idle, h.synced = idle, true
			h.pod("evictd/a", "ds-1", t0)
			h.pod("evictd/b", "ds-2", t0)
			self := "evictd/b"
			if tc.holder == "host_41" {
				self = "host_42"
			}
			a, b := h.runner(tc.holder), h.runner(self)
			b.processGone = func(int) bool { return false }
			h.round(a)
			h.round(b)
			wantReason(t, b, "another evictd ("+tc.holder+")")
			// There: waits past the active duration.
			h.clk.Step(dur)
			h.round(b)
			wantActing(t, b, false)
			tc.gone(h, b)
			h.round(b)
			wantActing(t, b, true)
			if h.api.holder() != self {
				t.Fatalf("holder %q, want %s", h.api.holder(), self)
			}
		})
	}
	// Gone only one active duration after its last renewal, never sooner.
	h := newHarness(t)
	h.idle, h.synced = idle, true
	h.pod("evictd/b", "ds-2", t0)
	a, b := h.runner("evictd/a"), h.runner("evictd/b")
	h.round(a)
	h.clk.Step(dur - time.Millisecond)
	h.round(b)
	wantActing(t, b, false)
	h.clk.Step(time.Millisecond)
	h.round(b)
	wantActing(t, b, true)

	// A pod list not synced yet shows nobody gone.
	h = newHarness(t)
	h.idle = idle
	a, b = h.runner("evictd/a"), h.runner("evictd/b")
	h.round(a)
	h.clk.Step(dur)
	h.round(b)
	wantActing(t, b, false)
}

// TestRetriesBackOffWithJitter: failed rounds wait longer each time, with
// jitter (package backoff: within the upper half of each step), up to the
// cap: a few seconds for an API server in trouble (never past a renewal at
// the active pace), minutes for a refused write; a success starts again.
func TestRetriesBackOffWithJitter(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd down")
	refused := apierrors.NewForbidden(leaseGR, "evictd-node-a", errors.New("denied by admission"))
	for _, tc := range []struct {
		err   error
		steps []time.Duration
	}{
		{unavailable, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}},
		{refused, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
			64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute, 5 * time.Minute}},
	} {
		for _, j := range []float64{0, 0.999} {
			h := newHarness(t)
			h.jitter = func() float64 { return j }
			a := h.runner("evictd/a")
			h.api.fail = tc.err
			for i, step := range tc.steps {
				got := a.round(context.Background())
				if got < step/2 || got > step {
					t.Errorf("%v, jitter %v: failed round %d waits %v, want within [%v, %v]", tc.err, j, i+1, got, step/2, step)
				}
			}
			h.api.fail = nil
			if got := a.round(context.Background()); got != RenewInterval(dur) {
				t.Errorf("after a success the round waits %v, want the renewal interval %v", got, RenewInterval(dur))
			}
			h.api.fail = tc.err
			h.clk.Step(RenewInterval(dur)) // the next renewal is due
			if got := a.round(context.Background()); got > time.Second {
				t.Errorf("the first failure after a success waits %v, want at most 1s: the back-off starts again", got)
			}
		}
	}
}

// TestRenewalsCarryJitter: a renewal comes up to a tenth of its interval
// early, as the jitter says, never late.
func TestRenewalsCarryJitter(t *testing.T) {
	for _, j := range []float64{0, 0.5, 0.999} {
		h := newHarness(t)
		h.idle, h.jitter = idle, func() float64 { return j }
		a := h.runner("evictd/a")
		h.round(a)
		interval := RenewInterval(idle)
		early := time.Duration(renewJitter * j * float64(interval))
		h.clk.Step(interval - early - time.Millisecond)
		h.round(a)
		if h.writes() != 1 {
			t.Fatalf("jitter %v: renewed %v before its jittered time", j, time.Millisecond)
		}
		h.clk.Step(time.Millisecond)
		h.round(a)
		if h.writes() != 2 {
			t.Fatalf("jitter %v: not renewed at %v, its interval less %v", j, interval-early, early)
		}
	}
}

func TestIdleDurationIsChecked(t *testing.T) {
	for _, d := range []time.Duration{dur - time.Second, MaxIdleDuration + time.Second} {
		_, err := NewRunner(Options{API: &store{}, Namespace: ns, Node: node, Identity: "a/b", Duration: dur, IdleDuration: d, Clock: newHarness(t).clk})
		if err == nil {
			t.Errorf("idle duration %v accepted", d)
		}
	}
}
