// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
