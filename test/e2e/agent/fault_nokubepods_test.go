// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestFaultNoKubepods: evictd's --cgroup-root names a real cgroup under
// which there is no kubepods cgroup (a wrong --cgroup-root, or a node whose
// kubelet has not made it yet). evictd cannot see any pod's usage, so it
// must never report ready and never evict, even with a memory threshold
// that is always met; it must say why once, not on every pass.
func TestFaultNoKubepods(t *testing.T) {
	// blindPasses is how many passes, each finding no kubepods cgroup under
	// a threshold that is met, evictd gets to wrongly evict or report
	// ready: the evidence is passes, counted from its own warning, not a
	// number of seconds a loaded machine may spend on anything else.
	const blindPasses = 5
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "nokubepods", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "nokubepods")
	pods := createRunning(t, c.Admin, podSpec{name: "victim", holdMiB: 50}.pod(ns, node.Name))
	waitHolding(t, node, pods["victim"])
	root, err := node.CreateCgroup("empty-root")
	if err != nil {
		t.Fatal(err)
	}

	// No node has 1000 GiB available: the threshold is always met.
	e := startEvictdWith(t, c, node, evictdSetup{cgroupRoot: root, noWait: true}, memoryOnlyHard("1000Gi"))
	start := time.Now()
	var firstReady time.Time
	var readyBody string
	answers := map[int]int{}
	// /readyz is polled from the start until evictd has said why it cannot
	// act and has then taken blindPasses more passes.
	var warned time.Time
	from := -1.0
	deadline := start.Add(60 * time.Second)
poll:
	for {
		if !e.alive() {
			t.Fatalf("evictd exited %s after start; it should keep running and report not ready:\n%s", time.Since(start).Round(time.Millisecond), e.tail(20))
		}
		code, body := e.readyz()
		answers[code]++
		if code == http.StatusOK && firstReady.IsZero() {
			firstReady, readyBody = time.Now(), body
		}
		if warned.IsZero() && len(e.warnings("no kubepods cgroup")) > 0 {
			warned = time.Now()
			deadline = warned.Add(60 * time.Second)
		}
		if !warned.IsZero() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			mt, err := e.p.Scrape(ctx)
			cancel()
			var n float64
			if err == nil {
				n, err = mt.Lookup("evictd_observation_duration_seconds", nil)
			}
			switch {
			case err != nil: // not serving metrics yet
			case from < 0:
				from = n
			case n >= from+blindPasses:
				t.Logf("/readyz answers from start to %v passes after the warning (%s): %v", blindPasses, time.Since(start).Round(time.Millisecond), answers)
				break poll
			}
		}
		if time.Now().After(deadline) {
			if warned.IsZero() {
				t.Fatalf("evictd never warned of \"no kubepods cgroup\" in 60s; log tail:\n%s", e.tail(20))
			}
			t.Fatalf("evictd did not take %d observation passes in the 60s after its warning (from %v); log tail:\n%s", blindPasses, from, e.tail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !firstReady.IsZero() {
		t.Errorf("evictd's /readyz answered 200 (%q) %s after start although --cgroup-root=%s has no kubepods cgroup; want not ready throughout",
			readyBody, firstReady.Sub(start).Round(time.Millisecond), root)
	}
	total := 0
	for _, n := range answers {
		total += n
	}
	if total == answers[0] {
		t.Errorf("/readyz never answered at all; want an answer other than 200")
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Errorf("evictd evicted %v without any pod's usage (no kubepods cgroup)", podsOf(evs))
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_evictions_total", nil); got != 0 {
		t.Errorf("evictd_evictions_total = %v over all results, want 0 (no eviction calls at all)", got)
	}
	untouched(t, c.Admin, node, pods["victim"])
	if lines := e.warnings("no kubepods cgroup"); len(lines) != 1 {
		t.Errorf("evictd logged %d warn/error lines containing \"no kubepods cgroup\" over %d passes, want exactly 1:%s\nwarnings and errors:%s",
			len(lines), blindPasses, rawLines(lines), rawLines(e.warnings()))
	}
}
