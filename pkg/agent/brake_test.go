// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/nodebrake"
)

// brakeRecorder keeps every Sync the loop makes, with the simulated time,
// and every WaitOn with the eviction calls made before it.
type brakeRecorder struct {
	n     *simNode
	syncs []brakeSync
	waits []brakeWait
}

type brakeWait struct {
	r           nodebrake.Resource
	callsBefore int
	// wanted: the last Sync before it wanted r on.
	wanted bool
}

func (b *brakeRecorder) WaitOn(_ context.Context, r nodebrake.Resource) bool {
	b.n.mu.Lock()
	calls := len(b.n.calls)
	b.n.mu.Unlock()
	wanted := len(b.syncs) > 0 && b.syncs[len(b.syncs)-1].want[r].On
	b.waits = append(b.waits, brakeWait{r: r, callsBefore: calls, wanted: wanted})
	return wanted
}

type brakeSync struct {
	at   time.Time
	want map[nodebrake.Resource]nodebrake.Want
}

func (b *brakeRecorder) Sync(want map[nodebrake.Resource]nodebrake.Want) {
	b.syncs = append(b.syncs, brakeSync{at: b.n.clk.Now(), want: want})
}

// on is the time span over which the memory brake was wanted.
func (b *brakeRecorder) memorySpan() (first, last time.Time, ok bool) {
	for _, s := range b.syncs {
		if s.want[nodebrake.Memory].On {
			if !ok {
				first = s.at
			}
			last, ok = s.at, true
		}
	}
	return first, last, ok
}

// The brake is wanted from the pass that opens a memory episode to the
// pass that closes it, a transition period after the last threshold; its
// message stays the same through the episode, so a pass is no write.
func TestLoopBrakeFollowsEpisode(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	n.brake = &brakeRecorder{n: n}
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	cfg.TransitionPeriod = 20 * time.Second
	w := n.run(t, cfg, 10*time.Second)
	first, _, ok := n.brake.memorySpan()
	if !ok {
		t.Fatal("no pass wanted the memory brake during a memory episode")
	}
	if first.After(n.clk.Now().Add(-10 * time.Second).Add(time.Second)) {
		t.Errorf("memory brake first wanted at %v; want at the episode's first pass", first)
	}
	msgs := map[string]bool{}
	for _, s := range n.brake.syncs {
		if w := s.want[nodebrake.Memory]; w.On {
			msgs[w.Message] = true
		}
		if s.want[nodebrake.Disk].On || s.want[nodebrake.PIDs].On {
			t.Fatalf("sync %v: a brake wanted for a resource without an episode", s.want)
		}
	}
	if len(msgs) != 1 {
		t.Errorf("the memory brake's message changed within one episode: %v", msgs)
	}
	for m := range msgs {
		if !strings.Contains(m, "memory pressure episode since") {
			t.Errorf("message %q does not say what the brake is for", m)
		}
	}
	// Each eviction waited for the memory brake, which its pass's Sync
	// had already asked for, before the call: its replacement must find
	// the taint on the Node.
	if len(n.calls) == 0 || len(n.brake.waits) != len(n.calls) {
		t.Fatalf("%d eviction calls, %d waits for the brake; want one wait per call, and a call", len(n.calls), len(n.brake.waits))
	}
	for i, wt := range n.brake.waits {
		if wt.r != nodebrake.Memory || wt.callsBefore != i || !wt.wanted {
			t.Errorf("wait %d: %+v; want the memory brake, wanted on, awaited before call %d", i, wt, i)
		}
	}
	n.runMore(t, 30*time.Second, w)
	if len(n.ended) != 1 {
		t.Fatalf("episodes ended: %q; want the memory one", n.ended)
	}
	last := n.brake.syncs[len(n.brake.syncs)-1]
	if len(last.want) != 0 {
		t.Errorf("after the episode ended the loop still wants %v", last.want)
	}
}
