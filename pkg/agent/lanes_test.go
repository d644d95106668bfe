// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/thresholds"
)

// heldLoop is the loop on n whose eviction calls wait until the test runs
// them (held, in launch order); before runs first at each launch.
func heldLoop(t *testing.T, n *simNode, spec thresholds.Spec, before func(held []func())) (*simWaker, *[]func()) {
	t.Helper()
	var held []func()
	w := &simWaker{n: n}
	l, err := NewLoop(testLoopConfig(mustThresholds(t, spec)), Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Metrics: n.metrics,
		Log: logger(t, n), Clock: n.clk, Go: func(f func()) {
			if before != nil {
				before(held)
			}
			held = append(held, f)
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	return w, &held
}

// logger is n's logger, zaptest's when it has none.
func logger(t *testing.T, n *simNode) *zap.Logger {
	if n.log != nil {
		return n.log
	}
	return zaptest.NewLogger(t)
}

func softAndHardMemory() thresholds.Spec {
	return thresholds.Spec{
		Hard:        map[string]string{"memory.available": "300Mi"},
		Soft:        map[string]string{"memory.available": "700Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}
}

// A soft call's refusal that arrives while a hard call was just launched
// says nothing of the hard call: the episode must not launch a second hard
// call in the lane whose call is under way (the first one's tracking would
// be lost, and two pods evicted for one need).
func TestLoopOneCallPerLane(t *testing.T) {
	// b's usage covers only half of the hard threshold's need: once a is
	// refused, the need is still open while b's call is under way.
	pods := []*simPod{
		{name: "a", usage: 1000 * mi, request: 100 * mi, grace: 30},
		{name: "b", usage: 50 * mi, grace: 30},
		{name: "c", usage: 40 * mi, grace: 30},
	}
	n := newSimNode(t, 4096*mi, 4096*mi-500*mi-1090*mi, pods...) // 500Mi available: soft only
	n.evictResult = func(p *simPod, req evict.Request) (evict.Outcome, error) {
		if p.name == "a" && !req.Hard {
			return evict.Outcome{Result: evict.Refused, Attempts: 1},
				&evict.PodError{Pod: "ns/a", Result: evict.Refused, Err: errors.New("admission webhook denied the request")}
		}
		return evict.Outcome{}, nil
	}
	softDone := false
	w, held := heldLoop(t, n, softAndHardMemory(), func(held []func()) {
		if len(held) == 1 && !softDone {
			softDone = true
			held[0]() // the soft call's refusal lands as the hard call is launched
		}
	})
	n.runMore(t, 3*time.Second, w)
	if len(*held) != 1 {
		t.Fatalf("%d calls launched for the soft threshold, want 1", len(*held))
	}
	n.mu.Lock()
	n.base += 300 * mi // 200Mi available: the hard threshold is met
	n.mu.Unlock()
	n.runMore(t, 200*time.Millisecond, w)
	if got := len(*held); got != 2 {
		t.Fatalf("%d calls launched, want 2 (the soft one and one hard call): a second hard call was launched while the first was under way", got)
	}
	(*held)[1]()
	n.runMore(t, 2*time.Second, w)
	if v := n.victims(); !eq(v, []string{"a", "b"}) {
		t.Errorf("calls %v, want [a b]: a refused, b evicted for the hard threshold", v)
	}
}

// An episode that ends while its call is under way: the call stays in
// flight for the next episode (the same pod is not called again), and its
// late answer is recorded for the pod, not in the dead episode.
func TestLoopLateAnswerOutlivesItsEpisode(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250-250*mi, threePods()...)
	core, logs := observer.New(zapcore.InfoLevel)
	n.log = zap.New(core)
	w, held := heldLoop(t, n, thresholds.Spec{
		Soft:        map[string]string{"memory.available": "700Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}, nil)
	n.runMore(t, 3*time.Second, w)
	if len(*held) != 1 {
		t.Fatalf("%d calls launched, want 1", len(*held))
	}
	n.mu.Lock()
	n.base -= 1000 * mi // the pressure ends: the episode ends at the next pass
	n.mu.Unlock()
	n.runMore(t, time.Second, w)
	n.mu.Lock()
	n.base += 1000 * mi // and comes back: a new episode
	n.mu.Unlock()
	n.runMore(t, 3*time.Second, w)
	if got := len(*held); got != 1 {
		t.Fatalf("%d calls launched, want 1: the new episode called again while the first call was under way", got)
	}
	(*held)[0]()
	n.runMore(t, 500*time.Millisecond, w)
	if v := n.victims(); !eq(v, []string{"a"}) {
		t.Fatalf("calls %v, want [a]", v)
	}
	found := false
	for _, e := range n.loop.InFlight() {
		found = found || e.Pod == "ns/a"
	}
	if !found {
		t.Errorf("a, evicted by a call that outlived its episode, is not in flight: %+v", n.loop.InFlight())
	}
	if got := logs.FilterMessage("eviction call answered after its pressure episode ended").FilterField(zap.String("pod", "ns/a")).Len(); got != 1 {
		t.Errorf("%d 'eviction call answered after its pressure episode ended' logs for a; want 1: the answer belongs to no live episode", got)
	}
}

// An episode that never ends keeps no record of the pods that left: the
// PodDisruptionBudget refusals and API refusals of a pod no longer listed
// are forgotten.
func TestLoopForgetsPodsNoLongerListed(t *testing.T) {
	pods := []*simPod{
		{name: "guarded", usage: 1000 * mi, request: 100 * mi, grace: 30, pdb: true},
		{name: "refused", usage: 900 * mi, request: 100 * mi, grace: 30},
		{name: "next", usage: 50 * mi, grace: 30},
	}
	n := newSimNode(t, 4096*mi, 4096*mi-200*mi-1950*mi, pods...) // 200Mi available: hard
	n.evictResult = func(p *simPod, req evict.Request) (evict.Outcome, error) {
		if p.name == "refused" {
			return evict.Outcome{Result: evict.Refused, Attempts: 1},
				&evict.PodError{Pod: "ns/refused", Result: evict.Refused, Err: errors.New("denied by a policy")}
		}
		return evict.Outcome{}, nil
	}
	w := n.run(t, testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})), time.Second)
	ep := n.loop.episodes.Get(episode.Memory)
	if ep == nil || len(ep.Blocked) != 1 || len(n.loop.held.refused) != 1 {
		t.Fatalf("after a pass: episode %v; want guarded's PDB refusal and refused's refusal recorded (refused %v)", ep, n.loop.held.refused)
	}
	n.mu.Lock()
	n.pod("guarded").deleted = true // gone by other means; the pressure stays
	n.pod("refused").deleted = true
	n.mu.Unlock()
	n.runMore(t, time.Second, w)
	if ep := n.loop.episodes.Get(episode.Memory); ep == nil || len(ep.Blocked) != 0 || len(n.loop.held.refused) != 0 {
		t.Errorf("pods gone, episode still on: blocked %v, refused %v; want both forgotten", ep.Blocked, n.loop.held.refused)
	}
}
