// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// PSIWatch is a PSI trigger on one pressure file.
type PSIWatch struct {
	set        *Set
	status     *Status
	path       string     // the file given to AddPSITrigger
	want       PSITrigger // the trigger asked for
	spec       PSITrigger
	privileged bool
	// swallowFirst is set for unprivileged triggers until their first event.
	swallowFirst bool
	tok          int32 // the trigger's registration; 0 while none is held
	// dev and ino identify the file the trigger was armed on, or the one
	// the last attempt failed on, when tried is set; err is that failure.
	dev, ino uint64
	tried    bool
	err      error
	armed    bool // armed at least once: later arms are re-arms
	closed   bool
}

// Spec is the trigger the kernel accepted (after any unprivileged fallback).
func (p *PSIWatch) Spec() PSITrigger { return p.spec }

// Privileged reports whether the trigger runs on the kernel's real-time poll
// path (CAP_SYS_RESOURCE, or a sub-2 s window the kernel accepted) rather than
// the 2 s averaging clock.
func (p *PSIWatch) Privileged() bool { return p.privileged }

// Status returns the source's current status.
func (p *PSIWatch) Status() Status {
	p.set.mu.Lock()
	defer p.set.mu.Unlock()
	return *p.status
}

// AddPSITrigger arms want on a pressure file (/proc/pressure/memory or a
// cgroup's memory.pressure). If the kernel refuses the window, which it does
// with EINVAL for windows that are not multiples of 2 s when the caller lacks
// CAP_SYS_RESOURCE, the trigger is re-armed with want.Unprivileged(). An
// unprivileged trigger's first event is swallowed (it can be spurious: the
// kernel seeds the trigger's window from another counter than the one it
// compares against, so the first evaluation may count all past stall), and
// its group's pressure files become unreadable for the polling loop (see
// PressureReadable). It always returns a handle; when the error is non-nil the
// source is reported inactive and logged, and Rearm tries again once the path
// names another file (one that exists, where it was missing).
func (s *Set) AddPSITrigger(name, pressureFile string, want PSITrigger) (*PSIWatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &PSIWatch{set: s, path: pressureFile, want: want, spec: want,
		status: s.addStatus(&Status{Source: SourcePSI, Name: name, Path: pressureFile})}
	if s.closed {
		p.status.Reason = ErrClosed.Error()
		return p, ErrClosed
	}
	if err := want.Validate(); err != nil {
		s.deactivate(p.status, "invalid trigger", err)
		return p, err
	}
	if reason, err := p.armLocked(); err != nil {
		s.deactivate(p.status, reason, err)
		return p, err
	}
	s.activate(p.status, p.activeReason())
	return p, nil
}

// Rearm makes sure the trigger is armed on the file its path names now, and
// arms it again if it is not: after the kernel reported an error on the
// trigger (POLLERR: its cgroup was removed), after a failed attempt on a file
// the path no longer names, or when the path names another file than the one
// armed on. The last case is a cgroup removed and created again before the
// kernel's error was collected, or on a kernel that reports none: the old
// trigger then looks active but never fires again, so Rearm compares the
// device and inode number of the armed file with the path's and replaces the
// trigger. An attempt that failed is not repeated on the same file. It costs
// one stat(2) when nothing changed, and is meant to be called after each
// observation. It reports whether it armed the trigger (logged at Info once
// per re-arm); while the file is missing the trigger is inactive and the
// error says so (logged once, when the trigger goes inactive).
func (p *PSIWatch) Rearm() (bool, error) {
	s := p.set
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, ErrClosed
	}
	if p.closed {
		return false, nil
	}
	if err := p.want.Validate(); err != nil {
		return false, err // AddPSITrigger logged it; no file makes it valid
	}
	var st unix.Stat_t
	err := unix.Stat(p.path, &st)
	same := err == nil && p.tried && uint64(st.Dev) == p.dev && st.Ino == p.ino
	switch {
	case p.tok != 0:
		if same {
			return false, nil
		}
		p.dropLocked()
		if err != nil {
			s.deactivate(p.status, "the pressure file was removed", nil)
			return false, fmt.Errorf("wakeup: %s: %w", p.path, err)
		}
	case err != nil:
		// Still missing: stay inactive without logging it again.
		return false, fmt.Errorf("wakeup: %s: %w", p.path, err)
	case same:
		// Arming already failed on this very file.
		return false, p.err
	}
	wasArmed := p.armed
	if reason, err := p.armLocked(); err != nil {
		s.deactivate(p.status, reason, err)
		return false, err
	}
	if !wasArmed {
		s.activate(p.status, p.activeReason())
		return true, nil
	}
	p.status.Active, p.status.Reason = true, p.activeReason()
	s.log.Info("wake-up source re-armed",
		zap.String("source", string(p.status.Source)), zap.String("name", p.status.Name),
		zap.String("path", p.status.Path), zap.String("reason", p.status.Reason))
	return true, nil
}

// Close removes the trigger and its status from the set; Rearm then does
// nothing.
func (p *PSIWatch) Close() {
	s := p.set
	s.mu.Lock()
	defer s.mu.Unlock()
	p.closed = true
	if !s.closed {
		p.dropLocked()
		group := s.pressureGroup(p.path)
		if _, ok := s.noRead[group]; ok && !s.unprivilegedTriggerLocked(group) {
			delete(s.noRead, group)
		}
	}
	s.statuses = slices.DeleteFunc(s.statuses, func(x *Status) bool { return x == p.status })
	p.status.Active, p.status.Reason = false, "closed"
}

// unprivilegedTriggerLocked reports whether an unprivileged trigger is held
// on a pressure file of group.
func (s *Set) unprivilegedTriggerLocked(group string) bool {
	for _, r := range s.regs {
		if r.kind == regPSI && !r.psi.privileged && s.pressureGroup(r.psi.path) == group {
			return true
		}
	}
	return false
}

// armLocked writes the trigger on p.path and adds it to the epoll set. On
// error it returns a short reason for the status; the file's identity is
// kept either way, so that Rearm tries a failed file only once.
func (p *PSIWatch) armLocked() (string, error) {
	var st unix.Stat_t
	p.tried = unix.Stat(p.path, &st) == nil
	p.dev, p.ino = uint64(st.Dev), st.Ino
	reason, err := p.registerLocked()
	p.err = err
	return reason, err
}

func (p *PSIWatch) registerLocked() (string, error) {
	s := p.set
	fd, used, err := armPSI(p.path, p.want)
	if err != nil {
		return "arming failed", err
	}
	// The identity of the file actually opened: if the path was replaced
	// since the stat, Rearm finds a different file and arms again.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return "arming failed", fmt.Errorf("wakeup: fstat %s: %w", p.path, err)
	}
	p.dev, p.ino, p.tried = uint64(st.Dev), st.Ino, true
	tok, err := s.register(&registration{kind: regPSI, fd: fd, status: p.status, psi: p}, unix.EPOLLPRI)
	if err != nil {
		unix.Close(fd)
		return "arming failed", err
	}
	p.tok = tok
	p.spec = used
	// A window the unprivileged kernel path would have refused proves the
	// privileged path; a 2 s multiple runs on whichever path our
	// capabilities select.
	p.privileged = used.Window%psiUnprivilegedStep != 0 || s.capSysResource
	p.swallowFirst = !p.privileged
	p.status.Privileged = p.privileged
	if !p.privileged {
		s.noRead[s.pressureGroup(p.path)] = p.path
	}
	p.armed = true
	return "", nil
}

func (p *PSIWatch) activeReason() string {
	if p.privileged {
		return "privileged trigger " + p.spec.String()
	}
	return fmt.Sprintf("unprivileged trigger %q (no CAP_SYS_RESOURCE: 2 s windows on the averaging clock, 0–2 s added latency); "+
		"first event ignored; pressure files of %s must not be read from the polling loop", p.spec.String(), p.set.pressureGroup(p.path))
}

// dropLocked removes the trigger from the epoll set and closes its fd.
func (p *PSIWatch) dropLocked() {
	if p.tok != 0 {
		p.set.unregister(p.tok)
		p.tok = 0
	}
}

// armPSI opens path and writes the trigger, falling back to the unprivileged
// form when the kernel refuses the requested one.
func armPSI(path string, want PSITrigger) (fd int, used PSITrigger, err error) {
	fd, err = writeTrigger(path, want)
	if err == nil {
		return fd, want, nil
	}
	fallback, ok := want.Unprivileged()
	if !ok {
		return -1, want, err
	}
	fd, err2 := writeTrigger(path, fallback)
	if err2 != nil {
		return -1, want, fmt.Errorf("%w; unprivileged fallback: %w", err, err2)
	}
	return fd, fallback, nil
}

func writeTrigger(path string, t PSITrigger) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("wakeup: open %s: %w", path, err)
	}
	// The trailing NUL matters: the /proc handler overwrites the last byte
	// written with a terminator, and would otherwise cut the window's last
	// digit (turning 1000000 into 100000).
	if _, err := unix.Write(fd, append([]byte(t.String()), 0)); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EINVAL) && t.Window%psiUnprivilegedStep != 0 {
			return -1, fmt.Errorf("wakeup: %s refused trigger %q (EINVAL: windows that are not multiples of 2 s need CAP_SYS_RESOURCE, or a kernel before 6.5 rejects the window): %w", path, t.String(), err)
		}
		return -1, fmt.Errorf("wakeup: %s refused trigger %q: %w", path, t.String(), err)
	}
	return fd, nil
}

func (s *Set) psiEventLocked(tok int32, r *registration, events uint32, now time.Time) {
	p := r.psi
	if events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		// The kernel reports POLLERR once the trigger's group is gone
		// (its cgroup was removed).
		// Rearm arms again on whatever file the path names once it exists.
		s.unregister(tok)
		if p.tok == tok {
			p.tok = 0
		}
		p.tried, p.err = false, nil
		s.deactivate(p.status, "the pressure file reported an error: its cgroup is gone", nil)
		return
	}
	if events&unix.EPOLLPRI == 0 {
		return
	}
	if p.swallowFirst {
		p.swallowFirst = false
		p.status.Ignored++
		s.log.Debug("ignored the first event of an unprivileged PSI trigger",
			zap.String("name", p.status.Name), zap.String("path", p.status.Path))
		return
	}
	s.queueLocked(SourcePSI, p.status.Name, now)
}
