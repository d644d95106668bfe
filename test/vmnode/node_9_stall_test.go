// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/test/bench"
	"github.com/evictd/evictd/test/e2e/framework"
)

// The memory stall signals on the real node: a pod that thrashes
// its own page cache inside its memory limit stalls the node (PSI) while
// memory.available stays high, which no memory.available threshold sees.
// These tests run on the imagefs node (imageFsNode), after the swap test,
// each on a quiet node: the thrasher's emptyDir is on the node's ext4 disk,
// whose page cache the pod's cgroup must reclaim and read back.

const (
	// The thrasher: a 64 MiB limit (and request: it never exceeds its
	// request, so the kubelet's memory order alone ranks it last) and a
	// file it keeps re-reading, 2.5 times larger, by thrashReaders readers
	// at once. On the TCG guest one reader stalled the node about 10 % of
	// the time (96-320 MiB files alike), 4 readers 30-32 %, 8 readers
	// 48-51 %, 16 readers 65 % (the last two with a second guest busy on
	// the same host).
	thrashLimit   = 64 << 20
	thrashFileMiB = 160
	thrashReaders = 8
	// stallMinShare is the least stall share (some, percent) the thrasher
	// must cause on the node for the tests to mean anything.
	stallMinShare = 20
	// stallDefaultPercent is the stall threshold when TestNodeStallThrash
	// did not measure the node first (a test run alone).
	stallDefaultPercent = 20
	// evictdMemoryThreshold and kubeletMemoryThreshold are the shipped
	// memory.available thresholds, which the stall tests stay clear of.
	evictdMemoryThreshold  = 300 << 20
	kubeletMemoryThreshold = 100 << 20
	// The node's memory pressure file (kubepodsPressure has kubepods').
	nodePressure = "/proc/pressure/memory"
)

// kubepodsPressure is the memory pressure file of the node's kubepods.
func kubepodsPressure(n *Node) string { return n.KubepodsCgroup() + "/memory.pressure" }

// stallThreshold is the stall threshold (percent) of these tests: half the
// share TestNodeStallThrash measured on the node with no stall threshold,
// in steps of 5 and within 10-40 %, or stallDefaultPercent.
var stallThreshold struct {
	sync.Mutex
	percent int
}

func stallPercent() int {
	stallThreshold.Lock()
	defer stallThreshold.Unlock()
	if stallThreshold.percent == 0 {
		return stallDefaultPercent
	}
	return stallThreshold.percent
}

// stallArgs are evictd's arguments for a stall threshold at stallPercent
// (hard, on the node's "some" share, the default 10 s window), and extra.
// The short transition period ends each pressure episode soon after its
// eviction, so every trial is an episode of its own.
func stallArgs(extra ...string) []string {
	return append([]string{
		fmt.Sprintf("--eviction-hard=memory.pressureSome>%d%%", stallPercent()),
		"--eviction-pressure-transition-period=1s",
	}, extra...)
}

// thrasherPod keeps re-reading a file of thrashFileMiB from an emptyDir (on
// the node's disk) under a limit of thrashLimit, thrashReaders at once.
func thrasherPod(ns, name string) *corev1.Pod {
	return withEmptyDir(workloadPod(ns, name, thrashLimit, thrashLimit,
		"--reread-mib="+strconv.Itoa(thrashFileMiB), "--reread-dir=/data", "--reread-readers="+strconv.Itoa(thrashReaders)), "/data")
}

// readPressure reads the guest's uptime and the pressure files in one go.
func readPressure(ctx context.Context, n *Node, files ...string) (PressureRead, error) {
	r, err := n.Exec(ctx, append([]string{"/bin/cat", "/proc/uptime"}, files...), WithTimeout(30*time.Second))
	if err != nil {
		return PressureRead{}, err
	}
	if err := r.Err(); err != nil {
		return PressureRead{}, err
	}
	return ParsePressureRead(r.Stdout, len(files))
}

// measureShare is the node's stall share (some) over d, read twice.
func measureShare(ctx context.Context, n *Node, d time.Duration) (float64, error) {
	a, err := readPressure(ctx, n, nodePressure)
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	b, err := readPressure(ctx, n, nodePressure)
	if err != nil {
		return 0, err
	}
	return StallShare(a, b, 0, false), nil
}

// stallSample is one reading of the pressure files and memory.available.
type stallSample struct {
	read  PressureRead
	avail int64
}

// sampleStall reads the pressure files and memory.available every interval
// for d (the first read at once), checking the namespace's pods' fates each
// time when pf is set.
func sampleStall(t *testing.T, ctx context.Context, n *Node, files []string, d, every time.Duration, pf *podFates) []stallSample {
	t.Helper()
	var out []stallSample
	end := time.Now().Add(d)
	for {
		next := time.Now().Add(every)
		r, err := readPressure(ctx, n, files...)
		if err != nil {
			t.Fatal(err)
		}
		a, err := nodeAvailable(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stallSample{r, a})
		if pf != nil {
			if err := pf.check(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !next.Before(end.Add(time.Second)) {
			return out
		}
		time.Sleep(time.Until(next))
	}
}

// stallTable shows each window between samples: the stall share (some) of
// every file, the node's full share, memory.available at the window's end;
// and the whole span last.
func stallTable(samples []stallSample, names []string) string {
	tab := &bench.Table{Header: []string{"window (guest s)"}}
	for _, name := range names {
		tab.Header = append(tab.Header, name+" some")
	}
	tab.Header = append(tab.Header, names[0]+" full", "memory.available")
	row := func(a, b stallSample, label string) {
		cells := []any{label}
		for i := range names {
			cells = append(cells, fmt.Sprintf("%.1f%%", StallShare(a.read, b.read, i, false)))
		}
		cells = append(cells, fmt.Sprintf("%.1f%%", StallShare(a.read, b.read, 0, true)), fmt.Sprintf("%d MiB", b.avail>>20))
		tab.Row(cells...)
	}
	t0 := samples[0].read.Uptime
	for i := 1; i < len(samples); i++ {
		row(samples[i-1], samples[i], fmt.Sprintf("%.0f-%.0f", samples[i-1].read.Uptime-t0, samples[i].read.Uptime-t0))
	}
	if len(samples) > 2 {
		row(samples[0], samples[len(samples)-1], "whole")
	}
	return tab.String()
}

// windowShares is each window's share (some) of file i.
func windowShares(samples []stallSample, i int) []float64 {
	var out []float64
	for j := 1; j < len(samples); j++ {
		out = append(out, StallShare(samples[j-1].read, samples[j].read, i, false))
	}
	return out
}

func minAvailable(samples []stallSample) int64 {
	m := samples[0].avail
	for _, s := range samples {
		m = min(m, s.avail)
	}
	return m
}

// podLogLine waits for a line containing text in the log of the pod's
// container "work" (workloadPod's) and returns its time (the runtime's, on
// the guest's clock).
func podLogLine(t *testing.T, ctx context.Context, n *Node, p *corev1.Pod, text string, timeout time.Duration) time.Time {
	t.Helper()
	return containerLogLine(t, ctx, n, p, "work", text, timeout)
}

// containerLogLine is podLogLine for the pod's container named container.
func containerLogLine(t *testing.T, ctx context.Context, n *Node, p *corev1.Pod, container, text string, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	var ended string
	err := n.poll(ctx, timeout, fmt.Sprintf("%q in %s's log", text, p.Name), func(ctx context.Context) error {
		out, err := n.Sh(ctx, fmt.Sprintf("cat /var/log/pods/%s_%s_%s/%s/*.log", p.Namespace, p.Name, p.UID, container))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, text) {
				ts, _, _ := strings.Cut(line, " ")
				if at, err = time.Parse(time.RFC3339Nano, ts); err != nil {
					return fmt.Errorf("line %q: %w", line, err)
				}
				return nil
			}
		}
		if q, err := n.Cluster.Admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err == nil &&
			(FateOf(q) != "" || q.Status.Phase == corev1.PodFailed || q.Status.Phase == corev1.PodSucceeded) {
			ended = describePods([]corev1.Pod{*q}) + "; its log: " + framework.LastLines(out, 5)
			return nil
		}
		return fmt.Errorf("its log: %q", framework.LastLines(out, 3))
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	if at.IsZero() && ended != "" {
		t.Fatalf("%s ended before %q in its log: %s", p.Name, text, ended)
	}
	return at
}

// evictedLines are evictd's "evicted pod" lines since from.
func evictedLines(t *testing.T, n *Node, ev *corev1.Pod, from time.Time) []bench.LogLine {
	t.Helper()
	var out []bench.LogLine
	for _, l := range CRILogLines(evictdLog(t, n, ev)) {
		if l.Msg == "evicted pod" && !l.TS.Before(from) {
			out = append(out, l)
		}
	}
	return out
}

func rawLines(ls []bench.LogLine) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Raw)
	}
	return strings.Join(out, "\n")
}

// waitGone waits until the pod is deleted.
func waitGone(t *testing.T, ctx context.Context, n *Node, ns, name string) {
	t.Helper()
	if err := n.poll(ctx, 2*time.Minute, ns+"/"+name+" gone", func(ctx context.Context) error {
		_, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("still there")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// evictdRestarts is the restart count of evictd's container in its pod p.
func evictdRestarts(t *testing.T, n *Node, p *corev1.Pod) int32 {
	t.Helper()
	cur, err := n.Cluster.Admin.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("evictd's pod %s: %v", p.Name, err)
	}
	return restartsOf(cur)
}

// evictdMemoryScript prints, for the evictd process of the pod cgroup $0,
// its locked and resident memory, its OOM score adjustment and its
// container cgroup's usage and limit, one "key value" per line.
const evictdMemoryScript = `for f in $(find "$0" -name cgroup.procs); do
  for p in $(cat "$f"); do
    [ "$(cat /proc/$p/comm)" = evictd ] || continue
    d=$(dirname "$f")
    echo "pid $p"
    grep -E '^(VmLck|VmRSS):' /proc/$p/status
    grep -E '^Locked:' /proc/$p/smaps_rollup
    echo "oom_score_adj $(cat /proc/$p/oom_score_adj)"
    echo "memory.current $(cat "$d/memory.current")"
    echo "memory.max $(cat "$d/memory.max")"
  done
done`

// checkEvictdMemory reads evictd's process in the guest: its memory is
// locked (VmLck > 0 for the locked mappings, smaps_rollup's Locked > 0 for
// the resident locked pages), its resident set and its container's memory
// stay under the container's limit, and its oom_score_adj is the kubelet's
// -997 for a system-node-critical pod (GetContainerOOMScoreAdjust), which
// evictd leaves as it is.
func checkEvictdMemory(t *testing.T, ctx context.Context, n *Node, p *corev1.Pod) {
	t.Helper()
	r, err := n.Exec(ctx, []string{"/bin/sh", "-c", evictdMemoryScript, n.PodCgroup(p)}, WithTimeout(time.Minute))
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		t.Errorf("reading evictd's memory in the guest: %v", err)
		return
	}
	out := r.Stdout
	t.Logf("evictd's memory in the guest:\n%s", out)
	v := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		key := strings.TrimSuffix(f[0], ":")
		if _, dup := v[key]; dup {
			t.Errorf("more than one evictd process in %s:\n%s", n.PodCgroup(p), out)
			return
		}
		if f[1] == "max" {
			continue
		}
		x, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Errorf("evictd's memory: line %q: %v", line, err)
			return
		}
		if len(f) == 3 && f[2] == "kB" {
			x <<= 10
		}
		v[key] = x
	}
	for _, k := range []string{"pid", "VmLck", "VmRSS", "Locked", "oom_score_adj", "memory.current"} {
		if _, ok := v[k]; !ok {
			t.Errorf("no %s for evictd in the guest's output:\n%s", k, out)
			return
		}
	}
	limit, ok := v["memory.max"]
	if !ok {
		t.Errorf("evictd's container has no memory limit (memory.max):\n%s", out)
		return
	}
	if v["VmLck"] == 0 || v["Locked"] == 0 {
		t.Errorf("evictd's memory is not locked: VmLck %d kB, Locked %d kB", v["VmLck"]>>10, v["Locked"]>>10)
	}
	if v["VmRSS"] >= limit || v["memory.current"] >= limit {
		t.Errorf("evictd: VmRSS %d MiB, its container's memory.current %d MiB; want both under its limit, %d MiB",
			v["VmRSS"]>>20, v["memory.current"]>>20, limit>>20)
	}
	if v["oom_score_adj"] != -997 {
		t.Errorf("evictd's oom_score_adj is %d, want the kubelet's -997 for a system-node-critical pod", v["oom_score_adj"])
	}
}

// TestNodeStallThrash: a pod thrashing its page cache inside its limit (a
// memory stall that frees nothing) beside two quiet pods, the larger of
// which the kubelet's memory order would pick. With no stall threshold
// (phase 1: evictd as shipped, the kubelet's own eviction manager on) the
// node stalls for a minute with memory.available far above every
// threshold, and nobody evicts anything. With memory.pressureSome>P% (phase
// 2, P half the measured share) evictd evicts the thrasher, and only it;
// then the node's stall share stays under P.
func TestNodeStallThrash(t *testing.T) {
	n := imageFsNode(t)
	ctx := context.Background()
	began := time.Now()
	ev := evictdPod(t, n)
	waitNoMemoryPressure(t, n)
	ns := newNamespace(t, n, "stall")
	pods := createRunning(t, ctx, n,
		workloadPod(ns, "quiet-big", 32<<20, 0, "--hold-mib=200"),
		workloadPod(ns, "quiet-small", 32<<20, 0, "--hold-mib=16"),
		thrasherPod(ns, "thrasher"))
	thr := pods[2]
	stallAt := podLogLine(t, ctx, n, thr, "rereading it from now on", 3*time.Minute)
	t.Logf("the thrasher (limit %d MiB, file %d MiB) rereads from %s", thrashLimit>>20, thrashFileMiB, stallAt.Format(time.RFC3339Nano))
	// A few seconds in, so the first window is all stall.
	time.Sleep(5 * time.Second)

	// Phase 1: no stall threshold.
	phase1 := time.Now()
	restartsBefore := evictdRestarts(t, n, ev)
	pf := newPodFates(n, ns)
	names := []string{"node", "kubepods", "thrasher", "quiet-big"}
	files := []string{nodePressure, kubepodsPressure(n), n.PodCgroup(thr) + "/memory.pressure", n.PodCgroup(pods[0]) + "/memory.pressure"}
	samples := sampleStall(t, ctx, n, files, 60*time.Second, 10*time.Second, pf)
	whole := StallShare(samples[0].read, samples[len(samples)-1].read, 0, false)
	t.Logf("phase 1, no stall threshold, %s:\n%s", time.Since(phase1).Round(time.Second), stallTable(samples, names))
	if whole < stallMinShare {
		t.Fatalf("the thrasher stalled the node %.1f%% of the time, under the %d%% these tests need", whole, stallMinShare)
	}
	if m := minAvailable(samples); m < evictdMemoryThreshold+64<<20 {
		t.Errorf("memory.available fell to %d MiB: not a stall with memory available (evictd's threshold %d MiB, the kubelet's %d MiB)",
			m>>20, evictdMemoryThreshold>>20, kubeletMemoryThreshold>>20)
	}
	// The quiet pod holds more, idle: it does not stall (evictd counts a
	// pod as stalling from 5 %).
	if q := StallShare(samples[0].read, samples[len(samples)-1].read, 3, false); q >= 5 {
		t.Errorf("quiet-big stalled %.1f%% of phase 1: not the quiet pod this test needs", q)
	}
	if len(pf.fates) != 0 {
		t.Errorf("with no stall threshold, pods ended: %v", pf.fates)
	}
	if ls := evictedLines(t, n, ev, phase1); len(ls) != 0 {
		t.Errorf("evictd evicted with no stall threshold:\n%s", rawLines(ls))
	}
	// The agent survives the pressure it watches: a minute of a stalled
	// guest restarts nothing (no liveness failure, no OOM kill).
	if r := evictdRestarts(t, n, ev); r != restartsBefore {
		t.Errorf("evictd's container restarted %d times during phase 1's stall", r-restartsBefore)
	}
	// Still in the stall: evictd's memory is locked (IPC_LOCK, --lock-memory),
	// inside its container's limit, at the kubelet's OOM score for a
	// system-node-critical pod.
	checkEvictdMemory(t, ctx, n, ev)
	p := min(max(int(whole/2)/5*5, 10), 40)
	stallThreshold.Lock()
	stallThreshold.percent = p
	stallThreshold.Unlock()
	t.Logf("the node stalled %.1f%% of phase 1: the stall threshold is memory.pressureSome>%d%%", whole, p)

	// Phase 2: the threshold.
	phase2 := time.Now()
	ev = evictdPodWith(t, n, stallArgs()...)
	t.Logf("evictd with %v Ready in %s", stallArgs(), time.Since(phase2).Round(time.Second))
	var evictedAt time.Time
	if err := n.poll(ctx, 4*time.Minute, "the thrasher evicted", func(ctx context.Context) error {
		if err := pf.check(ctx); err != nil {
			return err
		}
		if pf.fates["thrasher"] != "" {
			evictedAt = time.Now()
			return nil
		}
		if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "thrasher", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			evictedAt = time.Now()
			pf.fates["thrasher"] = "gone"
			return nil
		}
		return fmt.Errorf("fates %v", pf.fates)
	}); err != nil {
		t.Fatalf("%v\nevictd's log (tail):\n%s", err, framework.LastLines(evictdLog(t, n, ev), 30))
	}
	t.Logf("the thrasher ended (%s) %s after evictd's redeployment began", pf.fates["thrasher"], evictedAt.Sub(phase2).Round(time.Second))
	if f := pf.fates["thrasher"]; f != ByEvictd && f != "gone" {
		t.Errorf("the thrasher ended by %s, want an eviction by evictd", f)
	}
	waitGone(t, ctx, n, ns, "thrasher")

	// Afterwards: two windows of a quiet node, and no second eviction.
	after := sampleStall(t, ctx, n, []string{nodePressure, kubepodsPressure(n)}, 20*time.Second, 10*time.Second, pf)
	t.Logf("after the eviction:\n%s", stallTable(after, names[:2]))
	for i, s := range windowShares(after, 0) {
		if s >= float64(p) {
			t.Errorf("window %d after the eviction: the node stalled %.1f%%, not under the %d%% threshold", i+1, s, p)
		}
	}
	if err := pf.check(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"quiet-big", "quiet-small"} {
		if f := pf.fates[name]; f != "" {
			t.Errorf("%s ended by %s; the thrasher alone stalled the node", name, f)
		}
	}
	if r := evictdRestarts(t, n, ev); r != 0 {
		t.Errorf("evictd's container restarted %d times while it evicted the thrasher", r)
	}
	lines := evictedLines(t, n, ev, phase2)
	t.Logf("evictd's evictions:\n%s", rawLines(lines))
	if len(lines) != 1 || lines[0].Str("pod") != ns+"/thrasher" || lines[0].Str("signal") != "memory.pressureSome" {
		t.Errorf("evictd's evictions since phase 2: %d lines, want one, of the thrasher for memory.pressureSome", len(lines))
	}
	events := podEvents(t, n, ns)
	t.Logf("events in %s:\n%s", ns, events)
	var note string
	for _, line := range strings.Split(events, "\n") {
		// The Evicted Event, not an EvictionStuck one that can follow it.
		if strings.Contains(line, " Evicted Pod/thrasher: ") && strings.Contains(line, "("+evict.ReportingController+")") {
			note = line
		}
	}
	if !strings.Contains(note, "memory.pressureSome") {
		t.Errorf("no Event from evictd on the thrasher naming memory.pressureSome (last: %q)", note)
	}
	t.Logf("TestNodeStallThrash took %s", time.Since(began).Round(time.Second))
}

// TestNodeBusyNoStall: a busy but healthy node. Three pods hold most of the
// node's available memory (anonymous, touched once, idle after), leaving
// memory.available well above evictd's and the kubelet's thresholds; evictd
// runs with the stall threshold (and its shipped memory thresholds). For a minute (six of
// evictd's 10 s windows, four 15 s samples) nobody evicts anything,
// and the node's stall share stays under the threshold: a full node is not
// a stalled one.
func TestNodeBusyNoStall(t *testing.T) {
	n := imageFsNode(t)
	ctx := context.Background()
	began := time.Now()
	p := stallPercent()
	ev := evictdPodWith(t, n, stallArgs()...)
	waitNoMemoryPressure(t, n)
	ns := newNamespace(t, n, "busy")
	// The page cache goes first, so that filling takes free memory and
	// reclaims nothing (a fill that must reclaim is a stall of its own).
	if _, err := n.Sh(ctx, "sync; echo 1 > /proc/sys/vm/drop_caches"); err != nil {
		t.Fatal(err)
	}
	avail, err := nodeAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	meminfo, err := n.Sh(ctx, "grep '^MemTotal:' /proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	total := meminfoBytes(t, meminfo, "MemTotal")
	// memory.available ends 350 MiB above evictd's threshold. The pods
	// fill at 12 MiB/s each: a faster fill (three pods touching 400 MiB at
	// once, 210 MiB/s) is a fall evictd rightly extrapolates across its
	// threshold (--act-early), which is not what this test is about.
	target := int64(evictdMemoryThreshold + 350<<20)
	each := (avail - target) / 3 >> 20
	if each < 64 {
		t.Fatalf("memory.available is %d MiB: no room to fill", avail>>20)
	}
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, workloadPod(ns, fmt.Sprintf("busy-%d", i), (each+32)<<20, 0,
			"--grow-mib-per-sec=12", "--grow-to-mib="+strconv.FormatInt(each, 10)))
	}
	from := time.Now()
	pods = createRunning(t, ctx, n, pods...)
	for _, p := range pods {
		podLogLine(t, ctx, n, p, "workload: grew to", 2*time.Minute)
	}
	t.Logf("3 pods hold %d MiB each (%.0f%% of the node's %d MiB), filled in %s; memory.available was %d MiB, aimed at %d MiB",
		each, float64(3*each<<20)*100/float64(total), total>>20, time.Since(from).Round(time.Second), avail>>20, target>>20)
	pf := newPodFates(n, ns)
	samples := sampleStall(t, ctx, n, []string{nodePressure, kubepodsPressure(n)}, time.Minute, 15*time.Second, pf)
	t.Logf("soak, evictd with memory.pressureSome>%d%%:\n%s", p, stallTable(samples, []string{"node", "kubepods"}))
	for i, s := range windowShares(samples, 0) {
		if s >= float64(p) {
			t.Errorf("window %d: the node stalled %.1f%%, not under the %d%% threshold", i+1, s, p)
		}
	}
	if m := minAvailable(samples); m < evictdMemoryThreshold+64<<20 {
		t.Errorf("memory.available fell to %d MiB, near evictd's %d MiB threshold: not the busy but healthy node this test is about",
			m>>20, evictdMemoryThreshold>>20)
	}
	if len(pf.fates) != 0 {
		t.Errorf("on a busy node that does not stall, pods ended: %v", pf.fates)
	}
	if ls := evictedLines(t, n, ev, from); len(ls) != 0 {
		t.Errorf("evictd evicted on a busy node that does not stall:\n%s", rawLines(ls))
	}
	t.Logf("TestNodeBusyNoStall took %s", time.Since(began).Round(time.Second))
}

// meminfoBytes is a /proc/meminfo field ("MemTotal:  2000000 kB") in bytes.
func meminfoBytes(t *testing.T, meminfo, field string) int64 {
	t.Helper()
	for _, line := range strings.Split(meminfo, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == field+":" && f[2] == "kB" {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v << 10
		}
	}
	t.Fatalf("no %s in %q", field, meminfo)
	return 0
}
