// SPDX-License-Identifier: Apache-2.0

package evictreq

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/evict"
)

// What one open request costs the API server while it waits, over a
// simulated wait of five minutes (the defaults: a look in the informer every
// second, the request's status read on a back-off capped at 30 s). evictd
// runs on every node: a zone under soft pressure has one request open per
// node. Before, the pod and the request were each read every second: 600
// GETs in five minutes. Now the pod comes from the informer (one GET before
// the request, to see it is not terminating already) and the status is read
// about a dozen times, yet a Failed is still noticed within the cap.
func TestWaitReadsLittle(t *testing.T) {
	const wait = 5 * time.Minute
	for _, tc := range []struct {
		name string
		// failAt, when set, is when the request turns Failed.
		failAt time.Duration
		// maxStatusReads bounds the reads of the request's status.
		maxStatusReads int
		// fallBackBy is when the Eviction API must have been called.
		fallBackBy time.Duration
	}{
		// At 1, 3, 7, 15, 31 s, then every 30–36 s: 13 at most in 5 minutes.
		{name: "no responder: the wait runs out", maxStatusReads: 14, fallBackBy: wait + time.Second},
		// Failed at 2 minutes is read within the 36 s the back-off has
		// grown to.
		{name: "Failed at 2 minutes", failAt: 2 * time.Minute, maxStatusReads: 8, fallBackBy: 2*time.Minute + 37*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newMemAPI()
			clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			start := clk.Now()
			if tc.failAt > 0 {
				api.onPoll = func(*v1.Pod) {
					if clk.Since(start) >= tc.failAt {
						if er, ok := api.ers["shop/"+Name(uid)]; ok && er.Status.ObservedGeneration == nil {
							g := er.Generation
							er.Status.ObservedGeneration = &g
							er.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "NoFurtherResponder"}}
						}
					}
				}
			}
			pods := &podAPI{}
			ev, err := New(Config{Imperative: imperative(t, pods), API: api, Pods: api.informer, ResponderWait: wait, Clock: clk, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				out evict.Outcome
				err error
				at  time.Duration
			}
			done := make(chan answer, 1)
			go func() {
				out, err := ev.Evict(context.Background(), softMemory())
				done <- answer{out, err, clk.Since(start)}
			}()
			// The clock moves a second whenever the wait is waiting on it.
			deadline := time.Now().Add(30 * time.Second)
			var a answer
		run:
			for {
				select {
				case a = <-done:
					break run
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("Evict still waiting after %v of simulated time", clk.Since(start))
				}
				if clk.HasWaiters() {
					clk.Step(time.Second)
				} else {
					time.Sleep(100 * time.Microsecond)
				}
			}
			if a.err != nil || a.out.Result != evict.Evicted || pods.count() != 1 {
				t.Fatalf("Evict = %v, %v with %d Eviction API call(s); want evicted through the Eviction API once", a.out.Result, a.err, pods.count())
			}
			api.mu.Lock()
			podGets, statusReads := api.podGets, api.gets
			api.mu.Unlock()
			t.Logf("fell back after %v: %d pod GET(s), %d EvictionRequest GET(s)", a.at, podGets, statusReads)
			if a.at > tc.fallBackBy {
				t.Errorf("fell back to the Eviction API after %v, want by %v", a.at, tc.fallBackBy)
			}
			if podGets > 1 {
				t.Errorf("%d GETs of the pod, want 1 at most (before the request): the informer has it", podGets)
			}
			if statusReads > tc.maxStatusReads {
				t.Errorf("%d GETs of the EvictionRequest in %v, want %d at most", statusReads, a.at, tc.maxStatusReads)
			}
		})
	}
}
