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
		s.NoteMemory(func(uid types.UID) (int64, bool) { v, ok := ws[uid]; return v, ok })
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
