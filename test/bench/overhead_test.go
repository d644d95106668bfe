// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// The overhead scenario: a 4 GiB node running 110 pods (the kubelet's
// default pod limit), each a workload process holding 1 MiB, so evictd reads
// 110 real pod cgroups on every pass and keeps 110 pods in its informer.
// Idle, the node rests far from memory.available<300Mi. Under pressure, a
// hog pod grows at 500 MiB/s until evictd evicts it, again and again.
const (
	overheadNodeBytes = 4 << 30
	overheadPods      = 110
	overheadHogRate   = 500
	overheadWarmup    = 10 * time.Second
)

// The baseline: another evictd binary (hack/bench-overhead.sh builds it
// from BASELINE_REF) run through the same scenario on the same pods, so that
// a change is measured against the previous figures on the same machine in
// the same run. Unset, only the evictd of this tree runs.
const (
	baselineBinEnv = "EVICTD_BENCH_BASELINE"
	baselineRefEnv = "EVICTD_BENCH_BASELINE_REF"
	roundsEnv      = "EVICTD_BENCH_ROUNDS"
)

// phaseUsage is evictd's cost over one phase.
type phaseUsage struct {
	name      string
	wall, cpu time.Duration
	// rssMax and rssEnd are the largest and the last VmRSS sampled (every
	// second), rssMedian the median of the samples; hwm is VmHWM at the end.
	rssMax, rssEnd, rssMedian, hwm int64
	// end is the last reading, for its anonymous/file split.
	end       ProcUsage
	evictions int
	load      string
	// goStats are the Go runtime's figures from /metrics at the end.
	goStats map[string]float64
}

func (u phaseUsage) cpuPercent() float64 {
	return 100 * u.cpu.Seconds() / u.wall.Seconds()
}

// overheadRun is one evictd binary through the whole scenario.
type overheadRun struct {
	label, version string
	sources        string
	startup        ProcUsage
	startupGo      map[string]float64
	idle, pressure phaseUsage
}

// TestOverhead measures evictd's CPU time (utime + stime of
// /proc/<pid>/stat) and resident memory (VmRSS, VmHWM) with 110 pods, idle
// and under pressure; with a baseline binary, both binaries in turn on the
// same node, EVICTD_BENCH_ROUNDS times (default 1), and their ratio.
func TestOverhead(t *testing.T) {
	requireBench(t)
	phase := envDuration(t, phaseEnv, 60*time.Second, false)
	rounds := envInt(t, roundsEnv, 1)
	this := framework.RequireBinary(t, "evictd")
	baseline := os.Getenv(baselineBinEnv)
	baselineRef := os.Getenv(baselineRefEnv)
	if baseline != "" {
		if _, err := os.Stat(baseline); err != nil {
			t.Fatalf("%s=%q: %v", baselineBinEnv, baseline, err)
		}
		if baselineRef == "" {
			baselineRef = filepath.Base(baseline)
		}
	}
	loadBefore := loadavg()
	filler := buildFiller(t)
	e := startEnv(t, "", nodesim.Options{Name: "bench-overhead", MemoryBytes: overheadNodeBytes, Pods: overheadPods + 1})

	start := time.Now()
	var pods []*corev1.Pod
	for i := range overheadPods {
		pods = append(pods, e.createPod(t, podSpec{name: fmt.Sprintf("p-%03d", i), requestMiB: 16, grace: 1,
			holdMiB: 1, args: []string{"--hold-mib=1"}}))
	}
	for _, p := range pods {
		e.waitHolding(t, p, 1, 5*time.Minute)
	}
	waitAllRunning(t, e, overheadPods, 5*time.Minute)
	t.Logf("%d pods running after %s; node memory.available %d MiB", overheadPods, time.Since(start).Round(time.Second), e.available(t)/mib)

	hogs := 0
	var runs, baseRuns []overheadRun
	for r := range rounds {
		// Alternate which binary goes first, so neither always meets
		// the node (page cache, API server) in the state the other left.
		order := []string{this, baseline}
		if r%2 == 1 {
			order = []string{baseline, this}
		}
		for _, bin := range order {
			switch bin {
			case "":
			case this:
				runs = append(runs, runOverhead(t, e, bin, fmt.Sprintf("this-%d", r+1), phase, filler, &hogs))
			default:
				baseRuns = append(baseRuns, runOverhead(t, e, bin, fmt.Sprintf("baseline-%d", r+1), phase, filler, &hogs))
			}
		}
	}
	oomKills := e.node.OOMKills()

	title := fmt.Sprintf("evictd overhead with %d pods on a 4 GiB simulated node (memory.available<300Mi)\n%s; evictd %s; wake-up sources %s",
		overheadPods, machine(loadBefore), runs[0].version, runs[0].sources)
	if baseline != "" {
		title += fmt.Sprintf("; baseline %s (evictd %s)", baselineRef, baseRuns[0].version)
	}
	tab := &Table{
		Title: title,
		Header: []string{"run", "phase", "seconds", "CPU s", "CPU % of one core", "VmRSS max MiB", "VmRSS median MiB", "VmRSS end MiB", "anon/file MiB", "VmHWM MiB",
			"Go heap/stack/sys MiB", "trace MiB", "goroutines", "evictions", "load average at end"},
	}
	for _, run := range append(append([]overheadRun{}, baseRuns...), runs...) {
		tab.Row(run.label, "start-up+10s", "-", fmt.Sprintf("%.2f", run.startup.CPU.Seconds()), "-", "-", "-", mibs(run.startup.RSS),
			mibs(run.startup.RSSAnon)+"/"+mibs(run.startup.RSSFile), mibs(run.startup.HWM),
			goTriple(run.startupGo), goStat(run.startupGo, goStatNames[4]), goStat(run.startupGo, goStatNames[3]), 0, "-")
		for _, u := range []phaseUsage{run.idle, run.pressure} {
			tab.Row(run.label, u.name, fmt.Sprintf("%.0f", u.wall.Seconds()), fmt.Sprintf("%.2f", u.cpu.Seconds()), fmt.Sprintf("%.2f", u.cpuPercent()),
				mibs(u.rssMax), mibs(u.rssMedian), mibs(u.rssEnd), mibs(u.end.RSSAnon)+"/"+mibs(u.end.RSSFile), mibs(u.hwm),
				goTriple(u.goStats), goStat(u.goStats, goStatNames[4]), goStat(u.goStats, goStatNames[3]), u.evictions, u.load)
		}
	}
	rssMax := MedianOf(runs, func(r overheadRun) float64 { return float64(max(r.idle.rssMax, r.pressure.rssMax)) })
	hwm := MedianOf(runs, func(r overheadRun) float64 { return float64(r.pressure.hwm) })
	idleCPU := MedianOf(runs, func(r overheadRun) float64 { return r.idle.cpuPercent() })
	tab.Notes = append(tab.Notes,
		fmt.Sprintf("goal RSS <= 30 MiB: %s (largest VmRSS sampled %s MiB, VmHWM %s MiB; medians over %d round(s))",
			verdict(rssMax <= 30*mib && hwm <= 30*mib), mibs(int64(rssMax)), mibs(int64(hwm)), rounds),
		fmt.Sprintf("goal idle CPU <= 1%% of one core: %s (%.2f%%)", verdict(idleCPU <= 1), idleCPU),
		fmt.Sprintf("pressure phases: %d hog pods in all growing at %d MiB/s, %d OOM kills in the node", hogs, overheadHogRate, oomKills),
		"CPU = utime + stime of /proc/<pid>/stat (all threads) over the phase; RSS sampled every second from /proc/<pid>/status",
		"anon/file = RssAnon/RssFile at the end (file pages are mostly evictd's own binary text: shared, clean, reclaimable)",
		"Go heap/stack/sys = go_memstats_heap_inuse_bytes, _stack_inuse_bytes, _sys_bytes from evictd's /metrics at the end",
		"trace = evictd_trace_bytes at the end (the trace of passes, compressed; - when the build has no such metric)",
		"evictd run "+strings.Join(append([]string{memoryHard}, overheadExtraArgs()...), " ")+" (everything else as built)")
	tabs := []*Table{tab}
	if baseline != "" {
		tabs = append(tabs, compareOverhead(baselineRef, baseRuns, runs))
	}
	report(t, "overhead", tabs...)
}

// compareOverhead puts the baseline's figures and this tree's side by side:
// medians over the rounds, and this/baseline.
func compareOverhead(baselineRef string, base, this []overheadRun) *Table {
	tab := &Table{
		Title:  fmt.Sprintf("this tree against baseline %s (medians over %d round(s); ratio = this / baseline)", baselineRef, len(this)),
		Header: []string{"figure", "baseline", "this", "ratio"},
	}
	figures := []struct {
		name string
		mib  bool
		get  func(overheadRun) float64
	}{
		{"start-up+10s VmRSS MiB", true, func(r overheadRun) float64 { return float64(r.startup.RSS) }},
		{"idle VmRSS max MiB", true, func(r overheadRun) float64 { return float64(r.idle.rssMax) }},
		{"idle VmRSS median MiB", true, func(r overheadRun) float64 { return float64(r.idle.rssMedian) }},
		{"idle RssAnon MiB (end)", true, func(r overheadRun) float64 { return float64(r.idle.end.RSSAnon) }},
		{"idle RssFile MiB (end)", true, func(r overheadRun) float64 { return float64(r.idle.end.RSSFile) }},
		{"idle CPU % of one core", false, func(r overheadRun) float64 { return r.idle.cpuPercent() }},
		{"pressure VmRSS max MiB", true, func(r overheadRun) float64 { return float64(r.pressure.rssMax) }},
		{"pressure VmHWM MiB", true, func(r overheadRun) float64 { return float64(r.pressure.hwm) }},
		{"pressure CPU % of one core", false, func(r overheadRun) float64 { return r.pressure.cpuPercent() }},
		{"pressure evictions", false, func(r overheadRun) float64 { return float64(r.pressure.evictions) }},
	}
	for _, f := range figures {
		b, c := MedianOf(base, f.get), MedianOf(this, f.get)
		if f.mib {
			tab.Row(f.name, mibs(int64(b)), mibs(int64(c)), Ratio(c, b))
		} else {
			tab.Row(f.name, fmt.Sprintf("%.2f", b), fmt.Sprintf("%.2f", c), Ratio(c, b))
		}
	}
	return tab
}

// overheadExtraArgs are EVICTD_BENCH_ARGS's flags (space-separated), given
// to both binaries: the cost of one feature is a run with it off against
// one with it on.
func overheadExtraArgs() []string { return strings.Fields(os.Getenv("EVICTD_BENCH_ARGS")) }

// runOverhead starts the evictd binary bin on e's node, lets it settle,
// measures the idle and the pressure phase and stops it.
func runOverhead(t *testing.T, e *env, bin, label string, phase time.Duration, filler string, hogs *int) overheadRun {
	t.Helper()
	a := startAgentBin(t, e, bin, "overhead-"+label, append([]string{memoryHard}, overheadExtraArgs()...)...)
	defer a.stop()
	time.Sleep(overheadWarmup)
	startup, err := ReadProcUsage("/proc", a.p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	run := overheadRun{label: label, version: a.version, sources: a.sources, startup: startup, startupGo: a.goMetrics(goStatNames...)}
	run.idle = measurePhase(t, a, "idle", phase, nil)
	run.pressure = measurePhase(t, a, "pressure", phase, func(ctx context.Context) error {
		for ctx.Err() == nil {
			name := fmt.Sprintf("hog-%d", *hogs)
			*hogs++
			hog := podSpec{name: name, grace: 1, command: []string{filler,
				fmt.Sprintf("--grow-mib-per-sec=%d", overheadHogRate), fmt.Sprintf("--grow-to-mib=%d", overheadNodeBytes/mib)}}
			if _, err := e.c.Admin.CoreV1().Pods(e.ns).Create(ctx, hog.build(e.ns, e.node.Name), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			if !e.waitGone(name, 60*time.Second) {
				return fmt.Errorf("hog %s not evicted within a minute", name)
			}
		}
		return nil
	})
	a.alive(t)
	// The last hog may still be on its way out; the next run must start idle.
	if *hogs > 0 && !e.waitGone(fmt.Sprintf("hog-%d", *hogs-1), 60*time.Second) {
		t.Fatalf("hog-%d still there a minute after the %s run", *hogs-1, label)
	}
	return run
}

func goTriple(m map[string]float64) string {
	return goStat(m, goStatNames[0]) + "/" + goStat(m, goStatNames[1]) + "/" + goStat(m, goStatNames[2])
}

func mibs(b int64) string { return fmt.Sprintf("%.1f", float64(b)/mib) }

// goStatNames are the metrics the overhead table shows: the Go runtime's
// and the trace's size.
var goStatNames = []string{"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines", "evictd_trace_bytes"}

func goStat(m map[string]float64, name string) string {
	v, ok := m[name]
	if !ok {
		return "-"
	}
	if strings.HasSuffix(name, "_bytes") {
		return fmt.Sprintf("%.1f", v/mib)
	}
	return fmt.Sprintf("%.0f", v)
}

// measurePhase samples evictd's usage every second for d while load (if
// any) runs, and returns the phase's cost.
func measurePhase(t *testing.T, a *agent, name string, d time.Duration, load func(context.Context) error) phaseUsage {
	t.Helper()
	pid := a.p.Pid()
	before, err := ReadProcUsage("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	mark := a.logs.Len()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	loadErr := make(chan error, 1)
	go func() {
		if load == nil {
			loadErr <- nil
			return
		}
		loadErr <- load(ctx)
	}()
	u := phaseUsage{name: name}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last ProcUsage
	var samples []int64
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			s, err := ReadProcUsage("/proc", pid)
			if err != nil {
				t.Fatalf("evictd (pid %d) during %s: %v\n%s", pid, name, err, a.logs.Tail(20))
			}
			u.rssMax = max(u.rssMax, s.RSS)
			samples = append(samples, s.RSS)
			last = s
		}
	}
	end, err := ReadProcUsage("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	u.wall = time.Since(start)
	u.cpu = end.CPU - before.CPU
	u.rssMax = max(u.rssMax, end.RSS, last.RSS)
	u.rssEnd, u.hwm, u.end = end.RSS, end.HWM, end
	if len(samples) == 0 {
		samples = append(samples, end.RSS)
	}
	slices.Sort(samples)
	u.rssMedian = samples[len(samples)/2]
	u.evictions = len(a.evictedLines(mark, "", ""))
	u.load = loadavg()
	u.goStats = a.goMetrics(goStatNames...)
	// The load's last pod may still be on its way out; that is not measured.
	if err := <-loadErr; err != nil && ctx.Err() == nil {
		t.Fatalf("%s phase: %v\n%s", name, err, a.logs.Tail(20))
	}
	return u
}

// waitAllRunning waits until n pods of the namespace are Running.
func waitAllRunning(t *testing.T, e *env, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		list, err := e.c.Admin.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		var pending []string
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			} else {
				pending = append(pending, p.Name)
			}
		}
		if running >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d pods running after %s; not running: %s", running, n, timeout, strings.Join(pending, " "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
