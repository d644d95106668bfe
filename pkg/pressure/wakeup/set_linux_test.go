// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/cgrouptest"
)

func newSet(t *testing.T) *Set {
	t.Helper()
	return newSetWith(t, Options{})
}

func newSetWith(t *testing.T, opts Options) *Set {
	t.Helper()
	s, err := New(zaptest.NewLogger(t), clock.RealClock{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestWaitTimesOutWithAPoll(t *testing.T) {
	s := newSet(t)
	for _, timeout := range []time.Duration{0, -time.Second, 30 * time.Millisecond} {
		start := time.Now()
		w, err := s.Wait(context.Background(), timeout)
		took := time.Since(start)
		if err != nil || w.Source != SourcePoll || w.Name != "" || w.At.IsZero() {
			t.Errorf("Wait(%v) = %+v, %v; want a poll wake-up", timeout, w, err)
		}
		// A poll wake-up is the timeout's: that it came soon enough is not
		// for the wall clock to judge.
		if took < max(timeout, 0) {
			t.Errorf("Wait(%v) returned after %v, before its timeout", timeout, took)
		}
	}
	if !s.Active(SourcePoll) || s.Active(SourceMemoryEvents) {
		t.Errorf("an empty set: Active(poll) = %v, Active(memory_events) = %v", s.Active(SourcePoll), s.Active(SourceMemoryEvents))
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	s := newSet(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := s.Wait(ctx, time.Minute)
	// context.Canceled, not a poll wake-up: the context ended the minute's
	// wait.
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v after %v, want context.Canceled", err, time.Since(start))
	}
	// The set is still usable with a fresh context.
	if w, err := s.Wait(context.Background(), 10*time.Millisecond); err != nil || w.Source != SourcePoll {
		t.Errorf("Wait after a cancelled one = %+v, %v", w, err)
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := s.Wait(done, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a done context = %v, want context.Canceled", err)
	}
}

func TestWaitRefusesConcurrentCallers(t *testing.T) {
	s := newSet(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := s.Wait(ctx, time.Minute); errc <- err }()
	// Until the first Wait holds the set, a second one would be the first.
	for deadline := time.Now().Add(10 * time.Second); !s.waiting.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first Wait has not started after 10 s")
		}
	}
	if _, err := s.Wait(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "concurrently") {
		t.Errorf("a second Wait = %v, want a concurrency error", err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the first Wait = %v", err)
	}
}

func TestClosedSetRefusesWork(t *testing.T) {
	s := newSet(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := s.Wait(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
	if _, err := s.WatchMemoryEvents("x", "/"); !errors.Is(err, ErrClosed) {
		t.Errorf("WatchMemoryEvents after Close = %v, want ErrClosed", err)
	}
}

// TestMemoryEventsWatchOnAFile checks the inotify mechanism on an ordinary
// file, whose writes raise IN_MODIFY just as the kernel's notifications on
// memory.events do. (This machine has no cgroup v2 memory controller, so no
// memory.events exists; the kernfs path itself is exercised on cgroup.events
// below.) Files not named memory.events are read as a cgroup's own counters.
func TestMemoryEventsWatchOnAFile(t *testing.T) {
	s := newSetWith(t, Options{MemoryEventsInterval: -1}) // coalescing, not rate limiting, is under test
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.events"), filepath.Join(dir, "b.events")
	for _, p := range []string{a, b} {
		writeCounters(t, p, counters{})
	}
	wa, err := s.WatchMemoryEvents("a", a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WatchMemoryEvents("b", b); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Wait(context.Background(), 50*time.Millisecond); err != nil || w.Source != SourcePoll {
		t.Fatalf("Wait before any write = %+v, %v; want a poll", w, err)
	}

	// Three writes to a, one to b: a is coalesced into one wake-up.
	for i := range 3 {
		writeCounters(t, a, counters{high: int64(i + 1)})
	}
	writeCounters(t, b, counters{high: 1})
	got := map[string]int{}
	for {
		w, err := s.Wait(context.Background(), 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if w.Source == SourcePoll {
			break
		}
		if w.Source != SourceMemoryEvents {
			t.Fatalf("woken by %s, want memory_events", w.Source)
		}
		got[w.Name]++
	}
	if got["a"] != 1 || got["b"] != 1 || len(got) != 2 {
		t.Errorf("wake-ups by name = %v, want a:1 b:1", got)
	}

	// Removing the file ends the watch: the source reports inactive.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for wa.Status().Active && time.Now().Before(deadline) {
		if _, err := s.Wait(context.Background(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if st := wa.Status(); st.Active || !strings.Contains(st.Reason, "removed") {
		t.Errorf("after removing the file: %+v, want inactive, reason naming the removal", st)
	}
	if !s.Active(SourceMemoryEvents) {
		t.Errorf("the other watch went inactive too")
	}
	if _, err := s.WatchMemoryEvents("missing", filepath.Join(dir, "nope")); err == nil {
		t.Errorf("watching a missing file succeeded")
	}
}

// TestMemoryEventsWatchOnKernfs watches cgroup.events of a real cgroup2
// group: the kernel notifies it through the same cgroup_file_notify path as
// memory.events, and its "populated" field changes when a process enters.
// It holds none of the memory counters, so the notification is read and
// ignored.
func TestMemoryEventsWatchOnKernfs(t *testing.T) {
	group := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-events")
	s := newSet(t)
	ew, err := s.WatchMemoryEvents("group", group.Path("cgroup.events"))
	if err != nil {
		t.Fatal(err)
	}
	c := cgrouptest.StartChild(t)
	start := time.Now()
	if err := group.Add(c.Pid()); err != nil {
		t.Fatal(err)
	}
	if took, ok := waitIgnored(t, s, ew, 1); !ok {
		t.Fatalf("no notification read within %v of the write to cgroup.procs: %+v", took, ew.Status())
	}
	t.Logf("kernfs notification read %v after the write to cgroup.procs", time.Since(start))
	b, err := os.ReadFile(group.Path("cgroup.events"))
	if err != nil || !strings.Contains(string(b), "populated 1") {
		t.Errorf("cgroup.events = %q, %v; want populated 1", b, err)
	}
}

// waitIgnored runs Wait until ew has ignored at least n notifications, for
// up to 15 s, failing on any wake-up that is not a poll.
func waitIgnored(t *testing.T, s *Set, ew *EventsWatch, n int) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	for ew.Status().Ignored < n && time.Since(start) < 15*time.Second {
		w, err := s.Wait(context.Background(), 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if w.Source != SourcePoll {
			t.Errorf("woken by %s/%s for a file without memory counters", w.Source, w.Name)
		}
	}
	return time.Since(start), ew.Status().Ignored >= n
}

// TestMemoryEventsRearmOnKernfs removes a real cgroup2 group and creates it
// again. cgroupfs sends no inotify event for the removal, so only Rearm's
// check of the file's identity can find that the watch is dead.
func TestMemoryEventsRearmOnKernfs(t *testing.T) {
	parent := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-rearm")
	group := parent.Sub(t, "kubepods")
	s := newSet(t)
	ew, err := s.WatchMemoryEvents("group", group.Path("cgroup.events"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ew.Rearm(); again || err != nil {
		t.Fatalf("Rearm of a current watch = %v, %v; want false, nil", again, err)
	}
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Wait(context.Background(), 100*time.Millisecond); err != nil || w.Source != SourcePoll {
		t.Fatalf("Wait after removing the group = %+v, %v; want a poll", w, err)
	}
	t.Logf("after rmdir, before Rearm: %+v", ew.Status())
	if again, err := ew.Rearm(); again || err == nil || ew.Status().Active {
		t.Fatalf("Rearm with the group gone = %v, %v, %+v; want false, an error, inactive", again, err, ew.Status())
	}
	group = parent.Sub(t, "kubepods")
	if again, err := ew.Rearm(); !again || err != nil || !ew.Status().Active {
		t.Fatalf("Rearm with the group back = %v, %v, %+v; want true, nil, active", again, err, ew.Status())
	}
	c := cgrouptest.StartChild(t)
	if err := group.Add(c.Pid()); err != nil {
		t.Fatal(err)
	}
	if took, ok := waitIgnored(t, s, ew, 1); !ok {
		t.Fatalf("no notification from the new group within %v: %+v", took, ew.Status())
	}
}

func TestKickWakesAWaitAndCoalesces(t *testing.T) {
	s := newSet(t)
	// A kick before the Wait is collected at once; two of the same name
	// coalesce, another name is a wake-up of its own.
	s.Kick("pod_gone")
	s.Kick("pod_gone")
	s.Kick("other")
	for _, want := range []string{"pod_gone", "other"} {
		w, err := s.Wait(context.Background(), time.Minute)
		if err != nil || w.Source != SourceKick || w.Name != want {
			t.Fatalf("Wait = %+v, %v; want a kick named %q", w, err, want)
		}
	}
	// Nothing else is pending: the doorbell's leftover count must not turn
	// into a spurious wake-up.
	if w, err := s.Wait(context.Background(), 20*time.Millisecond); err != nil || w.Source != SourcePoll {
		t.Fatalf("Wait after the kicks = %+v, %v; want a poll", w, err)
	}
	// A kick during a Wait ends it early.
	time.AfterFunc(30*time.Millisecond, func() { s.Kick("late") })
	start := time.Now()
	w, err := s.Wait(context.Background(), time.Minute)
	// The kick, not the minute's poll, ended it.
	if err != nil || w.Source != SourceKick || w.Name != "late" {
		t.Fatalf("Wait = %+v, %v after %v; want the late kick", w, err, time.Since(start))
	}
	if !s.Active(SourceKick) {
		t.Error("Active(kick) = false, want true")
	}
	_ = s.Close()
	s.Kick("after close") // must not write to a closed fd or panic
}
