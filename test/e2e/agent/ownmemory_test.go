// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/test/e2e/agent/evictdproc"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// evictd's own memory: the scenario of TestOwnMemoryLimit, and the knobs
// that turn it into the measurement behind the chart's memory request and
// limit (docs/performance.md, "evictd's own memory").
const (
	// ownMemPodsEnv: pods on the node, the hogs included; default the
	// kubelet's maxPods (110), the node the chart's default sizing is for.
	ownMemPodsEnv = "EVICTD_E2E_OWN_MEMORY_PODS"
	// ownMemLimitEnv: evictd's memory limit, a Kubernetes quantity
	// (GOMEMLIMIT then 7/8 of it, the chart's rule); default the shipped
	// DaemonSet's limit and GOMEMLIMIT.
	ownMemLimitEnv = "EVICTD_E2E_OWN_MEMORY_LIMIT"
	ownMemPods     = 110
	// ownMemHogs hogs in turn, each evicted before the next comes: evictions
	// running, as in a long pressure episode.
	ownMemHogs = 3
	// The hogs grow this far above the node's resting point, past the
	// threshold set ownMemHeadroom below it.
	ownMemHeadroom = 256 * mib
	ownMemHogTo    = 512
	ownMemHogRate  = 100 // MiB/s
	// ownMemIdlePasses: the idle phase lasts this many of evictd's passes.
	ownMemIdlePasses = 10
)

// TestOwnMemoryLimit: evictd run as the chart runs it — in a memory cgroup
// of its own with the shipped DaemonSet's memory limit, its GOMEMLIMIT, its
// memory locked (--lock-memory, the default) so that locked pages are
// charged to that cgroup and cannot be reclaimed — on a node of 110 pods
// through a pressure episode of several evictions, is not OOM-killed: its
// cgroup's oom_kill stays 0, it stays alive and every hog is evicted. It
// logs evictd's peak usage, working set, RSS and locked memory, idle and
// under pressure: with ownMemPodsEnv and ownMemLimitEnv it is the
// measurement the limit is sized from.
func TestOwnMemoryLimit(t *testing.T) {
	pods := ownMemoryPods(t)
	limit, goMemLimit := ownMemoryLimit(t)
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-own")
	cg.SetMemoryLimit(t, limit)

	c := framework.Start(t)
	// Room for the pods' workload processes (a few MiB each) and the
	// hogs; the threshold is set from where the node rests.
	capacity := int64(1<<30) + int64(pods)*8*mib
	node := c.StartNode(t, nodesim.Options{Name: "own-mem", MemoryBytes: capacity, Pods: int64(pods)})
	ns := c.Namespace(t, "own")
	var specs []podSpec
	for i := range pods - 1 { // the hog in turn is the last pod
		specs = append(specs, podSpec{name: fmt.Sprintf("p-%03d", i), holdMiB: 1, grace: 1,
			requests: res("memory", "8Mi")})
	}
	start := time.Now()
	running := createRunning(t, c.Admin, podsFor(ns, node.Name, specs)...)
	waitHolding(t, node, mapValues(running)...)
	avail, err := memoryAvailable(node, capacity)()
	if err != nil {
		t.Fatal(err)
	}
	threshold := (avail - ownMemHeadroom) / mib
	t.Logf("%d pods running after %s; node memory.available %d MiB, threshold %d MiB", len(running), time.Since(start).Round(time.Second), avail/mib, threshold)

	e := startEvictdWith(t, c, node, evictdSetup{bin: uncachedCopy(t, framework.RequireBinary(t, "evictd")),
		env: []string{"GOMEMLIMIT=" + goMemLimit}, cgroupProcs: []string{cg.Path("cgroup.procs")}},
		fmt.Sprintf("--eviction-hard=memory.available<%dMi,allocatableMemory.available<none,nodefs.available<none,"+
			"nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none", threshold))
	if err := inCgroup(e.p.Pid(), cg.Dir()); err != nil {
		t.Fatal(err)
	}
	// No OOM kill of evictd, checked however the test ends: a wait below
	// that fails because evictd died is explained here.
	t.Cleanup(func() {
		kills, err := oomKills(cg.Path(cgrouptest.OOMKillFile))
		switch {
		case err != nil:
			t.Error(err)
		case kills > 0:
			t.Errorf("evictd OOM-killed in its memory cgroup (limit %d MiB, GOMEMLIMIT %s) at %d pods: oom_kill %d", limit/mib, goMemLimit, pods, kills)
		}
	})
	// The lock is on: the pages evictd touches are charged to its cgroup
	// and cannot be reclaimed. VmLck is the size of the locked mappings
	// (MCL_ONFAULT: address space, mostly never touched); what is resident
	// and locked is the cgroup's unevictable pages, sampled below.
	if u, err := evictdproc.ReadUsage("/proc", e.p.Pid()); err != nil || u.Locked == 0 {
		t.Fatalf("evictd's VmLck is %v (%v): its memory is not locked, as the chart's --lock-memory and IPC_LOCK have it", u.Locked, err)
	}
	// What is sampled: the cgroup's charge (what its limit is checked
	// against), its working set (the kubelet's and metrics-server's
	// figure), evictd's RSS and the cgroup's locked pages.
	every := 100 * time.Millisecond
	usage := startSampler(t, every, cg.MemoryUsage)
	ws := startSampler(t, every, func() (int64, error) { return workingSet(cg.Dir()) })
	rss := startSampler(t, every, func() (int64, error) {
		u, err := evictdproc.ReadUsage("/proc", e.p.Pid())
		return int64(u.RSS), err
	})
	locked := startSampler(t, every, func() (int64, error) { return memoryStat(cg.Dir(), cgrouptest.StatUnevictable) })

	ready := time.Now()
	e.waitObservedPasses(e.observedPasses(), ownMemIdlePasses, 60*time.Second)
	pressure := time.Now()
	var hogs []string
	var last logEntry
	for i := range ownMemHogs {
		name := fmt.Sprintf("hog-%d", i)
		hog := createRunning(t, c.Admin, podSpec{name: name, holdMiB: 16, grace: 1,
			growMiBPerSec: ownMemHogRate, growToMiB: ownMemHogTo}.pod(ns, node.Name))[name]
		hogs = append(hogs, podKey(hog))
		last = e.waitLog(evictionTimeout, "evicted pod", func(l logEntry) bool { return l.Pod == podKey(hog) })
		waitGone(t, c.Admin, hog, 60*time.Second)
	}
	e.waitLog(60*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(last.TS) })
	end := time.Now()

	maxUsage, err := cgrouptest.ReadInt(cg.Path(cgrouptest.PeakFile))
	if err != nil {
		t.Fatal(err)
	}
	failcnt, err := cg.LimitHits()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("evictd's own memory at %d pods, limit %d MiB, GOMEMLIMIT %s: %s idle, %s under pressure (%d evictions); cgroup max_usage %.1f MiB, failcnt %d",
		pods, limit/mib, goMemLimit, peaks(ready, pressure, usage, ws, rss, locked), peaks(pressure, end, usage, ws, rss, locked),
		len(evicted(e)), float64(maxUsage)/mib, failcnt)
	if !e.alive() {
		t.Fatalf("evictd died in its memory cgroup (limit %d MiB, GOMEMLIMIT %s) at %d pods; log tail:\n%s", limit/mib, goMemLimit, pods, e.tail(20))
	}
	// The limit was never even reached: no reclaim in evictd's own path.
	if failcnt != 0 {
		t.Errorf("evictd's memory cgroup reached its limit (%d MiB) %d times at %d pods (peak %.1f MiB)", limit/mib, failcnt, pods, float64(maxUsage)/mib)
	}
	if got := podsOf(evicted(e)); !slices.Equal(got, hogs) {
		t.Fatalf("evictd evicted %v, want the hogs %v", got, hogs)
	}
}

// uncachedCopy copies the binary bin to a file of the test's whose pages are
// in no page cache, so that evictd's text is charged to evictd's own cgroup
// as it faults it in, as when a container starts from an image on a node
// that had to read it back from disk: the worst case of its charge. The
// shared build's pages are charged to whoever read them first.
func uncachedCopy(t *testing.T, bin string) string {
	t.Helper()
	src, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(t.TempDir(), filepath.Base(bin))
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, src); err != nil {
		t.Fatal(err)
	}
	// Written back first: DONTNEED drops only clean pages.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise %s: %v", dst, err)
	}
	return dst
}

// peaks is the highest of each sampler's readings in [from, to), in MiB.
func peaks(from, to time.Time, usage, ws, rss, locked *sampler) string {
	var out []string
	for i, s := range []*sampler{usage, ws, rss, locked} {
		if p, ok := s.peak(from, to); ok {
			out = append(out, fmt.Sprintf("%s %.1f", []string{"usage", "working set", "RSS", "locked"}[i], float64(p.available)/mib))
		}
	}
	return "peak MiB: " + strings.Join(out, ", ")
}

// ownMemoryPods is ownMemPodsEnv, or ownMemPods.
func ownMemoryPods(t *testing.T) int {
	v := os.Getenv(ownMemPodsEnv)
	if v == "" {
		return ownMemPods
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 {
		t.Fatalf("%s=%q: want a number of pods, at least 2 (one is the hog)", ownMemPodsEnv, v)
	}
	return n
}

// ownMemoryLimit is the memory limit and GOMEMLIMIT evictd runs with: the
// shipped DaemonSet's (which test/deploy holds equal to the chart's), or
// ownMemLimitEnv's limit with the chart's 7/8 rule for GOMEMLIMIT.
func ownMemoryLimit(t *testing.T) (int64, string) {
	if v := os.Getenv(ownMemLimitEnv); v != "" {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() < 8*mib {
			t.Fatalf("%s=%q: want a memory quantity of at least 8Mi, such as 64Mi", ownMemLimitEnv, v)
		}
		return q.Value(), goMemLimitOf(q.Value())
	}
	path, err := framework.ManifestPath()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			t.Fatalf("%s: DaemonSet %s: %v", path, o.GetName(), err)
		}
		for _, ctr := range ds.Spec.Template.Spec.Containers {
			if ctr.Name != "evictd" {
				continue
			}
			lim, ok := ctr.Resources.Limits[corev1.ResourceMemory]
			for _, env := range ctr.Env {
				if env.Name == "GOMEMLIMIT" && ok && env.Value != "" {
					return lim.Value(), env.Value
				}
			}
			t.Fatalf("%s: container evictd has no memory limit or no GOMEMLIMIT", path)
		}
	}
	t.Fatalf("%s: no DaemonSet with a container evictd", path)
	return 0, ""
}

// goMemLimitOf is the chart's GOMEMLIMIT for a memory limit of limit bytes:
// 7/8 of it, in MiB when whole.
func goMemLimitOf(limit int64) string {
	if g := limit * 7 / 8; g%mib != 0 {
		return fmt.Sprintf("%dB", g)
	}
	return fmt.Sprintf("%dMiB", limit*7/8/mib)
}

// inCgroup checks that pid is in the v1 memory cgroup dir, from its
// /proc/pid/cgroup: evictd joined it before it ran.
func inCgroup(pid int, dir string) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err
	}
	want := "/" + filepath.Base(dir)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		// v1's memory line, or v2's one line of the unified hierarchy.
		if len(f) == 3 && (strings.Contains(","+f[1]+",", ",memory,") || cgrouptest.V2() && f[0] == "0" && f[1] == "") {
			if f[2] != want {
				return fmt.Errorf("evictd (pid %d) is in memory cgroup %s, want %s", pid, f[2], want)
			}
			return nil
		}
	}
	return fmt.Errorf("evictd (pid %d): no memory cgroup in /proc/%d/cgroup:\n%s", pid, pid, b)
}

// oomKills reads oom_kill from v1 memory.oom_control or v2 memory.events
// (cgrouptest.OOMKillFile): the processes of that cgroup the kernel's OOM
// killer ended.
func oomKills(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no oom_kill line (a kernel before 4.13?):\n%s", path, b)
}
