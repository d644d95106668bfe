// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/test/e2e/framework"
)

// Swap on the imagefs node, which has 1 GiB of swap and the
// kubelet's LimitedSwap: a Burstable container (request below its limit)
// may swap up to memory request / MemTotal × SwapTotal.

// TestNodeSwapRanking: pod A's memory is pushed into swap; pod B, kept out
// of swap, holds more than A's working set but less than A's working set
// and swap together, with the same priority and request. evictd observes A's swap and the
// node's, and when memory.available falls under its threshold it evicts A
// first, ranked by its whole footprint, where the kubelet's order (working
// set alone) would pick B.
//
// A's pages go to swap by proactive reclaim (memory.reclaim on its cgroup),
// not by allocating past its limit: under TCG a container allocating past
// its limit was OOM-killed every time (touching 80 MiB past it at once, or
// growing past it at 10 or at 3 MiB/s), its memory.swap.current climbing
// three times faster than its excess (swap-cache pages, apparently, whose
// slow writes kept them in memory and in swap) until its memory.swap.max.
func TestNodeSwapRanking(t *testing.T) {
	n := imageFsNode(t)
	if !n.Swap {
		t.Fatal("the node has no swap")
	}
	ctx := context.Background()
	began := time.Now()
	ev := evictdPod(t, n)
	waitNoMemoryPressure(t, n)
	ns := newNamespace(t, n, "swap")
	if _, err := n.Sh(ctx, "sync; echo 1 > /proc/sys/vm/drop_caches"); err != nil {
		t.Fatal(err)
	}
	meminfo, err := n.Sh(ctx, "cat /proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	memTotal, swapTotal := meminfoBytes(t, meminfo, "MemTotal"), meminfoBytes(t, meminfo, "SwapTotal")
	avail0, err := evictdAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	// A holds holdA under its limit, then swapMiB of it goes to swap, well
	// within the kubelet's swap limit for its request.
	const request, limitA, holdA, swapMiB = 192 << 20, 384 << 20, 360, 72
	swapLimit := int64(float64(request) / float64(memTotal) * float64(swapTotal))
	t.Logf("node: MemTotal %d MiB, SwapTotal %d MiB, memory.available %d MiB; LimitedSwap gives a %d MiB request %d MiB of swap",
		memTotal>>20, swapTotal>>20, avail0>>20, request>>20, swapLimit>>20)
	if swapMiB<<20 > swapLimit-16<<20 {
		t.Fatalf("%d MiB would not fit A's %d MiB of swap", swapMiB, swapLimit>>20)
	}
	if room := avail0 - 2*holdA<<20; room < evictdMemoryThreshold+100<<20 {
		t.Fatalf("memory.available %d MiB: after A and B only %d MiB would be left, too near evictd's threshold", avail0>>20, room>>20)
	}
	a := createRunning(t, ctx, n, workloadPod(ns, "swapper", request, limitA, "--hold-mib="+strconv.Itoa(holdA)))[0]
	podLogLine(t, ctx, n, a, "workload: holding", 3*time.Minute)
	cid, err := containerID(a, "work")
	if err != nil {
		t.Fatal(err)
	}
	// memory.reclaim says EAGAIN when it fell short: passes half a second
	// apart until the swap holds swapMiB. Pages written out may stay in the
	// swap cache, in memory and in swap at once: under TCG most did (A's
	// memory.current fell by a fraction of what went to swap), and they
	// count in both its working set and its swap, for the kubelet and
	// evictd alike.
	cg := n.PodCgroup(a)
	out, err := n.Sh(ctx, fmt.Sprintf(`cd %s && i=0
while [ $i -lt 12 ] && [ "$(cat memory.swap.current)" -lt %d ]; do
  echo 16M > memory.reclaim 2>/dev/null; i=$((i+1)); sleep 0.5
done
cat %s/memory.swap.max memory.swap.current memory.current`, cg, swapMiB<<20, containerCgroupName(n.CgroupDriver, cid)))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) != 3 {
		t.Fatalf("A's cgroup: %q", out)
	}
	swapMax, _ := strconv.ParseInt(f[0], 10, 64)
	swapA, _ := strconv.ParseInt(f[1], 10, 64)
	currentA, _ := strconv.ParseInt(f[2], 10, 64)
	t.Logf("A (request %d MiB, limit %d MiB, holds %d MiB) after memory.reclaim: container memory.swap.max %s, pod memory.swap.current %d MiB, memory.current %d MiB",
		request>>20, limitA>>20, holdA, f[0], swapA>>20, currentA>>20)
	if d := swapMax - swapLimit; d < -1<<20 || d > 1<<20 {
		t.Errorf("A's container has memory.swap.max %s, want the kubelet's LimitedSwap share, %d", f[0], swapLimit)
	}
	if swapA < (swapMiB-8)<<20 {
		t.Fatalf("A has %d MiB in swap, want about %d MiB", swapA>>20, swapMiB)
	}
	// The kubelet's figures lag (cAdvisor's housekeeping): A's once they
	// are near its memory.current, after the reclaim.
	wsA := summaryWorkingSet(t, ctx, n, a, currentA-16<<20, currentA+4<<20)
	// B, between A's working set and its working set and swap.
	holdB := (wsA + swapA/2) >> 20
	b := createRunning(t, ctx, n, workloadPod(ns, "holder", request, 0, "--hold-mib="+strconv.FormatInt(holdB, 10)))[0]
	podLogLine(t, ctx, n, b, "workload: holding", 3*time.Minute)
	holdOutOfSwap(t, ctx, n, b)
	wsB := summaryWorkingSet(t, ctx, n, b, holdB<<20, 0)
	// A again: its working set may have moved while B started.
	wsA = summaryWorkingSet(t, ctx, n, a, 0, 0)
	t.Logf("the kubelet: A working set %d MiB, B %d MiB; A's working set + swap %d MiB", wsA>>20, wsB>>20, (wsA+swapA)>>20)
	if wsA <= request || wsB <= wsA || wsA+swapA <= wsB {
		t.Fatalf("not the case this test is about: want request %d MiB < A's working set %d MiB < B's %d MiB < A's working set + swap %d MiB",
			request>>20, wsA>>20, wsB>>20, (wsA+swapA)>>20)
	}

	// evictd's observation, in its pod, against the cgroup and meminfo.
	obs, raw, err := observeInPod(ctx, n, ev)
	if err != nil {
		t.Fatalf("evictd observe: %v\n%s", err, raw)
	}
	meminfo, err = n.Sh(ctx, "cat /proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	swapFree := meminfoBytes(t, meminfo, "SwapFree")
	if s := obs.Node.Swap; s == nil || s.SwapAvailableBytes == nil || s.SwapUsageBytes == nil {
		t.Errorf("evictd observe reports no node swap: %+v", s)
	} else {
		t.Logf("evictd: node swap available %d MiB, used %d MiB; /proc/meminfo SwapFree %d MiB of %d MiB",
			*s.SwapAvailableBytes>>20, *s.SwapUsageBytes>>20, swapFree>>20, swapTotal>>20)
		if d := int64(*s.SwapAvailableBytes) - swapFree; d < -16<<20 || d > 16<<20 {
			t.Errorf("evictd's node swap available %d MiB, /proc/meminfo SwapFree %d MiB", *s.SwapAvailableBytes>>20, swapFree>>20)
		}
	}
	obsA, obsB := podByUID(obs, string(a.UID)), podByUID(obs, string(b.UID))
	if obsA == nil || obsB == nil {
		t.Fatalf("evictd observe lacks A or B:\n%s", raw)
	}
	var obsSwapA uint64
	if obsA.Swap == nil || obsA.Swap.SwapUsageBytes == nil {
		t.Errorf("evictd observe reports no swap for A: %+v", obsA.Swap)
	} else {
		obsSwapA = *obsA.Swap.SwapUsageBytes
		if d := int64(obsSwapA) - swapA; d < -8<<20 || d > 8<<20 {
			t.Errorf("evictd's swap for A %d MiB, its cgroup's memory.swap.current %d MiB", obsSwapA>>20, swapA>>20)
		}
	}
	t.Logf("evictd: A working set %d MiB + swap %d MiB, B working set %d MiB", *obsA.Memory.WorkingSetBytes>>20, obsSwapA>>20, *obsB.Memory.WorkingSetBytes>>20)
	table, err := execInContainer(ctx, n, ev, "evictd", "/evictd", "observe", "--host-root=/host", "-o", "table")
	if err != nil || table.Err() != nil {
		t.Fatalf("evictd observe -o table: %v %v", err, table)
	}
	t.Logf("evictd observe -o table:\n%s", table.Stdout)
	var swapRow string
	for _, line := range strings.Split(table.Stdout, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "swap.available") {
			swapRow = line
		}
	}
	if !strings.Contains(swapRow, "in use") {
		t.Errorf("evictd observe's table shows no swap.available figures (%q)", swapRow)
	}

	// The pressure: a pod within its request (last in either order) takes
	// memory.available 60 MiB under evictd's threshold, well over the
	// kubelet's, and then grows slowly by what the kernel may free on its
	// own as memory runs short: A's pages counted in its memory and its swap
	// at once (swap cache, clean, so reclaimed first). A CI run whose guest
	// was slow saw no crossing in 4 minutes with a fixed push, likely that:
	// memory.available came back up by as much as the push went under.
	// By evictd's own reading: MemFree + inactive_file, which counts the
	// kernel's memory and the swap cache as used, read 157 MiB lower on
	// this node, and CI saw a push planned by it leave evictd's figure
	// just over its threshold for 4 minutes (polling fast) while that one
	// read 137 MiB.
	avail, err := evictdAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	push := (avail - (evictdMemoryThreshold - 60<<20)) >> 20
	if push < 16 {
		t.Fatalf("memory.available is already %d MiB", avail>>20)
	}
	// Grown in full with nothing reclaimed, it leaves the node above the
	// kubelet's threshold still; evictd acts long before, at its own.
	doubled := max(currentA+swapA-holdA<<20, 0) >> 20
	growTo := push + doubled
	if low := avail - growTo<<20; low < kubeletMemoryThreshold+16<<20 {
		t.Fatalf("memory.available %d MiB: a push growing to %d MiB would take it to %d MiB, too near the kubelet's threshold", avail>>20, growTo, low>>20)
	}
	from := time.Now()
	pf := newPodFates(n, ns)
	createRunning(t, ctx, n, workloadPod(ns, "push", (growTo+48)<<20, (growTo+48)<<20, "--hold-mib="+strconv.FormatInt(push, 10),
		"--grow-mib-per-sec=2", "--grow-to-mib="+strconv.FormatInt(growTo, 10)))
	t.Logf("memory.available %d MiB; the push pod holds %d MiB, then grows at 2 MiB/s to %d MiB (A's pages in memory and swap at once: %d MiB)",
		avail>>20, push, growTo, doubled)
	if err := n.poll(ctx, 4*time.Minute, "an eviction", func(ctx context.Context) error {
		if err := pf.check(ctx); err != nil {
			return err
		}
		if len(pf.order) > 0 {
			return nil
		}
		// An evicted pod is deleted soon after: one gone unseen counts.
		for _, name := range []string{"swapper", "holder", "push"} {
			if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				pf.fates[name], pf.order = "gone", append(pf.order, name)
				return nil
			}
		}
		return fmt.Errorf("no pod ended")
	}); err != nil {
		now, aerr := evictdAvailable(ctx, n)
		free, _ := nodeAvailable(ctx, n)
		// CI once saw evictd log nothing here while the test read 158 MiB:
		// what evictd itself reads and says of its health, to tell why.
		addr := "http://" + ev.Status.PodIP + ":9731"
		seen, serr := n.Sh(ctx, "curl -s --max-time 10 '"+addr+"/readyz?verbose'; curl -s --max-time 10 "+addr+
			"/metrics | grep -E '^evictd_(signal_available_bytes|threshold_met|pressure|ready|observation|last_observation|wakeups)'")
		t.Fatalf("%v (memory.available now %d MiB as evictd reads it, err %v; MemFree + inactive_file %d MiB)\nevictd's log (tail):\n%s\nevictd's readiness and figures (err %v):\n%s",
			err, now>>20, aerr, free>>20, framework.LastLines(evictdLog(t, n, ev), 30), serr, seen)
	}
	// One eviction relieves the pressure: read once evictd has seen its
	// threshold no longer met and looked a few times more.
	waitEvictdLooked(t, ctx, n, ev, 5, `evictd_threshold_met{kind="hard",signal="memory.available"}`)
	if err := pf.check(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("fates, in order: %v %v", pf.order, pf.fates)
	if f := pf.fates["swapper"]; pf.order[0] != "swapper" || (f != ByEvictd && f != "gone") {
		t.Errorf("first ended: %s by %s; want swapper (A) evicted by evictd", pf.order[0], pf.fates[pf.order[0]])
	}
	for _, name := range []string{"holder", "push"} {
		if f := pf.fates[name]; f != "" {
			t.Errorf("%s ended by %s; one eviction relieved the pressure", name, f)
		}
	}
	lines := evictedLines(t, n, ev, from)
	t.Logf("evictd's evictions:\n%s", rawLines(lines))
	// The whole list: A's eviction, for memory.available (or
	// allocatableMemory.available), and no other.
	if len(lines) != 1 || lines[0].Str("pod") != ns+"/swapper" || !strings.HasSuffix(lines[0].Str("signal"), "emory.available") {
		t.Errorf("evictd's evictions are not exactly A's, for memory.available (or allocatableMemory.available)")
	}
	events := podEvents(t, n, ns)
	t.Logf("events in %s:\n%s", ns, events)
	if !strings.Contains(events, "Pod/swapper: ") || !strings.Contains(events, "("+evict.ReportingController+")") {
		t.Errorf("no Event from evictd on A")
	}
	t.Logf("TestNodeSwapRanking took %s", time.Since(began).Round(time.Second))
}

// holdOutOfSwap sets p's container's memory.swap.max to 0 (the kubelet sets
// it only when it creates the container), so that p's footprint is its
// working set alone, as the scenario plans. Left at LimitedSwap's share, B
// was swapped as deep as A once the push came (a slow CI run: 104 MiB of
// each), and evictd rightly ranked B, then the larger, first.
func holdOutOfSwap(t *testing.T, ctx context.Context, n *Node, p *corev1.Pod) {
	t.Helper()
	cid, err := containerID(p, "work")
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.Sh(ctx, fmt.Sprintf("cd %s/%s && echo 0 > memory.swap.max && cat memory.swap.max memory.swap.current",
		n.PodCgroup(p), containerCgroupName(n.CgroupDriver, cid)))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out); len(f) != 2 || f[0] != "0" || f[1] != "0" {
		t.Fatalf("%s's container: memory.swap.max and memory.swap.current %q, want 0 and 0", p.Name, out)
	}
}

// summaryWorkingSet waits until the kubelet's summary has p's working set at
// least atLeast and, when atMost is set, at most atMost, and returns it.
func summaryWorkingSet(t *testing.T, ctx context.Context, n *Node, p *corev1.Pod, atLeast, atMost int64) int64 {
	t.Helper()
	var ws int64
	if err := n.poll(ctx, 2*time.Minute, p.Name+"'s working set in the kubelet's summary", func(ctx context.Context) error {
		s, _, err := n.Summary(ctx)
		if err != nil {
			return err
		}
		ps := podByUID(s, string(p.UID))
		if ps == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
			return fmt.Errorf("not there")
		}
		ws = int64(*ps.Memory.WorkingSetBytes)
		if ws < atLeast || (atMost > 0 && ws > atMost) {
			return fmt.Errorf("%d MiB, want %d-%d MiB", ws>>20, atLeast>>20, atMost>>20)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ws
}
