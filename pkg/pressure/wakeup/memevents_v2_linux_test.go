// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// The v2 twins of the memcg threshold tests (memcg_linux_test.go), which
// run them on a cgroup v2-only host instead: there evictd is woken by an
// inotify watch on kubepods' memory.events, whose counters the kernel moves
// when kubepods reaches its own memory.high or memory.max (events.go). Each
// asserts what its v1 test does of the threshold, on the watch, with real
// groups and a real process charging them.

// eventsRig is a kubepods-like group with a pod group inside it and a
// memory.events watch on kubepods; kubepods' memory.high is set above its
// usage by high.
type eventsRig struct {
	kubepods, pod *cgrouptest.Cgroup
	set           *Set
	ew            *EventsWatch
}

func newEventsRig(t *testing.T, parent *cgrouptest.Cgroup, high int64) *eventsRig {
	t.Helper()
	r := &eventsRig{set: newSet(t)}
	if parent == nil {
		r.kubepods = cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-kubepods")
	} else {
		r.kubepods = parent.Sub(t, "kubepods")
	}
	r.pod = r.kubepods.Sub(t, "pod")
	r.setHigh(t, high)
	var err error
	if r.ew, err = r.set.WatchMemoryEvents("kubepods", r.kubepods.Path("memory.events")); err != nil {
		t.Fatalf("watching a fresh group's memory.events: %v", err)
	}
	return r
}

// setHigh sets kubepods' memory.high that far above its usage now.
func (r *eventsRig) setHigh(t *testing.T, above int64) {
	t.Helper()
	usage, err := r.kubepods.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.kubepods.Write("memory.high", fmt.Sprint(usage+above)); err != nil {
		t.Fatal(err)
	}
}

// cross starts a child in the pod group that touches mib MiB, watching
// kubepods' usage cross its memory.high, and waits for the set's next
// wake-up. Past memory.high the kernel throttles the child (reclaim, then a
// sleep of up to 2 s on each return to user space), so that the touch would
// crawl: once woken, memory.high goes to max and the child finishes.
func (r *eventsRig) cross(t *testing.T, mib int) (w Wakeup, woke cgrouptest.Mono, touched cgrouptest.Touched, werr error) {
	t.Helper()
	high, err := cgrouptest.ReadInt(r.kubepods.Path("memory.high"))
	if err != nil {
		t.Fatal(err)
	}
	c := cgrouptest.StartChild(t, r.pod)
	if err := c.BeginTouch(mib, &cgrouptest.Watch{File: r.kubepods.UsagePath(), Threshold: high}); err != nil {
		t.Fatal(err)
	}
	w, werr = r.set.Wait(context.Background(), 15*time.Second)
	woke = cgrouptest.Now()
	if err := r.kubepods.Write("memory.high", "max"); err != nil {
		t.Fatal(err)
	}
	if touched, err = c.EndTouch(cgrouptest.TouchTimeout); err != nil {
		t.Fatal(err)
	}
	return w, woke, touched, werr
}

// localHigh is kubepods' own count of reaching its memory.high.
func (r *eventsRig) localHigh(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(r.kubepods.Path("memory.events.local"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "high "); ok {
			var n int64
			if _, err := fmt.Sscan(v, &n); err == nil {
				return n
			}
		}
	}
	t.Fatalf("no high line in %s: %q", r.kubepods.Path("memory.events.local"), b)
	return 0
}

// eventsWakeOnCrossing (TestMemcgThresholdWakesOnCrossing): a process in a
// pod charging past kubepods' memory.high wakes the set, once per crossing,
// by kubepods' watch.
func eventsWakeOnCrossing(t *testing.T) {
	r := newEventsRig(t, nil, trialAbove)
	for i := range 3 {
		if i > 0 {
			// The previous child has exited: the next crossing is a new one.
			r.setHigh(t, trialAbove)
		}
		w, woke, touched, err := r.cross(t, trialAllocMiB)
		if err != nil || w.Source != SourceMemoryEvents || w.Name != "kubepods" {
			t.Fatalf("crossing %d: Wait = %+v, %v; want kubepods' memory_events", i, w, err)
		}
		if touched.Crossed == 0 {
			t.Fatalf("crossing %d: the child never read a usage at or above memory.high (last %d)", i, touched.Last)
		}
		t.Logf("crossing %d: woken %v after the child saw the usage cross memory.high", i, woke.Sub(touched.Crossed))
	}
	st := r.ew.Status()
	if !st.Active || st.Source != SourceMemoryEvents || !r.set.Active(SourceMemoryEvents) || r.set.Active(SourceMemcgThreshold) {
		t.Errorf("status after the crossings = %+v, Active(memcg_threshold) = %v; want an active memory_events watch only",
			st, r.set.Active(SourceMemcgThreshold))
	}
}

// eventsRearmFollowsKubepods (TestMemcgThresholdRearmReplacesTheOldOne):
// kubepods removed and made again, the re-armed watch is on the new group:
// the new group's crossing wakes it, and the old group's file no longer can.
func eventsRearmFollowsKubepods(t *testing.T) {
	parent := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-rearm")
	r := newEventsRig(t, parent, trialAbove)
	if err := r.kubepods.Remove(); err != nil {
		t.Fatal(err)
	}
	if again, err := r.ew.Rearm(); again || err == nil || r.ew.Status().Active {
		t.Fatalf("Rearm with kubepods gone = %v, %v, %+v; want false, an error, inactive", again, err, r.ew.Status())
	}
	r.kubepods = parent.Sub(t, "kubepods")
	r.pod = r.kubepods.Sub(t, "pod")
	r.setHigh(t, trialAbove)
	if again, err := r.ew.Rearm(); !again || err != nil || !r.ew.Status().Active {
		t.Fatalf("Rearm with kubepods back = %v, %v, %+v; want true, nil, active", again, err, r.ew.Status())
	}
	w, _, _, err := r.cross(t, trialAllocMiB)
	if n := r.localHigh(t); n == 0 {
		t.Fatalf("the new kubepods never reached its memory.high (memory.events.local high %d)", n)
	}
	if err != nil || w.Source != SourceMemoryEvents || w.Name != "kubepods" {
		t.Fatalf("Wait after the new kubepods' crossing = %+v, %v; want kubepods' memory_events", w, err)
	}
}

// eventsFailOverPerSource (TestMemcgThresholdFailsOverPerSource): a watch
// that cannot be set (no memory controller in the group, a missing file)
// is inactive naming its file, and leaves its good neighbour active; the
// good one goes inactive once its group is gone.
func eventsFailOverPerSource(t *testing.T) {
	good := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-good")
	// A group whose parent does not hand it the memory controller has no
	// memory.events, as a v1 memory cgroup has none.
	noMemory := filepath.Join(good.Dir(), "no-memory", "memory.events")
	if err := os.Mkdir(filepath.Dir(noMemory), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := good.Write("cgroup.subtree_control", "-memory"); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone", "memory.events")
	s := newSet(t)
	ok, err := s.WatchMemoryEvents("good", good.Path("memory.events"))
	if err != nil {
		t.Fatalf("watching a real group: %v", err)
	}
	for _, tc := range []struct{ name, path string }{{"no-memory", noMemory}, {"missing", missing}} {
		ew, err := s.WatchMemoryEvents(tc.name, tc.path)
		if err == nil {
			t.Errorf("watching %s succeeded, want an error", tc.path)
		}
		if ew != nil {
			if st := ew.Status(); st.Active {
				t.Errorf("%s: status %+v, want inactive", tc.name, st)
			}
		}
		if err != nil && !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %q does not name %s", tc.name, err, tc.path)
		}
	}
	if !ok.Status().Active || !s.Active(SourceMemoryEvents) {
		t.Errorf("the good watch went inactive with its failing neighbours: %+v", ok.Status())
	}
	if err := good.Remove(); err != nil {
		t.Fatal(err)
	}
	if again, err := ok.Rearm(); again || err == nil {
		t.Errorf("re-arming on a removed group = %v, %v; want an error", again, err)
	}
	if st := ok.Status(); st.Active {
		t.Errorf("after its group was removed: %+v, want inactive", st)
	}
}

// eventsOnTheRootRefused (TestMemcgThresholdOnTheRootMemcgArms): v1 arms a
// threshold on the node's root memcg; v2's root group has no memory.events
// (the kernel keeps none for the root), so a watch there fails naming the
// file, and the set goes on with its other sources: the node is watched
// through PSI and kubepods instead.
func eventsOnTheRootRefused(t *testing.T) {
	cgrouptest.Require(t)
	root := filepath.Join(cgrouptest.MemoryRoot, "memory.events")
	if _, err := os.Stat(root); err == nil {
		t.Fatalf("%s exists; this kernel keeps memory events for the root group", root)
	}
	s := newSet(t)
	if _, err := s.WatchMemoryEvents("node", root); err == nil || !strings.Contains(err.Error(), root) {
		t.Errorf("watching %s = %v; want an error naming it", root, err)
	}
	kubepods := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-node")
	if _, err := s.WatchMemoryEvents("kubepods", kubepods.Path("memory.events")); err != nil || !s.Active(SourceMemoryEvents) {
		t.Errorf("the set refused a good watch after the root's: %v", err)
	}
}

// eventsHoldNoFd (TestMemcgThresholdHoldsOneNonblockingFd): memory.events
// watches share the set's one inotify fd, made for the first of them: 20
// re-arms and a failed one open nothing more, and Close leaves nothing
// open.
func eventsHoldNoFd(t *testing.T) {
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-fds")
	before := openFds(t)
	s := newSet(t)
	withSet := openFds(t)
	ew, err := s.WatchMemoryEvents("kubepods", cg.Path("memory.events"))
	if err != nil {
		t.Fatal(err)
	}
	if got := openFds(t); got != withSet+1 {
		t.Errorf("with a watch %d fds are open, want %d (the set's and its inotify instance)", got, withSet+1)
	}
	for i := range 20 {
		if _, err := ew.Rearm(); err != nil {
			t.Fatalf("re-arm %d: %v", i, err)
		}
	}
	if got := openFds(t); got != withSet+1 {
		t.Errorf("after 20 re-arms %d fds are open, want %d", got, withSet+1)
	}
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := ew.Rearm(); err == nil || !strings.Contains(err.Error(), cg.Dir()) {
		t.Errorf("re-arming on a removed group: %v; want an error naming %s", err, cg.Dir())
	}
	if got := openFds(t); got != withSet+1 {
		t.Errorf("after a failed re-arm %d fds are open, want %d", got, withSet+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openFds(t); got != before {
		t.Errorf("after Close %d fds are open, want %d as before New", got, before)
	}
}
