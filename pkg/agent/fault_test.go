// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// The scripted counterparts of the end-to-end TestFault… tests
// (test/e2e/agent): each pins one way the loop used to stop protecting the
// node.

// A victim the runtime cannot stop stays terminating, holding its memory.
// After its grace and GoneTimeout it stops counting as reclaim, the
// evictor is told (Event), and the next candidate goes; nothing more.
func TestLoopStuckVictimLetsTheNextCandidateGo(t *testing.T) {
	pods := threePods()
	pods[0].hang = true
	n := newSimNode(t, 4096*mi, base250, pods...)
	n.metrics = newMetrics(t)
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	w := n.run(t, cfg, 20*time.Second)
	if !eq(n.victims(), []string{"a"}) {
		t.Fatalf("within a's grace and wait: calls %v, want [a] (its reclaim still counts)", n.victims())
	}
	n.runMore(t, 30*time.Second, w)
	if !eq(n.victims(), []string{"a", "b"}) {
		t.Fatalf("after a's grace (5s) and GoneTimeout (30s): calls %v, want [a b]", n.victims())
	}
	if !eq(n.stuck, []string{"ns/a"}) {
		t.Errorf("EvictionStuck events for %v, want [ns/a] once", n.stuck)
	}
	// The node cannot stop a pod: not ready until it goes.
	if err := n.loop.Problem(); err == nil || !strings.Contains(err.Error(), "ns/a") {
		t.Errorf("Problem() = %v while ns/a is stuck, want it named", err)
	}
	// The gauge the alerts read to tell this cause of unreadiness apart.
	stuckGauge := func(want string) {
		t.Helper()
		exp := "# HELP evictd_eviction_stuck_victims Evicted pods that outlived their grace period and evictd's wait and are still terminating now; /readyz fails while there is one.\n" +
			"# TYPE evictd_eviction_stuck_victims gauge\nevictd_eviction_stuck_victims " + want + "\n"
		if err := testutil.GatherAndCompare(n.metrics.Registry(), strings.NewReader(exp), "evictd_eviction_stuck_victims"); err != nil {
			t.Error(err)
		}
	}
	stuckGauge("1")
	n.mu.Lock()
	n.pod("a").exitAt = n.clk.Now() // the runtime recovers
	n.mu.Unlock()
	n.runMore(t, 2*time.Second, w)
	if err := n.loop.Problem(); err != nil {
		t.Errorf("Problem() = %v after ns/a went, want nil", err)
	}
	stuckGauge("0")
	b := n.calls[1].at.Sub(n.calls[0].at)
	if b < 35*time.Second || b > 37*time.Second {
		t.Errorf("b evicted %v after a, want grace 5s + GoneTimeout 30s (+ a poll)", b)
	}
}

// A victim with no usage figure may free anything: the loop waits for it to
// go and for a newer observation before it evicts again, instead of taking
// its reclaim as zero and evicting the next pod at once.
func TestLoopUnknownReclaimWaitsForAFreshObservation(t *testing.T) {
	pods := []*simPod{
		// Ranks first: the only pod with a usage figure. Frees 100Mi of
		// the 250Mi needed.
		{name: "c", usage: 100 * mi, grace: 30, exitIn: 3 * time.Second},
		// No usage figure (its cgroup is not seen): ranked after c, by name.
		{name: "a", usage: 500 * mi, grace: 30, exitIn: 4 * time.Second, noStats: true},
		{name: "d", usage: 500 * mi, grace: 30, exitIn: time.Second, noStats: true},
	}
	n := newSimNode(t, 4096*mi, 4096*mi-250*mi-1100*mi, pods...)
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 20*time.Second)
	// a's 500Mi are back when it exits: d must never be needed.
	if !eq(n.victims(), []string{"c", "a"}) {
		t.Fatalf("calls %v, want [c a]: a's reclaim is unknown, not zero, so d must wait for a to go", n.victims())
	}
}

// While a soft threshold's call hangs on a slow API server the loop goes on
// observing, and a hard threshold met meanwhile gets its own call at once.
func TestLoopHardCallDoesNotWaitBehindSoftCall(t *testing.T) {
	pods := threePods()
	n := newSimNode(t, 4096*mi, 4096*mi-600*mi-2400*mi, pods...) // 600Mi available
	spec := thresholds.Spec{
		Hard:        map[string]string{"memory.available": "300Mi"},
		Soft:        map[string]string{"memory.available": "700Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}
	cfg := testLoopConfig(mustThresholds(t, spec))
	var held []func()
	w := &simWaker{n: n}
	l, err := NewLoop(cfg, Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Log: zaptest.NewLogger(t), Clock: n.clk,
		Go: func(f func()) {
			if len(held) == 0 {
				held = append(held, f) // the first call (soft) is stuck on the wire
				return
			}
			f()
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, 5*time.Second, w)
	if len(held) != 1 || len(n.calls) != 0 {
		t.Fatalf("held %d calls, made %v; want the soft call held and nothing else", len(held), n.victims())
	}
	passes := n.steps
	n.mu.Lock()
	n.base += 400 * mi // 200Mi available: the hard threshold is met
	n.mu.Unlock()
	n.runMore(t, 3*time.Second, w)
	if n.steps-passes < 3 {
		t.Errorf("%d passes in 3s while a call hung: the loop must keep observing", n.steps-passes)
	}
	if len(n.calls) != 1 || !n.calls[0].hard {
		t.Fatalf("calls %+v, want one hard eviction while the soft call hangs", n.calls)
	}
	// The soft call answers at last; the loop takes it in without a second
	// hard eviction.
	held[0]()
	n.runMore(t, 3*time.Second, w)
	hard := 0
	for _, c := range n.calls {
		if c.hard {
			hard++
		}
	}
	if hard != 1 {
		t.Errorf("%d hard evictions, want 1: %+v", hard, n.calls)
	}
}

// A resource's episode outlives its last threshold by the transition
// period, and its end is said on the Node.
func TestLoopEpisodeEndsAfterTransitionPeriod(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	cfg.TransitionPeriod = 20 * time.Second
	w := n.run(t, cfg, 10*time.Second) // a evicted, gone after 3s
	if len(n.ended) != 0 {
		t.Fatalf("episode ended %v within the transition period", n.ended)
	}
	n.runMore(t, 15*time.Second, w)
	if len(n.ended) != 1 || !strings.Contains(n.ended[0], "memory pressure ended") || !strings.Contains(n.ended[0], "20s") {
		t.Fatalf("pressure-ended notes %q, want one about memory naming the 20s period", n.ended)
	}
	// Pressure again within a new episode: a fresh budget, a new Event.
	n.mu.Lock()
	n.base += 1000 * mi
	n.mu.Unlock()
	n.runMore(t, 10*time.Second, w)
	if !eq(n.victims(), []string{"a", "b"}) || n.nodeEvents != 2 {
		t.Errorf("second episode: calls %v, node events %d; want [a b], 2", n.victims(), n.nodeEvents)
	}
}

// Act-early plans with the time from an accepted eviction to the victim's
// memory being back, which is when its cgroup empties, not when the pod
// object goes after volume teardown and status sync.
func TestLoopLeadTimeIsEvictionToMemoryBack(t *testing.T) {
	pods := threePods()
	pods[0].exitIn, pods[0].teardown = time.Second, 20*time.Second
	n := newSimNode(t, 4096*mi, base250, pods...)
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 30*time.Second)
	if !eq(n.victims(), []string{"a"}) {
		t.Fatalf("calls %v, want [a]", n.victims())
	}
	// One sample of ~1s folded into the 2s default: (7×2 + 3×1)/10 = 1.7s.
	// Measured to the deletion it would be (7×2 + 3×21)/10 = 7.7s.
	if lead := n.loop.learned.lead.Get(); lead < 1500*time.Millisecond || lead > 2*time.Second {
		t.Errorf("lead %v after a 1s exit and a 20s teardown, want ≈1.7s (eviction → memory back)", lead)
	}
}

// refuse answers a's eviction as an admission policy would (a 403 the
// evictor classifies as Refused) and lets every other pod go.
func refuse(name string) func(p *simPod, req evict.Request) (evict.Outcome, error) {
	return func(p *simPod, req evict.Request) (evict.Outcome, error) {
		if p.name != name {
			return evict.Outcome{}, nil
		}
		return evict.Outcome{Result: evict.Refused, GracePeriodSeconds: 5, Attempts: 1},
			&evict.PodError{Pod: "ns/" + p.name, Result: evict.Refused, Err: evict.ErrRefused}
	}
}

// A pod whose eviction the API server refuses for the pod itself (an
// admission policy or webhook) is that pod's answer, not the API server's
// state: the next candidate goes in the same pass, with no back-off. Before,
// a refusal was a failure: the episode backed off and asked for the same
// pod again and again while the node sank.
func TestLoopRefusedPodLetsTheNextGoAtOnce(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	n.evictResult = refuse("a")
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 20*time.Second)
	if !eq(n.victims(), []string{"a", "b"}) {
		t.Fatalf("calls %v, want [a b]: a refused, b in its place, nothing more", n.victims())
	}
	if gap := n.calls[1].at.Sub(n.calls[0].at); gap != 0 || n.calls[1].step != n.calls[0].step {
		t.Errorf("b asked %v (pass %d) after a's refusal (pass %d), want in the same pass", gap, n.calls[1].step, n.calls[0].step)
	}
	if got := n.evictedPods(); !eq(got, []string{"b"}) {
		t.Errorf("terminated %v, want [b]", got)
	}
}

// With nobody else to evict, the refused pod is asked again only after the
// recheck time, never in the tight rhythm of a failure back-off.
func TestLoopRefusedPodIsAskedAgainOnlyAfterTheRecheck(t *testing.T) {
	n := newSimNode(t, 4096*mi, 4096*mi-250*mi-1000*mi, &simPod{name: "a", usage: 1000 * mi, grace: 30, exitIn: time.Second})
	n.evictResult = refuse("a")
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	cfg.RefusedRecheck = 2 * time.Minute
	n.run(t, cfg, 5*time.Minute)
	if len(n.calls) != 3 {
		t.Fatalf("%d calls for a in 5 minutes, want 3 (at 0, 2 and 4 minutes)", len(n.calls))
	}
	for i := 1; i < len(n.calls); i++ {
		if gap := n.calls[i].at.Sub(n.calls[i-1].at); gap < cfg.RefusedRecheck || gap > cfg.RefusedRecheck+2*time.Second {
			t.Errorf("a asked again %v after its refusal, want after the %v recheck", gap, cfg.RefusedRecheck)
		}
	}
}

// Act-early's lead is how soon a hard eviction gives memory back. A soft
// victim drains for its own grace (here 30 s): no measure of that, and one
// such sample used to move the lead from 2 s to 10 s.
func TestLoopLeadTimeIgnoresSoftVictims(t *testing.T) {
	pods := threePods()
	pods[0].exitIn = 30 * time.Second                            // uses its whole 30 s grace
	n := newSimNode(t, 4096*mi, 4096*mi-600*mi-2400*mi, pods...) // 600Mi available
	spec := thresholds.Spec{
		Soft:        map[string]string{"memory.available": "700Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}
	cfg := testLoopConfig(mustThresholds(t, spec))
	n.run(t, cfg, time.Minute)
	if !eq(n.victims(), []string{"a"}) || n.calls[0].hard {
		t.Fatalf("calls %+v, want one soft eviction of a", n.calls)
	}
	if got := n.evictedPods(); !eq(got, []string{"a"}) {
		t.Fatalf("terminated %v, want a, gone within the minute", got)
	}
	if lead := n.loop.learned.lead.Get(); lead != cfg.Decide.Lead {
		t.Errorf("lead %v after a soft victim's 30 s drain, want the default %v kept", lead, cfg.Decide.Lead)
	}
}

// A soft victim with no usage figure and a 600 s grace defers only soft
// decisions: when a hard threshold is met meanwhile, its victim goes at
// once. Hard never waits on soft; before, both lanes waited the ten minutes
// behind one Debug line.
func TestLoopSoftUnknownReclaimDoesNotHoldBackHard(t *testing.T) {
	pods := []*simPod{
		// Neither cgroup is seen at first: ranked by name, a goes first.
		{name: "a", usage: 500 * mi, grace: 600, exitIn: time.Hour, noStats: true},
		{name: "b", usage: 800 * mi, grace: 30, exitIn: time.Second, noStats: true},
	}
	n := newSimNode(t, 4096*mi, 4096*mi-600*mi-1300*mi, pods...) // 600Mi available
	spec := thresholds.Spec{
		Hard:        map[string]string{"memory.available": "300Mi"},
		Soft:        map[string]string{"memory.available": "700Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}
	w := n.run(t, testLoopConfig(mustThresholds(t, spec)), 5*time.Second)
	if !eq(n.victims(), []string{"a"}) || n.calls[0].hard {
		t.Fatalf("calls %+v, want one soft eviction of a", n.calls)
	}
	n.mu.Lock()
	n.pod("b").noStats = false
	n.base += 400 * mi // 200Mi available: the hard threshold is met
	n.mu.Unlock()
	n.runMore(t, 3*time.Second, w)
	if !eq(n.victims(), []string{"a", "b"}) || !n.calls[1].hard {
		t.Fatalf("calls %+v, want b evicted for the hard threshold while a drains", n.calls)
	}
}

// On a one-disk node nodefs.available and imagefs.available measure one
// filesystem, and their episodes act in one pass. While the nodefs
// episode's call for the writer is still under way (the calls here answer
// only when the test lets them), the imagefs episode must count the writer
// as freeing its 8 GiB, not call for it a second time (two Events, two
// budgets charged) nor evict the next pod for the same shortfall.
func TestLoopOneShortfallOneEvictionAcrossEpisodes(t *testing.T) {
	const gi = 1 << 30
	pods := []*simPod{
		{name: "writer", usage: 10 * mi, grace: 1, disk: 8 * gi},
		{name: "second", usage: 10 * mi, grace: 1, disk: 4 * gi},
	}
	n := newSimNode(t, 4096*mi, base250+2400*mi, pods...)
	n.diskCapacity, n.diskBase = 100*gi, 76*gi // 12 GiB available
	spec := thresholds.Spec{Hard: map[string]string{"nodefs.available": "15%", "imagefs.available": "20%"}}
	cfg := testLoopConfig(mustThresholds(t, spec))
	cfg.ExpectImageGC = false
	var held []func()
	w := &simWaker{n: n}
	l, err := NewLoop(cfg, Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Log: zaptest.NewLogger(t), Clock: n.clk,
		Go: func(f func()) { held = append(held, f) }})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, 3*time.Second, w)
	if len(held) != 1 {
		t.Fatalf("%d eviction calls under way after 3s, want 1: the writer covers both signals' need", len(held))
	}
	for _, f := range held {
		f()
	}
	n.runMore(t, 5*time.Second, w)
	if !eq(n.victims(), []string{"writer"}) {
		t.Fatalf("calls %v, want [writer] once", n.victims())
	}
}

// Stuck means still holding. A victim whose processes are gone while its
// object waits (a finalizer, a slow volume unmount) has given its memory
// back: readiness stays green (a 503 would stall the DaemonSet's rollouts)
// and no EvictionStuck Event is written. A pod evictd never evicted (found
// terminating) gets no Event "after its eviction" either.
func TestLoopStuckMeansStillHolding(t *testing.T) {
	t.Run("evicted, processes gone, object kept by a finalizer", func(t *testing.T) {
		pods := threePods()
		pods[0].exitIn, pods[0].teardown = time.Second, 10*time.Minute
		n := newSimNode(t, 4096*mi, base250, pods...)
		n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), time.Minute)
		if !eq(n.victims(), []string{"a"}) {
			t.Fatalf("calls %v, want [a]: its memory is back", n.victims())
		}
		if len(n.stuck) != 0 {
			t.Errorf("EvictionStuck events for %v: a holds nothing", n.stuck)
		}
		if err := n.loop.Problem(); err != nil {
			t.Errorf("Problem() = %v, want nil: a's processes are gone", err)
		}
	})
	t.Run("found terminating, never evicted by evictd", func(t *testing.T) {
		pods := threePods()
		pods[0].hang = true
		n := newSimNode(t, 4096*mi, 4096*mi-1000*mi, pods...) // no pressure
		n.terminate(n.pod("a"), 3, t0)
		n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), time.Minute)
		if len(n.stuck) != 0 {
			t.Errorf("EvictionStuck events for %v: evictd never evicted them", n.stuck)
		}
		if err := n.loop.Problem(); err != nil {
			t.Errorf("Problem() = %v, want nil", err)
		}
	})
}

// Hard pressure while a pod is terminating on a long grace (a user's delete
// with 600 s, holding 1000Mi): its memory does not count (its grace
// outlasts what a hard threshold can wait), and evicting another pod would
// leave it holding on. It is evicted again with the hard grace, before
// anyone else, and nothing more is needed.
func TestLoopHardPressureReEvictsALongTerminatingPod(t *testing.T) {
	pods := threePods()
	pods[0].exitIn = 10 * time.Minute
	n := newSimNode(t, 4096*mi, base250, pods...)
	n.terminate(n.pod("a"), 600, t0)
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 20*time.Second)
	if !eq(n.victims(), []string{"a"}) || !n.calls[0].hard {
		t.Fatalf("calls %+v, want a evicted again for the hard threshold, and no one else", n.calls)
	}
	if g := n.pod("a").graceActual; g > 5 {
		t.Errorf("a's grace %ds after the new eviction, want the hard grace (5s) at most", g)
	}
}

// Every candidate protected by a PodDisruptionBudget under lasting
// pressure: each is asked again later and later (30 s, then doubling up
// to 8×), and not in lockstep with the others. Before, all of them were
// re-asked back to back every 30 s, each answer starting a pass.
func TestLoopPDBRechecksSpreadAndBackOff(t *testing.T) {
	pods := threePods()
	for _, p := range pods {
		p.pdb = true
	}
	n := newSimNode(t, 4096*mi, base250, pods...)
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 6*time.Minute)
	at := map[string][]time.Time{}
	for _, c := range n.calls {
		at[c.pod] = append(at[c.pod], c.at)
	}
	// 30 s, 60 s, 120 s, 240 s (±20 %) after the first: five calls each in 6 minutes at most.
	for _, name := range []string{"a", "b", "c"} {
		calls := at[name]
		if len(calls) < 3 || len(calls) > 5 {
			t.Fatalf("%s asked %d times in 6 minutes, want 3–5 (30 s, then doubling): %v", name, len(calls), calls)
		}
		for i := 2; i < len(calls); i++ {
			prev, gap := calls[i-1].Sub(calls[i-2]), calls[i].Sub(calls[i-1])
			if float64(gap) < 1.3*float64(prev) {
				t.Errorf("%s re-asked after %v, then %v: the wait must grow", name, prev, gap)
			}
		}
	}
	if at["a"][1].Equal(at["b"][1]) && at["b"][1].Equal(at["c"][1]) {
		t.Errorf("a, b and c re-asked all at %v: in lockstep", at["a"][1])
	}
}

// One view of what is in flight: a pod the tracker holds (a soft victim
// draining) and a call under way for it (its hard re-eviction) are one
// entry, the call's, so the pod's reclaim is counted once and its hard
// grace is what the escalation rule sees.
func TestLoopInFlightViewHasEachPodOnce(t *testing.T) {
	pods := []*simPod{
		{name: "a", usage: 500 * mi, grace: 600, exitIn: time.Hour},
		{name: "b", usage: 400 * mi, grace: 30, exitIn: time.Second},
	}
	n := newSimNode(t, 4096*mi, 4096*mi-600*mi-900*mi, pods...) // 600Mi available
	spec := thresholds.Spec{
		Hard:        map[string]string{"memory.available": "300Mi"},
		Soft:        map[string]string{"memory.available": "700Mi"},
		GracePeriod: map[string]string{"memory.available": "1s"},
	}
	var held []func()
	release := func() {
		for _, f := range held {
			f()
		}
		held = nil
	}
	w := &simWaker{n: n}
	l, err := NewLoop(testLoopConfig(mustThresholds(t, spec)), Deps{Observer: n, Waker: w, Pods: n, Evictor: n,
		Log: zaptest.NewLogger(t), Clock: n.clk, Go: func(f func()) { held = append(held, f) }})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, 3*time.Second, w)
	release()
	if !eq(n.victims(), []string{"a"}) || n.calls[0].hard {
		t.Fatalf("calls %+v, want one soft eviction of a", n.calls)
	}
	n.mu.Lock()
	n.base += 400 * mi // 200Mi available: the hard threshold is met
	n.mu.Unlock()
	n.runMore(t, 2*time.Second, w)
	if len(held) != 1 {
		t.Fatalf("%d calls under way, want a's hard re-eviction alone", len(held))
	}
	var got []inflight.Entry
	for _, e := range l.inFlightView() {
		if e.UID == n.pod("a").uid() {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0].Origin != inflight.Pending || !got[0].Hard {
		t.Errorf("a in the in-flight view: %+v, want one entry, the hard call under way", got)
	}
	release()
}

// The loop and `evictd run` trust a refusal for the same time: before,
// run said 2 min and a LoopConfig without one got max(PDBRecheck, 1 min).
func TestLoopRefusedRecheckDefault(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
	cfg.RefusedRecheck = 0
	l, err := NewLoop(cfg, Deps{Observer: n, Waker: &simWaker{n: n}, Pods: n, Evictor: n, Log: zaptest.NewLogger(t), Clock: n.clk, Go: syncCall})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.cfg.RefusedRecheck; got != DefaultRefusedRecheck {
		t.Errorf("RefusedRecheck %v when unset, want DefaultRefusedRecheck (%v), as evictd run uses", got, DefaultRefusedRecheck)
	}
	if got := ConfigFor(options.NewOptions(), nil, rank.Options{}).RefusedRecheck; got != DefaultRefusedRecheck {
		t.Errorf("evictd run's RefusedRecheck %v, want DefaultRefusedRecheck (%v)", got, DefaultRefusedRecheck)
	}
}
