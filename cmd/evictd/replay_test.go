// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
)

func dispatchArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeTrace writes a trace of one pass on a 1 GiB node with 250Mi
// available and one BestEffort pod using 400Mi, recorded by an agent with
// the flags args and config file content cfg, which made no call (the
// agent's loop records it: its clock readings are an agent's).
func writeTrace(t *testing.T, dir string, args []string, cfg string) string {
	t.Helper()
	return writeTraceOf(t, dir, args, cfg, 250<<20, nil)
}

// writeTraceOf is writeTrace with avail available, its trace edited by
// edit (when set) after the agent's loop recorded it.
func writeTraceOf(t *testing.T, dir string, args []string, cfg string, avail uint64, edit func(*trace.Trace)) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := shownTrace(args, cfg, avail).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	node, err := trace.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	rec := recordAgent(t, node, args)
	buf.Reset()
	if _, err := rec.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.trace")
	if edit == nil {
		writeFile(t, path, buf.String())
		return path
	}
	tr, err := trace.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	edit(tr)
	writeTraceFile(t, path, tr)
	return path
}

// shownTrace is what the node showed in writeTraceOf's pass, as a player
// hands it to the loop: no clock readings, no calls.
func shownTrace(args []string, cfg string, avail uint64) *trace.Recorder {
	at := time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC)
	u := func(v uint64) *uint64 { return &v }
	ts := metav1.NewTime(at)
	obs := &pressure.Observation{Time: at, Summary: &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", Memory: &statsapi.MemoryStats{Time: ts, AvailableBytes: u(avail), WorkingSetBytes: u(1<<30 - avail)}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "hog", Namespace: "shop", UID: "uid-hog"},
			Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: u(400 << 20), UsageBytes: u(400 << 20)}}},
	}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "shop", UID: "uid-hog", ResourceVersion: "7"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0")}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort}}
	shown := trace.NewRecorder(trace.Header{Node: "n1", Started: at, Args: args, Config: cfg}, trace.MinBudget)
	shown.Begin(1, 0, at, trace.Wakeup{Source: "poll", At: at})
	shown.Observed(obs, nil, at, true)
	shown.PodState([]*v1.Pod{pod}, nil, nil, nil)
	shown.End()
	return shown
}

// recordAgent runs the agent's loop, with the configuration node's header
// keeps (its flags args), on the node node's passes show, and returns its
// recorder: the trace an agent would have kept there.
func recordAgent(t *testing.T, node *trace.Trace, args []string) *trace.Recorder {
	t.Helper()
	o, err := options.FromTrace(node.Header, "")
	if err != nil {
		t.Fatal(err)
	}
	o.Args = args
	m, err := metrics.New(buildinfo.Info{})
	if err != nil {
		t.Fatal(err)
	}
	rank, err := o.Config.RankOptions()
	if err != nil {
		t.Fatal(err)
	}
	rec := agent.NewTrace(o, nil, kubeletplace.View{}, o.Thresholds(), "test", node.Passes[0].At)
	p := play.New(node, o.Evict)
	l, err := agent.NewLoop(agent.ConfigFor(o, o.Thresholds(), rank), agent.Deps{Observer: p, Waker: p, Pods: p, Evictor: p,
		Metrics: m, Log: zap.NewNop(), Clock: p.Clock(), Go: p.Launch, Acting: p.Acting, Replay: p, Trace: rec})
	if err != nil {
		t.Fatal(err)
	}
	for i := range node.Passes {
		p.Begin(i)
		l.Step(context.Background(), p.Start())
	}
	p.Finish()
	return rec
}

// writeTraceFile writes tr as a trace file, gzipped JSON lines as an
// agent exports it.
func writeTraceFile(t *testing.T, path string, tr *trace.Trace) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	enc := json.NewEncoder(zw)
	if err := enc.Encode(map[string]any{"header": tr.Header}); err != nil {
		t.Fatal(err)
	}
	for i := range tr.Passes {
		if err := enc.Encode(map[string]any{"pass": &tr.Passes[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b.String())
}

// A replay of a pass the recorded agent made no call in, with a
// configuration whose threshold the pass's figures meet: the replay
// evicts, says the answer is assumed, and lists it as the difference. The
// recorded agent's configuration comes from the trace's header, not from
// the path its --config named.
func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nevictionHard:\n  memory.available: 200Mi\n"
	tr := writeTrace(t, dir, []string{"--node-name=n1", "--kubelet-thresholds=ignore", "--config=/nowhere/config.yaml"}, cfg)

	code, out, errOut := dispatchArgs(t, "replay", "--trace", tr)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"trace: node n1, 1 passes from 2026-11-26T01:02:03.000Z", "replayed with the recorded configuration (memory.available<200Mi",
		"0 eviction call(s)", "the recorded configuration made the recorded agent's 0 call(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay with the trace's own configuration (200Mi, above the 250Mi available: nothing met) prints no %q:\n%s", want, out)
		}
	}

	higher := filepath.Join(dir, "higher.yaml")
	writeFile(t, higher, "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nevictionHard:\n  memory.available: 300Mi\n")
	code, out, errOut = dispatchArgs(t, "replay", "--trace", tr, "--config", higher)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"replayed with " + higher + " (memory.available<300Mi", "1 eviction call(s)",
		"shop/hog  memory.available (hard)  1     evicted (assumed)", "where " + higher + " differs from the recorded agent:",
		"call 1: only with " + higher + ": pass 1 at 2026-11-26T01:02:03.000Z, shop/hog for memory.available (hard), rank 1",
		// Its pass read the clock past the agent's readings: not a divergence.
		"not comparable with the recorded agent in 1 pass(es) (the replay read the clock more or fewer times than the agent: it decided there with times the agent never read): 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay at 300Mi prints no %q:\n%s", want, out)
		}
	}

	code, out, _ = dispatchArgs(t, "replay", "--trace", tr, "--config", higher, "--config", higher)
	if code != exitOK || !strings.Contains(out, higher+" and "+higher+" make the same calls") {
		t.Errorf("two equal configurations: exit %d:\n%s", code, out)
	}
}

func TestReplayAndTraceErrors(t *testing.T) {
	dir := t.TempDir()
	tr := writeTrace(t, dir, []string{"--node-name=n1", "--kubelet-thresholds=ignore"}, "")
	notTrace := filepath.Join(dir, "notes.txt")
	writeFile(t, notTrace, "hello\n")
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nevictionHard:\n  memory.available: lots\n")
	// No agent of this evictd ran with that flag: the trace is the node's
	// figures alone.
	badFlags := filepath.Join(t.TempDir(), "bad-flags.trace")
	var bf bytes.Buffer
	if _, err := shownTrace([]string{"--node-name=n1", "--no-such-flag"}, "", 250<<20).WriteTo(&bf); err != nil {
		t.Fatal(err)
	}
	writeFile(t, badFlags, bf.String())
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"replay without a trace", []string{"replay"}, exitUsage, "give --trace FILE"},
		{"replay with an argument", []string{"replay", "--trace", tr, "extra"}, exitUsage, `unexpected argument "extra"`},
		{"three configurations", []string{"replay", "--trace", tr, "--config", bad, "--config", bad, "--config", bad}, exitUsage, "--config given 3 times"},
		{"bad output", []string{"replay", "--trace", tr, "-o", "yaml"}, exitUsage, `invalid --output (-o) "yaml"`},
		{"missing trace", []string{"replay", "--trace", filepath.Join(dir, "nope")}, exitUsage, "--trace: open"},
		{"not a trace", []string{"replay", "--trace", notTrace}, exitUsage, "trace: line 1: "},
		{"bad config", []string{"replay", "--trace", tr, "--config", bad}, exitUsage, "--config " + bad + ": "},
		{"a trace with flags this evictd lacks", []string{"replay", "--trace", badFlags}, exitFailure, "the trace's flags"},
		{"trace without a node", []string{"trace", "-o", "x"}, exitUsage, "give --node NODE"},
		{"trace without a file", []string{"trace", "--node", "n1"}, exitUsage, "give -o FILE"},
		{"trace with a bad timeout", []string{"trace", "--node", "n1", "-o", "x", "--request-timeout", "0s"}, exitUsage, "invalid --request-timeout 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := dispatchArgs(t, tc.args...)
			if code != tc.wantCode || out != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, tc.wantCode)
			}
			if !strings.Contains(errOut, tc.wantErr) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr = %q, want one line containing %q", errOut, tc.wantErr)
			}
		})
	}
}

// A replay with the recorded configuration that does otherwise than the
// agent did with what the agent had diverged: here the trace was edited
// after the agent's loop recorded it (150Mi available where the agent saw
// 250Mi, under its 200Mi), so the replay evicts where the agent made no
// call. It says which pass, what the agent did and what the replay did,
// and exits 1 with one line naming it. The same edit in a trace of format
// 4, which keeps no image collection thresholds of the start, is not a
// divergence: the replay placed with the kubelet's defaults instead,
// says so, and calls the pass not comparable.
func TestReplayCommandDiverged(t *testing.T) {
	cfg := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nevictionHard:\n  memory.available: 200Mi\n"
	args := []string{"--node-name=n1", "--kubelet-thresholds=ignore"}
	lower := func(tr *trace.Trace) {
		v := uint64(150 << 20)
		tr.Passes[0].Observation.Summary.Node.Memory.AvailableBytes = &v
	}
	edited := writeTraceOf(t, t.TempDir(), args, cfg, 250<<20, lower)
	code, out, errOut := dispatchArgs(t, "replay", "--trace", edited)
	if code != exitFailure || errOut != "evictd replay: the replay with the recorded configuration diverged from the recorded agent in 1 pass(es), first in pass 1\n" {
		t.Errorf("exit %d, stderr %q; want 1 and one line naming the divergence", code, errOut)
	}
	for _, want := range []string{"DIVERGED from the recorded agent in 1 pass(es):",
		"  pass 1: the agent made no call, read the clock ",
		"; the replay called for shop/hog (memory.available, hard, rank 1: usage 400Mi exceeds request 0, priority 0), read the clock "} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay of the edited trace prints no %q:\n%s", want, out)
		}
	}

	// The agent placed above the kubelet's memory.available<100Mi, and the
	// trace is format 4's.
	old := writeTraceOf(t, t.TempDir(), []string{"--node-name=n1"}, cfg, 250<<20, func(tr *trace.Trace) {
		lower(tr)
		tr.Header.Format, tr.Header.Start = 4, nil
		tr.Header.KubeletHard = map[string]string{"memory.available": "100Mi"}
	})
	code, out, errOut = dispatchArgs(t, "replay", "--trace", old)
	if code != exitOK || errOut != "evictd replay: warning: trace format 4 does not keep everything the agent read (\"not in the trace\"): 1 pass(es) done otherwise are not comparable\n" || strings.Count(errOut, "\n") != 1 {
		t.Errorf("a format 4 trace: exit %d, stderr %q; want 0 and one warning line", code, errOut)
	}
	for _, want := range []string{
		"not in the trace: the kubelet's image collection thresholds at start (trace format 4 keeps none): the replay bounds the disk thresholds with the kubelet's defaults, 85% and 80%",
		"not in the trace: the thresholds the agent started with (trace format 4 keeps none)",
		"not comparable with the recorded agent in 1 pass(es) (the trace does not keep everything the agent read: what the replay did otherwise may come of what it took instead): 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay of the format 4 trace prints no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "DIVERGED") {
		t.Errorf("the replay of the format 4 trace calls a pass diverged:\n%s", out)
	}
}
