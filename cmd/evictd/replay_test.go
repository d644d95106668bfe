// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/trace"
)

func dispatchArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeTrace writes a trace of one pass on a 1 GiB node with 250Mi
// available and one BestEffort pod using 400Mi, recorded by an agent with
// the flags args and config file content cfg, which made no call.
func writeTrace(t *testing.T, dir string, args []string, cfg string) string {
	t.Helper()
	at := time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC)
	u := func(v uint64) *uint64 { return &v }
	ts := metav1.NewTime(at)
	obs := &pressure.Observation{Time: at, Summary: &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", Memory: &statsapi.MemoryStats{Time: ts, AvailableBytes: u(250 << 20), WorkingSetBytes: u(774 << 20)}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "hog", Namespace: "shop", UID: "uid-hog"},
			Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: u(400 << 20), UsageBytes: u(400 << 20)}}},
	}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "shop", UID: "uid-hog", ResourceVersion: "7"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0")}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort}}
	rec := trace.NewRecorder(trace.Header{Node: "n1", Started: at, Args: args, Config: cfg}, trace.MinBudget)
	rec.Begin(1, 0, at, trace.Wakeup{Source: "poll", At: at})
	rec.Observed(obs, nil, at, true)
	rec.PodState([]*v1.Pod{pod}, nil, nil, nil)
	rec.End()
	path := filepath.Join(dir, "node.trace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
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
		"call 1: only with " + higher + ": pass 1 at 2026-11-26T01:02:03.000Z, shop/hog for memory.available (hard), rank 1"} {
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
	badFlags := writeTrace(t, t.TempDir(), []string{"--node-name=n1", "--no-such-flag"}, "")
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
