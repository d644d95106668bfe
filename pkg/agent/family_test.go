// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// fakeFamily is a signal family scripted by a test: it puts
// memory.pressureSome in full pressure while any pod it names as stalling
// is in the observation, ranks those pods (and only those) eligible, and
// settles for a window after each victim, as the stall family does.
type fakeFamily struct {
	observeErr error
	stalling   map[string]rank.PodStall // by pod UID
	window     time.Duration

	present     map[string]bool // pod UIDs in the last observation
	at          time.Time
	settleUntil time.Time

	observed int
	inFlight []string // victims Note was told of in flight
	gone     []string // victims Gone was told of
}

const fakeCapacity = 10_000_000 // a 10 s window in µs

func (f *fakeFamily) Name() string { return "fake" }

func (f *fakeFamily) Observe(obs *pressure.Observation, now time.Time) error {
	f.observed++
	f.at = now
	f.present = map[string]bool{}
	for _, ps := range obs.Summary.Pods {
		f.present[ps.PodRef.UID] = true
	}
	return f.observeErr
}

func (f *fakeFamily) Assess(signals map[thresholds.Signal]thresholds.Observation) {
	if f.observeErr != nil {
		return
	}
	o := thresholds.Observation{Available: fakeCapacity, Capacity: fakeCapacity, Time: f.at}
	for uid := range f.stalling {
		if f.present[uid] {
			o.Available = 0
		}
	}
	signals[thresholds.MemoryPressureSome] = o
}

func (f *fakeFamily) Targets(s thresholds.Signal, summary *statsapi.Summary, pods []*v1.Pod, opts rank.Options) ([]rank.Candidate, bool) {
	if s != thresholds.MemoryPressureSome {
		return nil, false
	}
	opts.PodStall = f.stalling
	return rank.Rank(s, summary, pods, opts).Candidates, true
}

func (f *fakeFamily) Settle(in *decide.Input) {
	in.StallSettling = len(in.InFlight) > 0 || in.Now.Before(f.settleUntil)
}

func (f *fakeFamily) Note(in decide.Input) {
	for _, e := range in.InFlight {
		if !slices.Contains(f.inFlight, e.Pod) {
			f.inFlight = append(f.inFlight, e.Pod)
		}
		f.settleUntil = later(f.settleUntil, in.Now.Add(f.window))
	}
}

func (f *fakeFamily) Gone(e inflight.Entry, at time.Time) {
	f.gone = append(f.gone, e.Pod)
	f.settleUntil = later(f.settleUntil, at.Add(f.window))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// runWithFamilies runs the loop on the node with the given families in
// place of those the thresholds name.
func (n *simNode) runWithFamilies(t *testing.T, cfg LoopConfig, d time.Duration, fams ...family.Family) {
	t.Helper()
	w := &simWaker{n: n}
	l, err := NewLoop(cfg, Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Metrics: n.metrics, Log: zaptest.NewLogger(t),
		Clock: n.clk, Go: syncCall, Families: fams})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, d, w)
}

// A family in pressure has its own targets evicted (pods the loop's own
// ranking would not pick: the node has no PSI figure), its settling holds
// the second victim back for its window, and it hears of its victims in
// flight and gone.
func TestLoopFamilyActs(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "big", usage: 900 * mi, request: 10 * mi, grace: 30},
		&simPod{name: "chosen", usage: 60 * mi, request: 64 * mi, grace: 30, exitIn: 3 * time.Second},
		&simPod{name: "second", usage: 30 * mi, request: 64 * mi, grace: 30, exitIn: 3 * time.Second},
	)
	f := &fakeFamily{window: 5 * time.Second, stalling: map[string]rank.PodStall{
		"uid-chosen": {Some: 0.9}, "uid-second": {Some: 0.5},
	}}
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"memory.pressureSome": "40%"}}))
	n.runWithFamilies(t, cfg, 30*time.Second, f)

	if f.observed == 0 {
		t.Fatal("the family was never asked to observe")
	}
	if !eq(n.victims(), []string{"chosen", "second"}) {
		t.Fatalf("eviction calls %v, want the family's targets: chosen, then second", n.victims())
	}
	if !eq(f.inFlight, []string{"ns/chosen", "ns/second"}) {
		t.Errorf("Note was told of %v in flight, want ns/chosen and ns/second", f.inFlight)
	}
	if !eq(f.gone, []string{"ns/chosen", "ns/second"}) {
		t.Errorf("Gone was told of %v, want ns/chosen and ns/second", f.gone)
	}
	gone := n.pod("chosen").exitAt
	if wait := n.calls[1].at.Sub(gone); wait < f.window {
		t.Errorf("second evicted %v after chosen was gone, want at least the family's %v settling", wait, f.window)
	}
}

// A family that cannot observe its signals is reported as the observer's
// unreadable signals are: readiness names them, the signal error metric
// counts them, and nothing is evicted for them.
func TestLoopFamilyBlind(t *testing.T) {
	for _, tc := range []struct {
		name         string
		err          error
		signal, want string
	}{{
		name: "unreadable signals",
		err: &family.Unreadable{Why: "the fake cannot read", Signals: []pressure.SignalError{
			{Signal: "memory.pressureSome", Path: "/proc/pressure/memory", Err: errors.New("no memory PSI figure")}}},
		signal: "memory.pressureSome",
		want:   "signal memory.pressureSome unknown: /proc/pressure/memory: no memory PSI figure",
	}, {
		name:   "any other error",
		err:    errors.New("boom"),
		signal: "fake",
		want:   "signal fake unknown: (family fake): boom",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newSimNode(t, 4096*mi, 250*mi,
				&simPod{name: "chosen", usage: 60 * mi, request: 64 * mi, grace: 30})
			var err error
			if n.metrics, err = metrics.New(buildinfo.Info{Version: "test"}); err != nil {
				t.Fatal(err)
			}
			f := &fakeFamily{observeErr: tc.err, window: time.Second, stalling: map[string]rank.PodStall{"uid-chosen": {Some: 0.9}}}
			cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"memory.pressureSome": "40%"}}))
			n.runWithFamilies(t, cfg, 5*time.Second, f)

			if v := n.victims(); len(v) != 0 {
				t.Errorf("evicted %v for a family that could not observe", v)
			}
			if p := n.loop.Problem(); p == nil || !strings.Contains(p.Error(), tc.want) {
				t.Errorf("Problem() = %v, want it to contain %q", p, tc.want)
			}
			if f.observed == 0 {
				t.Fatal("the family was never asked to observe")
			}
			// One signal error a pass: the family could not observe in any.
			want := fmt.Sprintf(`
# HELP evictd_observation_signal_errors_total Observations that could not measure an eviction signal because a node file it needs was unreadable or malformed (the signal was left out, not guessed).
# TYPE evictd_observation_signal_errors_total counter
evictd_observation_signal_errors_total{signal=%q} %d
`, tc.signal, f.observed)
			if err := testutil.GatherAndCompare(n.metrics.Registry(), strings.NewReader(want), "evictd_observation_signal_errors_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

// Without a family of its own the loop builds those the thresholds name:
// a stall threshold brings the stall family; no stall threshold, no family.
func TestNewLoopConfiguredFamilies(t *testing.T) {
	for _, tc := range []struct {
		spec map[string]string
		want int
	}{
		{map[string]string{"memory.available": "100Mi"}, 0},
		{map[string]string{"memory.available": "100Mi", "memory.pressureFull": "10%"}, 1},
	} {
		n := newSimNode(t, 4096*mi, 250*mi)
		n.run(t, testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: tc.spec})), time.Second)
		if got := len(n.loop.families); got != tc.want {
			t.Errorf("thresholds %v: %d families, want %d", tc.spec, got, tc.want)
		}
	}
}
