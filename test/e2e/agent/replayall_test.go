// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/test/e2e/framework"
)

// replayRepeats is how many times each agent's trace is replayed: a replay
// that depended on anything but the trace (the host's clock, map order)
// would not make the same calls each time.
const replayRepeats = 20

// replayOwnTrace: every scenario's agent leaves a trace, and a replay of it
// with the agent's own configuration makes the agent's calls, call for
// call (agent.ReplayCall.Same, with the answers the agent got), each of
// replayRepeats times, and decides each pass with the clock readings the
// agent decided with (issue 48), however the scenario's timing fell. The
// trace is saved from the agent's secure port just before the test stops
// it, as the cluster's admin (evictd trace does the same as a reader:
// TestReplayOfAnE2ERun), and replayed in-process (agent.Replay, which
// evictd replay runs).
func (e *evictd) replayOwnTrace(c *framework.Cluster) {
	t := e.t
	t.Helper()
	switch {
	case t.Failed():
		return // its own failure says more
	case e.ended || e.p.Exited():
		t.Logf("no trace replayed: the agent is gone")
		return
	}
	var addr string
	for _, l := range e.logs() {
		if l.Msg == "evictd starting" {
			addr = l.Str("secureAddress")
		}
	}
	if addr == "" {
		t.Logf("no trace replayed: the agent has not started serving")
		return
	}
	data, err := fetchTrace(addr, c.AdminConfig.BearerToken)
	if err != nil {
		t.Errorf("saving the agent's trace: %v", err)
		return
	}
	start := time.Now()
	var passes, calls int
	for i := range replayRepeats {
		tr, err := trace.Read(bytes.NewReader(data)) // afresh: a replay keeps what it is given
		if err != nil {
			t.Errorf("the agent's trace: %v", err)
			return
		}
		if tr.Header.Dropped > 0 {
			t.Errorf("the agent's trace dropped its %d oldest passes: the scenario outgrew --trace-size, and a replay begins mid-run", tr.Header.Dropped)
			return
		}
		recorded := agent.RecordedCalls(tr)
		o, err := agent.ReplayOptions(tr.Header, "")
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
			t.Errorf("replay %d of %d of the agent's trace (%d passes) does not make the agent's calls:\n%s", i+1, replayRepeats, len(tr.Passes), diff)
			return
		}
		passes, calls = len(tr.Passes), len(recorded)
	}
	t.Logf("replayed the agent's trace (%d passes, %d calls) %d times in %s: the agent's calls each time",
		passes, calls, replayRepeats, time.Since(start).Round(time.Millisecond))
}

// replayDiff says where a replay's calls and clock readings part from the
// recorded agent's ("" when they do not). A call still under way when the
// trace was saved has no recorded answer: the replay's is assumed.
func replayDiff(recorded []agent.ReplayCall, res *agent.ReplayResult) string {
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
	if len(res.Diverged) > 0 {
		fmt.Fprintf(&b, "  passes %v took other clock readings than the agent's\n", res.Diverged)
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
