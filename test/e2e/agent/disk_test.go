// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestDiskPressure: the node's /var is a real 512 MiB tmpfs (the kubelet's
// root dir, pod logs and image store on one small filesystem). One pod
// fills its emptyDir; when nodefs.available falls below 40 % evictd evicts
// that pod first, although other pods have lower priorities and one of
// them uses far more memory, because on disk only the writer uses more
// ephemeral storage than it requested. Its removal gives the space back.
func TestDiskPressure(t *testing.T) {
	const (
		diskBytes  = 512 * mib
		threshold  = diskBytes * 40 / 100
		minReclaim = 50 * mib
	)
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "disk", MemoryBytes: nodeMemory, DiskBytes: diskBytes})
	ns := c.Namespace(t, "disk")
	varDir := filepath.Join(node.HostRoot, "var")
	avail := startSampler(t, sampleInterval, fsAvailable(varDir))

	// Everyone but the writer stays within its ephemeral-storage request.
	specs := []podSpec{
		{name: "idle", holdMiB: 10, requests: res("ephemeral-storage", "20Mi")},
		{name: "memhog", holdMiB: 200, requests: res("ephemeral-storage", "20Mi")},
		{name: "small-writer", priorityClass: classLow, writeMiB: 20, requests: res("ephemeral-storage", "50Mi")},
	}
	pods := createRunning(t, c.Admin, podsFor(ns, node.Name, specs)...)
	e := startEvictd(t, c, node, explainedFlag,
		"--eviction-hard=nodefs.available<40%,memory.available<50Mi,allocatableMemory.available<none,"+
			"imagefs.available<none,imagefs.inodesFree<none,pid.available<none",
		"--eviction-minimum-reclaim=nodefs.available=50Mi",
	)
	if last, err := avail.last(); err == nil {
		t.Logf("baseline: nodefs.available %d MiB of %d MiB", last.available/mib, diskBytes/mib)
	}

	// 400 MiB at 40 MiB/s: the threshold is crossed after about 7 s, the
	// filesystem would be nearly full after 10 s.
	start := time.Now()
	writer := createRunning(t, c.Admin, podSpec{name: "writer", priorityClass: classMid, writeMiB: 400, writeRate: 40}.pod(ns, node.Name))["writer"]
	pods["writer"] = writer
	evs := waitEvictions(t, e, 1, evictionTimeout)
	e.waitLog(30*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[0].TS) })
	time.Sleep(3 * time.Second)
	// ... and after passes evictd made since: it looked, however slow the host.
	e.waitObservedPasses(e.observedPasses(), 3, evictionTimeout)

	evs = evicted(e)
	if len(evs) != 1 || evs[0].Pod != podKey(writer) {
		t.Fatalf("evictd evicted %v, want only %s", podsOf(evs), podKey(writer))
	}
	if evs[0].Signal != "nodefs.available" {
		t.Errorf("the eviction was for %q, want nodefs.available", evs[0].Signal)
	}
	waitGone(t, c.Admin, writer, 30*time.Second)
	if _, err := os.Stat(node.EmptyDirPath(writer.UID, "scratch")); !os.IsNotExist(err) {
		t.Errorf("the writer's emptyDir is still there after its deletion (stat: %v)", err)
	}
	for _, name := range []string{"idle", "memhog", "small-writer"} {
		untouched(t, c.Admin, node, pods[name])
	}
	x, ok := avail.crossing(start, threshold)
	if !ok {
		t.Fatalf("nodefs.available never went below %d MiB", threshold/mib)
	}
	figures.addLatency(t, latency{what: "nodefs " + evs[0].Pod, d: evs[0].TS.Sub(x.at), counted: true})
	if low, ok := avail.min(start); ok {
		t.Logf("lowest nodefs.available: %d MiB at %s", low.available/mib, low.at.Format(time.StampMilli))
	}
	final, err := avail.last()
	if err != nil {
		t.Fatal(err)
	}
	if final.available < threshold+minReclaim {
		t.Errorf("nodefs.available after the eviction is %d MiB, want at least threshold + minimum reclaim = %d MiB",
			final.available/mib, (threshold+minReclaim)/mib)
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"signal": "nodefs.available", "result": "evicted"}); got != 1 {
		t.Errorf("evictd_evictions_total{signal=nodefs.available,result=evicted} = %v, want 1", got)
	}
	if got := mt.Value(t, "evictd_signal_capacity_bytes", map[string]string{"signal": "nodefs.available"}); got < diskBytes*0.9 || got > diskBytes {
		t.Errorf("evictd_signal_capacity_bytes{nodefs.available} = %v, want the %d-byte tmpfs", got, diskBytes)
	}
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
	checkExplainedNext(t, e)
}
