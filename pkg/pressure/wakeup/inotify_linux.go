//go:build linux

package wakeup

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotifyState is the one inotify instance shared by every memory.events
// watch; it sits in the epoll set like any other source.
type inotifyState struct {
	fd      int
	watches map[int32][]*Status // watch descriptor → the sources on that file
	buf     [4096]byte
}

// EventsWatch is an inotify watch on a cgroup v2 memory.events file.
type EventsWatch struct {
	set    *Set
	status *Status
}

// Status returns the source's current status.
func (w *EventsWatch) Status() Status {
	w.set.mu.Lock()
	defer w.set.mu.Unlock()
	return *w.status
}

// WatchMemoryEvents wakes the agent whenever the file at path is modified:
// on cgroup v2 the kernel notifies (IN_MODIFY) when any counter of a
// memory.events file changes (low, high, max, oom, oom_kill). It always
// returns a handle; when the error is non-nil the source is reported
// inactive and logged.
func (s *Set) WatchMemoryEvents(name, path string) (*EventsWatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &EventsWatch{set: s, status: s.addStatus(&Status{Source: SourceMemoryEvents, Name: name, Path: path})}
	if s.closed {
		w.status.Reason = ErrClosed.Error()
		return w, ErrClosed
	}
	if err := s.ensureInotifyLocked(); err != nil {
		s.deactivate(w.status, "watch failed", err)
		return w, err
	}
	wd, err := unix.InotifyAddWatch(s.inotify.fd, path, unix.IN_MODIFY)
	if err != nil {
		err = fmt.Errorf("wakeup: inotify watch %s: %w", path, err)
		s.deactivate(w.status, "watch failed", err)
		return w, err
	}
	// Watching a file twice yields the same descriptor.
	s.inotify.watches[int32(wd)] = append(s.inotify.watches[int32(wd)], w.status)
	s.activate(w.status, "inotify IN_MODIFY")
	return w, nil
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
	s.inotify = &inotifyState{fd: fd, watches: map[int32][]*Status{}}
	return nil
}

// inotifyEventLocked drains the inotify queue and queues one wake-up per
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
		// Events were lost; any watch may have fired.
		for _, sts := range in.watches {
			for _, st := range sts {
				s.queueLocked(SourceMemoryEvents, st.Name, now)
			}
		}
		return
	}
	sts := in.watches[wd]
	if mask&unix.IN_IGNORED != 0 {
		// The watch is gone: the file was removed (its cgroup deleted) or
		// its filesystem unmounted.
		delete(in.watches, wd)
		for _, st := range sts {
			s.deactivate(st, "the watched file was removed", nil)
		}
		return
	}
	if mask&unix.IN_MODIFY != 0 {
		for _, st := range sts {
			s.queueLocked(SourceMemoryEvents, st.Name, now)
		}
	}
}
