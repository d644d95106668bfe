// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/evictd/evictd/pkg/thresholds"
)

// TestLoopDiskDecisionWaitsForFreshFigures: the writer starts writing at
// 1 GiB/s just after its first walk, and the observer caches each pod's
// disk figure for 10 s, as the real one caches its walks. nodefs.available
// falls below 15 % about five seconds in, when the writer's figure still
// says 0. Deciding on that figure, the quiet pods (within their requests,
// as the writer then seemed, and of lower priority) went first, one per
// pass, freeing next to nothing
// (seen on the host's e2e: TestDiskPressure evicted all four pods, the
// writer last). Put off one pass while the stale figures are walked
// again, the decision names the writer alone.
func TestLoopDiskDecisionWaitsForFreshFigures(t *testing.T) {
	const gi = 1 << 30
	for _, tc := range []struct {
		name   string
		rewalk bool
		first  string
	}{
		{"stale figures walked again", true, "writer"},
		{"cached figures", false, "quiet-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := []*simPod{
				{name: "writer", usage: 10 * mi, grace: 30, exitIn: time.Second, priority: 1000, diskRate: gi},
				{name: "quiet-1", usage: 10 * mi, grace: 30, disk: 100 * mi, diskReq: 200 * mi},
				{name: "quiet-2", usage: 10 * mi, grace: 30, disk: 90 * mi, diskReq: 200 * mi},
			}
			n := runDiskSim(t, pods, tc.rewalk, 20*time.Second)
			v := n.victims()
			if len(v) == 0 || v[0] != tc.first {
				t.Fatalf("eviction calls %v; want %s first", v, tc.first)
			}
			if tc.rewalk && !eq(v, []string{"writer"}) {
				t.Fatalf("eviction calls %v; want [writer]", v)
			}
			if got := slices.Contains(n.kicks, KickDiskFigures); got != tc.rewalk {
				t.Errorf("kicked for a walk of the disk figures: %v, want %v", got, tc.rewalk)
			}
		})
	}
}

// runDiskSim runs the loop for d on a 100 GiB node filesystem, 80 GiB used
// outside the pods, under nodefs.available<15%, with each pod's disk
// figure cached for 10 s, as the real observer caches its walks; without
// rewalk the observer cannot be asked to walk pods again.
func runDiskSim(t *testing.T, pods []*simPod, rewalk bool, d time.Duration) *simNode {
	t.Helper()
	const gi = 1 << 30
	n := newSimNode(t, 4096*mi, base250, pods...)
	n.diskCapacity, n.diskBase, n.diskRefresh = 100*gi, 80*gi, 10*time.Second
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"nodefs.available": "15%"}}))
	cfg.ExpectImageGC = false
	var obs Observer = n
	if !rewalk {
		obs = struct{ Observer }{n} // hides RemeasureEphemeral
	}
	w := &simWaker{n: n}
	l, err := NewLoop(cfg, Deps{Observer: obs, Waker: w, Pods: n, Evictor: n, Log: zaptest.NewLogger(t), Clock: n.clk, Go: syncCall})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, d, w)
	return n
}
