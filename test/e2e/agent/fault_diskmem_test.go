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
// --eviction-max-per-episode=2 on two pods and goes on. Then a pod leaks
// memory: its eviction must come within the usual few seconds of the memory
// threshold's crossing, whatever the disk episode did, because caps belong
// to each resource's own episode.
func TestFaultDiskThenMemory(t *testing.T) {
	const (
		diskBytes     = 512 * mib
		diskThreshold = diskBytes * 40 / 100
		junkBytes     = 400 * mib
		memThreshold  = 300 * mib
		// maxLatency is how long after the memory crossing the memory
		// eviction may come ("the usual time").
		maxLatency = 5 * time.Second
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
	waitGone(t, c.Admin, pods["d1"], 30*time.Second)
	waitGone(t, c.Admin, pods["d2"], 30*time.Second)
	// Time for a third disk eviction, which the cap must refuse.
	time.Sleep(3 * time.Second)
	if evs := evicted(e); len(evs) != 2 {
		t.Fatalf("the disk episode evicted %v, want 2 (--eviction-max-per-episode=2)", podsOf(evs))
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
	var memEv logEntry
	found := false
	deadline := memStart.Add(45 * time.Second)
	for !found && time.Now().Before(deadline) {
		for _, ev := range evicted(e) {
			if ev.Signal == "memory.available" {
				memEv, found = ev, true
			}
		}
		if x, crossed := mem.crossing(memStart, memThreshold); crossed && time.Since(x.at) > maxLatency+10*time.Second {
			break // long past the crossing: it is not coming
		}
		time.Sleep(50 * time.Millisecond)
	}
	x, crossed := mem.crossing(memStart, memThreshold)
	if !found {
		if !crossed {
			t.Fatalf("memory.available never fell below %d MiB; the test is mis-sized", memThreshold/mib)
		}
		t.Fatalf("no memory eviction %s after memory.available fell below %d MiB (at %s), while the disk episode had spent its cap: "+
			"the memory episode's eviction was held back by the disk episode; evictions: %v; log tail:\n%s",
			time.Since(x.at).Round(time.Millisecond), memThreshold/mib, x.at.Format(time.StampMilli), podsOf(evicted(e)), e.tail(25))
	}
	if memEv.Pod != podKey(hog) {
		t.Errorf("the memory eviction was of %s, want the leaking %s", memEv.Pod, podKey(hog))
	}
	switch {
	case !crossed:
		t.Logf("memory eviction of %s at %s, before the threshold was crossed (predicted)", memEv.Pod, memEv.TS.Format(time.StampMilli))
	case memEv.TS.Sub(x.at) > maxLatency:
		t.Errorf("the memory eviction came %s after the crossing, want within %s", memEv.TS.Sub(x.at).Round(time.Millisecond), maxLatency)
	default:
		t.Logf("memory eviction of %s %s after the crossing", memEv.Pod, memEv.TS.Sub(x.at).Round(time.Millisecond))
		figures.addLatency(t, latency{what: "memory hard, during a capped disk episode: " + memEv.Pod, d: memEv.TS.Sub(x.at)})
	}
	waitGone(t, c.Admin, hog, 30*time.Second)
	time.Sleep(3 * time.Second)

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
