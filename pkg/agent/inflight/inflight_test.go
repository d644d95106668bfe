// SPDX-License-Identifier: Apache-2.0

package inflight

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/thresholds"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

func terminating(name string, deadline time.Time, grace int64, phase v1.PodPhase) *v1.Pod {
	p := pod(name)
	ts := metav1.NewTime(deadline)
	p.DeletionTimestamp = &ts
	p.DeletionGracePeriodSeconds = &grace
	p.Status.Phase = phase
	return p
}

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Pod)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAddSetsDeadlinesByOrigin(t *testing.T) {
	s := New(Options{GoneTimeout: 30 * time.Second, VanishedTimeout: 10 * time.Second})
	tests := []struct {
		origin      Origin
		wantExpires time.Time
	}{
		{Evicted, t0.Add(5*time.Second + 30*time.Second)},
		{Vanished, t0.Add(10 * time.Second)},
		{DryRun, time.Time{}},
	}
	for _, tc := range tests {
		e := s.Add(Added{Pod: pod(string(tc.origin)), Origin: tc.origin, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 5, Usage: 42})
		if !e.ReclaimBy.Equal(t0.Add(5*time.Second)) || !e.Expires.Equal(tc.wantExpires) {
			t.Errorf("%s: reclaimBy %v expires %v, want %v and %v", tc.origin, e.ReclaimBy, e.Expires, t0.Add(5*time.Second), tc.wantExpires)
		}
		if e.LastUsage[thresholds.MemoryAvailable] != 42 {
			t.Errorf("%s: last usage %v", tc.origin, e.LastUsage)
		}
	}
	if s.Len() != 3 || !s.Contains("uid-evicted") {
		t.Errorf("Len = %d, want 3 with uid-evicted", s.Len())
	}
}

func TestSyncFindsTerminatingPodsAndDropsGoneAndExpired(t *testing.T) {
	s := New(DefaultOptions())
	s.Add(Added{Pod: pod("evicted"), Origin: Evicted, At: t0, GraceSeconds: 5})
	s.Add(Added{Pod: pod("gone"), Origin: Evicted, At: t0, GraceSeconds: 5})
	s.Add(Added{Pod: pod("stuck"), Origin: Evicted, At: t0.Add(-time.Minute), GraceSeconds: 5})
	s.Add(Added{Pod: pod("dry"), Origin: DryRun, At: t0.Add(-time.Hour), GraceSeconds: 5})

	listed := []*v1.Pod{
		pod("evicted"), pod("stuck"), pod("dry"), pod("running"),
		// Terminating since an earlier evictd, deadline in 20s.
		terminating("restart", t0.Add(20*time.Second), 30, v1.PodRunning),
		// Long past its deadline: gets one GoneTimeout from now.
		terminating("late", t0.Add(-time.Hour), 30, v1.PodRunning),
		// Finished: nothing left to reclaim.
		terminating("done", t0.Add(20*time.Second), 30, v1.PodSucceeded),
	}
	gone, expired := s.Sync(listed, t0)
	if !equal(names(gone), []string{"ns/gone"}) {
		t.Errorf("gone = %v, want [ns/gone]", names(gone))
	}
	if !equal(names(expired), []string{"ns/stuck"}) {
		t.Errorf("expired = %v, want [ns/stuck]", names(expired))
	}
	snap := s.Snapshot()
	got := map[string]Entry{}
	for _, e := range snap {
		got[e.Pod] = e
	}
	if len(got) != 4 {
		t.Fatalf("entries %v, want evicted, dry, restart, late", names(snap))
	}
	r := got["ns/restart"]
	if r.Origin != Terminating || !r.ReclaimBy.Equal(t0.Add(20*time.Second)) || !r.Start.Equal(t0.Add(-10*time.Second)) || !r.Expires.Equal(t0.Add(50*time.Second)) {
		t.Errorf("restart entry %+v", r)
	}
	if l := got["ns/late"]; !l.Expires.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("late entry expires %v, want now + GoneTimeout", l.Expires)
	}
	// A second Sync does not replace what it found (Start stays).
	s.Sync(listed, t0.Add(time.Second))
	if e := s.Snapshot(); len(e) != 4 {
		t.Errorf("after a second sync: %v", names(e))
	}
}

func TestGoneNoteUsageAndEndEpisode(t *testing.T) {
	s := New(DefaultOptions())
	s.Add(Added{Pod: pod("a"), Origin: Evicted, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 1, Usage: 1})
	s.Add(Added{Pod: pod("b"), Origin: DryRun, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 1, Usage: 1})
	s.Add(Added{Pod: pod("c"), Origin: DryRun, Signal: thresholds.NodeFsAvailable, At: t0, GraceSeconds: 1, Usage: 1})
	s.NoteUsage("uid-a", thresholds.NodeFsAvailable, 99)
	s.NoteUsage("uid-nobody", thresholds.NodeFsAvailable, 99) // ignored
	snap := s.Snapshot()
	if snap[0].LastUsage[thresholds.NodeFsAvailable] != 99 {
		t.Errorf("NoteUsage not recorded: %+v", snap[0])
	}
	// A smaller figure later is a walk cut short or racing the removal of
	// the pod's files, not space back: the largest seen stays.
	s.NoteUsage("uid-a", thresholds.NodeFsAvailable, 40)
	if got := s.Snapshot()[0].LastUsage[thresholds.NodeFsAvailable]; got != 99 {
		t.Errorf("NoteUsage lowered the figure to %d; want 99 kept", got)
	}
	// Snapshots are copies.
	snap[0].LastUsage[thresholds.NodeFsAvailable] = 1
	if s.Snapshot()[0].LastUsage[thresholds.NodeFsAvailable] != 99 {
		t.Error("a snapshot shares its map with the set")
	}
	s.EndEpisode(func(sig thresholds.Signal) bool { return sig == thresholds.MemoryAvailable })
	if s.Contains("uid-b") || !s.Contains("uid-a") || !s.Contains("uid-c") {
		t.Errorf("EndEpisode must drop only the ended episode's dry-run entries: %v", names(s.Snapshot()))
	}
	s.Gone("uid-c")
	if e, ok := s.Gone("uid-a"); !ok || e.Pod != "ns/a" {
		t.Errorf("Gone = %+v, %v", e, ok)
	}
	if _, ok := s.Gone("uid-a"); ok || s.Len() != 0 {
		t.Error("Gone twice found the pod again")
	}
}

// A victim held by a finalizer or a hung runtime stays listed, terminating,
// for ever. Once its entry expires it must not come back as Terminating:
// its usage is back in the observation, and counting it as reclaim again
// would keep evictd from choosing the next victim.
func TestSyncDoesNotReaddStuckVictim(t *testing.T) {
	s := New(DefaultOptions()) // GoneTimeout 30s
	s.Add(Added{Pod: pod("v"), Origin: Evicted, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 5, Usage: 100})
	stuck := terminating("v", t0.Add(5*time.Second), 5, v1.PodRunning)
	listed := []*v1.Pod{stuck, pod("next")}

	if _, expired := s.Sync(listed, t0.Add(10*time.Second)); len(expired) != 0 || !s.Contains("uid-v") {
		t.Fatalf("within grace + GoneTimeout: expired %v, in flight %v", names(expired), names(s.Snapshot()))
	}
	_, expired := s.Sync(listed, t0.Add(35*time.Second))
	if !equal(names(expired), []string{"ns/v"}) {
		t.Fatalf("at grace + GoneTimeout: expired %v, want [ns/v]", names(expired))
	}
	for _, after := range []time.Duration{35 * time.Second, time.Minute, time.Hour} {
		if _, again := s.Sync(listed, t0.Add(after)); len(again) != 0 || s.Contains("uid-v") {
			t.Fatalf("%v after the eviction the stuck pod is in flight again (%v); its reclaim would count for ever", after, names(s.Snapshot()))
		}
	}
	if !s.Stuck("uid-v") {
		t.Error("Stuck(uid-v) = false while the pod is still listed")
	}
	// Gone at last: forgotten, so a new pod reusing nothing is not held.
	s.Sync([]*v1.Pod{pod("next")}, t0.Add(2*time.Hour))
	if s.Stuck("uid-v") {
		t.Error("a pod no longer listed is still remembered as stuck")
	}
}

func TestNoteMemoryKeepsWhatEachVictimGaveBack(t *testing.T) {
	s := New(DefaultOptions())
	s.Add(Added{Pod: pod("leaker"), Origin: Evicted, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 5, Usage: 1400})
	s.Add(Added{Pod: pod("disk"), Origin: Evicted, Signal: thresholds.NodeFsAvailable, At: t0, GraceSeconds: 5, Usage: 9999})
	ws := map[types.UID]int64{}
	note := func() map[string][2]int64 {
		s.NoteMemory(func(uid types.UID) (int64, bool) { v, ok := ws[uid]; return v, ok }, t0)
		out := map[string][2]int64{}
		for _, e := range s.Snapshot() {
			out[e.Name] = [2]int64{e.MemorySeen, e.MemoryReleased}
		}
		return out
	}
	steps := []struct {
		name   string
		ws     map[types.UID]int64
		leaker [2]int64 // seen, released
		disk   [2]int64
	}{
		// The disk victim's usage at eviction is bytes of disk, not memory:
		// it has no memory figure until an observation gives one.
		{"still holding, and a little more", map[types.UID]int64{"uid-leaker": 1500}, [2]int64{1500, 0}, [2]int64{-1, 0}},
		{"exiting", map[types.UID]int64{"uid-leaker": 600, "uid-disk": 50}, [2]int64{600, 900}, [2]int64{50, 0}},
		{"cgroups gone: what was left counts once", map[types.UID]int64{}, [2]int64{0, 600}, [2]int64{0, 50}},
		{"and not again", map[types.UID]int64{}, [2]int64{0, 0}, [2]int64{0, 0}},
	}
	for _, st := range steps {
		ws = st.ws
		got := note()
		if got["leaker"] != st.leaker || got["disk"] != st.disk {
			t.Errorf("%s: leaker (seen, released) %v, want %v; disk %v, want %v", st.name, got["leaker"], st.leaker, got["disk"], st.disk)
		}
	}
}

func TestKeepPutsBackAnEntryWhoseObjectIsGone(t *testing.T) {
	s := New(DefaultOptions())
	s.Add(Added{Pod: pod("a"), Origin: Evicted, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 5, Usage: 100})
	e, ok := s.Gone("uid-a")
	if !ok || s.Contains("uid-a") {
		t.Fatalf("Gone: %v, still contained %v", ok, s.Contains("uid-a"))
	}
	s.Keep(e)
	got := s.Snapshot()
	if len(got) != 1 || !got[0].ObjectGone || got[0].MemorySeen != 100 || !got[0].ReclaimBy.Equal(t0.Add(5*time.Second)) {
		t.Errorf("kept entry %+v: want it back as it was, marked ObjectGone", got)
	}
	// The next Sync finds its pod unlisted again and hands it back.
	if gone, _ := s.Sync(nil, t0.Add(time.Second)); len(gone) != 1 || !gone[0].ObjectGone {
		t.Errorf("Sync gone = %+v", gone)
	}
}

// An evicted pod's deadline is the one its object shows: a responder that
// deleted it with a 600 s grace leaves it draining for ten minutes, whatever
// grace evictd planned; and an informer still showing the deletion a hard
// re-eviction started from does not take the new deadline back.
func TestSyncTakesTheDeadlineFromThePodObject(t *testing.T) {
	s := New(Options{GoneTimeout: 30 * time.Second, VanishedTimeout: 10 * time.Second})
	p := pod("drainer")
	s.Add(Added{Pod: p, Origin: Evicted, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 5})
	s.Sync([]*v1.Pod{terminating("drainer", t0.Add(600*time.Second), 600, v1.PodRunning)}, t0.Add(time.Second))
	e := s.Snapshot()[0]
	if want := t0.Add(600 * time.Second); !e.ReclaimBy.Equal(want) {
		t.Errorf("reclaim by %s after the pod showed a 600 s deletion; want %s (the pod's own deadline)", e.ReclaimBy.Sub(t0), want.Sub(t0))
	}
	if want := t0.Add(630 * time.Second); !e.Expires.Equal(want) {
		t.Errorf("expires %s; want %s", e.Expires.Sub(t0), want.Sub(t0))
	}

	// Evicted again with the hard grace, from the pod as it was.
	old := terminating("drainer", t0.Add(600*time.Second), 600, v1.PodRunning)
	s.Add(Added{Pod: old, Origin: Evicted, Signal: thresholds.MemoryAvailable, Hard: true, At: t0.Add(2 * time.Second), GraceSeconds: 1})
	s.Sync([]*v1.Pod{old}, t0.Add(2500*time.Millisecond))
	if e := s.Snapshot()[0]; !e.ReclaimBy.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("a stale object took the re-eviction's deadline back: reclaim by %s, want 3s", e.ReclaimBy.Sub(t0))
	}
	s.Sync([]*v1.Pod{terminating("drainer", t0.Add(3100*time.Millisecond), 1, v1.PodRunning)}, t0.Add(2600*time.Millisecond))
	if e := s.Snapshot()[0]; !e.ReclaimBy.Equal(t0.Add(3100 * time.Millisecond)) {
		t.Errorf("reclaim by %s after the object showed the shortened deletion; want 3.1s", e.ReclaimBy.Sub(t0))
	}
}

// teardownSteps drives a set through a victim's teardown, one observation a
// second: at each second, sync lists the pod as it then is and note gives
// the observation's figures. It returns the second the entry expired at
// (0: never within the run) and the second it was first prolonged.
func teardownSteps(t *testing.T, s *Set, seconds int, sync func(sec int) *v1.Pod, note func(sec int, at time.Time)) (expiredAt, prolongedAt int) {
	t.Helper()
	for sec := 1; sec <= seconds; sec++ {
		now := t0.Add(time.Duration(sec) * time.Second)
		_, expired := s.Sync([]*v1.Pod{sync(sec)}, now)
		if len(expired) > 0 {
			return sec, prolongedAt
		}
		for _, e := range s.Snapshot() {
			if e.Prolonged.Equal(now) {
				prolongedAt = sec
			}
		}
		note(sec, now)
	}
	return 0, prolongedAt
}

// A disk victim whose volume the kubelet removes file by file on a slow
// node: 18,615 files going at 100 a second. Its figure falls at every
// observation, so it still counts past its grace + GoneTimeout (35 s), and
// stops counting GoneTimeout after its figure stopped falling (the removal
// stalled at 90 s, with files left: the unmount hung).
func TestTeardownFallingFigureKeepsCounting(t *testing.T) {
	s := New(DefaultOptions())
	s.Add(Added{Pod: pod("many"), Origin: Evicted, Signal: thresholds.NodeFsInodesFree, Hard: true, At: t0, GraceSeconds: 5, Usage: 18615})
	gone := terminating("many", t0.Add(5*time.Second), 5, v1.PodRunning)
	files := func(sec int) int64 {
		// The container stops at 5 s; its files go from 10 s to 90 s.
		return 18615 - 100*int64(min(max(sec-10, 0), 80))
	}
	exp, prolonged := teardownSteps(t, s, 300, func(int) *v1.Pod { return gone },
		func(sec int, at time.Time) {
			s.NoteDisk(func(types.UID) (int64, int64, bool) { return 4096, files(sec), true }, at)
		})
	if prolonged != 35 {
		t.Errorf("prolonged at %d s, want 35 s: the first pass past grace + GoneTimeout, while its files went", prolonged)
	}
	// The last fall by a step (931 files, 1/20 of 18,615) before the
	// removal stalled: at 89 s it had fallen 1000 in ten seconds since 79 s.
	if exp < 110 || exp > 121 {
		t.Errorf("expired at %d s, want GoneTimeout after its figure last fell by a step (80..90 s), so 110..120 s", exp)
	}
}

// The same victim while its figure never falls: a finalizer or a runtime
// that cannot stop it. Jitter under a step (a walk a few files off, a
// working set a few pages lighter) is not progress: it stops counting at
// grace + GoneTimeout, as before, and is never prolonged.
func TestTeardownWithoutProgressExpiresAsBefore(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  thresholds.Signal
		note func(s *Set, sec int, at time.Time)
	}{
		{"disk figure jitters", thresholds.NodeFsInodesFree, func(s *Set, sec int, at time.Time) {
			s.NoteDisk(func(types.UID) (int64, int64, bool) { return 1 << 30, 18615 - int64(sec%7)*100, true }, at)
		}},
		{"working set jitters", thresholds.MemoryAvailable, func(s *Set, sec int, at time.Time) {
			s.NoteMemory(func(types.UID) (int64, bool) { return 300<<20 - int64(sec%5)<<20, true }, at)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(DefaultOptions())
			s.Add(Added{Pod: pod("v"), Origin: Evicted, Signal: tc.sig, Hard: true, At: t0, GraceSeconds: 5, Usage: 18615})
			stuck := terminating("v", t0.Add(5*time.Second), 5, v1.PodRunning)
			exp, prolonged := teardownSteps(t, s, 120, func(int) *v1.Pod { return stuck },
				func(sec int, at time.Time) { tc.note(s, sec, at) })
			if exp != 35 || prolonged != 0 {
				t.Errorf("expired at %d s (prolonged at %d), want 35 s (grace 5 s + GoneTimeout 30 s) and never prolonged", exp, prolonged)
			}
		})
	}
}

// A victim whose object a finalizer holds after the kubelet is done: its
// containers stopped and it turned Failed at the end of its grace, its
// figures are gone. That was progress, at 6 s; nothing moves after it, so
// it stops counting GoneTimeout later: a second past its wait.
func TestTeardownFinalizerStuckExpires(t *testing.T) {
	s := New(DefaultOptions())
	s.Add(Added{Pod: withContainers(pod("held"), "running", "running"), Origin: Evicted, Signal: thresholds.MemoryAvailable, Hard: true, At: t0, GraceSeconds: 5, Usage: 300 << 20})
	exp, prolonged := teardownSteps(t, s, 120, func(sec int) *v1.Pod {
		if sec < 6 {
			return withContainers(terminating("held", t0.Add(5*time.Second), 5, v1.PodRunning), "running", "running")
		}
		return withContainers(terminating("held", t0.Add(5*time.Second), 5, v1.PodFailed), "terminated", "terminated")
	}, func(sec int, at time.Time) {
		s.NoteMemory(func(types.UID) (int64, bool) { return 0, sec >= 6 }, at)
	})
	if exp != 36 || prolonged != 35 {
		t.Errorf("expired at %d s (prolonged at %d), want 36 s: GoneTimeout after its last progress (6 s), prolonged for its last second (35 s)", exp, prolonged)
	}
}

// Containers stopping one by one (a sidecar that takes its time, a runtime
// slow to stop each) and then the phase turning Failed are the kubelet
// visibly tearing the pod down: each keeps it counting GoneTimeout more. Its
// working set falling does too.
func TestTeardownStatusAndMemoryKeepCounting(t *testing.T) {
	s := New(DefaultOptions())
	s.Add(Added{Pod: withContainers(pod("v"), "running", "running", "running"), Origin: Evicted, Signal: thresholds.MemoryAvailable, Hard: true,
		At: t0, GraceSeconds: 5, Usage: 900 << 20})
	states := func(sec int) *v1.Pod {
		switch {
		case sec < 30:
			return withContainers(terminating("v", t0.Add(5*time.Second), 5, v1.PodRunning), "running", "running", "running")
		case sec < 60:
			return withContainers(terminating("v", t0.Add(5*time.Second), 5, v1.PodRunning), "terminated", "running", "running")
		case sec < 85:
			return withContainers(terminating("v", t0.Add(5*time.Second), 5, v1.PodRunning), "terminated", "terminated", "running")
		default:
			return withContainers(terminating("v", t0.Add(5*time.Second), 5, v1.PodRunning), "terminated", "terminated", "terminated")
		}
	}
	// The last container's 300 MiB go at 10 MiB a second from 100 s, then
	// its process hangs holding 100 MiB.
	ws := func(sec int) int64 { return int64(300-10*min(max(sec-100, 0), 20)) << 20 }
	exp, prolonged := teardownSteps(t, s, 300, states, func(sec int, at time.Time) {
		s.NoteMemory(func(types.UID) (int64, bool) { return ws(sec), true }, at)
	})
	if prolonged != 35 {
		t.Errorf("prolonged at %d s, want 35 s (a container stopped at 30 s)", prolonged)
	}
	// Steps of 15 MiB (1/20 of the 300 MiB seen), taken every 2 s: the
	// last at 120 s.
	if exp != 150 {
		t.Errorf("expired at %d s, want 150 s: GoneTimeout after its working set last fell by a step (120 s)", exp)
	}
}

// However steadily it moves, a teardown counts at most TeardownCap past its
// grace period: a pod releasing a little at a time cannot hold back the
// next eviction for ever.
func TestTeardownCap(t *testing.T) {
	opts := DefaultOptions()
	opts.TeardownCap = 2 * time.Minute
	s := New(opts)
	s.Add(Added{Pod: pod("slow"), Origin: Evicted, Signal: thresholds.NodeFsAvailable, Hard: true, At: t0, GraceSeconds: 5, Usage: 1 << 40})
	gone := terminating("slow", t0.Add(5*time.Second), 5, v1.PodRunning)
	exp, _ := teardownSteps(t, s, 600, func(int) *v1.Pod { return gone }, func(sec int, at time.Time) {
		s.NoteDisk(func(types.UID) (int64, int64, bool) { return (1 << 40) - int64(sec)*(1<<35), 1, true }, at)
	})
	if exp != 125 {
		t.Errorf("expired at %d s, want 125 s: grace 5 s + TeardownCap 2 m", exp)
	}
	// No cap: the old rule.
	opts.TeardownCap = 0
	s = New(opts)
	s.Add(Added{Pod: pod("slow"), Origin: Evicted, Signal: thresholds.NodeFsAvailable, Hard: true, At: t0, GraceSeconds: 5, Usage: 1 << 40})
	exp, _ = teardownSteps(t, s, 600, func(int) *v1.Pod { return gone }, func(sec int, at time.Time) {
		s.NoteDisk(func(types.UID) (int64, int64, bool) { return (1 << 40) - int64(sec)*(1<<35), 1, true }, at)
	})
	if exp != 35 {
		t.Errorf("TeardownCap 0: expired at %d s, want 35 s", exp)
	}
}

// withContainers gives p one container status per state ("running" or
// "terminated").
func withContainers(p *v1.Pod, states ...string) *v1.Pod {
	for i, st := range states {
		cs := v1.ContainerStatus{Name: "c" + string(rune('0'+i))}
		if st == "terminated" {
			cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: 143}
		} else {
			cs.State.Running = &v1.ContainerStateRunning{}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
	}
	return p
}
