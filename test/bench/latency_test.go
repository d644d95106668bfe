// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// agentConfig is one way of running evictd in a benchmark.
type agentConfig struct {
	name  string
	about string
	flags []string
}

// The wake-up source configurations the latency benchmark compares.
// Acting early is off in the three that measure detection, so that an
// eviction predicted from the step's own slope does not stand in for
// detecting the crossing; "default" runs evictd as built.
var latencyConfigs = []agentConfig{
	{"memcg", "memcg threshold eventfd, 1s timer", []string{"--wakeup-sources=memcg", "--act-early=false"}},
	{"polling-1s", "timer only, every 1s", []string{"--wakeup-sources=none", "--housekeeping-interval=1s", "--act-early=false"}},
	{"adaptive", "adaptive polling only (1s, faster near a threshold)", []string{"--wakeup-sources=adaptive", "--act-early=false"}},
	{"default", "as built: all wake-up sources, acting early", nil},
}

func configNames(cs []agentConfig) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.name)
	}
	return out
}

func pickConfigs(t *testing.T, all []agentConfig) []agentConfig {
	t.Helper()
	names := envSelect(t, configsEnv, configNames(all))
	var out []agentConfig
	for _, c := range all {
		for _, n := range names {
			if c.name == n {
				out = append(out, c)
			}
		}
	}
	return out
}

// The latency scenario: a 1 GiB node with memory.available<300Mi and a
// Guaranteed "base" pod holding 560 MiB within its request, so that the node
// rests about 150 MiB above the threshold. In each trial a BestEffort "step"
// pod maps 300 MiB in a single MAP_POPULATE call (test/bench/filler, about
// 0.2 s under load; touching pages from user space is 10 times slower on this
// machine), which crosses the threshold about halfway through and ends about
// 150 MiB below the node cgroup's limit. The step pod exceeds its request
// the most, so it ranks first.
const (
	latencyNodeBytes = 1 << 30
	latencyThreshold = 300 * mib
	latencyStepMiB   = 300
	// crossingPoll is how often the test reads the node's usage to time the
	// crossing.
	crossingPoll = 250 * time.Microsecond
	// defaultRest is how long the node rests between trials
	// (EVICTD_BENCH_REST).
	defaultRest = 3 * time.Second
)

var latencyBase = podSpec{name: "base", requestMiB: 640, limitMiB: 640, grace: 1, holdMiB: 560, args: []string{"--hold-mib=560"}}

// latencyTrial is one step and what came of it.
type latencyTrial struct {
	crossing Crossing
	// received is when the API server received the Eviction
	// (requestReceivedTimestamp in its audit log).
	received time.Time
	// logged is the ts of evictd's "evicted pod" line.
	logged time.Time
	// restAvailable is memory.available just before the step; stepTook is
	// how long the filler's one mmap call took.
	restAvailable int64
	stepTook      time.Duration
	// miss says why the trial has no figure.
	miss string
}

// latency and logLatency count from the last read that was still below the
// level: the crossing came after it, so they are upper bounds, off by at
// most the crossing's resolution (about a millisecond).
func (tr latencyTrial) latency() time.Duration    { return tr.received.Sub(tr.crossing.Earliest()) }
func (tr latencyTrial) logLatency() time.Duration { return tr.logged.Sub(tr.crossing.Earliest()) }

// TestLatency measures, per wake-up source configuration, the time from a
// one-step crossing of a hard memory threshold (timed by the test reading
// the node cgroup's usage every 250 µs, about 1 ms apart in practice) to
// evictd's Eviction request reaching the API server (timed by the API
// server's audit log, in microseconds).
func TestLatency(t *testing.T) {
	requireBench(t)
	trials := envInt(t, trialsEnv, 20)
	configs := pickConfigs(t, latencyConfigs)
	rest := envDuration(t, restEnv, defaultRest, true)
	loadBefore := loadavg()

	// The framework runs kube-apiserver from its binary directory; a copy of
	// that directory whose kube-apiserver is a wrapper adds the audit log.
	realBins, err := framework.BinDir()
	framework.Require(t, err)
	binDir := t.TempDir()
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	if err := AuditBinDir(binDir, realBins, auditLog); err != nil {
		t.Fatal(err)
	}
	filler := buildFiller(t)
	e := startEnv(t, binDir, nodesim.Options{Name: "bench-latency", MemoryBytes: latencyNodeBytes})

	results := map[string][]latencyTrial{}
	sources := map[string]string{}
	version := ""
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			e.ensure(t, latencyBase)
			flags := append([]string{memoryHard}, cfg.flags...)
			a := startAgent(t, e, "latency-"+cfg.name, flags...)
			sources[cfg.name], version = a.sources, a.version
			for i := range trials {
				tr := runLatencyTrial(t, e, a, filler, auditLog, fmt.Sprintf("step-%s-%d", cfg.name, i), rest)
				if tr.miss != "" {
					t.Logf("trial %d: no figure: %s", i, tr.miss)
				} else {
					t.Logf("trial %d: crossing→request %s (evictd log %s; crossing timed to %s; rest available %d MiB; step took %s)",
						i, Ms(tr.latency()), Ms(tr.logLatency()), tr.crossing.Resolution().Round(time.Microsecond),
						tr.restAvailable/mib, tr.stepTook.Round(time.Millisecond))
				}
				results[cfg.name] = append(results[cfg.name], tr)
			}
			a.alive(t)
		})
	}

	tab := &Table{
		Title: "Detection latency: one-step crossing of memory.available<300Mi (1 GiB node) -> Eviction received by the API server\n" +
			fmt.Sprintf("%s; evictd %s; %d trials per configuration, %s rest before each", machine(loadBefore), version, trials, rest),
		Header: []string{"config", "active sources", "n", "median", "p99", "min", "max", "evictd-log median", "evictd-log p99", "no figure"},
	}
	for _, cfg := range configs {
		var lat, logLat, res, steps []time.Duration
		var rest []int64
		misses := 0
		early := 0
		for i, tr := range results[cfg.name] {
			if tr.stepTook > 0 { // 0: the filler's line was not read in time
				steps = append(steps, tr.stepTook)
			}
			rest = append(rest, tr.restAvailable/mib)
			if tr.miss != "" {
				misses++
				tab.Notes = append(tab.Notes, fmt.Sprintf("%s trial %d: no figure: %s", cfg.name, i, tr.miss))
				continue
			}
			if tr.latency() < 0 {
				early++
			}
			lat = append(lat, tr.latency())
			logLat = append(logLat, tr.logLatency())
			res = append(res, tr.crossing.Resolution())
		}
		s, l := Summarize(lat), Summarize(logLat)
		if s.N == 0 {
			tab.Row(cfg.name, sources[cfg.name], 0, "-", "-", "-", "-", "-", "-", misses)
			continue
		}
		tab.Row(cfg.name, sources[cfg.name], s.N, Ms(s.Median), Ms(s.P99), Ms(s.Min), Ms(s.Max), Ms(l.Median), Ms(l.P99), misses)
		if early > 0 {
			tab.Notes = append(tab.Notes, fmt.Sprintf("%s: %d of %d requests reached the API server before the crossing (acted early on a prediction; negative latencies)", cfg.name, early, s.N))
		}
		if cfg.name == "memcg" {
			tab.Notes = append(tab.Notes, fmt.Sprintf("goal (v1 memcg eventfd): median <= 50ms %s, p99 <= 250ms %s",
				verdict(s.Median <= 50*time.Millisecond), verdict(s.P99 <= 250*time.Millisecond)))
		}
		tab.Notes = append(tab.Notes, fmt.Sprintf("%s: crossing timed to within %s (median), %s (max); the %d MiB step took %s (median); available before the step %d-%d MiB",
			cfg.name, Summarize(res).Median.Round(time.Microsecond), Summarize(res).Max.Round(time.Microsecond),
			latencyStepMiB, Summarize(steps).Median.Round(time.Millisecond), slices.Min(rest), slices.Max(rest)))
	}
	tab.Notes = append(tab.Notes,
		"latency = audit requestReceivedTimestamp - the last read of the node cgroup's memory.usage_in_bytes still below the threshold level",
		"  (the crossing came after that read, so each figure is an upper bound, off by at most the resolution below)",
		"evictd-log = ts of evictd's \"evicted pod\" line (written after the API server answered) - the same crossing",
		"p99 is by nearest rank: with fewer than 100 trials it is the maximum")
	for _, cfg := range configs {
		tab.Notes = append(tab.Notes, fmt.Sprintf("%s: evictd run %s  (%s)", cfg.name, strings.Join(cfg.flags, " "), cfg.about))
	}
	report(t, "latency", tab)
	// Keep the audit log next to the table: it is the evidence for every
	// figure.
	if f := outFile(t, "latency-audit.log"); f != nil {
		if b, err := os.ReadFile(auditLog); err == nil {
			_, _ = f.Write(b)
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

// runLatencyTrial makes one step and times it.
func runLatencyTrial(t *testing.T, e *env, a *agent, filler, auditLog, name string, rest time.Duration) latencyTrial {
	t.Helper()
	a.alive(t)
	e.ensure(t, latencyBase)
	waitAvailable(t, e, latencyThreshold+100*mib, 60*time.Second)
	// Rest first: evictd estimates the fill rate over the last 2 s, and
	// the previous trial's step and release must be out of that window.
	time.Sleep(rest)

	var tr latencyTrial
	mark := a.logs.Len()
	step := podSpec{name: name, grace: 1, command: []string{filler, fmt.Sprintf("--step-mib=%d", latencyStepMiB)}}
	pod := e.createPod(t, step)
	defer func() {
		// Whatever happened, the step pod must be gone before the next
		// trial: normally the eviction removes it, else it is deleted.
		if !e.waitGone(name, 30*time.Second) {
			e.deletePod(t, name, 0)
		}
	}()
	logPath := filepath.Join(e.node.PodLogDir(pod), "main", "0.log")
	// A random phase of the agent's timer.
	time.Sleep(500*time.Millisecond + jitter(time.Second))
	early := func() string {
		if ls := a.evictedLines(mark, e.ns, name); len(ls) > 0 {
			return fmt.Sprintf("evicted before the step (%s: %q)", ls[0].TS.Format("15:04:05.000"), ls[0].Str("reason"))
		}
		return ""
	}
	if !fileContains(logPath, "filler: ready") {
		if tr.miss = early(); tr.miss != "" {
			return tr
		}
		waitFileContains(t, logPath, "filler: ready", 60*time.Second)
	}
	pid := e.node.ContainerPIDs(pod.UID)["main"]
	if tr.miss = early(); tr.miss != "" {
		return tr
	}
	if pid == 0 {
		t.Fatalf("no process for the step pod %s", name)
	}

	tr.restAvailable = e.available(t)
	level := e.crossingLevel(t, latencyThreshold)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crossed := make(chan Crossing, 1)
	watchErr := make(chan error, 1)
	watching := make(chan struct{})
	go func() {
		c, err := WatchCrossing(ctx, e.memFile("memory.usage_in_bytes"), level, crossingPoll, watching)
		if err != nil {
			watchErr <- err
			return
		}
		crossed <- c
	}()
	<-watching
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		if tr.miss = early(); tr.miss != "" {
			return tr
		}
		t.Fatalf("signal the step pod's process %d: %v", pid, err)
	}
	select {
	case tr.crossing = <-crossed:
	case err := <-watchErr:
		t.Fatalf("the step never crossed the threshold: %v", err)
	}
	tr.stepTook = stepDuration(logPath)

	lctx, lcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer lcancel()
	l, err := a.logs.Wait(lctx, mark, MsgIs("evicted pod"))
	if err != nil {
		tr.miss = fmt.Sprintf("no eviction within 20s of the crossing (available now %d MiB)", e.available(t)/mib)
		return tr
	}
	if l.Str("pod") != e.ns+"/"+name {
		tr.miss = fmt.Sprintf("evicted %s first, not the step pod (%q)", l.Str("pod"), l.Str("reason"))
		return tr
	}
	tr.logged = l.TS
	// The audit event is written before the response (blocking mode), and
	// evictd logs after the response, so it is in the file by now.
	evs, err := ReadAuditEvictions(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Namespace == e.ns && ev.Name == name && !ev.DryRun {
			tr.received = ev.Received
			break
		}
	}
	if tr.received.IsZero() {
		t.Fatalf("evictd logged the eviction of %s but the audit log %s has no pods/eviction create for it", name, auditLog)
	}
	return tr
}

// stepDuration reads how long the filler's MAP_POPULATE took from its log,
// or 0 when it has not said yet.
func stepDuration(logPath string) time.Duration {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		for line := range strings.Lines(string(b)) {
			if _, rest, ok := strings.Cut(line, "MiB in "); ok {
				if d, err := time.ParseDuration(strings.Fields(rest)[0]); err == nil {
					return d
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

func fileContains(path, substr string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), substr)
}

// waitFileContains waits until the file holds substr.
func waitFileContains(t *testing.T, path, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), substr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not say %q after %s; it holds:\n%s", path, substr, timeout, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAvailable waits until the node's memory.available is at least want.
func waitAvailable(t *testing.T, e *env, want int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		avail := e.available(t)
		if avail >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node memory.available stays at %d MiB, below %d MiB, for %s", avail/mib, want/mib, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
