// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// ErrClosed is returned by a Set's methods after Close.
var ErrClosed = errors.New("wakeup: set is closed")

// Options configure a Set.
type Options struct {
	// SystemPressureDirs are the directories whose pressure files all belong
	// to the kernel's system-wide PSI group: the host's /proc/pressure and the
	// cgroup2 root. A trigger on a file in one of them marks all of them as
	// unreadable (see Set.PressureReadable).
	SystemPressureDirs []string
	// MemoryEventsInterval is the shortest time between two wake-ups of
	// one memory.events watch (see WatchMemoryEvents): 0 means
	// DefaultMemoryEventsInterval, a negative value no limit.
	MemoryEventsInterval time.Duration
}

type regKind int

const (
	regCancel regKind = iota
	regMemcg
	regPSI
	regInotify
)

// registration is one fd in the epoll set. The epoll data holds a token,
// never the fd: fds are reused after close, tokens are not, so a stale event
// for a replaced registration cannot be mistaken for a live one.
type registration struct {
	kind   regKind
	fd     int
	status *Status
	psi    *PSIWatch
}

// Set is one epoll set holding every wake-up source. Add sources, then call
// Wait in a loop from one goroutine; Arm and the status methods may be called
// from others. Close it once Wait has returned for the last time.
type Set struct {
	log   *zap.Logger
	clk   clock.PassiveClock
	epfd  int
	cfd   int // eventfd written when a Wait's context ends or on Kick
	ctok  int32
	sysPS map[string]bool

	capSysResource bool
	eventsInterval time.Duration

	mu       sync.Mutex
	closed   bool
	nextTok  int32
	regs     map[int32]*registration
	statuses []*Status
	pending  []Wakeup
	inotify  *inotifyState
	noRead   map[string]string // pressure group dir → the trigger's file
	onClose  []func()          // releases fds held outside the epoll set

	waiting atomic.Bool
	events  [16]unix.EpollEvent
}

// New creates an empty set.
func New(log *zap.Logger, clk clock.PassiveClock, opts Options) (*Set, error) {
	if log == nil {
		log = zap.NewNop()
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("wakeup: epoll_create1: %w", err)
	}
	cfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("wakeup: eventfd: %w", err)
	}
	s := &Set{
		log:            log,
		clk:            clk,
		epfd:           epfd,
		cfd:            cfd,
		sysPS:          map[string]bool{},
		capSysResource: hasCapSysResource(),
		regs:           map[int32]*registration{},
		noRead:         map[string]string{},
		eventsInterval: opts.MemoryEventsInterval,
	}
	if s.eventsInterval == 0 {
		s.eventsInterval = DefaultMemoryEventsInterval
	}
	for _, d := range opts.SystemPressureDirs {
		s.sysPS[filepath.Clean(d)] = true
	}
	if s.ctok, err = s.register(&registration{kind: regCancel, fd: cfd}, unix.EPOLLIN); err != nil {
		unix.Close(cfd)
		unix.Close(epfd)
		return nil, err
	}
	return s, nil
}

// register adds r to the epoll set under a fresh token. Callers hold s.mu
// (or own s exclusively, as New does).
func (s *Set) register(r *registration, events uint32) (int32, error) {
	s.nextTok++
	tok := s.nextTok
	ev := unix.EpollEvent{Events: events, Fd: tok}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, r.fd, &ev); err != nil {
		return 0, fmt.Errorf("wakeup: epoll_ctl add: %w", err)
	}
	s.regs[tok] = r
	return tok, nil
}

// unregister removes tok from the epoll set and closes its fd.
func (s *Set) unregister(tok int32) {
	r, ok := s.regs[tok]
	if !ok {
		return
	}
	delete(s.regs, tok)
	_ = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, r.fd, nil)
	_ = unix.Close(r.fd)
}

func (s *Set) addStatus(st *Status) *Status {
	s.statuses = append(s.statuses, st)
	return st
}

// deactivate marks st inactive and logs why, once per transition. reason is
// a short phrase; err, if any, carries the detail.
func (s *Set) deactivate(st *Status, reason string, err error) {
	full := reason
	if err != nil {
		full += ": " + err.Error()
	}
	if st.Active || st.Reason != full {
		fields := []zap.Field{
			zap.String("source", string(st.Source)), zap.String("name", st.Name),
			zap.String("path", st.Path), zap.String("reason", reason),
		}
		if err != nil {
			fields = append(fields, zap.NamedError("err", err))
		}
		s.log.Warn("wake-up source inactive, polling instead", fields...)
	}
	st.Active, st.Reason = false, full
}

func (s *Set) activate(st *Status, reason string) {
	if !st.Active {
		s.log.Info("wake-up source active",
			zap.String("source", string(st.Source)), zap.String("name", st.Name),
			zap.String("path", st.Path), zap.String("reason", reason))
	}
	st.Active, st.Reason = true, reason
}

// Statuses returns every added source instance in the order added.
func (s *Set) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, len(s.statuses))
	for i, st := range s.statuses {
		out[i] = *st
	}
	return out
}

// Kick makes the current or next Wait return a SourceKick wake-up named
// name, without waiting for its timeout. It may be called from any
// goroutine; kicks of the same name that have not been collected yet are
// coalesced.
func (s *Set) Kick(name string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	defer s.mu.Unlock()
	s.queueLocked(SourceKick, name, s.clk.Now())
	// The cancel eventfd doubles as the doorbell: Wait drains it and then
	// finds the queued kick. Written under the lock so that Close cannot
	// hand the fd number to another file in between.
	var one = [8]byte{1}
	_, _ = unix.Write(s.cfd, one[:])
}

// Active reports whether at least one source of kind src is active (for the
// active-sources gauge; SourcePoll and SourceKick are always active).
func (s *Set) Active(src Source) bool {
	if src == SourcePoll || src == SourceKick {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.statuses {
		if st.Source == src && st.Active {
			return true
		}
	}
	return false
}

// PressureReadable reports whether the agent may read the PSI file path
// (memory.pressure, cpu.pressure, io.pressure of a cgroup, or a file under
// /proc/pressure) from its polling loop. It is false for every pressure file
// of a group that holds an unprivileged trigger: each read on the group's 2 s
// averaging tick advances the clock the trigger is evaluated on, and a loop
// that reads often enough keeps the trigger from ever firing.
func (s *Set) PressureReadable(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, blocked := s.noRead[s.pressureGroup(path)]
	return !blocked
}

// pressureGroup names the PSI group a pressure file belongs to: its
// directory, with the system group's directories folded into one.
func (s *Set) pressureGroup(path string) string {
	dir := filepath.Dir(filepath.Clean(path))
	if s.sysPS[dir] {
		return "system"
	}
	return dir
}

// Wait blocks until a source fires, ctx ends, or timeout passes; on timeout
// it returns a SourcePoll wake-up. A timeout of zero or less only collects
// what is already pending. Wakeups of the same source instance that arrive
// together are coalesced. A memory.events rise held back by the rate limit
// (Options.MemoryEventsInterval) is delivered when its interval ends, by
// this Wait if that comes before the timeout. Only one goroutine may Wait at
// a time.
func (s *Set) Wait(ctx context.Context, timeout time.Duration) (Wakeup, error) {
	if !s.waiting.CompareAndSwap(false, true) {
		return Wakeup{}, errors.New("wakeup: Wait called concurrently")
	}
	defer s.waiting.Store(false)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Wakeup{}, ErrClosed
	}
	s.fireDueLocked(s.clk.Now())
	if w, ok := s.popLocked(); ok {
		s.mu.Unlock()
		return w, nil
	}
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Wakeup{}, err
	}
	stop := context.AfterFunc(ctx, func() {
		var one = [8]byte{1}
		_, _ = unix.Write(s.cfd, one[:])
	})
	defer stop()

	deadline := s.clk.Now().Add(timeout)
	for {
		now := s.clk.Now()
		remaining := deadline.Sub(now)
		s.mu.Lock()
		if due, ok := s.nextDueLocked(); ok {
			// A rate-limited memory.events rise is delivered when its
			// interval ends.
			remaining = min(remaining, due.Sub(now))
		}
		s.mu.Unlock()
		n, err := unix.EpollWait(s.epfd, s.events[:], epollMillis(remaining))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return Wakeup{}, fmt.Errorf("wakeup: epoll_wait: %w", err)
		}
		now = s.clk.Now()
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return Wakeup{}, ErrClosed
		}
		for _, ev := range s.events[:n] {
			s.dispatchLocked(ev, now)
		}
		s.fireDueLocked(now)
		w, ok := s.popLocked()
		s.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return Wakeup{}, err
		}
		if ok {
			return w, nil
		}
		if n == 0 || !now.Before(deadline) {
			return Wakeup{Source: SourcePoll, At: now}, nil
		}
	}
}

// epollMillis converts a remaining wait to epoll_wait's milliseconds,
// rounding up so a short remainder does not spin.
func epollMillis(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return int(min(ms, 1<<31-1))
}

func (s *Set) popLocked() (Wakeup, bool) {
	if len(s.pending) == 0 {
		return Wakeup{}, false
	}
	w := s.pending[0]
	s.pending = append(s.pending[:0], s.pending[1:]...)
	return w, true
}

func (s *Set) queueLocked(src Source, name string, at time.Time) {
	for _, p := range s.pending {
		if p.Source == src && p.Name == name {
			return
		}
	}
	s.pending = append(s.pending, Wakeup{Source: src, Name: name, At: at})
}

func (s *Set) dispatchLocked(ev unix.EpollEvent, now time.Time) {
	r, ok := s.regs[ev.Fd]
	if !ok {
		return // a registration replaced or removed since the event was queued
	}
	switch r.kind {
	case regCancel:
		drainEventfd(r.fd)
	case regMemcg:
		drainEventfd(r.fd)
		if ev.Events&unix.EPOLLIN != 0 {
			s.queueLocked(SourceMemcgThreshold, r.status.Name, now)
		}
	case regPSI:
		s.psiEventLocked(ev.Fd, r, ev.Events, now)
	case regInotify:
		s.inotifyEventLocked(now)
	}
}

func drainEventfd(fd int) {
	var buf [8]byte
	_, _ = unix.Read(fd, buf[:])
}

// Close removes every source and releases every fd. It must not run while a
// Wait is in progress: cancel the Wait's context first.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, f := range s.onClose {
		f()
	}
	for tok := range s.regs {
		s.unregister(tok)
	}
	for _, st := range s.statuses {
		st.Active, st.Reason = false, "closed"
	}
	s.inotify = nil
	if err := unix.Close(s.epfd); err != nil {
		return fmt.Errorf("wakeup: close epoll: %w", err)
	}
	return nil
}

// HasCapSysResource reports whether this process may arm PSI triggers with
// sub-2 s windows on the kernel's real-time poll path. Without it, triggers
// fall back to the unprivileged regime, whose groups must not be read from a
// polling loop (see PressureReadable); callers that build their observer
// before arming use this to decide up front.
func HasCapSysResource() bool { return hasCapSysResource() }

// hasCapSysResource reports whether this process has CAP_SYS_RESOURCE in its
// effective set; the kernel checks it on the opener of a pressure file.
func hasCapSysResource() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData // version 3 fills two 32-bit words
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_RESOURCE/32].Effective&(1<<(unix.CAP_SYS_RESOURCE%32)) != 0
}
