package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// phaseUsage is evictd's cost over one phase.
type phaseUsage struct {
	name      string
	wall, cpu time.Duration
	// rssMax and rssEnd are the largest and the last VmRSS sampled (every
	// second); hwm is VmHWM at the end.
	rssMax, rssEnd, hwm int64
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

// TestOverhead measures evictd's CPU time (utime + stime of
// /proc/<pid>/stat) and resident memory (VmRSS, VmHWM) with 110 pods, idle
// and under pressure.
func TestOverhead(t *testing.T) {
	requireBench(t)
	phase := envDuration(t, phaseEnv, 60*time.Second, false)
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

	a := startAgent(t, e, "overhead", "--eviction-hard=memory.available<300Mi")
	time.Sleep(overheadWarmup)
	startup, err := ReadProcUsage("/proc", a.p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	startupGo := a.goMetrics(goStatNames...)

	idle := measurePhase(t, a, "idle", phase, nil)
	hogs := 0
	pressure := measurePhase(t, a, "pressure", phase, func(ctx context.Context) error {
		for ctx.Err() == nil {
			name := fmt.Sprintf("hog-%d", hogs)
			hogs++
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
	oomKills := e.node.OOMKills()

	tab := &Table{
		Title: fmt.Sprintf("evictd overhead with %d pods on a 4 GiB simulated node (memory.available<300Mi)\n%s; evictd %s; wake-up sources %s",
			overheadPods, machine(loadBefore), a.version, a.sources),
		Header: []string{"phase", "seconds", "CPU s", "CPU % of one core", "VmRSS max MiB", "VmRSS end MiB", "anon/file MiB", "VmHWM MiB",
			"Go heap/stack/sys MiB", "goroutines", "evictions", "load average at end"},
	}
	tab.Row("start-up+10s", "-", fmt.Sprintf("%.2f", startup.CPU.Seconds()), "-", "-", mibs(startup.RSS),
		mibs(startup.RSSAnon)+"/"+mibs(startup.RSSFile), mibs(startup.HWM),
		goStat(startupGo, goStatNames[0])+"/"+goStat(startupGo, goStatNames[1])+"/"+goStat(startupGo, goStatNames[2]), goStat(startupGo, goStatNames[3]), 0, "-")
	for _, u := range []phaseUsage{idle, pressure} {
		tab.Row(u.name, fmt.Sprintf("%.0f", u.wall.Seconds()), fmt.Sprintf("%.2f", u.cpu.Seconds()), fmt.Sprintf("%.2f", u.cpuPercent()),
			mibs(u.rssMax), mibs(u.rssEnd), mibs(u.end.RSSAnon)+"/"+mibs(u.end.RSSFile), mibs(u.hwm),
			goStat(u.goStats, goStatNames[0])+"/"+goStat(u.goStats, goStatNames[1])+"/"+goStat(u.goStats, goStatNames[2]), goStat(u.goStats, goStatNames[3]),
			u.evictions, u.load)
	}
	rssMax := max(idle.rssMax, pressure.rssMax)
	tab.Notes = append(tab.Notes,
		fmt.Sprintf("goal RSS <= 30 MiB: %s (largest VmRSS sampled %s MiB, VmHWM %s MiB)", verdict(rssMax <= 30*mib && pressure.hwm <= 30*mib), mibs(rssMax), mibs(pressure.hwm)),
		fmt.Sprintf("goal idle CPU <= 1%% of one core: %s (%.2f%%)", verdict(idle.cpuPercent() <= 1), idle.cpuPercent()),
		fmt.Sprintf("pressure phase: %d hog pods growing at %d MiB/s, %d evictions, %d OOM kills in the node", hogs, overheadHogRate, pressure.evictions, oomKills),
		"CPU = utime + stime of /proc/<pid>/stat (all threads) over the phase; RSS sampled every second from /proc/<pid>/status",
		"anon/file = RssAnon/RssFile at the end (file pages are mostly evictd's own binary text: shared, clean, reclaimable)",
		"Go heap/stack/sys = go_memstats_heap_inuse_bytes, _stack_inuse_bytes, _sys_bytes from evictd's /metrics at the end",
		"evictd run --eviction-hard=memory.available<300Mi (everything else as built)")
	report(t, "overhead", tab)
}

func mibs(b int64) string { return fmt.Sprintf("%.1f", float64(b)/mib) }

// goStatNames are the Go runtime metrics the overhead table shows.
var goStatNames = []string{"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines"}

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
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			s, err := ReadProcUsage("/proc", pid)
			if err != nil {
				t.Fatalf("evictd (pid %d) during %s: %v\n%s", pid, name, err, a.logs.Tail(20))
			}
			u.rssMax = max(u.rssMax, s.RSS)
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
