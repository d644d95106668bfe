// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// Why the memory_events source keeps its own inotify watch rather than
// containerd/cgroups' cgroup2 Manager.EventChan: this test pins the
// library's behaviour on a stand-in cgroup directory (regular files, which
// inotify watches as it does cgroupfs files). Should a library upgrade make
// it fail, EventChan may have become usable: reconsider.
//
// What it shows:
//   - EventChan has no way to stop: no Close, no context. Its goroutine and
//     inotify fd live until the cgroup is empty (cgroup.events populated 0)
//     or memory.events cannot be read. kubepods is never meant to be
//     watched until then, and when it does empty (every pod evicted) the
//     watch ends for good, while evictd must keep watching for the next pods.
//   - A consumer that stops reading blocks the goroutine on its send, after
//     which not even an empty cgroup ends it: it leaks until someone reads.
//   - It reports memory.events, the hierarchical counters, only: a pod
//     hitting its own limit bumps those too, and telling that from kubepods'
//     own pressure needs memory.events.local (events.go).
func TestLibraryEventChanCannotBeStopped(t *testing.T) {
	mount := t.TempDir()
	dir := filepath.Join(mount, "kubepods")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Written in place, never truncated: a truncation is a notification of
	// its own, and the library could read the empty file it leaves.
	write := func(file, content string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte(content), 0); err != nil {
			t.Fatal(err)
		}
	}
	events := func(max int) string {
		return "low 0\nhigh 0\nmax " + strconv.Itoa(max) + "\noom 0\noom_kill 0\noom_group_kill 0\n"
	}
	write("memory.events", events(0))
	write("memory.events.local", events(0))
	write("cgroup.events", "populated 1\nfrozen 0\n")

	m, err := cgroup2.Load("/kubepods", cgroup2.WithMountpoint(mount))
	if err != nil {
		t.Fatal(err)
	}
	inotifyBefore := inotifyFds(t)
	ec, errc := m.EventChan()
	waitFor(t, "EventChan's goroutine and inotify fd", func() bool {
		return eventChanGoroutines() == 1 && inotifyFds(t) == inotifyBefore+1
	})

	// It works while read: a rise of max arrives.
	write("memory.events", events(1))
	select {
	case ev := <-ec:
		if ev.Max != 1 {
			t.Errorf("event %+v, want max 1", ev)
		}
	case err := <-errc:
		t.Fatalf("EventChan error: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no event for a change of memory.events")
	}

	// The rise evictd acts on is in memory.events.local; the library does
	// not watch it, and its Event has no field for it: after a rise there
	// and then one in memory.events, the next event is the latter's (an
	// event for the first would carry memory.events' max 1).
	write("memory.events.local", events(1))
	write("memory.events", events(2))
	select {
	case ev := <-ec:
		if ev.Max != 2 {
			t.Errorf("event %+v after memory.events.local rose, then memory.events; want max 2: the library watches memory.events.local", ev)
		}
	case err := <-errc:
		t.Fatalf("EventChan error: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no event for a change of memory.events")
	}

	// The consumer stops reading: one event fills the channel's buffer, the
	// next blocks the goroutine on its send.
	write("memory.events", events(3))
	waitFor(t, "the event to fill EventChan's buffer", func() bool { return len(ec) == 1 })
	write("memory.events", events(4))
	waitFor(t, "EventChan's goroutine to block on its send", eventChanBlockedOnSend)
	// The cgroup empties, which is the library's only way out: it does not
	// get there while blocked.
	write("cgroup.events", "populated 0\nfrozen 0\n")
	write("memory.events", events(5))
	if n := eventChanGoroutines(); n != 1 || !eventChanBlockedOnSend() || inotifyFds(t) != inotifyBefore+1 {
		t.Errorf("with the consumer gone and the cgroup empty, %d EventChan goroutines (blocked on its send: %v) and %d inotify fds remain; the library now stops: reconsider using it",
			n, eventChanBlockedOnSend(), inotifyFds(t)-inotifyBefore)
	}

	// Only reading again lets it see the empty cgroup and end.
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case _, ok := <-errc:
			done = !ok
		case <-ec:
		case <-deadline:
			t.Fatal("EventChan did not end after the cgroup emptied and its events were read")
		}
	}
	waitFor(t, "EventChan's goroutine and fd to end", func() bool {
		return eventChanGoroutines() == 0 && inotifyFds(t) == inotifyBefore
	})
}

// eventChanBlockedOnSend reports whether a goroutine EventChan started is
// blocked sending on its channel.
func eventChanBlockedOnSend() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[chan send") && strings.Contains(g, "cgroup2.(*Manager).EventChan.func") {
			return true
		}
	}
	return false
}

// eventChanGoroutines counts the goroutines EventChan started.
func eventChanGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "cgroup2.(*Manager).EventChan.func")
}

// inotifyFds counts this process's inotify instances.
func inotifyFds(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
