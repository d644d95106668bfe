// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

func memSpec(hard, minReclaim string) thresholds.Spec {
	s := thresholds.Spec{Hard: map[string]string{"memory.available": hard}}
	if minReclaim != "" {
		s.MinimumReclaim = map[string]string{"memory.available": minReclaim}
	}
	return s
}

// Three pods of 1000Mi (100Mi requested), 800Mi and 600Mi (within its
// 1000Mi request) on a 4Gi node left with 250Mi available.
func threePods() []*simPod {
	return []*simPod{
		{name: "a", usage: 1000 * mi, request: 100 * mi, grace: 30, exitIn: 3 * time.Second},
		{name: "b", usage: 800 * mi, grace: 30, exitIn: time.Second},
		{name: "c", usage: 600 * mi, request: 1000 * mi, grace: 30, exitIn: time.Second},
	}
}

const base250 = 4096*mi - 250*mi - 2400*mi // available 250Mi with threePods

func TestLoopEvictsOnlyWhatThePressureNeeds(t *testing.T) {
	tests := []struct {
		name       string
		minReclaim string
		victims    []string
	}{
		// Need 300+200−250 = 250Mi: a's 1000Mi covers it.
		{"one pod covers the need", "200Mi", []string{"a"}},
		// Need 300+1200−250 = 1250Mi: a (1000Mi) in flight leaves 250Mi,
		// so b too, and then 1800Mi in flight covers it: c stays.
		{"two pods, the second while the first is in flight", "1200Mi", []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newSimNode(t, 4096*mi, base250, threePods()...)
			n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", tc.minReclaim))), 30*time.Second)
			if !eq(n.victims(), tc.victims) {
				t.Fatalf("eviction calls %v, want %v", n.victims(), tc.victims)
			}
			// One eviction per pass: never two calls in the same step.
			for i := 1; i < len(n.calls); i++ {
				if n.calls[i].step == n.calls[i-1].step {
					t.Errorf("calls %d and %d were made in the same pass", i-1, i)
				}
			}
			if len(tc.victims) > 1 && !n.calls[1].at.Before(n.pod("a").exitAt) {
				t.Errorf("b was evicted at %v, after a's memory was back at %v: in-flight accounting should have allowed it earlier", n.calls[1].at, n.pod("a").exitAt)
			}
			if n.nodeEvents != 1 {
				t.Errorf("node events %d, want 1", n.nodeEvents)
			}
			if len(n.kicks) != len(tc.victims) {
				t.Errorf("kicks %v: want one per evicted pod gone", n.kicks)
			}
			if len(n.loop.InFlight()) != 0 {
				t.Errorf("pods still in flight at the end: %+v", n.loop.InFlight())
			}
		})
	}
}

func TestLoopEscalatesPastALongSoftGrace(t *testing.T) {
	// kubernetes#123872: "slow" is evicted for the soft threshold with its
	// 600s grace and ignores SIGTERM; "g" keeps growing. The hard threshold
	// must not wait for slow's grace to run out.
	spec := thresholds.Spec{
		Hard:        map[string]string{"memory.available": "300Mi"},
		Soft:        map[string]string{"memory.available": "1000Mi"},
		GracePeriod: map[string]string{"memory.available": "5s"},
	}
	pods := []*simPod{
		{name: "slow", usage: 2000 * mi, grace: 600, exitIn: time.Hour},
		{name: "g", usage: 100 * mi, growth: 100 * mi, request: 4000 * mi, grace: 30, exitIn: time.Second},
		{name: "o", usage: 300 * mi, request: 1000 * mi, grace: 30},
	}
	n := newSimNode(t, 4096*mi, 4096*mi-900*mi-2400*mi, pods...)
	n.run(t, testLoopConfig(mustThresholds(t, spec)), 40*time.Second)

	if len(n.calls) == 0 || n.calls[0].pod != "slow" || n.calls[0].hard {
		t.Fatalf("first call %+v, want a soft eviction of slow", n.calls)
	}
	if d := n.calls[0].at.Sub(t0); d < 5*time.Second || d > 7*time.Second {
		t.Errorf("soft eviction after %v, want right after the 5s grace period", d)
	}
	var hard *simCall
	for i := range n.calls {
		if n.calls[i].hard {
			hard = &n.calls[i]
			break
		}
	}
	if hard == nil {
		t.Fatalf("no hard eviction while slow held its memory: calls %+v", n.calls)
	}
	if !hard.at.Before(n.pod("slow").exitAt) {
		t.Errorf("hard eviction at %v waited for slow's exit at %v", hard.at, n.pod("slow").exitAt)
	}
	if hard.avail < 0 {
		t.Errorf("hard eviction came only when memory was exhausted (available %dMi)", hard.avail/mi)
	}
}

func TestLoopMovesPastAPodDisruptionBudget(t *testing.T) {
	tests := []struct {
		name    string
		policy  evict.PDBPolicy
		pdb     []string
		calls   []string
		evicted []string
		forced  []string
	}{
		{"429: the next candidate in the same pass", evict.PDBStrict, []string{"a"}, []string{"a", "b"}, []string{"b"}, nil},
		// Every eligible pod blocked, strict: each is asked once within the
		// recheck window, nothing is evicted.
		{"all blocked, strict", evict.PDBStrict, []string{"a", "b", "c"}, []string{"a", "b", "c"}, nil, nil},
		{"all blocked, best effort: forced delete of the first", evict.PDBBestEffort, []string{"a", "b", "c"}, []string{"a", "b", "c", "a"}, []string{"a"}, []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := threePods()
			for _, p := range pods {
				for _, name := range tc.pdb {
					if p.name == name {
						p.pdb = true
					}
				}
			}
			n := newSimNode(t, 4096*mi, base250, pods...)
			cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
			cfg.Decide.Evict.PDBPolicy = tc.policy
			n.run(t, cfg, 20*time.Second)
			if !eq(n.victims(), tc.calls) {
				t.Fatalf("calls %v, want %v", n.victims(), tc.calls)
			}
			for i := 1; i < len(n.calls); i++ {
				if n.calls[i].step != n.calls[0].step {
					t.Errorf("call %d (%s) in pass %d, want all in the first pass %d", i, n.calls[i].pod, n.calls[i].step, n.calls[0].step)
				}
			}
			if !eq(n.evictedPods(), tc.evicted) || !eq(n.forced, tc.forced) {
				t.Errorf("evicted %v forced %v, want %v and %v", n.evictedPods(), n.forced, tc.evicted, tc.forced)
			}
		})
	}
}

func TestLoopEpisodes(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	w := n.run(t, cfg, 20*time.Second)
	if !eq(n.victims(), []string{"a"}) || len(n.ended) != 1 || n.nodeEvents != 1 {
		t.Fatalf("first episode: calls %v resets %d node events %d; want [a], 1, 1", n.victims(), len(n.ended), n.nodeEvents)
	}
	// Pressure again: a new episode, a new Node event, the next pod.
	n.mu.Lock()
	n.base += 1000 * mi
	n.mu.Unlock()
	n.runMore(t, 20*time.Second, w)
	if !eq(n.victims(), []string{"a", "b"}) || len(n.ended) != 2 || n.nodeEvents != 2 {
		t.Fatalf("second episode: calls %v resets %d node events %d; want [a b], 2, 2", n.victims(), len(n.ended), n.nodeEvents)
	}
}

func TestLoopDryRunNamesEachPodOncePerEpisode(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	n.evictResult = func(p *simPod, req evict.Request) (evict.Outcome, error) {
		return evict.Outcome{Result: evict.DryRun, GracePeriodSeconds: 5, Attempts: 1}, nil
	}
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "1200Mi")))
	w := n.run(t, cfg, 30*time.Second)
	// Need 1250Mi: a and b would cover it; nothing changes, so the pressure
	// lasts, but each would-be victim is named once.
	if !eq(n.victims(), []string{"a", "b"}) {
		t.Fatalf("dry-run calls %v, want [a b] once each", n.victims())
	}
	if len(n.evictedPods()) != 0 {
		t.Fatalf("dry run terminated %v", n.evictedPods())
	}
	// The episode ends, and the next one names them again.
	n.mu.Lock()
	n.base -= 2000 * mi
	n.mu.Unlock()
	n.runMore(t, 5*time.Second, w)
	if len(n.ended) != 1 {
		t.Fatalf("resets %d after pressure ended, want 1", len(n.ended))
	}
	n.mu.Lock()
	n.base += 2000 * mi
	n.mu.Unlock()
	n.runMore(t, 10*time.Second, w)
	if !eq(n.victims(), []string{"a", "b", "a", "b"}) {
		t.Fatalf("calls %v, want [a b a b]", n.victims())
	}
}

func TestLoopCountsPodsAlreadyTerminating(t *testing.T) {
	pods := threePods()
	n := newSimNode(t, 4096*mi, base250, pods...)
	// a was evicted before this evictd started: terminating, 3s left.
	n.terminate(n.pod("a"), 3, t0)
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 20*time.Second)
	if len(n.calls) != 0 {
		t.Fatalf("calls %v, want none: a's reclaim was already on its way", n.victims())
	}
}

func TestLoopRateLimitAndFailureBackoff(t *testing.T) {
	t.Run("rate limited: retried when the token is due", func(t *testing.T) {
		n := newSimNode(t, 4096*mi, base250, threePods()...)
		first := true
		n.evictResult = func(p *simPod, req evict.Request) (evict.Outcome, error) {
			if first {
				first = false
				return evict.Outcome{Result: evict.RateLimited, RetryAfter: 700 * time.Millisecond},
					&evict.PodError{Pod: "ns/" + p.name, Result: evict.RateLimited, Err: evict.ErrRateLimited}
			}
			return evict.Outcome{}, nil
		}
		n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 10*time.Second)
		if !eq(n.victims(), []string{"a", "a"}) {
			t.Fatalf("calls %v, want a twice", n.victims())
		}
		gap := n.calls[1].at.Sub(n.calls[0].at)
		if gap < 700*time.Millisecond || gap > 800*time.Millisecond {
			t.Errorf("retried after %v, want when the token is due (700ms)", gap)
		}
	})
	t.Run("failures back off, never a tight loop", func(t *testing.T) {
		n := newSimNode(t, 4096*mi, base250, threePods()...)
		n.evictResult = func(p *simPod, req evict.Request) (evict.Outcome, error) {
			return evict.Outcome{Result: evict.Failed, Attempts: 4}, &evict.PodError{Pod: "ns/" + p.name, Result: evict.Failed, Err: errTest}
		}
		n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 40*time.Second)
		// Pauses of 1, 2, 4, 8, 16 s: six calls in 40s (the last 8s in).
		if len(n.calls) < 4 || len(n.calls) > 6 {
			t.Fatalf("%d calls in 40s of failures, want 4–6", len(n.calls))
		}
		for i := 2; i < len(n.calls); i++ {
			prev, gap := n.calls[i-1].at.Sub(n.calls[i-2].at), n.calls[i].at.Sub(n.calls[i-1].at)
			if gap < prev {
				t.Errorf("gap %v after %v: the backoff must not shrink", gap, prev)
			}
		}
	})
	t.Run("episode cap: no further calls until the episode ends", func(t *testing.T) {
		n := newSimNode(t, 4096*mi, base250, threePods()...)
		n.evictResult = func(p *simPod, req evict.Request) (evict.Outcome, error) {
			return evict.Outcome{Result: evict.RateLimited}, &evict.PodError{Pod: "ns/" + p.name, Result: evict.RateLimited, Err: evict.ErrEpisodeCap}
		}
		var err error
		if n.metrics, err = metrics.New(buildinfo.Info{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 10*time.Second)
		if len(n.calls) != 1 {
			t.Fatalf("calls %v, want one", n.victims())
		}
		// What EvictdEpisodeCapReached alerts on.
		want := `
# HELP evictd_pressure_episode_cap_reached 1 while a resource's pressure episode has reached its eviction cap (--eviction-max-per-episode): evictd evicts no more pods for it until the episode ends, whatever the pressure.
# TYPE evictd_pressure_episode_cap_reached gauge
evictd_pressure_episode_cap_reached{resource="imagefs"} 0
evictd_pressure_episode_cap_reached{resource="memory"} 1
evictd_pressure_episode_cap_reached{resource="memory-stall"} 0
evictd_pressure_episode_cap_reached{resource="memory-high"} 0
evictd_pressure_episode_cap_reached{resource="nodefs"} 0
evictd_pressure_episode_cap_reached{resource="pids"} 0
`
		if err := testutil.GatherAndCompare(n.metrics.Registry(), strings.NewReader(want), "evictd_pressure_episode_cap_reached"); err != nil {
			t.Error(err)
		}
	})
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("the API server is unreachable")

func TestLoopActsEarlyAndFitsGrace(t *testing.T) {
	// g fills 200Mi/s from 1000Mi available: the 300Mi threshold is 3.5s
	// away, so with a 2s lead evictd acts before the crossing, with a grace
	// that fits the time left.
	pods := []*simPod{
		{name: "g", usage: 100 * mi, growth: 200 * mi, grace: 30, exitIn: time.Second},
		{name: "b", usage: 800 * mi, request: 1000 * mi, grace: 30, exitIn: time.Second},
	}
	for _, early := range []bool{true, false} {
		n := newSimNode(t, 4096*mi, 4096*mi-1000*mi-900*mi, pods[0], pods[1])
		cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
		cfg.Adaptive = true
		cfg.Decide.ActEarly = early
		cfg.Decide.FitGrace = true
		n.run(t, cfg, 6*time.Second)
		if len(n.calls) == 0 || n.calls[0].pod != "g" {
			t.Fatalf("act early %v: calls %+v, want g evicted", early, n.calls)
		}
		c := n.calls[0]
		if early && c.avail < 300*mi {
			t.Errorf("acting early: evicted at %dMi available, after the crossing", c.avail/mi)
		}
		if !early && c.avail >= 300*mi {
			t.Errorf("not acting early: evicted at %dMi available, before the crossing", c.avail/mi)
		}
		if c.grace == nil || *c.grace >= 5 {
			t.Errorf("act early %v: grace override %v, want one shorter than the 5s hard cap", early, c.grace)
		}
		// Reset the shared pods for the next round.
		for _, p := range pods {
			p.termAt, p.exitAt, p.deleted, p.deletionTS = time.Time{}, time.Time{}, false, nil
		}
	}
}

func TestLoopActEarlyThenCrossingEvictsOnce(t *testing.T) {
	// As on the real node (TestNodeHeadToHead, 25 MiB/s): the leaker is
	// evicted early, the crossing comes anyway while it exits, and the
	// observation that sees the crossing read the node before the leaker's
	// memory was freed and its cgroup after. Its 1.1 GiB is then in neither
	// figure; the BestEffort pod must not go for it.
	for _, lag := range []time.Duration{0, 50 * time.Millisecond} {
		pods := []*simPod{
			{name: "leaker", usage: 1100 * mi, growth: 25 * mi, request: 64 * mi, grace: 5, exitIn: 2550 * time.Millisecond, teardown: 4 * time.Second},
			{name: "quiet", usage: 32 * mi, request: 128 * mi, grace: 5, exitIn: time.Second},
			{name: "besteffort", usage: 16 * mi, grace: 5, exitIn: time.Second},
		}
		n := newSimNode(t, 2048*mi, 2048*mi-1148*mi-500*mi, pods...)
		n.podReadLag = lag
		cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
		cfg.Adaptive = true
		cfg.Decide.ActEarly = true
		cfg.Decide.FitGrace = true
		n.run(t, cfg, 30*time.Second)
		if !eq(n.victims(), []string{"leaker"}) {
			t.Errorf("pod read %v after the node's: eviction calls %v, want [leaker] alone", lag, n.victims())
		}
		// 25Mi/s falls 50Mi over the lead: no bet is needed, the crossing
		// acts (decide.EarlyMargin).
		if len(n.calls) > 0 && n.calls[0].avail >= 300*mi {
			t.Errorf("pod read %v after the node's: the leaker went at %dMi available, before the crossing", lag, n.calls[0].avail/mi)
		}
		if lag > 0 && (len(n.torn) != 1 || n.torn[0] >= 300*mi) {
			t.Errorf("torn observations at %v bytes available: want one, below the threshold, or the scenario did not happen", n.torn)
		}
	}
}

// TestLoopActEarlyLosesNoBet: the two fills act-early bet on and lost on
// the real node, scripted. Before decide.EarlyMargin, the load coming up
// cost a pod at 583Mi available, and the leaker went during its first
// allocation at 748Mi; the crossing never came for the one and came 15s
// later for the other.
func TestLoopActEarlyLosesNoBet(t *testing.T) {
	tests := []struct {
		name string
		pods []*simPod
		// avail at the start; want: the eviction calls, and whether they
		// may come only after the crossing.
		avail int64
		want  []string
	}{
		{
			// TestNodeStuckTerminating: a load fills 1Gi at 300Mi/s and
			// holds, leaving 500Mi available, 200Mi above the threshold.
			name:  "a load coming up stops short of the threshold",
			avail: 1524 * mi,
			pods: []*simPod{
				{name: "load", usage: 0, ramp: 300 * mi, rampTo: 1024 * mi, request: 2048 * mi, grace: 5, exitIn: time.Second},
				{name: "idle", usage: 310 * mi, grace: 5, exitIn: time.Second},
			},
		},
		{
			// TestNodeHeadToHead at 25Mi/s: the leaker's first 1Gi at
			// 300Mi/s, then its leak.
			name:  "a leaker's first allocation, then a slow leak",
			avail: 1700 * mi,
			pods: []*simPod{
				{name: "leaker", usage: 0, ramp: 300 * mi, rampTo: 1024 * mi, growth: 25 * mi, request: 64 * mi, grace: 5, exitIn: time.Second},
				{name: "besteffort", usage: 16 * mi, grace: 5, exitIn: time.Second},
			},
			want: []string{"leaker"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var held int64
			for _, p := range tc.pods {
				held += p.usage
			}
			n := newSimNode(t, 4096*mi, 4096*mi-tc.avail-held, tc.pods...)
			cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
			cfg.Adaptive = true
			cfg.Decide.ActEarly = true
			cfg.Decide.FitGrace = true
			n.run(t, cfg, 30*time.Second)
			if !eq(n.victims(), tc.want) {
				t.Errorf("eviction calls %v, want %v", n.victims(), tc.want)
			}
			for _, c := range n.calls {
				if c.avail >= 300*mi {
					t.Errorf("%s went at %dMi available, before the crossing", c.pod, c.avail/mi)
				}
			}
		})
	}
}

func TestLoopWaitAdaptsToHeadroom(t *testing.T) {
	tests := []struct {
		name     string
		adaptive bool
		avail    int64
		growth   float64
		maxWait  time.Duration
		minWait  time.Duration
	}{
		{"far from any threshold: the housekeeping interval", true, 3000 * mi, 0, time.Second, time.Second},
		// 400Mi above 300Mi at the assumed 1000Mi/s: a poll per 200ms.
		{"near a threshold: faster", true, 700 * mi, 0, 250 * time.Millisecond, 100 * time.Millisecond},
		{"below it: the fastest", true, 200 * mi, 0, 100 * time.Millisecond, 100 * time.Millisecond},
		{"kubelet-like: always the housekeeping interval", false, 200 * mi, 0, time.Second, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One pod that is not eligible (no usage growth, PDB) keeps
			// the pressure as it is.
			p := &simPod{name: "p", usage: 100 * mi, grace: 30, pdb: true}
			n := newSimNode(t, 4096*mi, 4096*mi-tc.avail-100*mi, p)
			cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
			cfg.Adaptive = tc.adaptive
			w := n.run(t, cfg, 5*time.Second)
			waits := w.waits[3:] // past the first poll and its ramp
			for _, d := range waits {
				if d > tc.maxWait || d < tc.minWait {
					t.Fatalf("waits %v, want each within %v..%v", waits, tc.minWait, tc.maxWait)
				}
			}
		})
	}
}

func TestLoopForceDeletedVictimCountsUntilItsProcessExits(t *testing.T) {
	// Someone force-deletes the victim's pod object (grace 0) a second
	// after evictd evicted it; its process still holds its memory for two
	// more seconds, as on the real node, where the kubelet kills it only
	// after it noticed. The pod's cgroup, not its API object, says when the
	// memory is back: b must not go for it.
	pods := []*simPod{
		{name: "a", usage: 1000 * mi, request: 100 * mi, grace: 30, exitIn: 3 * time.Second, teardown: -2 * time.Second},
		{name: "b", usage: 800 * mi, grace: 30, exitIn: time.Second},
		{name: "c", usage: 600 * mi, request: 1000 * mi, grace: 30, exitIn: time.Second},
	}
	n := newSimNode(t, 4096*mi, base250, pods...)
	n.run(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 30*time.Second)
	if !eq(n.victims(), []string{"a"}) {
		t.Fatalf("eviction calls %v, want [a]: a's memory was on its way back after its object was deleted", n.victims())
	}
	if a := n.pod("a"); !a.deleted || a.exitAt.Sub(a.termAt) != 3*time.Second {
		t.Errorf("a deleted %v, exit %v after its eviction: the scenario did not happen", a.deleted, a.exitAt.Sub(a.termAt))
	}
	if len(n.loop.InFlight()) != 0 {
		t.Errorf("pods still in flight at the end: %+v", n.loop.InFlight())
	}
}

func TestWokenByNamesTheWakeup(t *testing.T) {
	for _, tc := range []struct {
		w    wakeup.Wakeup
		want string
	}{
		{wakeup.Wakeup{Source: wakeup.SourcePoll}, "poll"},
		{wakeup.Wakeup{Source: wakeup.SourcePSI, Name: "kubepods"}, "psi/kubepods"},
		{wakeup.Wakeup{Source: wakeup.SourceMemcgThreshold, Name: "node"}, "memcg_threshold/node"},
	} {
		if got := wokenBy(tc.w); got != tc.want {
			t.Errorf("wokenBy(%+v) = %q, want %q", tc.w, got, tc.want)
		}
	}
}
