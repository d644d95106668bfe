// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestFateOf(t *testing.T) {
	cond := func(reason string) corev1.PodStatus {
		return corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}}}
	}
	oom := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}
	for _, c := range []struct {
		name   string
		status corev1.PodStatus
		want   string
	}{
		{"eviction API", cond("EvictionByEvictionAPI"), ByEvictd},
		{"kubelet condition", cond("TerminationByKubelet"), ByKubelet},
		{"kubelet status", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}, ByKubelet},
		{"OOM killed", oom, ByOOM},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning}, ""},
		{"condition false", corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, Reason: "EvictionByEvictionAPI"}}}, ""},
	} {
		p := &corev1.Pod{Status: c.status}
		if got := FateOf(p); got != c.want {
			t.Errorf("%s: FateOf = %q, want %q", c.name, got, c.want)
		}
	}
}

// A real /proc/meminfo and root memory.stat of the guest (kernel 6.1),
// abridged only of lines the parser ignores.
const guestMeminfo = `MemTotal:        2014556 kB
MemFree:         1512340 kB
MemAvailable:    1760232 kB
Buffers:           10240 kB
Cached:           301524 kB
SwapCached:            0 kB
Active:            98124 kB
Inactive:         295012 kB
Active(anon):      61236 kB
Inactive(anon):    20480 kB
Active(file):      36888 kB
Inactive(file):   274532 kB
anon 83886080
file 318767104
inactive_anon 20971520
active_anon 62914560
inactive_file 268435456
active_file 37748736
`

func TestAvailableFromMeminfo(t *testing.T) {
	got, err := AvailableFromMeminfo(guestMeminfo)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1512340<<10 + 268435456); got != want {
		t.Errorf("available = %d, want MemFree+inactive_file = %d", got, want)
	}
	if _, err := AvailableFromMeminfo("MemFree: 1 kB\n"); err == nil || !strings.Contains(err.Error(), "inactive_file") {
		t.Errorf("meminfo without memory.stat: err %v", err)
	}
	if _, err := AvailableFromMeminfo("MemFree: x kB\n"); err == nil || !strings.Contains(err.Error(), "MemFree: x kB") {
		t.Errorf("malformed meminfo: err %v, want one naming the line", err)
	}
}

func TestRaceRun(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	samples := []MemorySample{{t0, 600 << 20}, {t0.Add(time.Second), 250 << 20}, {t0.Add(2 * time.Second), 90 << 20}}
	r := RaceRun{Mode: "m", Rate: 25, Leaker: "leaker", Samples: samples,
		Thresholds: map[string]int64{"evictd": 300 << 20, "kubelet": 100 << 20},
		Fates:      []PodFate{{"besteffort", ByKubelet, t0.Add(4 * time.Second)}, {"leaker", ByEvictd, t0.Add(3 * time.Second)}}}
	if f, _ := r.First(); f.Pod != "leaker" || !r.OrderKept() {
		t.Errorf("first %+v, order kept %v; want the leaker first", f, r.OrderKept())
	}
	if r.Count(ByKubelet) != 1 || r.Count(ByEvictd) != 1 || r.Count(ByOOM) != 0 {
		t.Errorf("counts %d %d %d", r.Count(ByEvictd), r.Count(ByKubelet), r.Count(ByOOM))
	}
	if got := FirstBelow(samples, 300<<20); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("FirstBelow 300Mi = %v", got)
	}
	if got := FillRate(samples, 600<<20, 300<<20); got < 349 || got > 351 {
		t.Errorf("FillRate 600Mi→300Mi = %.1f MiB/s, want 350", got)
	}
	if got := FillRate(samples, 600<<20, 50<<20); got != 0 {
		t.Errorf("FillRate to a floor never crossed = %.1f, want 0", got)
	}
	if r.MinAvailable() != 90<<20 {
		t.Errorf("MinAvailable = %d", r.MinAvailable())
	}
	table := RaceTable([]RaceRun{r})
	for _, want := range []string{"evictd (leaker)", "2s", "1s", "90 MiB"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	stuck := RaceRun{Mode: "kubelet alone", Rate: 25, Leaker: "leaker", Samples: samples, Thresholds: r.Thresholds,
		Unresponsive: 9*time.Minute + 15*time.Second + 400*time.Millisecond}
	if table := RaceTable([]RaceRun{stuck}); !strings.Contains(table, "none: node livelocked for 9m15s+") || !strings.Contains(table, "unknown") {
		t.Errorf("a run given up on a livelocked guest does not say so:\n%s", table)
	}
	r.Fates[1].At = t0.Add(5 * time.Second)
	if r.OrderKept() {
		t.Error("besteffort went first, yet the order counts as kept")
	}
}

// TestRaceRunStalled: only a run whose leak never pressed (nothing ended,
// nothing killed, memory never under evictd's threshold) counts as stalled.
func TestRaceRunStalled(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := map[string]int64{"evictd": 300 << 20}
	high := []MemorySample{{t0, 650 << 20}, {t0.Add(time.Second), 331 << 20}}
	low := append(high, MemorySample{t0.Add(2 * time.Second), 299 << 20})
	for name, c := range map[string]struct {
		r    RaceRun
		want bool
	}{
		"stalled above":     {RaceRun{Samples: high, Thresholds: th}, true},
		"crossed":           {RaceRun{Samples: low, Thresholds: th}, false},
		"ended":             {RaceRun{Samples: high, Thresholds: th, Fates: []PodFate{{"leaker", ByEvictd, t0}}}, false},
		"killed":            {RaceRun{Samples: high, Thresholds: th, OOMKills: 2}, false},
		"guest unanswering": {RaceRun{Samples: high, Thresholds: th, Unresponsive: time.Minute}, false},
		"no samples":        {RaceRun{Thresholds: th}, false},
	} {
		if got := c.r.Stalled(); got != c.want {
			t.Errorf("%s: Stalled() = %v, want %v", name, got, c.want)
		}
	}
}

func TestKubeletObservations(t *testing.T) {
	log := `I1122 19:16:12.744486     210 helpers.go:978] "Eviction manager:" log="observations" signal="memory.available" resourceName="memory" available="1742396Ki" capacity="1967Mi" time="2026-11-22 19:16:05.1 +0000 UTC"
I1122 19:16:12.744500     210 helpers.go:978] "Eviction manager:" log="observations" signal="nodefs.available" resourceName="ephemeral-storage" available="2Gi" capacity="3Gi" time="2026-11-22 19:16:05.1 +0000 UTC"
I1122 19:17:22.000001     210 helpers.go:978] "Eviction manager:" log="observations" signal="memory.available" resourceName="memory" available="90Mi" capacity="1967Mi" time="2026-11-22 19:17:10 +0000 UTC m=+70.1"
I1122 19:30:00.000001     210 helpers.go:978] "Eviction manager:" log="observations" signal="memory.available" resourceName="memory" available="1Gi" capacity="1967Mi" time="2026-11-22 19:29:59 +0000 UTC"`
	from := time.Date(2026, 11, 22, 19, 16, 0, 0, time.UTC)
	got := KubeletObservations(log, from, from.Add(5*time.Minute))
	want := []string{
		"19:16:12.744  1742396Ki  19:16:05.100 (7.6s old)",
		"19:17:22.000  90Mi  19:17:10.000 (12s old)",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOOMKills(t *testing.T) {
	dmesg := `[ 1080.584105] containerd-shim invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=1
[ 1080.592534] Out of memory: Killed process 6984 (workload) total-vm:5390124kB, anon-rss:1737956kB, file-rss:0kB, shmem-rss:0kB, UID:65532 pgtables:3492kB oom_score_adj:968
[ 1080.593346] Out of memory: Killed process 6984 (workload) total-vm:5390124kB, anon-rss:1737956kB, file-rss:0kB, shmem-rss:0kB, UID:65532 pgtables:3492kB oom_score_adj:968
[ 1200.000001] Memory cgroup out of memory: Killed process 7001 (workload) total-vm:1kB`
	got := OOMKills(dmesg)
	if len(got) != 2 || got[0] != (OOMKill{1080.592534, 6984, "workload", 1737956 << 10}) || got[1] != (OOMKill{1200.000001, 7001, "workload", 0}) {
		t.Errorf("OOMKills = %+v; want the two kills, each once, with the anon-rss the first names", got)
	}
}

// TestKillsAfterEviction: an OOM kill in a run with evictd is the node's
// slowness only when it killed the leaker, evictd had evicted it, and at
// least the allowance had passed since, on the guest's clock: the host's
// watch saw the eviction 3 s late in every case here, and its time counts
// for nothing.
func TestKillsAfterEviction(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 16, 57, 1, 0, time.UTC)
	evicted := []PodFate{{Pod: "leaker", By: ByEvictd, At: t0.Add(3 * time.Second)}}
	leakerKill := func(after time.Duration) Kill {
		return Kill{At: t0.Add(after), GuestAt: t0.Add(after), Command: "workload", AnonRSS: 1600 << 20}
	}
	for name, c := range map[string]struct {
		run  RaceRun
		want bool
		says string
	}{
		"no kill":                        {RaceRun{Fates: evicted}, true, "no OOM kill"},
		"leaker, 4.5 s after":            {RaceRun{OOMKills: 2, Fates: evicted, Kills: []Kill{leakerKill(4500 * time.Millisecond)}}, true, "4.5s after"},
		"leaker, 2.5 s after, seen late": {RaceRun{OOMKills: 2, Fates: evicted, Kills: []Kill{leakerKill(2500 * time.Millisecond)}}, true, "2.5s after"},
		"no guest time":                  {RaceRun{OOMKills: 2, Fates: evicted, Kills: []Kill{{At: t0.Add(5 * time.Second), Command: "workload", AnonRSS: 1600 << 20}}}, false, "no time on the guest's clock"},
		"leaker, 1 s after":              {RaceRun{OOMKills: 2, Fates: evicted, Kills: []Kill{leakerKill(time.Second)}}, false, "within the 2s"},
		"leaker, before":                 {RaceRun{OOMKills: 2, Fates: evicted, Kills: []Kill{leakerKill(-time.Second)}}, false, "within the 2s"},
		"another process": {RaceRun{OOMKills: 2, Fates: evicted,
			Kills: []Kill{leakerKill(5 * time.Second), {At: t0.Add(5 * time.Second), Command: "workload", AnonRSS: 16 << 20}}}, false, "holding 16 MiB"},
		"not evicted by evictd":   {RaceRun{OOMKills: 2, Fates: []PodFate{{Pod: "leaker", By: ByOOM, At: t0}}, Kills: []Kill{leakerKill(5 * time.Second)}}, false, "did not evict"},
		"dmesg silent":            {RaceRun{OOMKills: 2, Fates: evicted}, false, "named no kill"},
		"no line in evictd's log": {RaceRun{OOMKills: 2, Fates: evicted, Evicted: time.Time{}, Kills: []Kill{leakerKill(5 * time.Second)}}, false, "no eviction of the leaker"},
	} {
		c.run.Leaker, c.run.Hold = "leaker", 1000<<20
		if name != "no line in evictd's log" {
			c.run.Evicted = t0
		}
		got, ok := c.run.KillsAfterEviction(2 * time.Second)
		if ok != c.want || !strings.Contains(got, c.says) {
			t.Errorf("%s: %v, %q; want %v, saying %q", name, ok, got, c.want, c.says)
		}
	}
}
