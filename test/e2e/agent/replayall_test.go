// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
	"github.com/evictd/evictd/test/e2e/framework"
)

// ReplayRepeatsEnv sets how many times each agent's trace is replayed
// (default 20): a replay that depended on anything but the trace (the
// host's clock, map order) would not make the same calls each time. Under
// the VM's emulation (hack/vm/host-v2.sh sets 1) a replay of a large trace
// takes a minute where the host takes a quarter of a second: the host's
// run holds the repeats, the guest's the cgroup v2 trace replayed once.
const ReplayRepeatsEnv = "EVICTD_E2E_REPLAY_REPEATS"

// replayRepeats is ReplayRepeatsEnv's count, or 20.
func replayRepeats() (int, error) {
	v := os.Getenv(ReplayRepeatsEnv)
	if v == "" {
		return 20, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a count of 1 or more", ReplayRepeatsEnv, v)
	}
	return n, nil
}

// ownTrace and replayTrace: every scenario's agent leaves a trace, and a replay of it
// with the agent's own configuration makes the agent's calls, call for
// call (play.Call.Same, with the answers the agent got), each of
// replayRepeats times, and decides each pass with the clock readings the
// agent decided with (issue 48), however the scenario's timing fell. The
// trace is saved from the agent's secure port just before the test stops
// it, as the cluster's admin (evictd trace does the same as a reader:
// TestReplayOfAnE2ERun: ownTrace), and replayed in-process once the agent
// has stopped (agent.Replay, which evictd replay runs: replayTrace), so
// that the replays do not share the CPU with an agent still at work.
func (e *evictd) ownTrace(c *framework.Cluster) []byte {
	t := e.t
	t.Helper()
	switch {
	case t.Failed():
		return nil // its own failure says more
	case e.ended || e.p.Exited():
		t.Logf("no trace replayed: the agent is gone")
		return nil
	}
	var addr string
	for _, l := range e.logs() {
		if l.Msg == "evictd starting" {
			addr = l.Str("secureAddress")
		}
	}
	if addr == "" {
		t.Logf("no trace replayed: the agent has not started serving")
		return nil
	}
	data, err := fetchTrace(addr, c.AdminConfig.BearerToken)
	if err != nil {
		t.Errorf("saving the agent's trace: %v", err)
		return nil
	}
	return data
}

// replayTrace replays data, the agent's trace ownTrace saved, replayRepeats
// times; nothing when there is none.
func (e *evictd) replayTrace(data []byte) {
	t := e.t
	t.Helper()
	if data == nil {
		return
	}
	repeats, err := replayRepeats()
	if err != nil {
		t.Error(err)
		return
	}
	start := time.Now()
	var passes, calls int
	for i := range repeats {
		tr, err := trace.Read(bytes.NewReader(data)) // afresh: a replay keeps what it is given
		if err != nil {
			t.Errorf("the agent's trace: %v", err)
			return
		}
		if len(tr.Passes) == 0 {
			// A test that ends as soon as the agent serves (its informers'
			// requests, its secure port) can stop it before its first pass:
			// there is nothing to replay, and nothing replayed to compare.
			t.Logf("no trace replayed: the agent made no pass before the test ended")
			return
		}
		if tr.Header.Dropped > 0 {
			t.Errorf("the agent's trace dropped its %d oldest passes: the scenario outgrew --trace-size, and a replay begins mid-run", tr.Header.Dropped)
			return
		}
		recorded := play.RecordedCalls(tr)
		o, err := options.FromTrace(tr.Header, "")
		if err != nil {
			t.Errorf("the trace's options: %v", err)
			return
		}
		res, err := agent.Replay(context.Background(), o, tr, nil)
		if err != nil {
			t.Errorf("replay %d of the agent's trace: %v", i+1, err)
			return
		}
		if diff := replayDiff(recorded, res); diff != "" {
			t.Errorf("replay %d of %d of the agent's trace (%d passes) does not make the agent's calls:\n%s", i+1, repeats, len(tr.Passes), diff)
			return
		}
		passes, calls = len(tr.Passes), len(recorded)
	}
	t.Logf("replayed the agent's trace (%d passes, %d calls) %d times in %s: the agent's calls each time",
		passes, calls, repeats, time.Since(start).Round(time.Millisecond))
}

// replayDiff says where a replay's calls and clock readings part from the
// recorded agent's ("" when they do not). A call still under way when the
// trace was saved has no recorded answer: the replay's is assumed.
func replayDiff(recorded []play.Call, res *agent.ReplayResult) string {
	var b strings.Builder
	for i := range max(len(recorded), len(res.Calls)) {
		switch {
		case i >= len(recorded):
			fmt.Fprintf(&b, "  call %d: only the replay's: %+v\n", i+1, res.Calls[i])
		case i >= len(res.Calls):
			fmt.Fprintf(&b, "  call %d: only the agent's: %+v\n", i+1, recorded[i])
		case !res.Calls[i].Same(recorded[i]) || (recorded[i].Result != "" && (!res.Calls[i].Recorded || res.Calls[i].Result != recorded[i].Result)):
			fmt.Fprintf(&b, "  call %d: the replay's %+v\n    the agent's %+v\n", i+1, res.Calls[i], recorded[i])
		}
	}
	if d := res.Differ; len(d) > 0 {
		fmt.Fprintf(&b, "  %d passes the replay did otherwise than the agent (thresholds, calls or clock readings): %+v", len(d), d[:min(len(d), 10)])
		if len(d) > 10 {
			b.WriteString(" ...")
		}
		b.WriteString("\n")
	}
	if b.Len() > 0 && len(res.Left) > 0 {
		fmt.Fprintf(&b, "  not replayed: %s\n", strings.Join(res.Left, "; "))
	}
	return b.String()
}

// fetchTrace is GET /trace on the agent's secure port.
func fetchTrace(addr, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/trace", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, trace.MaxBudget+1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /trace answered %d: %s", resp.StatusCode, firstLines(string(b), 3))
	}
	return b, nil
}

// busyCore puts the agent (pid, each of its threads, and so the threads
// they start) and a CPU burner on one core for the rest of the test: the
// scheduler cuts the agent's passes wherever its timeslices end, so the
// time between a pass's observation and its decisions varies as on a
// loaded node. It returns the core.
func busyCore(t *testing.T, pid int) int {
	t.Helper()
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &allowed); err != nil {
		t.Fatalf("the agent's CPUs: %v", err)
	}
	cpu := -1
	for i := range 1024 {
		if allowed.IsSet(i) {
			cpu = i
			break
		}
	}
	if cpu < 0 {
		t.Fatal("the agent may run on no CPU")
	}
	var one unix.CPUSet
	one.Set(cpu)
	burner := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := burner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = burner.Process.Kill()
		_ = burner.Wait()
	})
	pin := func(tid int) {
		if err := unix.SchedSetaffinity(tid, &one); err != nil && err != unix.ESRCH {
			t.Fatalf("pinning thread %d to CPU %d: %v", tid, cpu, err)
		}
	}
	pin(burner.Process.Pid)
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			t.Fatalf("/proc/%d/task/%s: not a thread", pid, task.Name())
		}
		pin(tid)
	}
	return cpu
}

// slowestDecision is the longest a pass of tr took from its observation to
// its last clock reading, and that pass.
func slowestDecision(tr *trace.Trace) (time.Duration, uint64) {
	var most time.Duration
	var pass uint64
	for _, p := range tr.Passes {
		r := p.ReadingTimes()
		if len(r) == 0 || p.ObservedAt.IsZero() {
			continue
		}
		if d := r[len(r)-1].Sub(p.ObservedAt); d > most {
			most, pass = d, p.N
		}
	}
	return most, pass
}

// TestReplayRepeatsEnv: EVICTD_E2E_REPLAY_REPEATS sets how many times each
// agent's trace is replayed (20 without it); a value that is no count of 1
// or more is an error naming it.
func TestReplayRepeatsEnv(t *testing.T) {
	for v, want := range map[string]int{"": 20, "1": 1, "3": 3} {
		t.Setenv(ReplayRepeatsEnv, v)
		if got, err := replayRepeats(); err != nil || got != want {
			t.Errorf("%s=%q: %d, %v; want %d", ReplayRepeatsEnv, v, got, err, want)
		}
	}
	for _, v := range []string{"0", "-2", "twenty", "2.5"} {
		t.Setenv(ReplayRepeatsEnv, v)
		if _, err := replayRepeats(); err == nil || !strings.Contains(err.Error(), `"`+v+`"`) {
			t.Errorf("%s=%q: error %v; want one naming the value", ReplayRepeatsEnv, v, err)
		}
	}
}
