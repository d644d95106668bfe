// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/test/bench"
	"github.com/evictd/evictd/test/e2e/framework"
)

// Containers stuck at memory.high on the real node (docs/memhigh.md): the
// kubelet itself writes memory.high (MemoryQoS, beta and on by default in
// 1.37, with a memoryThrottlingFactor), a container churning above it is
// detected and, without an actuator, evicted after the grace period, while
// a container with a stable working set below it and one busy allocating
// and freeing well below it see nothing. It runs on the one-disk node and
// restarts its kubelet twice (into the factor and back). Its file's name
// puts it right after TestNodeDemoV2 (go test runs the files in name
// order): not after TestNodeDiskImageGC, whose DiskPressure taint stays five
// minutes, nor just before it, whose ballast image the kubelet must have
// detected more than its 2-minute imageMinimumGCAge before (a restart
// detects every image again); the tests in between take far longer.

const (
	// memHighFactor is the kubelet's memoryThrottlingFactor during the
	// test: 0.9, the value the kubelet defaulted to before 1.37 made it nil
	// (its validation's previousDefaultMemoryThrottlingFactor), so
	// memory.high = request + 0.9 (limit - request).
	memHighFactor = 0.9
	// Every pod of the test has the same request and limit: memory.high
	// = 32 + 0.9 * 224 = 233.6 MiB, 22.4 MiB below memory.max (256 MiB).
	memHighRequest = 32 << 20
	memHighLimit   = 256 << 20
	// The churner holds 196 MiB and maps, touches and unmaps 40 MiB over
	// and over: with its runtime it peaked at 239.5-241.3 MiB in the
	// guest, 6-8 MiB above memory.high and 15-16 MiB below memory.max, so
	// it is throttled at every cycle and never OOM-killed (no swap here).
	churnHoldMiB = 196
	churnMiB     = 40
	// The stable pod holds 128 MiB, 105 MiB below memory.high, and does
	// nothing else.
	stableHoldMiB = 128
	// The busy pod holds 64 MiB and churns 64 MiB every half second: a
	// pod allocating and freeing all the time, peaking near 130 MiB, well
	// below memory.high, so never throttled.
	busyHoldMiB  = 64
	busyChurnMiB = 64
	busyPause    = 500 * time.Millisecond
	// memHighWindow is evictd's default, which the test leaves to evictd:
	// a throttled container wakes evictd itself (memory.events, PSI), so
	// its passes come every 100 ms or so, and a history too short for the
	// window goes blind at exactly these rates (issue 32, A1). The grace
	// is shorter than the default 1 m to keep the node stage short; 20 s
	// is still two thirds of a window over, so one throttled burst cannot
	// evict. The detection cannot come before half a window, the eviction
	// not before the grace period after that.
	memHighWindow = config.DefaultMemoryHighWindow
	memHighGrace  = 20 * time.Second
	// memHighPoll is how often the test reads the cgroups and evictd's
	// metrics; its times are that coarse.
	memHighPoll = 2 * time.Second
)

// memHighArgs are evictd's arguments for the family at the test's grace,
// the window and the rate and share thresholds at their defaults, and
// extra.
func memHighArgs(extra ...string) []string {
	return append([]string{
		"--memory-high-eviction",
		"--memory-high-grace-period=" + memHighGrace.String(),
	}, extra...)
}

// memHighCase is one configuration of evictd against the same three pods;
// check asserts what must become of the churner (the stable and busy pods
// must see nothing in every case). A case with the actuator (relax
// memory.high to memory.max, evict only if pressure persists) is another
// entry: its arguments and a check that the churner's memory.high was
// relaxed and it was not evicted once it stabilised.
type memHighCase struct {
	name string
	args []string
	// stays: the churner must still run at the end (sampled a window and a
	// grace period past its memory.high's relax, or to the deadline, not
	// until it ends).
	stays bool
	check func(t *testing.T, r *memHighRun)
}

// TestNodeMemoryHigh: the cases of the memory.high family on the real
// kubelet's memory.high.
func TestNodeMemoryHigh(t *testing.T) {
	n := sharedNode(t)
	began := time.Now()
	// Registered first, so it runs last: after the kubelet's restart back.
	t.Cleanup(func() {
		t.Logf("TestNodeMemoryHigh took %s, the kubelet's two restarts included", time.Since(began).Round(time.Second))
	})
	withKubeletMemoryQoS(t, n, memHighFactor)
	for _, c := range []memHighCase{
		{name: "evicted after the grace period", args: memHighArgs(), check: checkChurnerEvicted},
		{name: "with the actuator: relaxed, then left alone", args: memHighArgs("--actuator"), stays: true, check: checkChurnerRelaxed},
	} {
		t.Run(c.name, func(t *testing.T) { runMemHighCase(t, n, c) })
	}
}

// withKubeletMemoryQoS restarts the kubelet with memoryThrottlingFactor
// set, and at the end of the test with its config as it was. Only the
// pods created in between get memory.high; the factor on the whole node
// would give every other test's pods one too (a BestEffort pod's at 0.9 of
// the node's allocatable memory, below where its memory tests want it to
// go).
func withKubeletMemoryQoS(t *testing.T, n *Node, factor float64) {
	t.Helper()
	path := filepath.Join(n.OutDir, "kubelet.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := withMemoryThrottlingFactor(orig, factor)
	if err != nil {
		t.Fatal(err)
	}
	restart := func(what string, data []byte) error {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		return restartKubelet(t, n, what)
	}
	// The way back first, so that it runs however far the way there got.
	t.Cleanup(func() {
		if err := restart("with its config as before", orig); err != nil {
			t.Errorf("putting the kubelet's config back: %v", err)
		}
	})
	if err := restart(fmt.Sprintf("with memoryThrottlingFactor %g", factor), cfg); err != nil {
		t.Fatal(err)
	}
}

// memHighPod is a workload pod at the test's request and limit whose one
// container is named name (the metric names containers, not pods).
func memHighPod(ns, name string, args ...string) *corev1.Pod {
	p := workloadPod(ns, name, memHighRequest, memHighLimit, args...)
	p.Spec.Containers[0].Name = name
	return p
}

// memHighRun is what one case saw: its pods, every reading of their
// container cgroups and of evictd's gauge, and when things happened (host
// clock, memHighPoll apart).
type memHighRun struct {
	n     *Node
	ev    *corev1.Pod
	ns    string
	began time.Time
	// cgroups are the pods' container cgroups, by pod (and container) name.
	cgroups map[string]string
	samples []memHighSample
	pf      *podFates
	// firstHigh, firstOver, firstStuck and ended are when the churner's
	// memory.events high was first above zero, when evictd's gauge first
	// had it over and stuck, and when its fate (or its going) was seen:
	// the polls' times, as coarse as the polls (a poll of the loaded
	// guest took 2-8 s).
	firstHigh, firstOver, firstStuck, ended time.Time
	// churnAt is the churner's "churning" log line's time (guest clock).
	churnAt time.Time
}

// memHighSample is one poll: each pod's cgroup (missing once gone) and
// evictd's non-zero evictd_memory_high_containers series.
type memHighSample struct {
	at     time.Time
	reads  map[string]cgroupRead
	series []string
}

// cgroupReadScript prints what parseCgroupRead reads, for the cgroup
// directory $0.
const cgroupReadScript = `cat /proc/uptime; cd "$0" && for f in memory.events memory.pressure memory.current memory.peak memory.high; do echo "== $f"; cat $f; done`

// memHighPollScript reads each container cgroup given ($2...) with
// cgroupReadScript and then evictd's metrics at $1.
const memHighPollScript = `url=$1; shift
for d in "$@"; do
  echo "#### $d"
  sh -c '` + cgroupReadScript + `' "$d" 2>/dev/null || echo "#### gone"
done
echo "#### metrics"
curl -s --max-time 10 "$url" | grep '^evictd_memory_high_containers' || true`

// poll reads the cgroups and the metrics once.
func (r *memHighRun) poll(ctx context.Context) (memHighSample, error) {
	s := memHighSample{at: time.Now(), reads: map[string]cgroupRead{}}
	url := "http://" + r.ev.Status.PodIP + ":9731/metrics"
	names := slices.Sorted(maps.Keys(r.cgroups))
	argv := []string{"/bin/sh", "-c", memHighPollScript, "sh", url}
	for _, name := range names {
		argv = append(argv, r.cgroups[name])
	}
	res, err := r.n.Exec(ctx, argv, WithTimeout(time.Minute))
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return s, err
	}
	byDir := map[string]string{}
	for name, dir := range r.cgroups {
		byDir[dir] = name
	}
	var section string
	parts := map[string]*strings.Builder{}
	for _, line := range strings.Split(res.Stdout, "\n") {
		if h, ok := strings.CutPrefix(line, "#### "); ok {
			if h == "gone" {
				delete(parts, section)
				continue
			}
			section = h
			parts[section] = &strings.Builder{}
			continue
		}
		if b := parts[section]; b != nil {
			b.WriteString(line + "\n")
		}
	}
	for dir, b := range parts {
		if dir == "metrics" {
			s.series = memHighSeries(b.String())
			continue
		}
		cr, err := parseCgroupRead(b.String())
		if err != nil {
			// A cgroup going away while read is a pod ending.
			if strings.Contains(err.Error(), "no memory.") {
				continue
			}
			return s, fmt.Errorf("%s: %w", byDir[dir], err)
		}
		s.reads[byDir[dir]] = cr
	}
	return s, nil
}

// record polls, keeps the sample and the churner's times, and checks the
// pods' fates.
func (r *memHighRun) record(ctx context.Context) error {
	s, err := r.poll(ctx)
	if err != nil {
		return err
	}
	r.keep(s)
	return r.pf.check(ctx)
}

// keep keeps a sample and the churner's times it shows. Every poll counts,
// the first one too: on a loaded guest a poll takes 10-20 s, and the first
// may be the only one in the grace period the churner is over for.
func (r *memHighRun) keep(s memHighSample) {
	r.samples = append(r.samples, s)
	if c, ok := s.reads["churn"]; ok && c.Events["high"] > 0 && r.firstHigh.IsZero() {
		r.firstHigh = s.at
	}
	for _, series := range s.series {
		if strings.HasPrefix(series, "churn/") && r.firstOver.IsZero() {
			r.firstOver = s.at
		}
		if strings.HasPrefix(series, "churn/") && strings.HasSuffix(series, "/stuck") && r.firstStuck.IsZero() {
			r.firstStuck = s.at
		}
	}
}

// sample records every memHighPoll until done says so or timeout passes.
func (r *memHighRun) sample(t *testing.T, ctx context.Context, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	end := time.Now().Add(timeout)
	for {
		next := time.Now().Add(memHighPoll)
		if err := r.record(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if done() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s; fates %v\n%s\nevictd's log (tail):\n%s", what, timeout, r.pf.fates, r.table(),
				framework.LastLines(evictdLogSince(t, r.n, r.ev, r.began), 30))
		}
		time.Sleep(time.Until(next))
	}
}

// table shows each poll: per pod, its memory.events high rate and
// memory.pressure some share since the previous poll and its
// memory.current; evictd's series last.
func (r *memHighRun) table() string {
	names := []string{"churn", "stable", "busy"}
	tab := &bench.Table{Header: []string{"s"}}
	for _, name := range names {
		tab.Header = append(tab.Header, name+" high/s", name+" some", name+" MiB")
	}
	tab.Header = append(tab.Header, "evictd_memory_high_containers")
	for i := 1; i < len(r.samples); i++ {
		a, b := r.samples[i-1], r.samples[i]
		cells := []any{fmt.Sprintf("%.0f", b.at.Sub(r.began).Seconds())}
		for _, name := range names {
			x, okA := a.reads[name]
			y, okB := b.reads[name]
			if !okA || !okB {
				cells = append(cells, "-", "-", "-")
				continue
			}
			h, s := memHighRates(x, y)
			cells = append(cells, fmt.Sprintf("%.1f", h), fmt.Sprintf("%.0f%%", s), fmt.Sprintf("%.1f", float64(y.Current)/(1<<20)))
		}
		cells = append(cells, strings.Join(b.series, " "))
		tab.Row(cells...)
	}
	return tab.String()
}

// span is the first and last reading of a pod's cgroup.
func (r *memHighRun) span(name string) (first, last cgroupRead, ok bool) {
	for _, s := range r.samples {
		if c, found := s.reads[name]; found {
			if !ok {
				first, ok = c, true
			}
			last = c
		}
	}
	return first, last, ok
}

// runMemHighCase deploys evictd with the case's arguments, runs the three
// pods, samples until the churner ends (or, for one that stays, long
// enough to see it is left alone), then soaks the other two, and asserts.
func runMemHighCase(t *testing.T, n *Node, c memHighCase) {
	ctx := context.Background()
	from := time.Now()
	ev := evictdPodWith(t, n, c.args...)
	t.Logf("evictd with %v Ready in %s", c.args, time.Since(from).Round(time.Second))
	ns := newNamespace(t, n, "memhigh")
	r := &memHighRun{n: n, ev: ev, ns: ns, began: time.Now(), cgroups: map[string]string{}, pf: newPodFates(n, ns)}
	pods := createRunning(t, ctx, n,
		memHighPod(ns, "churn", "--hold-mib="+strconv.Itoa(churnHoldMiB), "--churn-mib="+strconv.Itoa(churnMiB)),
		memHighPod(ns, "stable", "--hold-mib="+strconv.Itoa(stableHoldMiB)),
		memHighPod(ns, "busy", "--hold-mib="+strconv.Itoa(busyHoldMiB), "--churn-mib="+strconv.Itoa(busyChurnMiB),
			"--churn-pause="+busyPause.String()))
	t.Logf("the pods run %s after their creation", time.Since(r.began).Round(time.Second))
	for _, p := range pods {
		id, err := containerID(p, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		r.cgroups[p.Name] = n.PodCgroup(p) + "/" + containerCgroupName(n.CgroupDriver, id)
	}

	// The case's premise, established before the case is read: the
	// kubelet's MemoryQoS gave every container memory.high by its formula.
	first := r.waitKubeletMemoryHigh(t, ctx, pods)
	r.keep(first)
	// The table shows each poll's gauge against the one before: the
	// first's is here.
	t.Logf("first poll at +%.0f s: evictd_memory_high_containers %v", first.at.Sub(r.began).Seconds(), first.series)
	// The churn's first cycle crosses memory.high (the hold alone stays
	// below it): its start, on the guest's clock as evictd's log lines are,
	// is when the churner's throttling began, to a cycle.
	r.churnAt = containerLogLine(t, ctx, n, pods[0], "churn", "workload: churning", 3*time.Minute)

	// Until the churner ends (its eviction, the case's outcome) or, for a
	// case where it must stay, a whole window and a grace period after its
	// memory.high was seen relaxed (as long as evictd would take to evict
	// it for the throttling it saw before), or else the deadline: half a
	// window, the grace period and three minutes for the guest's slowness.
	deadline := memHighWindow/2 + memHighGrace + 3*time.Minute
	deadlineAt := time.Now().Add(deadline)
	var relaxedAt time.Time
	r.sample(t, ctx, deadline+memHighWindow+memHighGrace+time.Minute, "the churner's end", func() bool {
		if c.stays {
			if f := r.pf.fates["churn"]; f != "" {
				t.Fatalf("the churner ended by %q; with this case it must stay", f)
			}
			last := r.samples[len(r.samples)-1]
			if ch, ok := last.reads["churn"]; ok && ch.High == memHighLimit && relaxedAt.IsZero() {
				relaxedAt = last.at
			}
			if !relaxedAt.IsZero() {
				return time.Since(relaxedAt) > memHighWindow+memHighGrace
			}
			return time.Now().After(deadlineAt)
		}
		if r.pf.fates["churn"] != "" {
			return true
		}
		if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "churn", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			r.pf.fates["churn"] = "gone"
			return true
		}
		return false
	})
	r.ended = time.Now()
	// The soak goes on until the stable and busy pods have been watched for
	// half a window and two grace periods and, after an eviction, for a
	// grace period more (no second one); a churner that stays was watched
	// long enough above.
	soakEnd := r.began.Add(memHighWindow/2 + 2*memHighGrace + memHighPoll)
	if e := time.Now().Add(memHighGrace); !c.stays && e.After(soakEnd) {
		soakEnd = e
	}
	r.sample(t, ctx, time.Until(soakEnd)+30*time.Second, "the soak", func() bool { return time.Now().After(soakEnd) })
	t.Logf("%s (s since the pods were created):\n%s", c.name, r.table())

	c.check(t, r)
	checkQuietPods(t, r)
	checkWakeupSources(t, ctx, r)
	t.Logf("case %q took %s", c.name, time.Since(from).Round(time.Second))
}

// waitKubeletMemoryHigh establishes the case's premise: the kubelet's
// MemoryQoS gave each container memory.high by its formula. The kubelet
// asks for it only when it creates a container, in its CRI request's
// unified resources, which runc writes into the cgroup before the
// container starts; with no memoryThrottlingFactor it asks for none, and a
// restart into the factor changes only the containers created after it.
// So the kubelet's own figure is the container's OCI spec, read first. The
// cgroup's file is then polled (minutes on the loaded guest) until it is
// set: to the kubelet's figure, or, for the churner, to memory.max where
// evictd's actuator has already raised it, its "memory.high relaxed to
// memory.max" line saying from the kubelet's figure. That happens when the
// first read comes half a window and the grace period after the churn
// began (a loaded host: the pods seen Running late, a poll taking 10-20 s),
// and read as the kubelet's memory.high it failed the case: "churn's
// container has memory.high 268435456, want the kubelet's 244944896". It
// returns the first poll that showed every container's file so.
func (r *memHighRun) waitKubeletMemoryHigh(t *testing.T, ctx context.Context, pods []*corev1.Pod) memHighSample {
	t.Helper()
	want := kubeletMemoryHigh(memHighRequest, memHighLimit, memHighFactor, 4096)
	premise := fmt.Sprintf("the kubelet's %d (request %d MiB, limit %d MiB, factor %g)", want, memHighRequest>>20, memHighLimit>>20, memHighFactor)
	for _, p := range pods {
		id, err := containerID(p, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.n.Exec(ctx, []string{r.n.Ctr, "-n", "k8s.io", "containers", "info", "--spec", id}, WithTimeout(time.Minute))
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			t.Fatalf("%s's container spec: %v", p.Name, err)
		}
		got, err := specMemoryHigh([]byte(res.Stdout))
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if got != want {
			t.Fatalf("the kubelet created %s's container with memory.high %d in its spec, want %s: is MemoryQoS on, the factor set?", p.Name, got, premise)
		}
	}
	var first memHighSample
	var relaxedFrom string
	gone := map[string]string{}
	err := r.n.poll(ctx, 3*time.Minute, "every container's memory.high at "+premise, func(ctx context.Context) error {
		s, err := r.poll(ctx)
		if err != nil {
			return err
		}
		for name := range r.cgroups {
			c, ok := s.reads[name]
			if !ok {
				// Gone already (evicted on a guest slower still): its
				// spec above is the kubelet's figure, which runc wrote.
				fate, err := r.fateOf(ctx, name)
				if err != nil || fate == "" {
					return fmt.Errorf("%s's cgroup not read (%v)", name, err)
				}
				gone[name] = fate
				continue
			}
			if c.High == want {
				continue
			}
			if name == "churn" && c.High == memHighLimit {
				relaxed, ok := FirstLogAfter(CRILogLines(evictdLogSince(t, r.n, r.ev, r.began)), r.began,
					"memory.high relaxed to memory.max", map[string]string{"container": "churn"})
				if ok && relaxed.Str("from") == strconv.FormatInt(want, 10) {
					relaxedFrom = relaxed.Raw
					continue
				}
				return fmt.Errorf("churn's memory.high is its memory.max, %d, and evictd's log says no relax from the kubelet's %d", c.High, want)
			}
			return fmt.Errorf("%s's memory.high is %d", name, c.High)
		}
		first = s
		return nil
	})
	if err != nil {
		t.Fatalf("%v: is MemoryQoS on?", err)
	}
	t.Logf("the kubelet set memory.high %d (%.1f MiB) on each container (its spec and its cgroup)", want, float64(want)/(1<<20))
	if relaxedFrom != "" {
		t.Logf("evictd relaxed the churner's before the test's first read: %s", relaxedFrom)
	}
	if len(gone) != 0 {
		t.Logf("gone before the test's first read of their cgroup (their spec has the kubelet's memory.high): %v", gone)
	}
	return first
}

// fateOf is how the named pod ended ("" while it runs): its fate, or "gone"
// once deleted.
func (r *memHighRun) fateOf(ctx context.Context, name string) (string, error) {
	if err := r.pf.check(ctx); err != nil {
		return "", err
	}
	if f := r.pf.fates[name]; f != "" {
		return f, nil
	}
	if _, err := r.n.Cluster.Admin.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		r.pf.fates[name] = "gone"
		return "gone", nil
	} else if err != nil {
		return "", err
	}
	return "", nil
}

// checkWakeupSources: the cgroup v2 fast path is armed on the real node and
// works: kubepods' memory.events watch (inotify) and the PSI triggers are
// armed, and the churner's stall (its memory.pressure some near 90 %) woke
// evictd through a PSI trigger. The memory.events watch wakes only for
// kubepods' own events (node pressure, pkg/pressure/wakeup/events.go), never
// for a container at its own memory.high, so its count is only logged.
func checkWakeupSources(t *testing.T, ctx context.Context, r *memHighRun) {
	res, err := r.n.Exec(ctx, []string{"curl", "-s", "--max-time", "10", "http://" + r.ev.Status.PodIP + ":9731/metrics"}, WithTimeout(time.Minute))
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Errorf("evictd's metrics: %v", err)
		return
	}
	active, woke := WakeupFigures(res.Stdout)
	t.Logf("evictd's wake-up sources: armed %v, wake-ups %v", active, woke)
	for _, src := range []string{"memory_events", "psi"} {
		if active[src] != 1 {
			t.Errorf("evictd_wakeup_source_active{source=%q} %v, want 1: not armed on the cgroup v2 node", src, active[src])
		}
	}
	if woke["psi"] <= 0 {
		t.Errorf("evictd_wakeups_total{source=\"psi\"} %v while the churner stalled: no PSI trigger woke evictd", woke["psi"])
	}
}

// checkChurnerEvicted: without the actuator, the churner is evicted by
// evictd for memory.highStuck through the Eviction API, no sooner than the
// grace period after evictd first had it over, with an Event naming the
// container and the signal, and nothing else is evicted.
func checkChurnerEvicted(t *testing.T, r *memHighRun) {
	if f := r.pf.fates["churn"]; f != ByEvictd && f != "gone" {
		t.Fatalf("the churner ended by %q, want an eviction by evictd (an OOM kill means its peak reached memory.max)", f)
	}
	waitGone(t, context.Background(), r.n, r.ns, "churn")
	// The test's polls, 2-20 s apart on a loaded guest, may miss any state
	// (stuck lasts a loop tick or two): what evictd saw is in its own
	// eviction line below, not in when the host happened to look.
	if r.firstHigh.IsZero() || r.firstOver.IsZero() {
		t.Logf("the test's polls did not see the churner throttled (%s) and over in evictd's gauge (%s); evictd's lines on it:\n%s",
			r.firstHigh, r.firstOver, grepLines(evictdLogSince(t, r.n, r.ev, r.began), "churn", "memory.high", "episode"))
	}
	first, last, _ := r.span("churn")
	h, s := memHighRates(first, last)
	t.Logf("the churner: memory.events high %.1f/s, memory.pressure some %.0f%% over %.0f s; memory.peak %.1f MiB (memory.high %.1f, memory.max %d MiB)",
		h, s, last.Uptime-first.Uptime, float64(last.Peak)/(1<<20), float64(last.High)/(1<<20), memHighLimit>>20)
	since := func(at time.Time) string {
		if at.IsZero() {
			return "never seen"
		}
		return fmt.Sprintf("+%.0f s", at.Sub(r.began).Seconds())
	}
	t.Logf("the churner, by the test's polls (since the pods were created): first throttled %s, over in evictd's gauge %s, stuck %s, gone %s",
		since(r.firstHigh), since(r.firstOver), since(r.firstStuck), since(r.ended))
	if last.Events["oom_kill"] != 0 {
		t.Errorf("the churner's memory.events oom_kill %d: it reached memory.max", last.Events["oom_kill"])
	}
	lines := evictedLines(t, r.n, r.ev, r.began)
	t.Logf("evictd's evictions:\n%s", rawLines(lines))
	if len(lines) != 1 || lines[0].Str("pod") != r.ns+"/churn" || lines[0].Str("signal") != "memory.highStuck" {
		t.Fatalf("evictd's evictions: %d lines, want one, of the churner for memory.highStuck", len(lines))
	}
	// On the guest's clock: from the churn's start (its first cycle
	// throttled) to the eviction, at least the grace period (over from
	// the first pass that sees the throttling, stuck the grace period
	// after). How much more is the emulated guest's speed as much as
	// evictd's: logged, not asserted (the waiting rule).
	took := lines[0].TS.Sub(r.churnAt)
	t.Logf("the churner evicted %.1f s after its churn began (window %s, grace %s)", took.Seconds(), memHighWindow, memHighGrace)
	if took < memHighGrace {
		t.Errorf("evicted %s after the churn began, before the %s grace period", took.Round(100*time.Millisecond), memHighGrace)
	}
	// evictd's own figures, in its eviction's reason: the rate over the
	// window and how long it held (at least the grace period).
	if held, err := memHighHeld(lines[0].Str("reason")); err != nil {
		t.Errorf("evictd's eviction reason: %v", err)
	} else if held < memHighGrace {
		t.Errorf("evictd's eviction reason says the churner was stuck for %s, under the %s grace period: %s", held, memHighGrace, lines[0].Str("reason"))
	}
	events := podEvents(t, r.n, r.ns)
	t.Logf("events in %s:\n%s", r.ns, events)
	// The Evicted Event: on a loaded guest an EvictionStuck one can follow
	// it, the churner's container taking longer than its grace to stop.
	var note string
	for _, line := range strings.Split(events, "\n") {
		if strings.Contains(line, " Evicted Pod/churn: ") && strings.HasSuffix(line, "("+evict.ReportingController+")") {
			note = line
		}
	}
	if !strings.Contains(note, "memory.highStuck") || !strings.Contains(note, "container churn") {
		t.Errorf("no Event from evictd on the churner naming its container and memory.highStuck (last: %q)", note)
	}
}

// checkChurnerRelaxed: with the actuator, the churner stuck on its
// memory.events high for the grace period has its memory.high raised to its
// memory.max (stage 1), once, with an Event naming the container, and is
// not evicted: at memory.max, its working set below it, it has stabilised.
// The writable pod cgroups also let kubepods' PSI trigger arm.
func checkChurnerRelaxed(t *testing.T, r *memHighRun) {
	if f := r.pf.fates["churn"]; f != "" {
		t.Fatalf("the churner ended by %q; relaxed, it should have been left alone", f)
	}
	log := evictdLog(t, r.n, r.ev)
	if !strings.Contains(log, `"msg":"actuator on:`) {
		t.Errorf("evictd's log does not say the actuator is on")
	}
	armed := false
	for _, line := range strings.Split(log, "\n") {
		armed = armed || strings.Contains(line, `"msg":"wake-up source active"`) && strings.Contains(line, `"source":"psi"`) &&
			strings.Contains(line, `"name":"kubepods"`)
	}
	if !armed {
		t.Errorf("kubepods' PSI trigger did not arm with the pod cgroups writable; evictd's wake-up lines:\n%s", grepLines(log, "wake-up source"))
	}
	relaxed := 0
	for _, line := range strings.Split(evictdLogSince(t, r.n, r.ev, r.began), "\n") {
		if strings.Contains(line, `"msg":"memory.high relaxed to memory.max"`) {
			relaxed++
			t.Logf("evictd: %s", line)
			if !strings.Contains(line, `"container":"churn"`) || !strings.Contains(line, fmt.Sprintf(`"to":"%d"`, memHighLimit)) {
				t.Errorf("relaxed something else than the churner to its memory.max: %s", line)
			}
		}
	}
	if relaxed != 1 {
		t.Errorf("evictd relaxed memory.high %d times, want once", relaxed)
	}
	_, last, ok := r.span("churn")
	if !ok || last.High != memHighLimit {
		t.Errorf("the churner's memory.high at the end is %d, want its memory.max %d", last.High, memHighLimit)
	}
	if lines := evictedLines(t, r.n, r.ev, r.began); len(lines) != 0 {
		t.Errorf("evictd evicted:\n%s", rawLines(lines))
	}
	events := podEvents(t, r.n, r.ns)
	if !strings.Contains(events, evict.ReasonMemoryHighRelaxed) || !strings.Contains(events, "container churn") {
		t.Errorf("no %s Event naming the churner's container:\n%s", evict.ReasonMemoryHighRelaxed, events)
	}
	if last.Events["oom_kill"] != 0 {
		t.Errorf("the churner's memory.events oom_kill %d after its relax", last.Events["oom_kill"])
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// checkQuietPods: the stable and busy pods were never throttled (their
// memory.events high stayed 0, their peak below memory.high), evictd's
// gauge never named them, and they still run.
func checkQuietPods(t *testing.T, r *memHighRun) {
	for _, name := range []string{"stable", "busy"} {
		first, last, ok := r.span(name)
		if !ok {
			t.Errorf("%s: never read", name)
			continue
		}
		t.Logf("%s: memory.events high %d, memory.peak %.1f MiB over %.0f s", name, last.Events["high"], float64(last.Peak)/(1<<20), last.Uptime-first.Uptime)
		if last.Events["high"] != 0 || last.Peak >= last.High {
			t.Errorf("%s was throttled (memory.events high %d, peak %d, memory.high %d): not the quiet pod this test needs",
				name, last.Events["high"], last.Peak, last.High)
		}
		if f := r.pf.fates[name]; f != "" {
			t.Errorf("%s ended by %s", name, f)
		}
		for _, s := range r.samples {
			for _, series := range s.series {
				if strings.HasPrefix(series, name+"/") {
					t.Errorf("%s in evictd's gauge at +%.0f s: %s", name, s.at.Sub(r.began).Seconds(), series)
				}
			}
		}
	}
	if r.samples[len(r.samples)-1].at.Sub(r.began) < memHighWindow/2+2*memHighGrace {
		t.Errorf("the soak lasted %s, under half a window and two grace periods", r.samples[len(r.samples)-1].at.Sub(r.began))
	}
}
