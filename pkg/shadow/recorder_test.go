// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// evictedPod is a pod of node n1 as its kubelet leaves one it evicted at
// at (the DisruptionTarget condition's time).
func evictedPod(ns, name, uid string, at time.Time) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + uid)},
		Spec: v1.PodSpec{NodeName: "n1"},
		Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory. ",
			Conditions: []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet,
				LastTransitionTime: metav1.NewTime(at)}}}}
}

func TestRecorderReportsEachEpisode(t *testing.T) {
	oom := int64(7)
	var got []Report
	r := NewRecorder(func() (int64, error) { return oom, nil }, func(rep Report) { got = append(got, rep) })
	r.EpisodeStarted("memory", at(0))
	r.WouldEvict("memory", Action{Pod: "shop/a", UID: "uid-a", At: at(1), Signal: "memory.available"})
	r.WouldEvict("disk", Action{Pod: "shop/z", UID: "uid-z", At: at(1)}) // no disk episode open
	r.KubeletEvicted(evictedPod("shop", "a", "a", at(9)))
	r.KubeletEvicted(evictedPod("shop", "a", "a", at(9))) // deleted, or listed again
	oom = 8
	r.Pass(at(40))
	r.EpisodeEnded("memory", at(40))
	r.EpisodeEnded("memory", at(41)) // none open: nothing
	if len(got) != 1 {
		t.Fatalf("%d reports, want 1", len(got))
	}
	rep := got[0]
	if len(rep.Both) != 1 || rep.Both[0] != "shop/a" || rep.Lead != 8*time.Second || rep.OOMKills != 1 || len(rep.KubeletEvicted) != 1 {
		t.Errorf("report %+v: want shop/a by both, evictd 8s first, 1 OOM kill", rep)
	}
	if rs := r.Reports(); len(rs) != 1 || rs[0].Summary != rep.Summary {
		t.Errorf("Reports() = %+v, want the one emitted", rs)
	}
}

func TestRecorderOOMUnknown(t *testing.T) {
	var got Report
	r := NewRecorder(func() (int64, error) { return 0, errors.New("no vmstat") }, func(rep Report) { got = rep })
	r.EpisodeStarted("memory", at(0))
	r.EpisodeEnded("memory", at(3))
	if got.OOMKills != -1 || !strings.HasSuffix(got.Summary, "OOM kills unknown") {
		t.Errorf("report %+v, want OOM kills unknown", got)
	}
}

func TestRecorderBounds(t *testing.T) {
	var first *Report
	r := NewRecorder(nil, func(rep Report) {
		if first == nil {
			first = &rep
		}
	})
	for i := range MaxKubelet + 10 {
		r.KubeletEvicted(evictedPod("ns", "p", string(rune(i)), at(float64(i))))
	}
	r.EpisodeStarted("memory", at(0))
	for range MaxWouldEvict + 10 {
		r.WouldEvict("memory", act("x", 1))
	}
	for range MaxReports + 3 {
		r.EpisodeEnded("memory", at(1))
		r.EpisodeStarted("memory", at(1))
	}
	if len(r.kubelet) != MaxKubelet || len(r.Reports()) != MaxReports || len(first.WouldEvict) != MaxWouldEvict {
		t.Errorf("kept %d kubelet evictions, %d reports, %d would-be evictions; want %d, %d, %d",
			len(r.kubelet), len(r.Reports()), len(first.WouldEvict), MaxKubelet, MaxReports, MaxWouldEvict)
	}
}

func TestVMStatOOMKills(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, err string
		want               int64
	}{
		{"a 6.1 kernel's", "nr_free_pages 12345\noom_kill 3\nnr_unstable 0\n", "", 3},
		{"no line", "nr_free_pages 12345\n", "no oom_kill line", 0},
		{"garbage", "oom_kill x\n", `oom_kill "x" is not a count`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "vmstat")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			n, err := VMStatOOMKills(p)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || n != tc.want {
				t.Errorf("got %d, %v; want %d, %q", n, err, tc.want, tc.err)
			}
		})
	}
	if _, err := VMStatOOMKills(filepath.Join(dir, "nope")); err == nil {
		t.Error("a missing file read without error")
	}
}

// counted is a Counter that keeps what it was told.
type counted struct{ lines []string }

func (c *counted) ShadowWouldEvict(resource, signal string) {
	c.lines = append(c.lines, "would evict "+resource+" "+signal)
}
func (c *counted) ShadowKubeletEviction(resource string) {
	c.lines = append(c.lines, "kubelet evicted "+resource)
}
func (c *counted) ShadowOOMKills(episode string, n int64) {
	c.lines = append(c.lines, fmt.Sprintf("%d OOM kills %s", n, episode))
}
func (c *counted) ShadowEpisode(resource, first string) {
	c.lines = append(c.lines, "episode "+resource+" first "+first)
}

// TestRecorderCounts: what the recorder counts for the fleet. The kubelet's
// evictions once per pod, from the agent's start (not those the informer
// lists from before it, nor refused admissions), by what they were for;
// the OOM kills between passes under the episode under way (a memory one
// first), or none, and not across a read that failed; the kill seen at the
// pass that opens an episode is the episode's; each would-be eviction; each
// episode as it ends, by who acted first.
func TestRecorderCounts(t *testing.T) {
	oom, oomErr := int64(40), error(nil)
	c := &counted{}
	var reports []Report
	r := NewRecorder(func() (int64, error) { return oom, oomErr }, func(rep Report) { reports = append(reports, rep) })
	r.start = at(0).Add(300 * time.Millisecond)
	r.now = func() time.Time { return at(1) }
	r.CountInto(c)

	// Listed at start: an eviction from an hour ago, kept for the reports
	// but not counted; one in the agent's first second is (the pod's time
	// is truncated).
	r.KubeletEvicted(evictedPod("old", "gone", "old", at(-3600)))
	r.KubeletEvicted(evictedPod("shop", "early", "early", at(0)))
	rejected := evictedPod("shop", "late", "rejected", at(5))
	rejected.Status.Message = "Pod was rejected: The node had condition: [MemoryPressure]. "
	r.KubeletEvicted(rejected)

	r.Pass(at(1)) // no kill since the start
	oom = 41
	r.Pass(at(2)) // outside any episode
	oom = 43
	r.EpisodeStarted("nodefs", at(3))
	r.EpisodeStarted("memory", at(3))
	r.Pass(at(3)) // the kills that came with the pressure: memory's
	r.WouldEvict("memory", Action{Pod: "shop/a", UID: "uid-a", At: at(3.5), Signal: "memory.available"})
	disk := evictedPod("shop", "logs", "logs", at(4))
	disk.Status.Message = "The node was low on resource: ephemeral-storage. "
	r.KubeletEvicted(disk)
	r.KubeletEvicted(evictedPod("shop", "b", "b", at(6)))
	r.KubeletEvicted(evictedPod("shop", "b", "b", at(6))) // deleted, or listed again
	oomErr = errors.New("vmstat unreadable")
	r.Pass(at(7))
	oom, oomErr = 50, nil
	r.Pass(at(8)) // after a failed read: no baseline, nothing counted
	oom = 51
	r.Pass(at(9))
	r.EpisodeEnded("memory", at(9))
	r.EpisodeEnded("nodefs", at(9))
	oom = 52
	r.Pass(at(10))

	want := []string{
		"kubelet evicted memory",              // shop/early
		"1 OOM kills none",                    // at(2)
		"2 OOM kills memory",                  // at(3)
		"would evict memory memory.available", // shop/a
		"kubelet evicted ephemeral-storage",   // shop/logs
		"kubelet evicted memory",              // shop/b
		"1 OOM kills memory",                  // at(9)
		"episode memory first oom_killer",     // killed at the pass that opened it
		"episode nodefs first kubelet",        // shop/logs
		"1 OOM kills none",                    // at(10)
	}
	if !slices.Equal(c.lines, want) {
		t.Errorf("counted\n%q\nwant\n%q", c.lines, want)
	}
	if len(reports) != 2 {
		t.Fatalf("%d reports, want 2", len(reports))
	}
	mem := reports[0]
	// The report's kills are the count's rise from the pass before the
	// start (41) to the last pass (51), the failed read between them
	// notwithstanding.
	if mem.Resource != "memory" || mem.OOMKills != 10 || !mem.FirstOOMKill.Equal(at(3)) || mem.First != FirstOOMKiller {
		t.Errorf("memory's report: %d OOM kills, the first seen at %v, first %q; want 10, at %v, %q",
			mem.OOMKills, mem.FirstOOMKill, mem.First, at(3), FirstOOMKiller)
	}
	if disk := reports[1]; disk.Resource != "nodefs" || disk.First != FirstKubelet || len(disk.KubeletEvicted) != 2 {
		t.Errorf("nodefs' report: first %q, kubelet evicted %+v; want the kubelet first (shop/logs), with shop/b in the span", disk.First, disk.KubeletEvicted)
	}
}

// TestVMStatOOMKillsRefusesAFIFO: the path is read at every shadow pass,
// so one that is no regular file (a FIFO, whose read would wait for a
// writer forever) is refused at once, naming what it is.
func TestVMStatOOMKillsRefusesAFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vmstat")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := VMStatOOMKills(p); err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("VMStatOOMKills(FIFO) = %v; want a refusal naming the FIFO", err)
	}
}
