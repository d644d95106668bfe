// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/kubeletplace/kubelettest"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
)

// TestReplayPlacesWhereTheAgentPlacedAnew: the kubelet restarts mid-run
// with a higher memory.available, and evictd's default, placed above it
// again, moves from 950Mi to 1224Mi, over the node's 1100Mi available: the
// agent evicts from that pass on. The trace keeps the placement in that
// pass, and the replay of it with the agent's own configuration, which
// reads no kubelet, places there too and makes the agent's calls; one with
// another configuration places that configuration there instead. A trace
// whose passes up to after the restart were dropped still replays with the
// thresholds placed anew: its first pass carries them.
func TestReplayPlacesWhereTheAgentPlacedAnew(t *testing.T) {
	root := kubelettest.Root(t)
	kubelettest.SetKubelet(t, root, 640, 1000, "  memory.available: 750Mi\n")
	o := kubelettest.Options(t, root)
	m, err := metrics.New(buildinfo.Info{})
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t)
	start := kubeletplace.View{Signals: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Capacity: 4096 * mi}}}
	placer := kubeletplace.NewPlacer(o, start, log, m)
	if got := o.Config.EvictionHard["memory.available"]; got != "950Mi" {
		t.Fatalf("at start: memory.available<%s, want 950Mi (the kubelet's 750Mi + 200Mi)", got)
	}
	n := newSimNode(t, 4096*mi, 4096*mi-1100*mi-2400*mi, threePods()...) // 1100Mi available
	// Every call is rate-limited: the agent calls again pass after pass,
	// and the node stays under pressure to the end.
	n.evictResult = func(_ *simPod, req evict.Request) (evict.Outcome, error) {
		return evict.Outcome{Result: evict.RateLimited, RetryAfter: 500 * time.Millisecond, GracePeriodSeconds: 30},
			&evict.PodError{Pod: req.Pod.Namespace + "/" + req.Pod.Name, Result: evict.RateLimited, Err: evict.ErrRateLimited}
	}
	l, rec := placedLoop(t, o, n, placer, start, log, m)
	const restartAt, sealAt = 10, 20
	for i := range 30 {
		switch i {
		case restartAt:
			kubelettest.SetKubelet(t, root, 641, 2000, "  memory.available: 1Gi\n")
			placer.Place("the kubelet restarted")
		case sealAt:
			// An export seals the trace's part: the next pass begins one.
			if _, err := rec.WriteTo(io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		n.clk.SetTime(t0.Add(time.Duration(i) * time.Second))
		l.Step(context.Background(), wakeup.Wakeup{Source: wakeup.SourcePSI, At: n.clk.Now()})
	}
	tr := readBack(t, rec)
	recorded := play.RecordedCalls(tr)
	if len(recorded) == 0 || recorded[0].Pass != restartAt+1 {
		t.Fatalf("the agent made the calls %v: want its first in pass %d, the first after the kubelet's restart", callKeys(recorded), restartAt+1)
	}
	placedIn := map[uint64]*trace.Placement{}
	for _, p := range tr.Passes {
		if p.Placed != nil && !p.Placed.Carried {
			placedIn[p.N] = p.Placed
		}
	}
	pl := placedIn[restartAt+1]
	if len(placedIn) != 1 || pl == nil || pl.KubeletHard["memory.available"] != "1Gi" || !slices.Contains(pl.Thresholds, "memory.available<1224Mi") {
		t.Fatalf("the trace's placements by pass: %+v; want one, in pass %d, against the kubelet's 1Gi, to memory.available<1224Mi", placedIn, restartAt+1)
	}

	// The agent's own configuration, on a host with no kubelet to read:
	// the replay places from the trace only.
	res, err := Replay(context.Background(), kubelettest.Options(t, t.TempDir()), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := callKeys(res.Calls), callKeys(recorded); !eq(got, want) {
		t.Fatalf("the replay made the calls\n%v\nwant the agent's\n%v", got, want)
	}
	for i, c := range res.Calls {
		if !c.Same(recorded[i]) || !c.Recorded {
			t.Errorf("call %d: %+v, want the agent's %+v", i, c, recorded[i])
		}
	}
	if len(res.Placed) != 1 || res.Placed[0].Pass != restartAt+1 || !eq(res.Placed[0].Thresholds, pl.Thresholds) {
		t.Errorf("the replay placed anew %+v; want in pass %d, the agent's %v", res.Placed, restartAt+1, pl.Thresholds)
	}
	if len(res.Differ) != 0 {
		t.Errorf("the replay of the agent's own trace took other readings than the agent in passes %+v", res.Differ)
	}

	// Another configuration is placed against the kubelet the agent read,
	// not given the agent's placement: one that sets memory.available<1000Mi
	// itself keeps it past the restart, as an agent running it would
	// have, and evicts nobody at 1100Mi available.
	other, err := Replay(context.Background(), kubelettest.Options(t, t.TempDir(), "--eviction-hard=memory.available<1000Mi"), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Calls) != 0 || len(other.Placed) != 0 || !slices.Contains(other.Thresholds, "memory.available<1000Mi") {
		t.Errorf("a replay with memory.available<1000Mi set made the calls %v with %v and placed anew %+v; want none, and memory.available<1000Mi kept",
			callKeys(other.Calls), other.Thresholds, other.Placed)
	}

	// The trace as it is once the passes up to the export mid-run are
	// dropped for its size: its first pass carries the placement in force,
	// which the replay takes before deciding.
	first := tr.Passes[sealAt]
	if first.N != sealAt+1 || first.Placed == nil || !first.Placed.Carried || !eq(first.Placed.Thresholds, pl.Thresholds) {
		t.Fatalf("pass %d, the first after an export: placement %+v, want pass %d's carried", first.N, first.Placed, restartAt+1)
	}
	cut := *tr
	cut.Passes = tr.Passes[sealAt:]
	cut.Header.Passes, cut.Header.Dropped = len(cut.Passes), sealAt
	keptCalls := play.RecordedCalls(&cut)
	if len(keptCalls) == 0 {
		t.Fatal("the agent made no call past the export: the cut trace tests nothing")
	}
	late, err := Replay(context.Background(), kubelettest.Options(t, t.TempDir()), &cut, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := callKeys(late.Calls), callKeys(keptCalls); !eq(got, want) {
		t.Fatalf("the replay of the trace begun at pass %d made the calls\n%v\nwant the agent's\n%v", sealAt+1, got, want)
	}
	if len(late.Placed) != 1 || late.Placed[0].Pass != sealAt+1 {
		t.Errorf("the replay of the trace begun at pass %d placed anew %+v; want at its first pass", sealAt+1, late.Placed)
	}
}

// imageGCAt is a kubelet config's evictionHard body (SetKubelet's hard)
// with its image collection at high % used (low five below).
func imageGCAt(high int) string {
	return fmt.Sprintf("  memory.available: 750Mi\nimageGCHighThresholdPercent: %d\nimageGCLowThresholdPercent: %d\n", high, high-5)
}

// diskAt12 is a one-disk node of 100 GiB with 12 % of it available, and
// two pods writing on it: below the disk defaults' 15 %, above 10 %.
func diskAt12(t *testing.T) *simNode {
	const gi = 1 << 30
	n := newSimNode(t, 4096*mi, base250, &simPod{name: "writer", usage: 10 * mi, grace: 1, disk: 8 * gi},
		&simPod{name: "quiet", usage: 10 * mi, grace: 1})
	n.diskCapacity, n.diskBase = 100*gi, 80*gi
	return n
}

// recordPlaced runs the agent under o on n for passes passes, placed above
// root's kubelet as `evictd run` places at start (one observation), with
// the kubelet restarted by restart, when set, before pass restartAt, and
// returns the trace read back.
func recordPlaced(t *testing.T, o *options.Options, n *simNode, passes, restartAt int, restart func()) *trace.Trace {
	t.Helper()
	m, err := metrics.New(buildinfo.Info{})
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t)
	obs, err := n.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := kubeletplace.View{Signals: thresholds.Observe(obs.Summary), DiskLayout: obs.Node.DiskLayout}
	placer := kubeletplace.NewPlacer(o, start, log, m)
	l, rec := placedLoop(t, o, n, placer, start, log, m)
	for i := range passes {
		if i == restartAt && restart != nil {
			restart()
			placer.Place("the kubelet restarted")
		}
		n.clk.SetTime(t0.Add(time.Duration(i) * time.Second))
		l.Step(context.Background(), wakeup.Wakeup{Source: wakeup.SourcePSI, At: n.clk.Now()})
	}
	return readBack(t, rec)
}

// TestReplayPlacesWithTheKubeletsImageCollection is issue 59's: the
// kubelet collects images at 90 % used, so the agent bounded its disk
// defaults at 10 % available, and on one disk at 12 % available made no
// call. The replay with the recorded configuration places with the same
// image collection thresholds, which the trace keeps: the same thresholds
// (the agent's, checked), no call, and no pass done otherwise than the
// agent.
func TestReplayPlacesWithTheKubeletsImageCollection(t *testing.T) {
	root := kubelettest.Root(t)
	kubelettest.SetKubelet(t, root, 640, 1000, imageGCAt(90))
	o := kubelettest.Options(t, root)
	tr := recordPlaced(t, o, diskAt12(t), 10, -1, nil)
	if got := o.Config.EvictionHard["nodefs.available"]; got != "10%" {
		t.Fatalf("the agent placed nodefs.available<%s, want 10%% (the kubelet's images collected at 90%% used)", got)
	}
	if calls := play.RecordedCalls(tr); len(calls) != 0 {
		t.Fatalf("the agent made the calls %v at 12%% available, want none", callKeys(calls))
	}
	res, err := Replay(context.Background(), kubelettest.Options(t, t.TempDir()), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 0 || !slices.Contains(res.Thresholds, "nodefs.available<10%") || len(res.Differ) != 0 || len(res.Unknown) != 0 {
		t.Fatalf("the replay with the recorded configuration ran %v, made the calls %v, did otherwise than the agent in %+v, and knew nothing of %q; "+
			"want the agent's nodefs.available<10%%, no call, no difference, everything known",
			res.Thresholds, callKeys(res.Calls), res.Differ, res.Unknown)
	}
}

// TestReplayPlacesWhereTheAgentsThresholdsStayed: the kubelet restarts
// mid-run collecting images at 85 % used instead of 90 %; the agent's
// disk thresholds are its operator's, which placement leaves alone, so
// nothing of the agent's moves. The trace still keeps the placement, in
// the pass that took it: a replay with evictd's default disk thresholds
// places them there, at 15 %, and evicts from that pass on, where an agent
// running that configuration would have; before it, at 10 %, nobody.
func TestReplayPlacesWhereTheAgentsThresholdsStayed(t *testing.T) {
	const restartAt = 5
	root := kubelettest.Root(t)
	kubelettest.SetKubelet(t, root, 640, 1000, imageGCAt(90))
	own := []string{"--eviction-hard=nodefs.available<10%,imagefs.available<10%"}
	o := kubelettest.Options(t, root, own...)
	tr := recordPlaced(t, o, diskAt12(t), 12, restartAt, func() { kubelettest.SetKubelet(t, root, 641, 2000, imageGCAt(85)) })
	if calls := play.RecordedCalls(tr); len(calls) != 0 {
		t.Fatalf("the agent made the calls %v at 12%% available with its 10%%, want none", callKeys(calls))
	}
	mine, err := Replay(context.Background(), kubelettest.Options(t, t.TempDir(), own...), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(mine.Calls) != 0 || len(mine.Differ) != 0 {
		t.Fatalf("the replay with the recorded configuration made the calls %v and did otherwise than the agent in %+v; want neither",
			callKeys(mine.Calls), mine.Differ)
	}
	other, err := Replay(context.Background(), kubelettest.Options(t, t.TempDir()), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(other.Thresholds, "nodefs.available<10%") || len(other.Placed) != 1 || other.Placed[0].Pass != restartAt+1 ||
		!slices.Contains(other.Placed[0].Thresholds, "nodefs.available<15%") {
		t.Fatalf("the replay with the default disk thresholds started with %v and placed anew %+v; want nodefs.available<10%% at start, <15%% from pass %d on",
			other.Thresholds, other.Placed, restartAt+1)
	}
	if len(other.Calls) == 0 || other.Calls[0].Pass != restartAt+1 || other.Calls[0].Pod != "ns/writer" {
		t.Fatalf("the replay with the default disk thresholds made the calls %v; want its first for ns/writer in pass %d", callKeys(other.Calls), restartAt+1)
	}
}

// placedLoop is the agent's loop on n under o, traced, with placer wired
// to it as `evictd run` wires them: placements anew go to the loop, and
// are made against the loop's last view (start until a pass has one).
func placedLoop(t *testing.T, o *options.Options, n *simNode, placer *kubeletplace.Placer, start kubeletplace.View,
	log *zap.Logger, m *metrics.Metrics) (*Loop, *trace.Recorder) {
	t.Helper()
	rec := NewTrace(o, placer.Current(), start, o.Thresholds(), "test", t0)
	rank, err := o.Config.RankOptions()
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoop(ConfigFor(o, o.Thresholds(), rank), Deps{Observer: n, Waker: &simWaker{n: n}, Pods: n,
		Evictor: n, Log: log, Metrics: m, Clock: n.clk, Go: syncCall, Trace: rec})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	placer.Retune = l.PlacedAnew
	placer.View = func() kubeletplace.View {
		if signals, layout, ok := l.LastView(); ok {
			return kubeletplace.View{Signals: signals, DiskLayout: layout}
		}
		return start
	}
	return l, rec
}
