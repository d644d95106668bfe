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

	"go.uber.org/zap/zaptest"
	clocktesting "k8s.io/utils/clock/testing"
)

// counters is one memory.events or memory.events.local file, in the order
// and format the kernel prints them (mm/memcontrol.c, __memory_events_show).
type counters struct{ low, high, max, oom, oomKill, oomGroupKill int64 }

func (c counters) String() string {
	return fmt.Sprintf("low %d\nhigh %d\nmax %d\noom %d\noom_kill %d\noom_group_kill %d\n",
		c.low, c.high, c.max, c.oom, c.oomKill, c.oomGroupKill)
}

func writeCounters(t *testing.T, path string, c counters) {
	t.Helper()
	if err := os.WriteFile(path, []byte(c.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeSet is a set on a fake clock, so that rate limiting is under the
// test's control.
func fakeSet(t *testing.T, opts Options) (*Set, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(zaptest.NewLogger(t), clk, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

// collect returns the wake-ups Wait delivers until it first times out (each
// Wait waits up to quiet, real time: inotify events arrive within
// milliseconds).
func collect(t *testing.T, s *Set, quiet time.Duration) []Wakeup {
	t.Helper()
	var got []Wakeup
	for {
		w, err := s.Wait(context.Background(), quiet)
		if err != nil {
			t.Fatal(err)
		}
		if w.Source == SourcePoll {
			return got
		}
		got = append(got, w)
		if len(got) > 100 {
			t.Fatalf("more than 100 wake-ups: %v", got)
		}
	}
}

func wantWakeups(t *testing.T, step string, got []Wakeup, names ...string) {
	t.Helper()
	var gotNames []string
	for _, w := range got {
		if w.Source != SourceMemoryEvents {
			t.Errorf("%s: woken by %s/%s, want only memory_events", step, w.Source, w.Name)
		}
		gotNames = append(gotNames, w.Name)
	}
	if fmt.Sprint(gotNames) != fmt.Sprint(names) {
		t.Errorf("%s: memory_events wake-ups %v, want %v", step, gotNames, names)
	}
}

// kubepodsDir makes a directory holding memory.events and, with local,
// memory.events.local, as the kernel shows them for kubepods.
func kubepodsDir(t *testing.T, hier counters, local *counters) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kubepods")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCounters(t, filepath.Join(dir, "memory.events"), hier)
	if local != nil {
		writeCounters(t, filepath.Join(dir, "memory.events.local"), *local)
	}
	return dir
}

// A pod (or container) hitting its own memory.high or memory.max bumps
// kubepods' hierarchical memory.events; only kubepods' own counters
// (memory.events.local) mean that the pods as a whole are short of memory.
func TestMemoryEventsWakeOnlyForKubepodsOwnCounters(t *testing.T) {
	s, clk := fakeSet(t, Options{})
	hier, local := counters{high: 12, max: 3}, counters{}
	dir := kubepodsDir(t, hier, &local)
	ew, err := s.WatchMemoryEvents("kubepods", filepath.Join(dir, "memory.events"))
	if err != nil {
		t.Fatal(err)
	}
	if st := ew.Status(); st.Path != filepath.Join(dir, "memory.events.local") || !st.Active {
		t.Fatalf("status %+v, want an active watch on memory.events.local", st)
	}
	steps := []struct {
		name        string
		hier, local counters
		want        []string
	}{
		{"a container reaches its memory.high", counters{high: 40, max: 3}, counters{}, nil},
		{"a container reaches its memory.max and is OOM-killed", counters{high: 40, max: 9, oom: 1, oomKill: 1, oomGroupKill: 1}, counters{}, nil},
		{"kubepods reaches its own memory.max", counters{high: 40, max: 10, oom: 1, oomKill: 1, oomGroupKill: 1}, counters{max: 1}, []string{"kubepods"}},
		{"a kubepods-level OOM kills a pod's process", counters{high: 40, max: 11, oom: 2, oomKill: 2, oomGroupKill: 2}, counters{max: 2, oom: 1}, []string{"kubepods"}},
		{"kubepods' memory.low is breached by node-wide reclaim", counters{low: 1, high: 40, max: 11, oom: 2, oomKill: 2, oomGroupKill: 2}, counters{low: 1, max: 2, oom: 1}, []string{"kubepods"}},
		{"kubepods' memory.high is exceeded", counters{low: 1, high: 41, max: 11, oom: 2, oomKill: 2, oomGroupKill: 2}, counters{low: 1, high: 1, max: 2, oom: 1}, []string{"kubepods"}},
		{"pods again", counters{low: 1, high: 90, max: 30, oom: 5, oomKill: 7, oomGroupKill: 5}, counters{low: 1, high: 1, max: 2, oom: 1}, nil},
	}
	for _, st := range steps {
		// Far apart, so that rate limiting plays no part here. The kernel
		// bumps the local counter first, then each ancestor's.
		clk.SetTime(clk.Now().Add(time.Minute))
		if st.local != local {
			writeCounters(t, filepath.Join(dir, "memory.events.local"), st.local)
		}
		writeCounters(t, filepath.Join(dir, "memory.events"), st.hier)
		local = st.local
		ignored := ew.Status().Ignored
		wantWakeups(t, st.name, collect(t, s, 200*time.Millisecond), st.want...)
		// Only the local file is watched: a step that leaves it alone is
		// not even read.
		if st.want == nil && st.local == local && ew.Status().Ignored != ignored {
			t.Errorf("%s: memory.events.local unchanged, yet %d notifications read", st.name, ew.Status().Ignored-ignored)
		}
	}
	if st := ew.Status(); st.Suppressed != 0 {
		t.Errorf("suppressed %d wake-ups a minute apart", st.Suppressed)
	}
}

// Without memory.events.local (kernels before 5.2), kubepods' memory.events
// counts every descendant's events and cannot tell kubepods' own limit hits
// from its pods'. The one node-pressure event it still shows is a kill by
// the kernel's global OOM killer: oom_kill rises with no memcg OOM (oom)
// anywhere below kubepods.
func TestMemoryEventsHierarchicalOnlyWakeForKillsWithoutAMemcgOOM(t *testing.T) {
	s, clk := fakeSet(t, Options{})
	dir := kubepodsDir(t, counters{}, nil)
	path := filepath.Join(dir, "memory.events")
	ew, err := s.WatchMemoryEvents("kubepods", path)
	if err != nil {
		t.Fatal(err)
	}
	if st := ew.Status(); st.Path != path || !st.Active || !strings.Contains(st.Reason, "hierarchical") {
		t.Fatalf("status %+v, want an active watch on the hierarchical memory.events", st)
	}
	steps := []struct {
		name    string
		advance time.Duration
		c       counters
		want    []string
	}{
		{"containers at memory.high and memory.max", time.Minute, counters{high: 50, max: 7}, nil},
		{"a container OOM (memcg OOM, then its kills)", time.Minute, counters{high: 50, max: 8, oom: 1, oomKill: 3, oomGroupKill: 1}, nil},
		{"the global OOM killer kills a pod's container", time.Minute, counters{high: 50, max: 8, oom: 1, oomKill: 5, oomGroupKill: 2}, []string{"kubepods"}},
		{"a memcg OOM read before its kill is counted", time.Minute, counters{high: 50, max: 9, oom: 2, oomKill: 5, oomGroupKill: 2}, nil},
		{"... then the kill it explains", 10 * time.Millisecond, counters{high: 50, max: 9, oom: 2, oomKill: 6, oomGroupKill: 3}, nil},
	}
	for _, st := range steps {
		clk.SetTime(clk.Now().Add(st.advance))
		ignored := ew.Status().Ignored
		writeCounters(t, path, st.c)
		wantWakeups(t, st.name, collect(t, s, 200*time.Millisecond), st.want...)
		if st.want == nil && ew.Status().Ignored == ignored {
			t.Errorf("%s: no notification counted as ignored", st.name)
		}
	}
}

// A storm of kubepods-level events (kubepods pinned at its memory.max bumps
// max on every charge attempt) wakes the loop at most once per interval; the
// bumps in between are counted, and one wake-up at the end of the interval
// stands for them.
func TestMemoryEventsRateLimited(t *testing.T) {
	s, clk := fakeSet(t, Options{})
	t0 := clk.Now()
	path := filepath.Join(t.TempDir(), "memory.events.local")
	writeCounters(t, path, counters{})
	ew, err := s.WatchMemoryEvents("kubepods", path)
	if err != nil {
		t.Fatal(err)
	}
	writeCounters(t, path, counters{max: 1})
	got := collect(t, s, 200*time.Millisecond)
	wantWakeups(t, "the first bump", got, "kubepods")
	if len(got) == 1 && !got[0].At.Equal(t0) {
		t.Errorf("first wake-up at %v, want %v", got[0].At, t0)
	}

	// Two more bumps within the interval: suppressed.
	clk.SetTime(t0.Add(300 * time.Millisecond))
	writeCounters(t, path, counters{max: 2})
	wantWakeups(t, "a second bump 300ms later", collect(t, s, 200*time.Millisecond))
	clk.SetTime(t0.Add(600 * time.Millisecond))
	writeCounters(t, path, counters{max: 3})
	wantWakeups(t, "a third bump 600ms later", collect(t, s, 200*time.Millisecond))
	if st := ew.Status(); st.Suppressed != 2 {
		t.Errorf("Suppressed = %d after two bumps within the interval, want 2", st.Suppressed)
	}

	// At the end of the interval the suppressed bumps deliver one wake-up.
	clk.SetTime(t0.Add(time.Second))
	got = collect(t, s, 50*time.Millisecond)
	wantWakeups(t, "the end of the interval", got, "kubepods")
	if len(got) == 1 && !got[0].At.Equal(t0.Add(time.Second)) {
		t.Errorf("deferred wake-up at %v, want %v", got[0].At, t0.Add(time.Second))
	}

	// The next bump after a full interval delivers at once.
	clk.SetTime(t0.Add(2500 * time.Millisecond))
	writeCounters(t, path, counters{max: 4})
	wantWakeups(t, "a bump a full interval later", collect(t, s, 200*time.Millisecond), "kubepods")
	if st := ew.Status(); st.Suppressed != 2 {
		t.Errorf("Suppressed = %d, want still 2", st.Suppressed)
	}
}

// A read that does not parse (a malformed line, or a file cut short of its
// final newline) is judged as a whole: it delivers no wake-up, even when its
// well-formed lines show a rise, is counted as ignored, and leaves the
// baseline as it was, so the next good read still sees the rise.
func TestMemoryEventsGarbledReadIgnored(t *testing.T) {
	s, clk := fakeSet(t, Options{MemoryEventsInterval: -1})
	path := filepath.Join(t.TempDir(), "memory.events.local")
	writeCounters(t, path, counters{})
	ew, err := s.WatchMemoryEvents("kubepods", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, garbled := range []struct{ name, content string }{
		{"a malformed line", "low 0\nhigh 0\nmax 5\noom x\noom_kill 0\noom_group_kill 0\n"},
		{"a truncated read", "low 0\nhigh 0\nmax 6"},
	} {
		clk.SetTime(clk.Now().Add(time.Minute))
		ignored := ew.Status().Ignored
		if err := os.WriteFile(path, []byte(garbled.content), 0o644); err != nil {
			t.Fatal(err)
		}
		wantWakeups(t, garbled.name, collect(t, s, 200*time.Millisecond))
		if ew.Status().Ignored == ignored {
			t.Errorf("%s: not counted as ignored", garbled.name)
		}
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	writeCounters(t, path, counters{max: 5})
	wantWakeups(t, "the first good read after the garbled ones", collect(t, s, 200*time.Millisecond), "kubepods")
	if st := ew.Status(); !st.Active || st.Suppressed != 0 {
		t.Errorf("status %+v, want active with nothing suppressed", st)
	}
}

// A custom interval is honoured, and a negative one turns the limit off.
func TestMemoryEventsIntervalOption(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		// after is how long after the first bump the second comes.
		after time.Duration
		want  []string
	}{
		{interval: 5 * time.Second, after: 4 * time.Second, want: nil},
		{interval: 5 * time.Second, after: 5 * time.Second, want: []string{"kubepods"}},
		{interval: -1, after: 0, want: []string{"kubepods"}},
	} {
		t.Run(fmt.Sprintf("%v after %v", tc.interval, tc.after), func(t *testing.T) {
			s, clk := fakeSet(t, Options{MemoryEventsInterval: tc.interval})
			path := filepath.Join(t.TempDir(), "memory.events.local")
			writeCounters(t, path, counters{})
			if _, err := s.WatchMemoryEvents("kubepods", path); err != nil {
				t.Fatal(err)
			}
			writeCounters(t, path, counters{high: 1})
			wantWakeups(t, "the first bump", collect(t, s, 200*time.Millisecond), "kubepods")
			clk.SetTime(clk.Now().Add(tc.after))
			writeCounters(t, path, counters{high: 2})
			wantWakeups(t, "the second bump", collect(t, s, 200*time.Millisecond), tc.want...)
		})
	}
}

// Rearm on ordinary files: after IN_IGNORED, and after a replacement the
// kernel could not report (the old file held open, as cgroupfs never
// reports a removed cgroup's files).
func TestMemoryEventsRearm(t *testing.T) {
	s := newSetWith(t, Options{MemoryEventsInterval: -1})
	dir := kubepodsDir(t, counters{}, &counters{})
	local := filepath.Join(dir, "memory.events.local")
	recreate := func() {
		t.Helper()
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeCounters(t, filepath.Join(dir, "memory.events"), counters{})
		writeCounters(t, local, counters{})
	}
	ew, err := s.WatchMemoryEvents("kubepods", filepath.Join(dir, "memory.events"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ew.Rearm(); again || err != nil {
		t.Fatalf("Rearm of a current watch = %v, %v; want false, nil", again, err)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	collect(t, s, 100*time.Millisecond)
	if st := ew.Status(); st.Active || !strings.Contains(st.Reason, "removed") {
		t.Fatalf("after removal: %+v, want inactive", st)
	}
	if again, err := ew.Rearm(); again || err == nil || ew.Status().Active {
		t.Fatalf("Rearm of a missing file = %v, %v, %+v; want false, an error, inactive", again, err, ew.Status())
	}
	recreate()
	if again, err := ew.Rearm(); !again || err != nil || !ew.Status().Active || ew.Status().Path != local {
		t.Fatalf("Rearm once the file is back = %v, %v, %+v", again, err, ew.Status())
	}
	writeCounters(t, local, counters{max: 1})
	wantWakeups(t, "a bump after re-arming", collect(t, s, 100*time.Millisecond), "kubepods")

	old, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	recreate()
	collect(t, s, 100*time.Millisecond)
	if !ew.Status().Active {
		t.Fatalf("the kernel reported the removal of an open file: the test no longer mimics cgroupfs")
	}
	if again, err := ew.Rearm(); !again || err != nil {
		t.Fatalf("Rearm after a replacement = %v, %v; want true, nil", again, err)
	}
	writeCounters(t, local, counters{oom: 1})
	wantWakeups(t, "a bump of the replacing file", collect(t, s, 100*time.Millisecond), "kubepods")

	// Close drops the watch and its status.
	ew.Close()
	writeCounters(t, local, counters{oom: 2})
	wantWakeups(t, "a bump after Close", collect(t, s, 100*time.Millisecond))
	if len(s.Statuses()) != 0 || s.Active(SourceMemoryEvents) {
		t.Errorf("after Close: statuses %+v", s.Statuses())
	}
	if again, err := ew.Rearm(); again || err != nil {
		// A closed watch is not re-armed.
		t.Errorf("Rearm after Close = %v, %v; want false, nil", again, err)
	}
}
