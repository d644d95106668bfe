// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
	"github.com/evictd/evictd/test/e2e/framework"
)

// replayOutput is what `evictd replay -o json` prints.
type replayOutput struct {
	Recorded []play.Call `json:"recorded"`
	Runs     []struct {
		Name       string      `json:"name"`
		Thresholds []string    `json:"thresholds"`
		Calls      []play.Call `json:"calls"`
	} `json:"runs"`
	Differences []string `json:"differences"`
}

// TestReplayOfAnE2ERun: the hard memory scenario (TestMemoryPressureHard:
// batch, web and the hog evicted, one after the other), recorded by the
// agent on a busy core (it shares one with a CPU burner: busyCore), saved
// with docs/decide.md's evictd trace and replayed with its evictd replay:
// the replay makes the agent's calls, pass for pass, with the same pods,
// order, ranks and reasons (and the cleanup's replayTrace, twenty times
// over). Then with other thresholds, as the trace's own figures predict:
// one under everything the node went down to evicts nothing; a higher one
// evicts first in the first pass that read memory.available under it.
// Act-early is off, so that a threshold is met exactly where the figures
// cross it.
func TestReplayOfAnE2ERun(t *testing.T) {
	m := newMemoryNode(t, "replay")
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--act-early=false", "--secure-bind-address=127.0.0.1:0")...)
	addr := e.secureAddress()
	cpu := busyCore(t, e.p.Pid())
	_, hog := m.startHog(t, hogSpec(50, 600))
	want := []string{podKey(m.pods["batch"]), podKey(m.pods["web"]), podKey(hog)}
	evs := waitEvictions(t, e, len(want), evictionTimeout)
	e.waitLog(30*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[len(evs)-1].TS) })
	evs = evicted(e)
	if got := podsOf(evs); !slices.Equal(got, want) {
		t.Fatalf("evictd evicted %v, want %v", got, want)
	}

	// docs/decide.md's commands, as written but for NODE and the agent's
	// address, as a caller granted evictd-explain-reader.
	ctx := context.Background()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "reader.kubeconfig")
	writeTokenKubeconfig(t, m.c, kubeconfig, callerToken(t, m.c, m.c.Namespace(t, "callers"), "reader", "evictd-explain-reader"))
	outputs := map[string]string{}
	for _, line := range framework.DocLines(t, "docs/decide.md") {
		args := strings.Fields(strings.NewReplacer("NODE", "replay", "127.0.0.1:9732", addr).Replace(line))
		if args[0] != "evictd" || (args[1] != "trace" && args[1] != "replay") {
			continue
		}
		cmd := exec.CommandContext(ctx, framework.RequireBinary(t, "evictd"), args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, stderr.String())
		}
		outputs[args[1]] = out.String()
	}
	if len(outputs) != 2 {
		t.Fatalf("ran docs/decide.md's %v, want its evictd trace and evictd replay", slices.Collect(func(yield func(string) bool) {
			for k := range outputs {
				yield(k)
			}
		}))
	}
	if !strings.Contains(outputs["trace"], "node.trace: node replay, ") {
		t.Errorf("evictd trace printed %q, want what it saved", outputs["trace"])
	}
	text := outputs["replay"]
	t.Logf("evictd replay --trace node.trace:\n%s", text)
	if !regexp.MustCompile(`the recorded configuration made the recorded agent's \d+ call\(s\): the same pods, passes, ranks and reasons`).MatchString(text) {
		t.Errorf("evictd replay --trace node.trace does not say it made the recorded calls:\n%s", text)
	}
	for _, p := range want {
		if !strings.Contains(text, p) {
			t.Errorf("evictd replay --trace node.trace does not name %s:\n%s", p, text)
		}
	}

	// The replay's calls are the agent's, as its log has them.
	tracePath := filepath.Join(dir, "node.trace")
	got := runReplay(t, tracePath)
	if len(got.Runs) != 1 || len(got.Differences) != 0 {
		t.Fatalf("replay with the recorded configuration: %d runs, differences %v", len(got.Runs), got.Differences)
	}
	calls := got.Runs[0].Calls
	if len(calls) != len(got.Recorded) {
		t.Fatalf("the replay made %d calls, the agent %d", len(calls), len(got.Recorded))
	}
	// Those the API server accepted are the agent's "evicted pod" lines
	// (others were answered otherwise: the per-episode rate, say).
	var accepted []play.Call
	for i, c := range calls {
		if !c.Recorded || !c.Same(got.Recorded[i]) || c.Result != got.Recorded[i].Result {
			t.Errorf("replayed call %d: %+v; recorded %+v", i, c, got.Recorded[i])
		}
		if c.Result == "evicted" {
			accepted = append(accepted, c)
		}
	}
	if len(accepted) != len(evs) {
		t.Fatalf("the replay has %d accepted evictions, the agent logged %d", len(accepted), len(evs))
	}
	for i, c := range accepted {
		ev := evs[i]
		if c.Pod != ev.Pod || c.Signal != ev.Signal || fmt.Sprint(c.Rank) != fmt.Sprint(ev.Fields["rank"]) || c.Reason != ev.Str("reason") ||
			c.RunnerUp != ev.Str("runnerUp") {
			t.Errorf("replayed eviction %d: %+v; the agent logged pod %s signal %s rank %v reason %q runner-up %q",
				i, c, ev.Pod, ev.Signal, ev.Fields["rank"], ev.Str("reason"), ev.Str("runnerUp"))
		}
	}

	// What the trace's figures predict for other thresholds.
	f, err := os.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkPrunedPods(t, tr, m.pods["batch"], m.mirror)
	slowest, in := slowestDecision(tr)
	t.Logf("on CPU %d with a burner, the agent's slowest pass decided %s after its observation (pass %d)", cpu, slowest, in)
	lowest, firstUnder := lowestAvailable(tr, 500<<20)
	if firstUnder == 0 || firstUnder > calls[0].Pass {
		t.Fatalf("no pass read memory.available under 500Mi before the first call (pass %d): %d", calls[0].Pass, firstUnder)
	}
	below := (lowest>>20 - 1) // a MiB under the lowest reading
	low := writeConfig(t, dir, "low.yaml", fmt.Sprintf("%dMi", below))
	high := writeConfig(t, dir, "high.yaml", "500Mi")
	got = runReplay(t, tracePath, "--config", low, "--config", high)
	if len(got.Runs) != 2 {
		t.Fatalf("%d runs for two configurations", len(got.Runs))
	}
	if n := len(got.Runs[0].Calls); n != 0 {
		t.Errorf("at memory.available<%dMi (the lowest reading was %d MiB) the replay made %d calls, want none", below, lowest>>20, n)
	}
	if h := got.Runs[1].Calls; len(h) == 0 || h[0].Pass != firstUnder {
		t.Errorf("at memory.available<500Mi the replay's first call is %+v; want it in pass %d, the first that read under 500Mi", h, firstUnder)
	}
	if len(got.Differences) == 0 {
		t.Error("the two configurations make different calls, and the replay lists no difference")
	}
}

// checkPrunedPods: the trace, served to the explain-reader role, holds the
// pods as far as the decisions read them, not as the API server serves
// them: no managed fields, labels, commands, args or env, and of the
// annotations only those evictd reads (the mirror pod keeps
// kubernetes.io/config.mirror, not the kubelet's config.hash). batch and
// mirror are the API's copies, which have what the trace must not.
func checkPrunedPods(t *testing.T, tr *trace.Trace, batch, mirror *corev1.Pod) {
	t.Helper()
	read := map[string]bool{rank.ConfigSourceAnnotation: true, rank.ConfigMirrorAnnotation: true, rank.OptOutAnnotation: true}
	if len(batch.Labels) == 0 || len(batch.ManagedFields) == 0 || len(batch.Spec.Containers[0].Command) == 0 || len(batch.Spec.Containers[0].Args) == 0 {
		t.Fatalf("the API's batch pod has no labels, managed fields, command or args: nothing to prune (%+v)", batch)
	}
	if _, ok := mirror.Annotations["kubernetes.io/config.hash"]; !ok {
		t.Fatalf("the API's mirror pod has no config.hash annotation: %v", mirror.Annotations)
	}
	lists, sawMirror := 0, false
	for _, p := range tr.Passes {
		if p.Pods == nil {
			continue
		}
		lists++
		for _, pod := range p.Pods.Pods {
			bad := len(pod.ManagedFields) > 0 || len(pod.Labels) > 0
			for _, c := range pod.Spec.Containers {
				bad = bad || len(c.Command) > 0 || len(c.Args) > 0 || len(c.Env) > 0
			}
			for k := range pod.Annotations {
				bad = bad || !read[k]
			}
			if bad {
				t.Fatalf("pass %d: the trace holds pod %s/%s with more than the decisions read: %+v", p.N, pod.Namespace, pod.Name, pod)
			}
			if pod.UID == mirror.UID {
				sawMirror = true
				if pod.Annotations[rank.ConfigMirrorAnnotation] == "" {
					t.Errorf("pass %d: the mirror pod lost %s, which the static check reads: %v", p.N, rank.ConfigMirrorAnnotation, pod.Annotations)
				}
			}
		}
	}
	if lists == 0 || !sawMirror {
		t.Fatalf("the trace holds %d pod lists, the mirror pod in none: %v", lists, sawMirror)
	}
}

// lowestAvailable is the lowest memory.available the trace's acting
// passes read, and the first pass that read it under under.
func lowestAvailable(tr *trace.Trace, under uint64) (int64, uint64) {
	lowest, first := int64(-1), uint64(0)
	for _, p := range tr.Passes {
		o := p.Observation
		if !p.Acting || o == nil || o.Summary.Node.Memory == nil || o.Summary.Node.Memory.AvailableBytes == nil {
			continue
		}
		a := *o.Summary.Node.Memory.AvailableBytes
		if lowest < 0 || int64(a) < lowest {
			lowest = int64(a)
		}
		if first == 0 && a < under {
			first = p.N
		}
	}
	return lowest, first
}

// writeConfig writes an EvictdConfiguration with the memory scenario's
// signals (memoryFlags) but for memory.available's hard threshold.
func writeConfig(t *testing.T, dir, name, memory string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	cfg := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nevictionHard:\n  memory.available: " + memory +
		"\n  allocatableMemory.available: none\n  nodefs.available: none\n  nodefs.inodesFree: none\n  imagefs.available: none\n" +
		"  imagefs.inodesFree: none\n  pid.available: none\nevictionMinimumReclaim:\n  memory.available: 100Mi\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runReplay(t *testing.T, tracePath string, extra ...string) replayOutput {
	t.Helper()
	args := append([]string{"replay", "--trace", tracePath, "-o", "json"}, extra...)
	out, err := exec.Command(framework.RequireBinary(t, "evictd"), args...).Output()
	if err != nil {
		t.Fatalf("evictd %s: %v", strings.Join(args, " "), err)
	}
	var r replayOutput
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("evictd %s printed no report: %v\n%s", strings.Join(args, " "), err, out)
	}
	return r
}
