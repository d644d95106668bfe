// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"sync"
	"testing"
	"time"
)

// TestLoopTakesThresholdsBetweenPasses: thresholds handed over from
// another goroutine while the loop runs (and /explain reads) are what the
// next passes decide with: at 250Mi available, memory.available<200Mi
// evicts nobody; moved to 300Mi, the loop evicts. Under -race, the swap
// and the explanation's reads must not race the passes.
func TestLoopTakesThresholdsBetweenPasses(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	w := n.run(t, testLoopConfig(mustThresholds(t, memSpec("200Mi", ""))), 20*time.Second)
	if v := n.victims(); len(v) != 0 {
		t.Fatalf("evictions at 250Mi available under memory.available<200Mi: %v", v)
	}
	moved := mustThresholds(t, memSpec("300Mi", ""))
	stop, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	n.loop.SetThresholds(moved)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = n.loop.Explain("n1", false)
			// The passes start once this goroutine runs, and it hands over
			// thresholds at least once after saying so: that hand-over and
			// the passes' takes are then unordered but for the swap's lock,
			// however the two goroutines are scheduled (on a loaded machine
			// this one might otherwise run only after the passes).
			once.Do(func() { close(started) })
			n.loop.SetThresholds(moved)
		}
	}()
	<-started
	n.runMore(t, 20*time.Second, w)
	close(stop)
	wg.Wait()
	if v := n.victims(); len(v) == 0 || v[0] != "a" {
		t.Errorf("eviction calls %v after memory.available moved to 300Mi at 250Mi available: want a first", v)
	}
	if got := n.loop.Explain("n1", false).Signals; len(got) != 1 || len(got[0].Thresholds) != 1 || got[0].Thresholds[0].Threshold != "memory.available<300Mi" {
		t.Errorf("the thresholds /explain shows after the switch: %+v; want memory.available<300Mi", got)
	}
}
