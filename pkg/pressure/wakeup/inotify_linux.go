// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// inotifyState is the one inotify instance shared by every memory.events
// watch; it sits in the epoll set like any other source.
type inotifyState struct {
	fd      int
	watches map[int32][]*EventsWatch // watch descriptor → the watches on that file
	all     []*EventsWatch           // every watch, in the order added
	buf     [4096]byte
	rbuf    [1024]byte // one counters file (memory.events is about 100 bytes)
}

// eventsMask: IN_MODIFY for each change of a counter; IN_DELETE_SELF and the
// IN_IGNORED that always follows when the watched file goes away. cgroupfs
// sends neither when a cgroup is removed (see Rearm).
const eventsMask = unix.IN_MODIFY | unix.IN_DELETE_SELF

// EventsWatch is an inotify watch on a cgroup v2 memory.events file.
type EventsWatch struct {
	set    *Set
	status *Status
	asked  string // the path given to WatchMemoryEvents
	wd     int32  // -1 while no watch is held
	dev    uint64 // the watched file, taken before the watch was added
	ino    uint64
	armed  bool // armed at least once: later arms are re-arms
	closed bool
	judge  eventJudge
	// delivered is when the last wake-up was queued; due, when non-zero, is
	// when a suppressed rise must be delivered.
	delivered time.Time
	due       time.Time
}

// Status returns the source's current status.
func (w *EventsWatch) Status() Status {
	w.set.mu.Lock()
	defer w.set.mu.Unlock()
	return *w.status
}

// WatchMemoryEvents wakes the agent when the memory.events file at path
// shows memory pressure of its cgroup itself, not of its descendants. The
// kernel notifies (IN_MODIFY) on any counter change of the file; on each,
// the counters are read and compared with the previous read:
//
//   - If path is a memory.events and memory.events.local exists beside it
//     (kernel ≥ 5.2), that file is watched instead (Status.Path names it),
//     and a rise of its low, high, max, oom, oom_kill or oom_group_kill wakes
//     the agent: the cgroup's own protection or limit was hit.
//   - Without it, memory.events is hierarchical and only a rise of oom_kill
//     with no memcg OOM (a kill by the global OOM killer) wakes the agent.
//   - A file with another name is taken to hold a cgroup's own counters, as
//     memory.events.local does.
//
// Notifications that show no such rise are counted in Status.Ignored. A
// watch delivers at most one wake-up per Options.MemoryEventsInterval; rises
// in between are counted in Status.Suppressed and delivered as one wake-up
// when the interval ends. See events.go for the reasoning.
//
// It always returns a handle; when the error is non-nil the source is
// reported inactive and logged, and Rearm tries again.
func (s *Set) WatchMemoryEvents(name, path string) (*EventsWatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &EventsWatch{set: s, asked: path, wd: -1, status: s.addStatus(&Status{Source: SourceMemoryEvents, Name: name, Path: path})}
	if s.closed {
		w.status.Reason = ErrClosed.Error()
		return w, ErrClosed
	}
	if reason, err := w.armLocked(); err != nil {
		s.deactivate(w.status, reason, err)
		return w, err
	}
	s.activate(w.status, w.activeReason())
	return w, nil
}

// Rearm makes sure the watch is on the file its path names now, and watches
// again if it is not: after the file was removed (IN_IGNORED made the watch
// inactive), after a failed first attempt, or when the path names another
// file than the one watched. The last case is how a removed cgroup shows on
// cgroupfs: the kernel sends no inotify event when a cgroup directory is
// removed (the watch holds the file's inode, which stays with nlink 1), so
// the old watch looks active but never fires again; Rearm compares the
// device and inode number of the watched file with the path's. It costs one
// stat(2) when nothing changed, and is meant to be called after each
// observation. It reports whether it armed the watch (logged at Info once per
// re-arm); while the file is missing the watch is inactive and the error says
// so (logged once, when the watch goes inactive).
func (w *EventsWatch) Rearm() (bool, error) {
	s := w.set
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, ErrClosed
	}
	if w.closed {
		return false, nil
	}
	var st unix.Stat_t
	if w.wd >= 0 {
		err := unix.Stat(w.status.Path, &st)
		if err == nil && uint64(st.Dev) == w.dev && st.Ino == w.ino {
			return false, nil
		}
		w.dropLocked()
		if err != nil {
			s.deactivate(w.status, "the watched file was removed", nil)
			return false, fmt.Errorf("wakeup: %s: %w", w.status.Path, err)
		}
	} else {
		path, _ := eventsFile(w.asked)
		if err := unix.Stat(path, &st); err != nil {
			// Still missing: stay inactive without logging it again.
			return false, fmt.Errorf("wakeup: %s: %w", path, err)
		}
	}
	wasArmed := w.armed
	if reason, err := w.armLocked(); err != nil {
		s.deactivate(w.status, reason, err)
		return false, err
	}
	if !wasArmed {
		s.activate(w.status, w.activeReason())
		return true, nil
	}
	w.status.Active, w.status.Reason = true, w.activeReason()
	s.log.Info("wake-up source re-armed",
		zap.String("source", string(w.status.Source)), zap.String("name", w.status.Name),
		zap.String("path", w.status.Path), zap.String("reason", w.status.Reason))
	return true, nil
}

// Close removes the watch and its status from the set; Rearm then does
// nothing.
func (w *EventsWatch) Close() {
	s := w.set
	s.mu.Lock()
	defer s.mu.Unlock()
	w.closed = true
	if !s.closed {
		w.dropLocked()
		if s.inotify != nil {
			s.inotify.all = slices.DeleteFunc(s.inotify.all, func(x *EventsWatch) bool { return x == w })
		}
	}
	s.statuses = slices.DeleteFunc(s.statuses, func(x *Status) bool { return x == w.status })
	w.status.Active, w.status.Reason = false, "closed"
}

// eventsFile is the file to watch for path, and whether it holds the
// cgroup's own counters.
func eventsFile(path string) (string, bool) {
	if filepath.Base(path) != "memory.events" {
		return path, true
	}
	if local := path + ".local"; unix.Access(local, unix.F_OK) == nil {
		return local, true
	}
	return path, false
}

func (w *EventsWatch) activeReason() string {
	limit := "no rate limit"
	if iv := w.set.eventsInterval; iv > 0 {
		limit = "at most one wake-up per " + iv.String()
	}
	if w.judge.local {
		return "inotify IN_MODIFY; wakes when the cgroup's own low, high, max, oom, oom_kill or oom_group_kill rises; " + limit
	}
	return "inotify IN_MODIFY on hierarchical counters (no memory.events.local); wakes only when oom_kill rises without a memcg OOM (a global OOM kill); " + limit
}

// armLocked adds the inotify watch and reads the baseline counters. On error
// it returns a short reason for the status.
func (w *EventsWatch) armLocked() (string, error) {
	s := w.set
	path, local := eventsFile(w.asked)
	w.status.Path = path
	if err := s.ensureInotifyLocked(); err != nil {
		return "watch failed", err
	}
	// The file's identity is taken before the watch is added: if the file
	// is replaced in between, Rearm finds a different file and watches
	// again rather than trusting a watch on the old one.
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "watch failed", fmt.Errorf("wakeup: stat %s: %w", path, err)
	}
	wd, err := unix.InotifyAddWatch(s.inotify.fd, path, eventsMask)
	if err != nil {
		return "watch failed", fmt.Errorf("wakeup: inotify watch %s: %w", path, err)
	}
	n, err := readFile(path, s.inotify.rbuf[:])
	if err != nil {
		if len(s.inotify.watches[int32(wd)]) == 0 {
			_, _ = unix.InotifyRmWatch(s.inotify.fd, uint32(wd))
		}
		return "reading the counters failed", err
	}
	w.wd, w.dev, w.ino = int32(wd), uint64(st.Dev), st.Ino
	w.judge = eventJudge{local: local, last: parseEventCounters(s.inotify.rbuf[:n])}
	w.due = time.Time{}
	// Watching a file twice yields the same descriptor.
	s.inotify.watches[w.wd] = append(s.inotify.watches[w.wd], w)
	if !slices.Contains(s.inotify.all, w) {
		s.inotify.all = append(s.inotify.all, w)
	}
	w.armed = true
	return "", nil
}

// dropLocked removes w's watch, and the kernel's when no other watch shares
// it. The IN_IGNORED the kernel then queues finds no watch and is dropped.
func (w *EventsWatch) dropLocked() {
	in := w.set.inotify
	if w.wd < 0 || in == nil {
		w.wd, w.due = -1, time.Time{}
		return
	}
	rest := slices.DeleteFunc(in.watches[w.wd], func(x *EventsWatch) bool { return x == w })
	if len(rest) == 0 {
		delete(in.watches, w.wd)
		_, _ = unix.InotifyRmWatch(in.fd, uint32(w.wd))
	} else {
		in.watches[w.wd] = rest
	}
	w.wd, w.due = -1, time.Time{}
}

// readFile reads a small file into buf with open, pread and close. The file
// is not kept open: an open file pins the dentry, and the kernel then reports
// the file's removal (IN_DELETE_SELF, IN_IGNORED) only once it is closed.
// Reads are as rare as the kernel's notifications (at most 100 per second
// per file).
func readFile(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("wakeup: open %s: %w", path, err)
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("wakeup: read %s: %w", path, err)
		}
		if m == 0 {
			return n, nil
		}
		n += m
	}
	return 0, fmt.Errorf("wakeup: read %s: larger than %d bytes", path, len(buf))
}

func (s *Set) ensureInotifyLocked() error {
	if s.inotify != nil {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("wakeup: inotify_init1: %w", err)
	}
	if _, err := s.register(&registration{kind: regInotify, fd: fd}, unix.EPOLLIN); err != nil {
		unix.Close(fd)
		return err
	}
	s.inotify = &inotifyState{fd: fd, watches: map[int32][]*EventsWatch{}}
	return nil
}

// inotifyEventLocked drains the inotify queue, reading the counters of each
// modified watch.
func (s *Set) inotifyEventLocked(now time.Time) {
	in := s.inotify
	if in == nil {
		return
	}
	for {
		n, err := unix.Read(in.fd, in.buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n <= 0 || err != nil {
			return // EAGAIN: drained
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&in.buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			s.inotifyOneLocked(ev.Wd, ev.Mask, now)
		}
	}
}

func (s *Set) inotifyOneLocked(wd int32, mask uint32, now time.Time) {
	in := s.inotify
	if mask&unix.IN_Q_OVERFLOW != 0 {
		// Events were lost. The counters are cumulative, so reading every
		// watched file now misses nothing.
		for _, w := range in.all {
			if w.wd >= 0 {
				s.memoryEventsLocked(w, now)
			}
		}
		return
	}
	ws := in.watches[wd]
	if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF) != 0 {
		// The watch is gone (IN_IGNORED follows IN_DELETE_SELF): the file
		// was removed or its filesystem unmounted. Rearm watches again once
		// the file is back.
		delete(in.watches, wd)
		for _, w := range ws {
			w.wd, w.due = -1, time.Time{}
			s.deactivate(w.status, "the watched file was removed", nil)
		}
		return
	}
	if mask&unix.IN_MODIFY != 0 {
		for _, w := range ws {
			s.memoryEventsLocked(w, now)
		}
	}
}

// memoryEventsLocked reads w's counters after a notification and queues a
// wake-up if a pressure counter rose, subject to the rate limit.
func (s *Set) memoryEventsLocked(w *EventsWatch, now time.Time) {
	n, err := readFile(w.status.Path, s.inotify.rbuf[:])
	if err != nil {
		w.status.Ignored++
		s.log.Debug("memory.events notification not read", zap.String("name", w.status.Name), zap.Error(err))
		return
	}
	key, rose := w.judge.observe(parseEventCounters(s.inotify.rbuf[:n]), now)
	if !rose {
		w.status.Ignored++
		return
	}
	if iv := s.eventsInterval; iv > 0 && !w.delivered.IsZero() && now.Sub(w.delivered) < iv {
		w.status.Suppressed++
		if w.due.IsZero() {
			w.due = w.delivered.Add(iv)
		}
		return
	}
	s.log.Debug("memory.events counter rose", zap.String("name", w.status.Name), zap.String("counter", key.String()))
	s.deliverLocked(w, now)
}

func (s *Set) deliverLocked(w *EventsWatch, now time.Time) {
	s.queueLocked(SourceMemoryEvents, w.status.Name, now)
	w.delivered, w.due = now, time.Time{}
}

// fireDueLocked delivers the suppressed rises whose interval has ended.
func (s *Set) fireDueLocked(now time.Time) {
	if s.inotify == nil {
		return
	}
	for _, w := range s.inotify.all {
		if !w.due.IsZero() && !now.Before(w.due) {
			s.deliverLocked(w, now)
		}
	}
}

// nextDueLocked is the earliest time a suppressed rise is due.
func (s *Set) nextDueLocked() (time.Time, bool) {
	var next time.Time
	if s.inotify == nil {
		return next, false
	}
	for _, w := range s.inotify.all {
		if !w.due.IsZero() && (next.IsZero() || w.due.Before(next)) {
			next = w.due
		}
	}
	return next, !next.IsZero()
}
