// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestFaultUnreadableCgroupFiles: the node cgroup's memory.stat and memory
// limit (v1 memory.limit_in_bytes, v2 memory.max), as evictd sees them under its --host-root, turn
// into garbage mid-run (the stand-in's fault root mounts copies over them;
// the pods' cgroups and the real files stay intact). While they are broken,
// memory.available is unknown: evictd must report not ready naming the
// signal, count and log the failure, and evict nothing although the node
// really is below the threshold. Once the files are restored it is ready
// again, and the pressure it could not see is acted on.
func TestFaultUnreadableCgroupFiles(t *testing.T) {
	const (
		threshold = 300 * mib
		signal    = "memory.available"
		// blindPasses is how many passes under real pressure, each unable
		// to measure the signal, evictd gets to wrongly evict: the
		// evidence that it does not is passes, not seconds.
		blindPasses = 5
	)
	brokenFiles := []string{"memory.stat", cgrouptest.LimitFile}
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "cgfiles", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "cgfiles")
	pods := createRunning(t, c.Admin, podSpec{name: "batch", holdMiB: 100}.pod(ns, node.Name))
	waitHolding(t, node, pods["batch"])
	fr, err := node.NewFaultRoot(brokenFiles...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fr.Close(); err != nil {
			t.Errorf("close the fault root: %v", err)
		}
	})
	avail := startSampler(t, sampleInterval, memoryAvailable(node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, node, avail, mapValues(pods))

	e := startEvictdWith(t, c, node, evictdSetup{hostRoot: fr.Root}, memoryOnlyHard("300Mi"))
	// The fault root's files are read like the real ones while intact.
	seen := e.scrape().Value(t, "evictd_signal_available_bytes", map[string]string{"signal": signal})
	if last, err := avail.last(); err != nil || seen < float64(last.available)-64*mib || seen > float64(last.available)+64*mib {
		t.Fatalf("through the fault root evictd sees %s = %.0f MiB, the node has %d MiB (err %v): the fault root does not show the node",
			signal, seen/mib, last.available/mib, err)
	}

	broke := time.Now()
	for _, f := range brokenFiles {
		if err := fr.Break(f); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("broke %v at %s", brokenFiles, broke.Format(time.StampMilli))
	var notReadyAt time.Time
	var code int
	var body string
	for time.Since(broke) < 30*time.Second {
		code, body = e.readyz()
		if code != http.StatusOK && code != 0 {
			notReadyAt = time.Now()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	switch {
	case notReadyAt.IsZero():
		t.Errorf("evictd's /readyz still answers %d (%q) %s after the node's %v turned to garbage; want not ready while %s is unknown",
			code, body, time.Since(broke).Round(time.Millisecond), brokenFiles, signal)
	case !strings.Contains(body, signal):
		t.Errorf("/readyz answers %d %q, want its reason to name %s", code, body, signal)
	default:
		t.Logf("/readyz %d %s after breaking the files: %q", code, notReadyAt.Sub(broke).Round(time.Millisecond), body)
	}

	// Real pressure that evictd cannot see: about 250 MiB available.
	hogStart := time.Now()
	pods["hog"] = createRunning(t, c.Admin, podSpec{name: "hog", priorityClass: classHigh, holdMiB: 650,
		requests: res("cpu", "100m", "memory", "700Mi"), limits: res("cpu", "100m", "memory", "700Mi")}.pod(ns, node.Name))["hog"]
	waitHolding(t, node, pods["hog"])
	x, crossed := avail.crossing(hogStart, threshold)
	if !crossed {
		last, _ := avail.last()
		t.Fatalf("memory.available did not fall below %d MiB (it is %d MiB); the test is mis-sized", threshold/mib, last.available/mib)
	}
	// blindPasses passes under the pressure, each of which must have failed
	// to measure the signal (its error counter keeps pace; it counts each
	// unusable file, so at least once a pass).
	signalErrors := func() float64 {
		return e.scrape().Value(t, "evictd_observation_signal_errors_total", map[string]string{"signal": signal})
	}
	from := signalErrors()
	e.waitObservedPasses(e.observedPasses(), blindPasses, 60*time.Second)
	if got := signalErrors(); got < from+blindPasses {
		t.Errorf("evictd_observation_signal_errors_total{signal=%q} rose from %v to %v over %d passes, want by %d at least: the passes were not blind",
			signal, from, got, blindPasses, blindPasses)
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Errorf("evictd evicted %v while %s was unknown (the node's memory files were garbage)", podsOf(evs), signal)
	}
	if code, body := e.readyz(); code == http.StatusOK {
		t.Errorf("/readyz answers 200 (%q) %s after the files broke; want not ready while they stay broken", body, time.Since(broke).Round(time.Millisecond))
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_observation_signal_errors_total", map[string]string{"signal": signal}); got <= 0 {
		t.Errorf("evictd_observation_signal_errors_total{signal=%q} = %v, want > 0", signal, got)
	}
	if got := mt.Value(t, "evictd_evictions_total", nil); got != 0 {
		t.Errorf("evictd_evictions_total = %v over all results, want 0", got)
	}
	if w := entriesSince(e.warnings(signal), broke); len(w) == 0 {
		t.Errorf("no warning naming %s since the files broke; warnings and errors since then:%s", signal, rawLines(entriesSince(e.warnings(), broke)))
	} else {
		t.Logf("warning: %s", w[0].Raw)
	}
	if !e.alive() {
		t.Fatalf("evictd exited while the files were broken:\n%s", e.tail(20))
	}

	// Restore: ready again, and the pressure it could not see is acted on.
	restored := time.Now()
	for _, f := range brokenFiles {
		if err := fr.Restore(f); err != nil {
			t.Fatal(err)
		}
	}
	readyAt, _, _ := e.waitReadyz(30*time.Second, "answered 200 again after the files were restored", func(code int, _ string) bool { return code == http.StatusOK })
	t.Logf("ready again %s after restoring the files", readyAt.Sub(restored).Round(time.Millisecond))
	evs := waitEvictions(t, e, 1, evictionTimeout)
	if evs[0].Pod != podKey(pods["batch"]) || evs[0].Signal != signal || evs[0].TS.Before(restored) {
		t.Errorf("after the restore evictd evicted %s for %q at %s, want %s for %s after %s",
			evs[0].Pod, evs[0].Signal, evs[0].TS.Format(time.StampMilli), podKey(pods["batch"]), signal, restored.Format(time.StampMilli))
	}
	t.Logf("pressure since %s; evicted %s %s after the restore", x.at.Format(time.StampMilli), evs[0].Pod, evs[0].TS.Sub(restored).Round(time.Millisecond))
	waitGone(t, c.Admin, pods["batch"], 60*time.Second)
	untouched(t, c.Admin, node, pods["hog"])
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
}
