// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/thresholds"
)

// A node that stalls while memory.available stays high: the stall
// threshold evicts the pods in the stall, the worst first in the memory
// order, one per window, and never the quiet pod that uses the most memory.
func TestLoopStall(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "big", usage: 900 * mi, request: 10 * mi, grace: 30},
		&simPod{name: "thrasher", usage: 60 * mi, request: 64 * mi, grace: 30, stall: 0.8, exitIn: time.Second},
		&simPod{name: "second", usage: 30 * mi, request: 64 * mi, grace: 30, stall: 0.5, exitIn: time.Second},
	)
	n.psi = true
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{
		"memory.pressureSome": "40%", "memory.available": "300Mi",
	}}))
	cfg.StallWindow = 10 * time.Second
	n.run(t, cfg, 60*time.Second)

	if !eq(n.victims(), []string{"thrasher", "second"}) {
		t.Fatalf("eviction calls %v, want thrasher then second", n.victims())
	}
	// Stalled 100 % of the time from t0 (0.8 + 0.5, capped): 40 % of the
	// 10 s window is passed after 4 s; the history before t0 counts as none.
	first := n.calls[0].at.Sub(t0)
	if first < 4*time.Second || first > 5*time.Second {
		t.Errorf("thrasher evicted %v after the stall began, want within 4-5 s", first)
	}
	// Once the thrasher is gone the node still stalls 50 %: the second pod
	// goes, but only a whole window after the first was gone.
	gone := n.pod("thrasher").exitAt
	if wait := n.calls[1].at.Sub(gone); wait < 10*time.Second {
		t.Errorf("second evicted %v after the thrasher was gone, want at least the 10 s window", wait)
	}
	if got := n.pod("big").termAt; !got.IsZero() {
		t.Errorf("big, which does not stall, was evicted at %v", got)
	}
}

// Without memory PSI (psi=0 at boot) a stall threshold cannot be
// evaluated: nothing is evicted for it, and readiness says why rather than
// reading the missing figure as "no stall".
func TestLoopStallWithoutPSI(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "thrasher", usage: 60 * mi, request: 64 * mi, grace: 30, stall: 0.8})
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{
		"memory.pressureSome": "40%", "allocatableMemory.pressureFull": "10%",
	}}))
	n.run(t, cfg, 20*time.Second)
	if v := n.victims(); len(v) != 0 {
		t.Errorf("evicted %v without any stall figure", v)
	}
	err := n.loop.Problem()
	for _, want := range []string{
		"signal memory.pressureSome unknown: /proc/pressure/memory: no memory PSI figure",
		"signal allocatableMemory.pressureFull unknown: kubepods/memory.pressure",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Problem() = %v, want it to contain %q", err, want)
		}
	}
}

// memory.available and a stall threshold met for one shortfall: the memory
// victim settles the stall too. The stall's eviction waits until the
// victim is gone and one whole window has shown what its memory did to the
// stall; before, each signal evicted a pod at once for the same shortfall.
func TestLoopMemoryVictimSettlesTheStall(t *testing.T) {
	n := newSimNode(t, 4096*mi, 4096*mi-250*mi-960*mi, // 250Mi available
		&simPod{name: "big", usage: 900 * mi, request: 10 * mi, grace: 30, exitIn: time.Second},
		&simPod{name: "thrasher", usage: 60 * mi, request: 64 * mi, grace: 30, stall: 0.8, exitIn: time.Second},
	)
	n.psi = true
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{
		"memory.pressureSome": "40%", "memory.available": "300Mi",
	}}))
	cfg.StallWindow = 10 * time.Second
	n.run(t, cfg, 30*time.Second)
	if !eq(n.victims(), []string{"big", "thrasher"}) {
		t.Fatalf("eviction calls %v, want big (memory.available), then the thrasher (the stall goes on)", n.victims())
	}
	gone := n.pod("big").exitAt
	if wait := n.calls[1].at.Sub(gone); wait < cfg.StallWindow {
		t.Errorf("thrasher evicted %v after big was gone, want at least the %v window", wait, cfg.StallWindow)
	}
}
