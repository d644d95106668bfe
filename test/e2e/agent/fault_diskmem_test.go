// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestFaultDiskThenMemory: the node's disk fills with a file that belongs to
// no pod, so evicting pods cannot relieve it; the disk episode spends its
// --eviction-max-per-episode=2 on two pods and goes on, and evictd says the
// cap is reached. Then a pod leaks memory: evictd must evict it for memory
// as it would on a calm node, whatever the disk episode did, because caps
// belong to each resource's own episode. How soon is evictd's own figure
// (its memory episode's start to the eviction, from its log), asserted only
// loosely here: a disk cap that held the memory eviction back would hold it
// for good; speed is the benchmarks' business (issue 46).
func TestFaultDiskThenMemory(t *testing.T) {
	const (
		diskBytes     = 512 * mib
		diskThreshold = diskBytes * 40 / 100
		junkBytes     = 400 * mib
		memThreshold  = 300 * mib
		// maxLatency bounds, on evictd's clock, its memory episode's start
		// to the memory eviction; generous for a loaded host (a calm one
		// takes well under a second).
		maxLatency = 30 * time.Second
	)
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "diskmem", MemoryBytes: nodeMemory, DiskBytes: diskBytes})
	ns := c.Namespace(t, "diskmem")
	// On disk, d1 and d2 exceed their (zero) ephemeral-storage requests and
	// go first; steady stays within its requests on disk and memory.
	specs := []podSpec{
		{name: "d1", priorityClass: classLow, holdMiB: 10, writeMiB: 1, grace: 2},
		{name: "d2", priorityClass: classLow, holdMiB: 10, writeMiB: 1, grace: 2},
		{name: "steady", priorityClass: classHigh, holdMiB: 100,
			requests: res("cpu", "100m", "memory", "200Mi", "ephemeral-storage", "50Mi"),
			limits:   res("cpu", "100m", "memory", "200Mi", "ephemeral-storage", "50Mi")},
	}
	pods := createRunning(t, c.Admin, podsFor(ns, node.Name, specs)...)
	waitHolding(t, node, mapValues(pods)...)
	disk := startSampler(t, sampleInterval, fsAvailable(filepath.Join(node.HostRoot, "var")))
	mem := startSampler(t, sampleInterval, memoryAvailable(node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, node, mem, mapValues(pods))

	e := startEvictd(t, c, node,
		"--eviction-hard=nodefs.available<40%,memory.available<300Mi,allocatableMemory.available<none,nodefs.inodesFree<none,"+
			"imagefs.available<none,imagefs.inodesFree<none,pid.available<none",
		"--eviction-max-per-episode=2",
	)

	// Phase 1: 400 MiB of the 512 MiB filesystem go to a file of no pod.
	diskStart := time.Now()
	junk := filepath.Join(node.HostRoot, "var", "lib", "junk.img")
	if err := os.WriteFile(junk, bytes.Repeat([]byte{0xa5}, junkBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	diskEvs := waitEvictions(t, e, 2, evictionTimeout)
	for _, ev := range diskEvs {
		if ev.Signal != "nodefs.available" {
			t.Fatalf("eviction of %s for %q; the disk phase should evict for nodefs.available only", ev.Pod, ev.Signal)
		}
	}
	waitGone(t, c.Admin, pods["d1"], evictionTimeout)
	waitGone(t, c.Admin, pods["d2"], evictionTimeout)
	// The disk stays full, so the episode asks for a third pod, and the cap
	// refuses it: evictd says so once. Only then is "two and no more" a
	// fact of evictd's, not of how long the test looked.
	capped := e.waitLog(evictionTimeout, "eviction cap for this pressure episode reached; evicting no more until pressure ends", nil)
	if capped.Signal != "nodefs.available" {
		t.Errorf("the cap was reached for %q, want nodefs.available: %s", capped.Signal, capped.Raw)
	}
	if evs := evicted(e); len(evs) != 2 {
		t.Fatalf("the disk episode evicted %v, want 2 (--eviction-max-per-episode=2)", podsOf(evs))
	}
	// The loop marks the episode capped when it takes the refused call's
	// answer, a moment after the evictor's line.
	capGauge := func() []float64 {
		return []float64{e.scrape().Value(t, "evictd_pressure_episode_cap_reached", map[string]string{"resource": "nodefs"})}
	}
	if _, err := pollFind(evictionTimeout, capGauge, func(v float64) bool { return v == 1 }); err != nil {
		t.Errorf("evictd_pressure_episode_cap_reached{resource=nodefs} = %v %s after the cap line, want 1", capGauge()[0], evictionTimeout)
	}
	if last, err := disk.last(); err != nil || last.available >= diskThreshold {
		t.Fatalf("nodefs.available is %d MiB (err %v), want still below %d MiB: the disk pressure must last; the test is mis-sized",
			last.available/mib, err, diskThreshold/mib)
	}
	if x, ok := disk.crossing(diskStart, diskThreshold); ok {
		t.Logf("disk: below the threshold from %s; evicted %v, both gone", x.at.Format(time.StampMilli), podsOf(diskEvs))
	}

	// Phase 2: a leak, 64 → 700 MiB at 50 MiB/s, crossing the 300 MiB
	// threshold after about 10 s; unevicted it would leave about 190 MiB,
	// so the node never reaches the OOM killer either way.
	memStart := time.Now()
	hog := createRunning(t, c.Admin, podSpec{name: "hog", holdMiB: 64, growMiBPerSec: 50, growToMiB: 700, grace: 2}.pod(ns, node.Name))["hog"]
	pods["hog"] = hog
	// The leak meets the threshold about 10 s in; evictd's memory episode
	// starts then (or earlier, predicted), and its eviction follows.
	memEpisode := e.waitLog(evictionTimeout, "pressure episode started", func(l logEntry) bool { return l.Str("resource") == "memory" })
	memEv, err := pollFind(evictionTimeout, func() []logEntry { return evicted(e) }, func(l logEntry) bool { return l.Signal == "memory.available" })
	if err != nil {
		t.Fatalf("no memory eviction %s after evictd's memory episode started (%s), while the disk episode had spent its cap: "+
			"the memory episode's eviction was held back by the disk episode; evictions: %v; log tail:\n%s",
			evictionTimeout, memEpisode.Raw, podsOf(evicted(e)), e.tail(25))
	}
	if memEv.Pod != podKey(hog) {
		t.Errorf("the memory eviction was of %s, want the leaking %s", memEv.Pod, podKey(hog))
	}
	switch lat := memEv.TS.Sub(memEpisode.TS); {
	case lat < 0:
		t.Errorf("evictd evicted %s for memory at %s, before its memory episode started at %s", memEv.Pod, memEv.TS.Format(time.StampMilli), memEpisode.TS.Format(time.StampMilli))
	case lat >= maxLatency:
		t.Errorf("evictd evicted %s %s after its memory episode started, want under %s (loose: a held-back eviction)", memEv.Pod, lat.Round(time.Millisecond), maxLatency)
	default:
		t.Logf("memory eviction of %s %s after evictd's memory episode started", memEv.Pod, lat.Round(time.Millisecond))
	}
	// The test sampler's figure, for the book only.
	if x, crossed := mem.crossing(memStart, memThreshold); crossed && x.at.Before(memEv.TS) {
		t.Logf("memory eviction of %s %s after the sampled crossing", memEv.Pod, memEv.TS.Sub(x.at).Round(time.Millisecond))
		figures.addLatency(t, latency{what: "memory hard, during a capped disk episode: " + memEv.Pod, d: memEv.TS.Sub(x.at)})
	} else {
		t.Logf("memory eviction of %s at %s, before the sampled crossing (predicted)", memEv.Pod, memEv.TS.Format(time.StampMilli))
	}
	waitGone(t, c.Admin, hog, evictionTimeout)
	// Nothing more for memory: its episode ends (no memory threshold met for
	// the transition period, on evictd's clock) after the hog's eviction.
	e.waitLog(evictionTimeout, "pressure episode ended", func(l logEntry) bool {
		return l.Str("resource") == "memory" && l.TS.After(memEv.TS)
	})

	if got, want := podsOf(evicted(e)), []string{podKey(pods["d1"]), podKey(pods["d2"]), podKey(hog)}; !slices.Equal(got, want) {
		t.Errorf("evictd evicted %v, want exactly %v", got, want)
	}
	started := e.find("pressure episode started")
	byResource := map[string][]logEntry{}
	for _, l := range started {
		byResource[l.Str("resource")] = append(byResource[l.Str("resource")], l)
	}
	if len(byResource["nodefs"]) == 0 {
		t.Errorf(`no "pressure episode started" line with resource="nodefs":%s`, rawLines(started))
	}
	if m := byResource["memory"]; len(m) == 0 {
		t.Errorf(`no "pressure episode started" line with resource="memory":%s`, rawLines(started))
	} else if m[0].TS.Before(memStart) {
		t.Errorf(`the memory episode started at %s, before the leak began at %s`, m[0].TS.Format(time.StampMilli), memStart.Format(time.StampMilli))
	}
	untouched(t, c.Admin, node, pods["steady"])
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
	if got := e.scrape().Value(t, "evictd_evictions_total", map[string]string{"signal": "memory.available", "result": "evicted"}); got != 1 {
		t.Errorf("evictd_evictions_total{signal=memory.available,result=evicted} = %v, want 1", got)
	}
}
