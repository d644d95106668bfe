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

// TestAPIServerOutage: kube-apiserver is stopped for 20 s while a hog pushes
// the node into memory pressure. evictd keeps running and observing (its
// /healthz stays OK, its metrics show the pressure), cannot evict while the
// API is gone, and once it is back evicts exactly the one pod the pressure
// needs: the failed attempts during the outage must not add up to more.
func TestAPIServerOutage(t *testing.T) {
	const outage = 20 * time.Second
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "outage", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "outage")
	// batch (300 MiB, rank 1) alone brings memory.available from about
	// 170 MiB to about 470 MiB, above threshold + minimum reclaim (400 MiB).
	// The hog asks for more than it will use, so it ranks after web.
	specs := []podSpec{
		{name: "batch", holdMiB: 300},
		{name: "web", priorityClass: classMid, holdMiB: 100, requests: res("memory", "64Mi")},
		{name: "db", priorityClass: classHigh, holdMiB: 100,
			requests: res("cpu", "100m", "memory", "200Mi"), limits: res("cpu", "100m", "memory", "200Mi")},
	}
	pods := createRunning(t, c.Admin, podsFor(ns, node.Name, specs)...)
	waitHolding(t, node, mapValues(pods)...)
	avail := startSampler(t, sampleInterval, memoryAvailable(node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, node, avail, mapValues(pods))
	e := startEvictd(t, c, node, memoryFlags...)

	// 64 → 350 MiB at 20 MiB/s: the threshold is crossed about 8 s in,
	// well inside the outage, and the node stays about 170 MiB short of
	// the OOM killer.
	hogStart := time.Now()
	hog := createRunning(t, c.Admin, podSpec{name: "hog", priorityClass: classHigh, holdMiB: 64, growMiBPerSec: 20, growToMiB: 350,
		requests: res("memory", "400Mi")}.pod(ns, node.Name))["hog"]
	pods["hog"] = hog
	down := time.Now()
	argv, err := c.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopping from %s, gone %s later", down.Format(time.StampMilli), time.Since(down).Round(time.Millisecond))
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			// Let the cluster's own teardown and the namespace cleanup work.
			_ = c.StartAPIServer(context.Background(), argv)
		}
	})

	ctx := context.Background()
	var firstObs, lastObs float64
	for time.Since(down) < outage {
		if !e.alive() {
			t.Fatalf("evictd exited during the API outage:\n%s", e.tail(30))
		}
		if code := e.get(ctx, "/healthz"); code != http.StatusOK {
			t.Errorf("evictd /healthz answered %d during the outage, want 200", code)
		}
		obs := e.scrape().Value(t, "evictd_observation_last_success_timestamp_seconds", nil)
		if firstObs == 0 {
			firstObs = obs
		}
		lastObs = obs
		time.Sleep(500 * time.Millisecond)
	}
	if lastObs-firstObs < outage.Seconds()/2 {
		t.Errorf("evictd's last successful observation moved %.1f s during the %s outage: it stopped observing", lastObs-firstObs, outage)
	}
	seen := e.scrape().Value(t, "evictd_signal_available_bytes", map[string]string{"signal": "memory.available"})
	if seen >= memThreshold {
		t.Errorf("at the end of the outage evictd saw memory.available = %.0f MiB, want below the threshold (the hog made pressure)", seen/mib)
	}
	x, crossed := avail.crossing(hogStart, memThreshold)
	if !crossed || x.at.Before(down) {
		t.Fatalf("memory.available did not cross the threshold during the outage (crossed: %v at %s); the test is mis-sized", crossed, x.at)
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Fatalf("evictd logged evictions while the API server was down: %v", podsOf(evs))
	}
	errorsDuringOutage := e.scrape().Value(t, "evictd_evictions_total", map[string]string{"result": "error"})

	up := time.Now()
	if err := c.StartAPIServer(ctx, argv); err != nil {
		t.Fatal(err)
	}
	restarted = true
	t.Logf("kube-apiserver restarted at %s, ready %s later; pressure since %s; %v eviction calls failed meanwhile",
		up.Format(time.StampMilli), time.Since(up).Round(time.Millisecond), x.at.Format(time.StampMilli), errorsDuringOutage)

	evs := waitEvictions(t, e, 1, 90*time.Second)
	e.waitLog(30*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[0].TS) })
	// Anything still queued from the outage would show now ...
	time.Sleep(10 * time.Second)
	// ... and after passes evictd made since: it looked, however slow the host.
	e.waitObservedPasses(e.observedPasses(), 3, evictionTimeout)
	evs = evicted(e)
	if len(evs) != 1 || evs[0].Pod != podKey(pods["batch"]) {
		t.Fatalf("after the outage evictd evicted %v, want only %s", podsOf(evs), podKey(pods["batch"]))
	}
	t.Logf("evicted %s %s after kube-apiserver was restarted", evs[0].Pod, evs[0].TS.Sub(up).Round(time.Millisecond))
	figures.addLatency(t, latency{what: "memory hard, across a 20 s API outage: " + evs[0].Pod, d: evs[0].TS.Sub(x.at)})
	waitGone(t, c.Admin, pods["batch"], 30*time.Second)
	for _, name := range []string{"web", "db", "hog"} {
		untouched(t, c.Admin, node, pods[name])
	}
	if got := e.scrape().Value(t, "evictd_evictions_total", map[string]string{"result": "evicted"}); got != 1 {
		t.Errorf("evictd_evictions_total{result=evicted} = %v, want 1", got)
	}
	if final, err := avail.last(); err != nil || final.available < memThreshold+memMinReclaim {
		t.Errorf("memory.available at the end: %d MiB (err %v), want at least %d MiB", final.available/mib, err, (memThreshold+memMinReclaim)/mib)
	}
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
	if !e.alive() {
		t.Errorf("evictd is not running after the outage")
	}
}
