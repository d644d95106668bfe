// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
)

// replayOptions are `evictd run`'s options for args, completed.
func replayOptions(t *testing.T, args ...string) *options.Options {
	t.Helper()
	o := options.NewOptions()
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
func recordSim(t *testing.T, o *options.Options, pods ...*simPod) (*simNode, *trace.Trace) {
	t.Helper()
	n := newSimNode(t, 4096*mi, base250, pods...)
	return n, recordOn(t, o, n, nil)
}

// recordOn runs the scripted node n under o, recording its trace (through
// wrap's tracer when wrap is set), and returns the trace read back.
func recordOn(t *testing.T, o *options.Options, n *simNode, wrap func(*trace.Recorder) Tracer) *trace.Trace {
	t.Helper()
	rec := NewTrace(o, nil, kubeletplace.View{}, o.Thresholds(), "test", t0)
	n.trace = rec
	if wrap != nil {
		n.trace = wrap(rec)
	}
	rank, err := o.Config.RankOptions()
	if err != nil {
		t.Fatal(err)
	}
	n.run(t, ConfigFor(o, o.Thresholds(), rank), 40*time.Second)
	return readBack(t, rec)
}

// readBack is the trace rec holds, as `evictd replay` reads it.
func readBack(t *testing.T, rec *trace.Recorder) *trace.Trace {
	t.Helper()
	var buf bytes.Buffer
	if _, err := rec.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func callKeys(calls []play.Call) []string {
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
	recorded := play.RecordedCalls(tr)
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
	if got, want := callKeys(res.Calls), callKeys(play.RecordedCalls(tr)); !eq(got, want) {
		t.Errorf("the replay made the calls\n%v\nwant the recorded\n%v", got, want)
	}
}

// A trace saved while a call was under way: the call is the agent's, with
// no answer yet, and the replay makes it too (answering it as accepted).
func TestReplayOfACallUnderWay(t *testing.T) {
	args := []string{"--eviction-hard=memory.available<300Mi", "--eviction-minimum-reclaim=memory.available=1200Mi"}
	_, tr := recordSim(t, replayOptions(t, args...), threePods()...)
	recorded := play.RecordedCalls(tr)
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
	cut := play.RecordedCalls(tr)
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

// wholePods records the trace through a recorder and keeps, pass by pass,
// the whole pod objects the recorder was given (it keeps them pruned).
type wholePods struct {
	*trace.Recorder
	pass  uint64
	whole map[uint64][]*v1.Pod
}

func (w *wholePods) Begin(n, calls uint64, at time.Time, wk trace.Wakeup) {
	w.pass = n
	w.Recorder.Begin(n, calls, at, wk)
}

func (w *wholePods) PodState(pods []*v1.Pod, classes map[string]int32, nsLabels map[string]map[string]string, node *v1.Node) {
	if _, ok := w.whole[w.pass]; !ok {
		w.whole[w.pass] = pods // the sim makes new objects for each list
	}
	w.Recorder.PodState(pods, classes, nsLabels, node)
}

// TestReplayOfPrunedPodsMakesTheWholePodsCalls: a run whose victims depend
// on what the pods carry beyond the figures (an opt-out annotation, a
// sidecar's request), with env values, args and annotations no decision
// reads, replays from its trace (pods pruned) to the calls that the same
// trace with the whole pods, as an older agent wrote it (format 2), replays
// to: the recorded ones, and under another configuration the same as each
// other.
func TestReplayOfPrunedPodsMakesTheWholePodsCalls(t *testing.T) {
	// The sim's namespace may opt out: a's annotation is honoured.
	optOut := filepath.Join(t.TempDir(), "evictd.yaml")
	if err := os.WriteFile(optOut, []byte("apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\noptOut: {namespaces: [ns]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "--config=" + optOut
	args := []string{cfg, "--eviction-hard=memory.available<300Mi", "--eviction-minimum-reclaim=memory.available=1200Mi"}
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	always := v1.ContainerRestartPolicyAlways
	n.dress = func(p *v1.Pod) {
		p.Annotations = map[string]string{"example.com/db-password": "s3cr3t",
			v1.LastAppliedConfigAnnotation: `{"kind":"Pod","spec":{"containers":[{"env":[{"name":"PASSWORD","value":"s3cr3t"}]}]}}`}
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "PASSWORD", Value: "s3cr3t"}}
		p.Spec.Containers[0].Args = []string{"--password=s3cr3t"}
		switch p.Name {
		case "a": // the largest, opted out: never a victim
			p.Annotations[rank.OptOutAnnotation] = "false"
		case "b": // a sidecar's request puts b after c
			p.Spec.InitContainers = []v1.Container{{Name: "proxy", RestartPolicy: &always,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("2000Mi")}}}}
		}
	}
	rec := &wholePods{whole: map[uint64][]*v1.Pod{}}
	pruned := recordOn(t, replayOptions(t, args...), n, func(r *trace.Recorder) Tracer { rec.Recorder = r; return rec })
	if !eq(n.victims(), []string{"c", "b"}) {
		t.Fatalf("the recorded run evicted %v, want c then b (a opted out, b's sidecar request over its usage)", n.victims())
	}

	// The same trace with the whole pods, as a format 2 agent wrote it.
	var old bytes.Buffer
	h := pruned.Header
	h.Format = 2
	enc := json.NewEncoder(&old)
	if err := enc.Encode(map[string]any{"header": h}); err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, p := range pruned.Passes {
		if p.Pods != nil {
			whole, ok := rec.whole[p.N]
			if !ok {
				t.Fatalf("pass %d: no whole pod list kept", p.N)
			}
			for _, pod := range p.Pods.Pods {
				if pod.Spec.Containers[0].Env != nil || len(pod.Annotations) > 1 {
					t.Fatalf("pass %d: the trace holds pod %s whole: %+v", p.N, pod.Name, pod)
				}
			}
			wp := *p.Pods // p is a copy: the pruned trace keeps its own
			wp.Pods = whole
			p.Pods = &wp
			lists++
		}
		if err := enc.Encode(map[string]any{"pass": p}); err != nil {
			t.Fatal(err)
		}
	}
	full, err := trace.Read(&old)
	if err != nil {
		t.Fatalf("the format 2 trace: %v", err)
	}
	if lists == 0 || full.Passes[0].Pods.Pods[0].Spec.Containers[0].Env == nil {
		t.Fatal("the format 2 trace holds no whole pods: this test compares nothing")
	}

	recorded := callKeys(play.RecordedCalls(pruned))
	for i, run := range [][]string{args, {cfg, "--eviction-hard=memory.available<300Mi"}, {cfg, "--eviction-soft=memory.available<400Mi", "--eviction-soft-grace-period=memory.available=5s"}} {
		fromPruned, err := Replay(context.Background(), replayOptions(t, run...), pruned, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		fromWhole, err := Replay(context.Background(), replayOptions(t, run...), full, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		got, want := callKeys(fromPruned.Calls), callKeys(fromWhole.Calls)
		if !eq(got, want) || len(want) == 0 {
			t.Errorf("%v: the pruned pods replay to the calls\n%v\nthe whole pods to\n%v", run, got, want)
		}
		if i == 0 && !eq(got, recorded) {
			t.Errorf("the recorded configuration replays to %v, want the recorded %v", got, recorded)
		}
		t.Logf("%v: %v", run, got)
	}
}
