// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/evictd/evictd/pkg/agent/family"
)

// TestLoopStandsByWhileNotActing: while another agent holds the node lease
// (Deps.Acting false) the loop observes and decides nothing: no eviction
// call under a pressure it sees, and its families do not observe (their
// observations may write: memory.high relaxes). Once it acts, the same
// pressure is met: the evidence that it looked and would have acted.
func TestLoopStandsByWhileNotActing(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	f := &fakeFamily{window: time.Second}
	acting := false
	w := &simWaker{n: n}
	l, err := NewLoop(testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Log: zaptest.NewLogger(t),
		Clock: n.clk, Go: syncCall, Families: []family.Family{f}, Acting: func() bool { return acting }})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, 30*time.Second, w)
	if n.steps == 0 {
		t.Fatal("the loop never ran a pass")
	}
	if v := n.victims(); len(v) != 0 || f.observed != 0 {
		t.Errorf("standing by, under memory pressure, the loop made eviction calls %v and had its family observe %d times; want none", v, f.observed)
	}
	acting = true
	n.runMore(t, 30*time.Second, w)
	if v := n.victims(); !eq(v, []string{"a"}) || f.observed == 0 {
		t.Errorf("acting, the loop made eviction calls %v and had its family observe %d times; want a evicted, and the family observing", v, f.observed)
	}
}
