// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// softOnlyHard leaves one hard threshold, far below the soft tests'
// pressure, so that only the soft threshold under test evicts.
const softOnlyHard = "--eviction-hard=memory.available<50Mi,allocatableMemory.available<none,nodefs.available<none," +
	"nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none"

// TestSoftThreshold: a soft memory threshold with an 8 s grace period and
// --eviction-max-pod-grace-period=4. Pressure that clears within the grace
// period evicts nothing; pressure that lasts evicts, no sooner than the
// grace period after evictd saw the threshold met (both times from its own
// log), and each victim gets min(its terminationGracePeriodSeconds, 4 s), as
// the stand-in's SIGTERM and SIGKILL timestamps show (the victims ignore
// SIGTERM, so the grace period is what ends them). Upper bounds are loose:
// a loaded host is slow, not wrong (issue 46).
func TestSoftThreshold(t *testing.T) {
	const (
		softThreshold = 400 * mib
		softGrace     = 8 * time.Second
		maxPodGrace   = 4 * time.Second
	)
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "soft", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "soft")
	// batch-a asks for 30 s and gets the cap; batch-b asks for 2 s, under
	// the cap, and gets its own. Neither exits on SIGTERM.
	specs := []podSpec{
		{name: "batch-a", holdMiB: 100, grace: 30, termDelay: time.Minute},
		{name: "batch-b", priorityClass: classLow, holdMiB: 150, grace: 2, termDelay: time.Minute},
		{name: "steady", priorityClass: classHigh, holdMiB: 250,
			requests: res("cpu", "100m", "memory", "300Mi"), limits: res("cpu", "100m", "memory", "300Mi")},
	}
	pods := createRunning(t, c.Admin, podsFor(ns, node.Name, specs)...)
	waitHolding(t, node, mapValues(pods)...)
	avail := startSampler(t, sampleInterval, memoryAvailable(node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, node, avail, mapValues(pods))

	e := startEvictd(t, c, node, explainedFlag,
		softOnlyHard,
		"--eviction-soft=memory.available<400Mi",
		"--eviction-soft-grace-period=memory.available="+softGrace.String(),
		"--eviction-max-pod-grace-period=4",
	)

	// Phase 1: a spike that grows to 250 MiB and exits after 7 s: below the
	// soft threshold for about 5 s, less than the grace period. Memory grows
	// at 50 MiB/s rather than in one step: a step of 250 MiB looks to
	// --act-early like memory falling at over 100 MiB/s towards the hard
	// threshold, and it would evict for that instead.
	spikeStart := time.Now()
	spike := createRunning(t, c.Admin, podSpec{name: "spike", priorityClass: classHigh, holdMiB: 10, growMiBPerSec: 50, growToMiB: 250,
		exitAfter: 7 * time.Second, requests: res("memory", "300Mi")}.pod(ns, node.Name))["spike"]
	spikeMet := e.waitLog(evictionTimeout, "threshold met", func(l logEntry) bool { return l.Signal == "memory.available" })
	if got := e.scrape().Value(t, "evictd_threshold_met", map[string]string{"signal": "memory.available", "kind": "soft"}); got != 1 {
		t.Errorf("evictd_threshold_met{memory.available,soft} = %v during the spike, want 1", got)
	}
	waitPod(t, c.Admin, ns, spike.Name, evictionTimeout, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	// evictd's own word that the pressure is gone: the episode ends once no
	// threshold has been met for the transition period.
	spikeEnded := e.waitLog(evictionTimeout, "pressure episode ended", func(l logEntry) bool {
		return l.Str("resource") == "memory" && l.TS.After(spikeMet.TS)
	})
	if n, _ := spikeEnded.Num("evictions"); n != 0 {
		t.Errorf("the spike's episode ended with %v evictions, want 0: %s", n, spikeEnded.Raw)
	}
	// Had evictd kept the threshold's grace running after the pressure
	// cleared, it would evict once the grace is over, counted from when it
	// saw the threshold met: wait (on the host's clock, which evictd's log
	// shares) for that moment, then for passes evictd made after it.
	time.Sleep(time.Until(spikeMet.TS.Add(softGrace)))
	e.waitObservedPasses(e.observedPasses(), 3, evictionTimeout)
	x, ok := avail.crossing(spikeStart, softThreshold)
	if !ok {
		t.Fatalf("the spike never took memory.available below %d MiB", softThreshold/mib)
	}
	var recovered time.Time
	if r, ok := avail.recovery(x.at, softThreshold); ok {
		recovered = r.at
	}
	t.Logf("spike: below the soft threshold from %s to %s (%s)", x.at.Format(time.StampMilli), recovered.Format(time.StampMilli), recovered.Sub(x.at).Round(time.Millisecond))
	if recovered.IsZero() || recovered.Sub(x.at) >= softGrace {
		t.Fatalf("the spike's pressure did not clear within the grace period; the test is mis-sized")
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Fatalf("pressure that cleared within the grace period evicted %v", podsOf(evs))
	}
	if got := e.scrape().Value(t, "evictd_evictions_total", map[string]string{"result": "evicted"}); got != 0 {
		t.Fatalf("evictd_evictions_total{result=evicted} = %v after the spike, want 0", got)
	}

	// Phase 2: 250 MiB that stays. After the grace period, batch-a (rank 1)
	// and batch-b (rank 2) must go: 100 MiB alone is not enough.
	loadStart := time.Now()
	createRunning(t, c.Admin, podSpec{name: "load", priorityClass: classHigh, holdMiB: 10, growMiBPerSec: 50, growToMiB: 250,
		requests: res("memory", "300Mi")}.pod(ns, node.Name))
	evs := waitEvictions(t, e, 2, softGrace+evictionTimeout)
	// The grace period is counted on evictd's clock from the pass that saw
	// the threshold met, which stamps it before writing the line; the
	// eviction's line comes after the API server accepted: at least the
	// grace period apart, exactly.
	var loadMet logEntry
	for _, l := range e.find("threshold met") {
		if l.Signal == "memory.available" && l.TS.After(spikeEnded.TS) {
			loadMet = l
			break
		}
	}
	if loadMet.TS.IsZero() {
		t.Fatalf("evictd evicted %v without a \"threshold met\" line for memory.available after the spike's episode ended:\n%s", podsOf(evs), e.tail(30))
	}
	if hard, _ := loadMet.Fields["hard"].(bool); hard {
		t.Errorf("the load met a hard threshold, want the soft one only: %s", loadMet.Raw)
	}
	wait := evs[0].TS.Sub(loadMet.TS)
	t.Logf("load: evictd saw the soft threshold met at %s; first eviction %s later", loadMet.TS.Format(time.StampMilli), wait.Round(time.Millisecond))
	if wait < softGrace || wait >= softGrace+30*time.Second {
		t.Errorf("first soft eviction came %s after evictd saw the threshold met, want the grace period %s (plus under 30 s)", wait, softGrace)
	}
	// The test sampler's figure, for the book only.
	if x, ok = avail.crossing(loadStart, softThreshold); ok {
		figures.addLatency(t, latency{what: "soft, includes the 8 s grace: " + evs[0].Pod, d: evs[0].TS.Sub(x.at)})
	}
	if got, want := podsOf(evs[:2]), []string{podKey(pods["batch-a"]), podKey(pods["batch-b"])}; !slices.Equal(got, want) {
		t.Fatalf("evicted %v, want %v", got, want)
	}

	tests := []struct {
		pod   string
		grace time.Duration
	}{
		{"batch-a", maxPodGrace},     // asked 30 s, capped
		{"batch-b", 2 * time.Second}, // asked 2 s, under the cap
	}
	for i, tt := range tests {
		p := pods[tt.pod]
		if ev := evs[i]; ev.Str("kind") != "soft" {
			t.Errorf("%s: eviction kind %q, want soft", tt.pod, ev.Str("kind"))
		}
		if g, _ := evs[i].Num("gracePeriodSeconds"); time.Duration(g)*time.Second != tt.grace {
			t.Errorf("%s: evictd logged gracePeriodSeconds %v, want %s", tt.pod, g, tt.grace)
		}
		waitGone(t, c.Admin, p, tt.grace+evictionTimeout)
		tl, ok := node.Record(p.UID)
		if !ok {
			t.Fatalf("no timeline for %s", tt.pod)
		}
		killedAfter := tl.SIGKILL.Sub(tl.SIGTERM)
		t.Logf("%s: grace %s, SIGTERM %s, SIGKILL %s later, exited %s", tt.pod, tl.GracePeriod, tl.SIGTERM.Format(time.StampMilli),
			killedAfter.Round(time.Millisecond), tl.Exited.Format(time.StampMilli))
		if tl.GracePeriod != tt.grace {
			t.Errorf("%s: deletion grace period %s, want %s", tt.pod, tl.GracePeriod, tt.grace)
		}
		if tl.SIGTERM.IsZero() || tl.SIGKILL.IsZero() {
			t.Errorf("%s: want SIGTERM then SIGKILL (it ignores SIGTERM), got %+v", tt.pod, tl)
			continue
		}
		// At least the grace period: the pod had it all. The upper bound
		// only tells a grace period of 30 s (not capped) from 4 s.
		if killedAfter < tt.grace || killedAfter > tt.grace+10*time.Second {
			t.Errorf("%s: SIGKILL came %s after SIGTERM, want the grace period %s (plus under 10 s)", tt.pod, killedAfter, tt.grace)
		}
	}
	// Nothing more: with both gone the pressure clears and evictd ends the
	// episode; only then is the count final.
	e.waitLog(evictionTimeout, "pressure episode ended", func(l logEntry) bool {
		return l.Str("resource") == "memory" && l.TS.After(evs[1].TS)
	})
	if evs := evicted(e); len(evs) != 2 {
		t.Errorf("evictd evicted %v, want only batch-a and batch-b", podsOf(evs))
	}
	untouched(t, c.Admin, node, pods["steady"])
	if last, _ := avail.last(); last.available < softThreshold {
		t.Errorf("memory.available %d MiB at the end, want above the soft threshold", last.available/mib)
	}
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
	checkExplainedNext(t, e)
}
