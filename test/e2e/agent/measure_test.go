// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/test/nodesim"
)

// sample is one reading of an amount available to the node.
type sample struct {
	at        time.Time
	available int64
}

// sampler reads what is available on the node every interval, from the same
// kernel files evictd reads, so that the test knows independently when a
// threshold was crossed.
type sampler struct {
	read    func() (int64, error)
	stopCh  chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []sample
	err     error
}

func startSampler(t *testing.T, every time.Duration, read func() (int64, error)) *sampler {
	s := &sampler{read: read, stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			v, err := read()
			now := time.Now()
			s.mu.Lock()
			if err != nil {
				if s.err == nil {
					s.err = err
				}
			} else {
				s.samples = append(s.samples, sample{at: now, available: v})
			}
			s.mu.Unlock()
			select {
			case <-s.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *sampler) stop() {
	select {
	case <-s.stopCh:
	default:
		close(s.stopCh)
	}
	<-s.done
}

// crossing is the first downward crossing of threshold at or after from: a
// sample below it whose predecessor was not. Pressure that was already there
// at from is not a crossing.
func (s *sampler) crossing(from time.Time, threshold int64) (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 1; i < len(s.samples); i++ {
		x := s.samples[i]
		if !x.at.Before(from) && x.available < threshold && s.samples[i-1].available >= threshold {
			return x, true
		}
	}
	return sample{}, false
}

// recovery is the first sample at or after from at or above threshold.
func (s *sampler) recovery(from time.Time, threshold int64) (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.samples {
		if !x.at.Before(from) && x.available >= threshold {
			return x, true
		}
	}
	return sample{}, false
}

// projectedCrossing extrapolates when available would have crossed
// threshold, from a least-squares line through the samples of the window
// before at; ok is false unless available was falling then.
func (s *sampler) projectedCrossing(at time.Time, window time.Duration, threshold int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var xs, ys []float64
	for _, x := range s.samples {
		if x.at.After(at.Add(-window)) && !x.at.After(at) {
			xs = append(xs, x.at.Sub(at).Seconds())
			ys = append(ys, float64(x.available))
		}
	}
	if len(xs) < 10 {
		return time.Time{}, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return time.Time{}, false
	}
	slope := sxy / sxx // bytes per second
	if slope > -float64(mib) {
		return time.Time{}, false // not falling by at least 1 MiB/s: no crossing ahead
	}
	atZero := my - slope*mx // the line's value at time at
	secs := (atZero - float64(threshold)) / -slope
	return at.Add(time.Duration(secs * float64(time.Second))), true
}

// min is the lowest reading at or after from.
func (s *sampler) min(from time.Time) (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m sample
	ok := false
	for _, x := range s.samples {
		if !x.at.Before(from) && (!ok || x.available < m.available) {
			m, ok = x, true
		}
	}
	return m, ok
}

// peak is the highest reading at or after from and before to.
func (s *sampler) peak(from, to time.Time) (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m sample
	ok := false
	for _, x := range s.samples {
		if !x.at.Before(from) && x.at.Before(to) && (!ok || x.available > m.available) {
			m, ok = x, true
		}
	}
	return m, ok
}

// last is the latest reading.
func (s *sampler) last() (sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return sample{}, fmt.Errorf("no sample taken (first error: %v)", s.err)
	}
	return s.samples[len(s.samples)-1], nil
}

// logBaseline logs what the node and each pod use before the test makes
// pressure, so that a failure can be told apart from a mis-sized workload.
func logBaseline(t *testing.T, node *nodesim.Node, avail *sampler, pods []*corev1.Pod) {
	t.Helper()
	var b strings.Builder
	if s, err := avail.last(); err == nil {
		fmt.Fprintf(&b, "baseline: memory.available %d MiB", s.available/mib)
	}
	for _, p := range pods {
		if ws, err := workingSet(node.PodMemoryCgroupDir(p)); err == nil {
			fmt.Fprintf(&b, ", %s %d MiB", p.Name, ws/mib)
		}
	}
	t.Log(b.String())
}

func mapValues[K comparable, V any](m map[K]V) []V {
	var out []V
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// memoryAvailable reads the node's memory.available as the kubelet defines
// it for a node cgroup: limit − (usage − inactive_file).
func memoryAvailable(node *nodesim.Node, capacity int64) func() (int64, error) {
	dir := node.MemoryCgroupDir()
	return func() (int64, error) {
		ws, err := workingSet(dir)
		if err != nil {
			return 0, err
		}
		return capacity - ws, nil
	}
}

// workingSet is a memory cgroup's usage minus its inactive file pages, in
// the host's cgroup version's files.
func workingSet(dir string) (int64, error) {
	usage, err := cgrouptest.ReadInt(filepath.Join(dir, cgrouptest.UsageFile))
	if err != nil {
		return 0, err
	}
	inactive, err := memoryStat(dir, cgrouptest.StatInactiveFile)
	if err != nil {
		return 0, err
	}
	return max(usage-inactive, 0), nil
}

// memoryStat reads one counter of a memory cgroup's memory.stat; 0 when
// the file has no such line.
func memoryStat(dir, key string) (int64, error) {
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s/memory.stat: %q: %w", dir, line, err)
			}
			return n, nil
		}
	}
	return 0, nil
}

// fsAvailable reads the free bytes (for unprivileged users, as the kubelet
// reports) of the filesystem holding path.
func fsAvailable(path string) func() (int64, error) {
	return func() (int64, error) {
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil {
			return 0, fmt.Errorf("statfs %s: %w", path, err)
		}
		return int64(st.Bavail) * st.Bsize, nil
	}
}

// figureBook collects what the tests measured, for the summary TestMain
// prints: time from a threshold crossing to evictd's eviction, and evictd's
// resource use per test.
type figureBook struct {
	mu        sync.Mutex
	latencies []latency
	runs      []run
}

type latency struct {
	test, what string
	// d is the time from the threshold crossing to the eviction; negative
	// when evictd evicted before a crossing it predicted (--act-early), the
	// crossing then being projected from the fill rate (projected).
	d         time.Duration
	projected bool
	// counted says whether the figure goes into the median and max: a soft
	// threshold's wait is its grace period and an API outage's is the
	// outage, not evictd's reaction time.
	counted bool
}

type run struct {
	test string
	u    usage
}

var figures = &figureBook{}

func (b *figureBook) addLatency(t *testing.T, l latency) {
	l.test = t.Name()
	t.Logf("pressure to eviction: %s", l)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.latencies = append(b.latencies, l)
}

func (l latency) String() string {
	switch {
	case l.projected:
		return fmt.Sprintf("%s: evicted %s before the projected crossing", l.what, (-l.d).Round(time.Millisecond))
	default:
		return fmt.Sprintf("%s: evicted %s after the measured crossing", l.what, l.d.Round(time.Millisecond))
	}
}

func (b *figureBook) addRun(test string, u usage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs = append(b.runs, run{test: test, u: u})
}

// summary is the figures as text, or "" when nothing was measured.
func (b *figureBook) summary() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.latencies) == 0 && len(b.runs) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("evictd e2e figures\n")
	var reaction, lead []time.Duration
	for _, l := range b.latencies {
		mark := ""
		switch {
		case !l.counted:
			mark = " (not in median/max)"
		case l.projected:
			lead = append(lead, -l.d)
		default:
			reaction = append(reaction, l.d)
		}
		fmt.Fprintf(&sb, "  %-28s %s%s\n", l.test, l, mark)
	}
	for _, f := range []struct {
		what string
		ds   []time.Duration
	}{
		{"threshold crossed → evicted", reaction},
		{"evicted ahead of the projected crossing (--act-early) by", lead},
	} {
		if len(f.ds) == 0 {
			continue
		}
		slices.Sort(f.ds)
		fmt.Fprintf(&sb, "  %s: median %s, max %s, min %s over %d evictions\n", f.what,
			median(f.ds).Round(time.Millisecond), f.ds[len(f.ds)-1].Round(time.Millisecond), f.ds[0].Round(time.Millisecond), len(f.ds))
	}
	var peak, cpu float64
	var wall time.Duration
	for _, r := range b.runs {
		fmt.Fprintf(&sb, "  evictd %-40s peak RSS %6.1f MiB, mean RSS %6.1f MiB, CPU %6.2f s in %7s (%4.1f%% of a core)\n",
			r.test, r.u.peakRSS/mib, r.u.meanRSS/mib, r.u.cpu.Seconds(), r.u.wall.Round(time.Second), 100*r.u.cpu.Seconds()/r.u.wall.Seconds())
		peak = max(peak, r.u.peakRSS)
		cpu += r.u.cpu.Seconds()
		wall += r.u.wall
	}
	if len(b.runs) > 0 {
		fmt.Fprintf(&sb, "  evictd overall: peak RSS %.1f MiB, CPU %.2f s in %s (%.1f%% of a core)\n",
			peak/mib, cpu, wall.Round(time.Second), 100*cpu/wall.Seconds())
	}
	return sb.String()
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func TestMain(m *testing.M) {
	code := m.Run()
	if s := figures.summary(); s != "" {
		fmt.Print(s)
	}
	os.Exit(code)
}
