// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// replayOptions are `evictd run`'s options for args, completed.
func replayOptions(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	s := &cliflag.Sections{}
	o.AddFlags(s)
	if err := s.FlagSet("run").Parse(append([]string{"--node-name=sim", "--kubelet-thresholds=ignore"}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	return o
}

// recordSim runs threePods on the scripted node under o, recording its
// trace, and returns the trace read back.
func recordSim(t *testing.T, o *Options, pods ...*simPod) (*simNode, *trace.Trace) {
	t.Helper()
	n := newSimNode(t, 4096*mi, base250, pods...)
	rec := newTrace(o, nil, nil, "test", t0)
	n.trace = rec
	rank, err := o.Config.RankOptions()
	if err != nil {
		t.Fatal(err)
	}
	n.run(t, loopConfig(o, configThresholds(o), rank), 40*time.Second)
	var buf bytes.Buffer
	if _, err := rec.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return n, tr
}

func callKeys(calls []ReplayCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, fmt.Sprintf("pass %d %s rank %d %s", c.Pass, c.Pod, c.Rank, c.Reason))
	}
	return out
}

// TestReplayReproducesTheRecordedDecisions: a scripted run that evicts two
// pods one after the other (the second while the first is in flight, its
// answer taken in the pass that made it, its deletion later) replays to the
// same calls, pass for pass, with the same reasons; a replay under another
// threshold changes them as the trace's figures predict.
func TestReplayReproducesTheRecordedDecisions(t *testing.T) {
	args := []string{"--eviction-hard=memory.available<300Mi", "--eviction-minimum-reclaim=memory.available=1200Mi"}
	n, tr := recordSim(t, replayOptions(t, args...), threePods()...)
	if !eq(n.victims(), []string{"a", "b"}) {
		t.Fatalf("the recorded run evicted %v, want a then b", n.victims())
	}
	recorded := RecordedCalls(tr)
	if len(recorded) != 2 || recorded[0].Pod != "ns/a" || recorded[1].Pod != "ns/b" || recorded[1].Pass <= recorded[0].Pass {
		t.Fatalf("the trace holds the calls %v, want a then b in a later pass", callKeys(recorded))
	}
	var deletions int
	for _, p := range tr.Passes {
		deletions += len(p.Deleted)
	}
	if deletions == 0 {
		t.Fatal("the trace holds no pod deletion: the replay of in-flight pods going is not exercised")
	}

	res, err := Replay(context.Background(), replayOptions(t, args...), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := callKeys(res.Calls), callKeys(recorded); !eq(got, want) {
		t.Fatalf("the replay made the calls\n%v\nwant the recorded\n%v", got, want)
	}
	for i, c := range res.Calls {
		if !c.Same(recorded[i]) || !c.Recorded {
			t.Errorf("call %d: %+v, want the recorded %+v, answered from the trace", i, c, recorded[i])
		}
	}

	// memory.available never fell under 250Mi: at 200Mi nothing is met.
	res, err = Replay(context.Background(), replayOptions(t, "--eviction-hard=memory.available<200Mi", "--eviction-minimum-reclaim=memory.available=1200Mi"), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 0 {
		t.Errorf("at memory.available<200Mi the replay made the calls %v, want none", callKeys(res.Calls))
	}
	// Without the minimum reclaim, a alone covers the need (300Mi-250Mi).
	res, err = Replay(context.Background(), replayOptions(t, "--eviction-hard=memory.available<300Mi"), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 1 || res.Calls[0].Pod != "ns/a" || !res.Calls[0].Same(recorded[0]) {
		t.Errorf("without the minimum reclaim the replay made the calls %v, want a's alone, as recorded", callKeys(res.Calls))
	}
}

// The trace holds no container's memory.events: a replay with the
// memory.high family on leaves it out, and says so, rather than read the
// counters of the host it runs on.
func TestReplayLeavesTheMemoryHighFamilyOut(t *testing.T) {
	args := []string{"--eviction-hard=memory.available<300Mi", "--eviction-minimum-reclaim=memory.available=1200Mi"}
	_, tr := recordSim(t, replayOptions(t, args...), threePods()...)
	res, err := Replay(context.Background(), replayOptions(t, append(args, "--memory-high-eviction")...), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range res.Thresholds {
		if strings.Contains(th, string(thresholds.MemoryHighStuck)) {
			t.Errorf("the replay ran the threshold %s", th)
		}
	}
	if len(res.Left) != 1 || !strings.HasPrefix(res.Left[0], string(thresholds.MemoryHighStuck)+": ") {
		t.Errorf("left out %q; want memory.highStuck, with why", res.Left)
	}
	if got, want := callKeys(res.Calls), callKeys(RecordedCalls(tr)); !eq(got, want) {
		t.Errorf("the replay made the calls\n%v\nwant the recorded\n%v", got, want)
	}
}

// A trace saved while a call was under way: the call is the agent's, with
// no answer yet, and the replay makes it too (answering it as accepted).
func TestReplayOfACallUnderWay(t *testing.T) {
	args := []string{"--eviction-hard=memory.available<300Mi", "--eviction-minimum-reclaim=memory.available=1200Mi"}
	_, tr := recordSim(t, replayOptions(t, args...), threePods()...)
	recorded := RecordedCalls(tr)
	if len(recorded) != 2 {
		t.Fatalf("recorded %v", callKeys(recorded))
	}
	// Cut the trace at the pass that made the second call, before its answer.
	for i, p := range tr.Passes {
		if p.N == recorded[1].Pass {
			tr.Passes = tr.Passes[:i+1]
			tr.Passes[i].Drains = nil
			break
		}
	}
	cut := RecordedCalls(tr)
	if len(cut) != 2 || cut[1].Result != "" || !cut[1].Same(recorded[1]) || cut[0].Result != "evicted" {
		t.Fatalf("the cut trace's calls %+v, want the second under way", cut)
	}
	res, err := Replay(context.Background(), replayOptions(t, args...), tr, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Calls) != 2 || !res.Calls[0].Recorded || res.Calls[1].Recorded || !res.Calls[1].Same(cut[1]) {
		t.Errorf("the replay made %+v; want both calls, the second answered as assumed", res.Calls)
	}
}
