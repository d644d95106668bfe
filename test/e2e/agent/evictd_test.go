// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/test/e2e/agent/evictdproc"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// evictd is `evictd run` as a real process (see package evictdproc): the
// built binary with only its ServiceAccount's kubeconfig, pointed at a
// simulated node, with helpers that fail the test.
type evictd struct {
	t     *testing.T
	p     *evictdproc.Process
	usage *usageSampler
	// ended: the test stopped or killed the process itself and checked
	// how; the cleanup's stop has nothing left to check.
	ended bool
}

// logEntry is one line of evictd's JSON log.
type logEntry = evictdproc.Entry

// stopGrace is how long evictd gets to stop on SIGTERM before the test calls
// its shutdown a failure (it flushes Events for up to 5 s).
const stopGrace = 15 * time.Second

// startEvictd starts evictd against node with the given extra flags and waits
// until /readyz answers 200. Thresholds come from extra. It is stopped with
// SIGTERM in t.Cleanup, which also checks that it stopped cleanly.
func startEvictd(t *testing.T, c *framework.Cluster, node *nodesim.Node, extra ...string) *evictd {
	t.Helper()
	return startEvictdWith(t, c, node, evictdSetup{}, extra...)
}

// stop sends SIGTERM and checks that evictd stopped by itself, with exit
// code 0 and its last log line `stopped`, as docs/run.md promises. It
// records evictd's resource use for the figures.
func (e *evictd) stop() {
	t := e.t
	if e.ended {
		e.usage.stop()
		return
	}
	exitedEarly := e.p.Exited()
	u := e.usage.stop()
	killed, code, err := e.p.Stop(stopGrace)
	switch {
	case exitedEarly:
		t.Errorf("evictd exited before the test stopped it:\n%s", e.p.Tail(30))
	case killed:
		t.Errorf("evictd did not stop within %s of SIGTERM and was killed", stopGrace)
	case err != nil:
		t.Errorf("evictd: %v", err)
	case code != 0:
		t.Errorf("evictd exited with code %d after SIGTERM, want 0", code)
	}
	figures.addRun(t.Name(), u)
	t.Logf("evictd resources: peak RSS %.1f MiB, mean RSS %.1f MiB, CPU %.2f s over %s (%.1f%% of one core)",
		u.peakRSS/mib, u.meanRSS/mib, u.cpu.Seconds(), u.wall.Round(time.Millisecond), 100*u.cpu.Seconds()/u.wall.Seconds())
	lines := e.logs()
	if len(lines) == 0 || lines[len(lines)-1].Msg != "stopped" {
		t.Errorf("evictd's last log line is not \"stopped\":\n%s", e.p.Tail(5))
	}
	for _, l := range lines {
		switch l.Level {
		case "panic", "dpanic", "fatal", "unparsed":
			t.Errorf("evictd wrote a %s line: %s", l.Level, l.Raw)
		}
	}
}

// kill sends SIGKILL and waits for the process to go, as an agent dies
// mid-episode: no exit work runs, so what it put on the cluster stays
// behind. The cleanup's stop has nothing left to check.
func (e *evictd) kill() {
	e.t.Helper()
	if err := syscall.Kill(e.p.Pid(), syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	e.ended = true
	for !e.p.Exited() {
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether the process is still running.
func (e *evictd) alive() bool { return !e.p.Exited() }

func (e *evictd) get(ctx context.Context, path string) int { return e.p.Get(ctx, path) }

func (e *evictd) tail(n int) string { return e.p.Tail(n) }

// logs parses every line evictd has written so far.
func (e *evictd) logs() []logEntry {
	l, err := e.p.Logs()
	if err != nil {
		e.t.Fatalf("read evictd log: %v", err)
	}
	return l
}

// find returns the log entries with message msg.
func (e *evictd) find(msg string) []logEntry {
	var out []logEntry
	for _, l := range e.logs() {
		if l.Msg == msg {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits until a log entry with message msg satisfies cond (nil: any).
func (e *evictd) waitLog(timeout time.Duration, msg string, cond func(logEntry) bool) logEntry {
	e.t.Helper()
	var found logEntry
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, l := range e.find(msg) {
			if cond == nil || cond(l) {
				found = l
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("evictd never logged %q (matching the test's condition) within %s; log tail:\n%s", msg, timeout, e.tail(30))
	}
	return found
}

// scrape reads /metrics.
func (e *evictd) scrape() evictdproc.Metrics {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := e.p.Scrape(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// healthy reports whether /healthz answers 200.
func (e *evictd) healthy(ctx context.Context) bool { return e.get(ctx, "/healthz") == http.StatusOK }

// usage is what evictd cost while it ran.
type usage struct {
	peakRSS, meanRSS float64 // bytes
	cpu              time.Duration
	wall             time.Duration
}

// usageSampler reads a process's resident set and CPU time at an interval.
type usageSampler struct {
	pid      int
	start    time.Time
	stopOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	rss      []float64
	lastCPU  time.Duration
	lastSeen time.Time
}

func startUsageSampler(pid int, every time.Duration) *usageSampler {
	s := &usageSampler{pid: pid, start: time.Now(), stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if u, err := evictdproc.ReadUsage("/proc", s.pid); err == nil {
				s.mu.Lock()
				s.rss = append(s.rss, u.RSS)
				s.lastCPU, s.lastSeen = u.CPU, time.Now()
				s.mu.Unlock()
			}
			select {
			case <-s.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends sampling and sums up; call it before the process is stopped, so
// that the last sample is one taken while it ran.
func (s *usageSampler) stop() usage {
	s.stopOnce.Do(func() { close(s.stopCh) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	u := usage{cpu: s.lastCPU, wall: s.lastSeen.Sub(s.start)}
	for _, r := range s.rss {
		u.peakRSS = max(u.peakRSS, r)
		u.meanRSS += r
	}
	if len(s.rss) > 0 {
		u.meanRSS /= float64(len(s.rss))
	}
	return u
}

// pollFind polls list every 20 ms until an item cond accepts shows, and
// returns it; an error once timeout has passed without one.
func pollFind[T any](timeout time.Duration, list func() []T, cond func(T) bool) (T, error) {
	var found T
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, x := range list() {
			if cond(x) {
				found = x
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}
