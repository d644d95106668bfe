// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/test/nodesim"
)

// The OOM race: a pod grows at a fixed rate toward the limit of a 1 GiB node
// with memory.available<300Mi while three other pods hold memory, and either
// evictd stops it with an eviction or the kernel OOM killer stops it (or
// another pod) without any grace.
//
// The documented order (exceeds request, then priority, then usage − request)
// puts the grower first once it exceeds its 64 Mi request by more than the
// BestEffort batch pod's 32 MiB: it does long before the threshold. db is
// Guaranteed and within its request, web is Burstable within its request.
const (
	// fastest stands for the filler's --grow-fastest among the rates: as
	// fast as this kernel charges pages (shown as "max").
	fastest       = 0
	oomNodeBytes  = 1 << 30
	oomThreshold  = 300 * mib
	oomGrowToMiB  = 1024 // beyond the node: it never stops on its own
	oomGrowerName = "grower"
)

var (
	oomOthers = []podSpec{
		{name: "db", requestMiB: 256, limitMiB: 256, priorityClass: "bench-high", grace: 30, holdMiB: 192, args: []string{"--hold-mib=192"}},
		{name: "web", requestMiB: 128, grace: 30, holdMiB: 64, args: []string{"--hold-mib=64"}},
		{name: "batch", grace: 30, holdMiB: 32, args: []string{"--hold-mib=32"}},
	}
	oomConfigs = []agentConfig{
		{"evictd", "as built", nil},
		{"evictd-actuator", "as built, with the actuator containing each hard victim once its eviction is accepted", []string{"--actuator"}},
		{"kubelet-cadence", "the same binary at the kubelet's cadence",
			[]string{"--wakeup-sources=none", "--housekeeping-interval=10s", "--act-early=false", "--fit-grace=false"}},
	}
)

// oomCase is one row of the race: the asked fill rate in MiB/s (fastest
// for the fastest), and whether the grower goes on through SIGTERM, as a
// container's PID 1 without a handler does, growing through its whole
// grace period: no eviction alone can save the node from that one.
type oomCase struct {
	rate       int
	ignoreTerm bool
}

func (c oomCase) String() string {
	s := strconv.Itoa(c.rate)
	if c.rate == fastest {
		s = "max"
	}
	if c.ignoreTerm {
		s += " ignoring SIGTERM"
	}
	return s
}

// oomTrial is what happened in one race.
type oomTrial struct {
	oomCase
	// achieved is the grower's measured fill rate, MiB/s, from 64 MiB to
	// its peak or 400 MiB.
	achieved float64
	// oomKills counts the kernel's kills in the node during the trial.
	oomKills int
	// lost lists how each pod that did not survive ended, in order:
	// "grower:evicted(grace 1s)", "db:oom-killed".
	lost []string
	// firstLost is the pod that went first ("" if none).
	firstLost string
	// minAvailable is the least memory.available the node reached, from
	// its memory.max_usage_in_bytes.
	minAvailable int64
	// none says the grower was neither evicted nor killed in time.
	none bool
}

// matched reports whether the documented order was kept: the grower went
// first, by eviction, and nothing else was lost.
func (tr oomTrial) matched() bool {
	return len(tr.lost) == 1 && strings.HasPrefix(tr.lost[0], oomGrowerName+":evicted")
}

// TestOOMRace runs the race at each fill rate, with evictd as built and with
// the same binary at the kubelet's cadence, and counts OOM kills.
func TestOOMRace(t *testing.T) {
	requireBench(t)
	trials := envInt(t, trialsEnv, 3)
	configs := pickConfigs(t, oomConfigs)
	cases := oomCases(t)
	loadBefore := loadavg()

	filler := buildFiller(t)
	e := startEnv(t, "", nodesim.Options{Name: "bench-oom", MemoryBytes: oomNodeBytes})
	e.createPriorityClass(t, "bench-high", 1000)
	results := map[string][]oomTrial{}
	version := ""
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			for _, s := range oomOthers {
				e.ensure(t, s)
			}
			// Each race is an eviction in one long pressure episode (the
			// trials come faster than the transition period ends it): the
			// per-episode cap must not be what a trial measures.
			flags := append([]string{memoryHard, "--eviction-max-per-episode=1000"}, cfg.flags...)
			a := startAgent(t, e, "oom-"+cfg.name, flags...)
			version = a.version
			interval := time.Second
			if slices.Contains(cfg.flags, "--housekeeping-interval=10s") {
				interval = 10 * time.Second
			}
			for ci, c := range cases {
				for i := range trials {
					tr := runOOMTrial(t, e, a, filler, c, interval, fmt.Sprintf("%s-%d-%d", oomGrowerName, ci, i))
					t.Logf("%s %s MiB/s trial %d: achieved %.0f MiB/s, OOM kills %d, lost %v, min available %d MiB",
						cfg.name, c, i, tr.achieved, tr.oomKills, tr.lost, tr.minAvailable/mib)
					results[cfg.name] = append(results[cfg.name], tr)
				}
			}
			a.alive(t)
		})
	}

	tab := &Table{
		Title: "OOM race: a pod grows toward the limit of a 1 GiB node with memory.available<300Mi (db, web, batch pods present)\n" +
			fmt.Sprintf("%s; evictd %s; %d trials per rate", machine(loadBefore), version, trials),
		Header: []string{"config", "rate MiB/s", "achieved MiB/s", "trials", "trials with OOM kill", "OOM kills", "grower evicted", "order kept", "min available MiB", "outcomes"},
	}
	kills := map[string]map[oomCase]int{}
	for _, cfg := range configs {
		kills[cfg.name] = map[oomCase]int{}
		for _, rate := range cases {
			var achieved []float64
			var minAvail []int64
			n, withKill, killsSum, evicted, kept := 0, 0, 0, 0, 0
			var outcomes []string
			for _, tr := range results[cfg.name] {
				if tr.oomCase != rate {
					continue
				}
				n++
				achieved = append(achieved, tr.achieved)
				minAvail = append(minAvail, tr.minAvailable/mib)
				killsSum += tr.oomKills
				if tr.oomKills > 0 {
					withKill++
				}
				for _, l := range tr.lost {
					if strings.HasPrefix(l, oomGrowerName+":evicted") {
						evicted++
					}
				}
				if tr.matched() {
					kept++
				}
				o := strings.Join(tr.lost, "+")
				if tr.none {
					o = "nothing happened"
				}
				outcomes = append(outcomes, o)
			}
			kills[cfg.name][rate] = killsSum
			tab.Row(cfg.name, rate, fmt.Sprintf("%.0f", median(achieved)), n, withKill, killsSum, evicted,
				fmt.Sprintf("%d/%d", kept, n), fmt.Sprintf("%d", slices.Min(append(minAvail, 1<<30))), CountSame(outcomes))
		}
	}
	has := func(name string) bool { _, ok := kills[name]; return ok }
	for _, c := range cases {
		base := kills["kubelet-cadence"][c]
		if has("evictd") && has("kubelet-cadence") && !c.ignoreTerm {
			ev := kills["evictd"][c]
			goal := ""
			switch {
			case c.rate != fastest && c.rate <= 300:
				goal = fmt.Sprintf("goal no OOM kill: %s", verdict(ev == 0))
			default:
				goal = fmt.Sprintf("goal far fewer than the baseline: %s", verdict(base > 0 && float64(ev) <= float64(base)/4))
			}
			tab.Notes = append(tab.Notes, fmt.Sprintf("%s MiB/s: OOM kills evictd %d vs kubelet-cadence %d, ratio %s; %s",
				c, ev, base, Ratio(float64(ev), float64(base)), goal))
		}
		if has("evictd-actuator") && has("evictd") {
			act, ev := kills["evictd-actuator"][c], kills["evictd"][c]
			goal := fmt.Sprintf("goal no more than without it: %s", verdict(act <= ev))
			if c.ignoreTerm {
				goal = fmt.Sprintf("goal no OOM kill: %s", verdict(act == 0))
			}
			tab.Notes = append(tab.Notes, fmt.Sprintf("%s MiB/s: OOM kills evictd-actuator %d vs evictd %d, ratio %s; %s",
				c, act, ev, Ratio(float64(act), float64(ev)), goal))
		}
	}
	tab.Notes = append(tab.Notes,
		"order kept = the grower (first in the documented order) went first, by eviction, and no other pod was lost",
		"min available = capacity - (node memory.max_usage_in_bytes - inactive_file), the lowest point of the trial (worst trial shown)",
		"achieved = the grower's measured fill rate from 64 to 400 MiB (median over trials); it allocates with MAP_POPULATE every 10 ms, or at max 8 MiB a call one after the other (--grow-fastest; test/bench/filler, which prints the rate it achieved itself)",
		"ignoring SIGTERM = the grower goes on growing through its grace period until SIGKILL (--ignore-term), as a container's PID 1 without a handler does",
		"'far fewer' is read as at most a quarter of the baseline's kills")
	for _, cfg := range configs {
		tab.Notes = append(tab.Notes, fmt.Sprintf("%s: evictd run %s --eviction-max-per-episode=1000 %s  (%s)", cfg.name, memoryHard, strings.Join(cfg.flags, " "), cfg.about))
	}
	report(t, "oom", tab)
}

// oomCases are the rows of EVICTD_BENCH_RATES: MiB/s or "max", each
// optionally followed by "/ignore-term".
func oomCases(t *testing.T) []oomCase {
	t.Helper()
	s := os.Getenv(ratesEnv)
	if s == "" {
		return []oomCase{{100, false}, {300, false}, {1000, false}, {fastest, false}, {1000, true}, {fastest, true}}
	}
	var out []oomCase
	for _, f := range strings.Split(s, ",") {
		f, ignore := strings.CutSuffix(strings.TrimSpace(f), "/ignore-term")
		c := oomCase{rate: fastest, ignoreTerm: ignore}
		if f != "max" {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want MiB/s rates such as 100,300,1000,max,max/ignore-term", ratesEnv, s)
			}
			c.rate = n
		}
		out = append(out, c)
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// runOOMTrial starts a grower at rate MiB/s and waits until it is evicted or
// killed.
func runOOMTrial(t *testing.T, e *env, a *agent, filler string, c oomCase, interval time.Duration, name string) oomTrial {
	t.Helper()
	a.alive(t)
	others := map[string]*corev1.Pod{}
	for _, s := range oomOthers {
		p, _ := e.ensure(t, s)
		others[s.name] = p
	}
	waitAvailable(t, e, oomThreshold+300*mib, 60*time.Second)
	// Rest, so that evictd's 2 s fill-rate window holds no earlier trial,
	// then start at a random phase of its timer.
	time.Sleep(3*time.Second + jitter(interval))

	tr := oomTrial{oomCase: c}
	if err := os.WriteFile(e.memFile("memory.max_usage_in_bytes"), []byte("0"), 0o644); err != nil {
		t.Fatalf("reset the node's peak usage: %v", err)
	}
	oomBefore := e.node.OOMKills()
	mark := a.logs.Len()
	cmd := []string{filler, fmt.Sprintf("--grow-mib-per-sec=%d", c.rate), fmt.Sprintf("--grow-to-mib=%d", oomGrowToMiB)}
	if c.rate == fastest {
		cmd[1] = "--grow-fastest"
	}
	if c.ignoreTerm {
		cmd = append(cmd, "--ignore-term")
	}
	grower := e.createPod(t, podSpec{name: name, requestMiB: 64, grace: 30, command: cmd})
	defer func() {
		if !e.waitGone(name, 0) {
			e.deletePod(t, name, 0)
		}
	}()
	rateDone := make(chan float64, 1)
	stopRate := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopRate) }) }
	defer stop()
	go func() {
		rateDone <- measureFillRate(e.node.PodMemoryCgroupDir(grower)+"/memory.usage_in_bytes", stopRate)
	}()

	deadline := time.Now().Add(90 * time.Second)
	for {
		tl, ok := e.node.Record(grower.UID)
		if ok && (!tl.DeletionSeen.IsZero() || !tl.OOMKilled.IsZero() || !tl.Exited.IsZero()) {
			break
		}
		if time.Now().After(deadline) {
			tr.none = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Let whatever follows (a second eviction, a late kill) happen.
	time.Sleep(3 * time.Second)
	stop()
	tr.achieved = <-rateDone
	tr.oomKills = e.node.OOMKills() - oomBefore

	peak, err := readInt(e.memFile("memory.max_usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	inactive, err := ReadStatValue(e.memFile("memory.stat"), "total_inactive_file")
	if err != nil {
		t.Fatal(err)
	}
	tr.minAvailable = e.capacity - max(peak-inactive, 0)

	grace := map[string]string{}
	for _, l := range a.logs.Since(mark, MsgIs("evicted pod")) {
		if g, ok := l.Num("gracePeriodSeconds"); ok {
			grace[l.Str("pod")] = fmt.Sprintf("%gs", g)
		}
	}
	type loss struct {
		at   time.Time
		what string
	}
	var losses []loss
	pods := map[string]*corev1.Pod{oomGrowerName: grower}
	for n, p := range others {
		pods[n] = p
	}
	for label, p := range pods {
		tl, ok := e.node.Record(p.UID)
		if !ok {
			continue
		}
		switch {
		case !tl.OOMKilled.IsZero() && (tl.DeletionSeen.IsZero() || tl.OOMKilled.Before(tl.DeletionSeen)):
			what := label + ":oom-killed"
			if !tl.DeletionSeen.IsZero() {
				what += "(during eviction grace)"
			}
			losses = append(losses, loss{tl.OOMKilled, what})
		case !tl.DeletionSeen.IsZero():
			losses = append(losses, loss{tl.DeletionSeen, fmt.Sprintf("%s:evicted(grace %s)", label, grace[p.Namespace+"/"+p.Name])})
		}
	}
	slices.SortFunc(losses, func(a, b loss) int { return a.at.Compare(b.at) })
	for _, l := range losses {
		tr.lost = append(tr.lost, l.what)
	}
	if len(losses) > 0 {
		tr.firstLost, _, _ = strings.Cut(losses[0].what, ":")
	}
	return tr
}

// measureFillRate samples a cgroup's usage every 10 ms until stop and
// returns its growth rate in MiB/s between 64 MiB and the lower of its peak
// and 400 MiB: the part of the growth that decides the race.
func measureFillRate(usagePath string, stop <-chan struct{}) float64 {
	var samples []Sample
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return FillRate(samples, 64*mib, 400*mib) / mib
		case <-tick.C:
			if v, err := readInt(usagePath); err == nil {
				samples = append(samples, Sample{At: time.Now(), Bytes: v})
			}
		}
	}
}
