//go:build linux

package wakeup

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// PSIWatch is an armed PSI trigger.
type PSIWatch struct {
	set        *Set
	status     *Status
	spec       PSITrigger
	privileged bool
	// swallowFirst is set for unprivileged triggers until their first event.
	swallowFirst bool
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
// source is reported inactive and logged.
func (s *Set) AddPSITrigger(name, pressureFile string, want PSITrigger) (*PSIWatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &PSIWatch{set: s, spec: want, status: s.addStatus(&Status{Source: SourcePSI, Name: name, Path: pressureFile})}
	if s.closed {
		p.status.Reason = ErrClosed.Error()
		return p, ErrClosed
	}
	if err := want.Validate(); err != nil {
		s.deactivate(p.status, "invalid trigger", err)
		return p, err
	}
	fd, used, err := armPSI(pressureFile, want)
	if err != nil {
		s.deactivate(p.status, "arming failed", err)
		return p, err
	}
	p.spec = used
	// A window the unprivileged kernel path would have refused proves the
	// privileged path; a 2 s multiple runs on whichever path our
	// capabilities select.
	p.privileged = used.Window%psiUnprivilegedStep != 0 || s.capSysResource
	p.swallowFirst = !p.privileged
	p.status.Privileged = p.privileged
	if _, err := s.register(&registration{kind: regPSI, fd: fd, status: p.status, psi: p}, unix.EPOLLPRI); err != nil {
		unix.Close(fd)
		s.deactivate(p.status, "arming failed", err)
		return p, err
	}
	reason := "privileged trigger " + used.String()
	if !p.privileged {
		group := s.pressureGroup(pressureFile)
		s.noRead[group] = pressureFile
		reason = fmt.Sprintf("unprivileged trigger %q (no CAP_SYS_RESOURCE: 2 s windows on the averaging clock, 0–2 s added latency); "+
			"first event ignored; pressure files of %s must not be read from the polling loop", used.String(), group)
	}
	s.activate(p.status, reason)
	return p, nil
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
		s.unregister(tok)
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
