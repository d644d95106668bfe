//go:build linux

package wakeup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// MemcgThreshold is a cgroup v1 memory threshold notification on one cgroup
// directory. The kernel signals when the cgroup's memory.usage_in_bytes
// (hierarchical: descendants count) crosses the armed value, in either
// direction. Arming at a value usage has already passed yields no event until
// usage falls back and rises again, so the caller checks the current value
// itself after each Arm (its next poll does).
type MemcgThreshold struct {
	set     *Set
	status  *Status
	dir     string
	usageFd int // memory.usage_in_bytes, kept open for re-arming
	ctlFd   int // cgroup.event_control
	tok     int32
	armed   int64
}

// AddMemcgThreshold arms a threshold notification on the memory cgroup
// directory dir (e.g. the node's root memcg or kubepods) at usage bytes. It
// always returns a handle: when the error is non-nil the source is reported
// inactive (and logged) until a later Arm succeeds.
func (s *Set) AddMemcgThreshold(name, dir string, usage int64) (*MemcgThreshold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &MemcgThreshold{
		set: s, dir: dir, usageFd: -1, ctlFd: -1,
		status: s.addStatus(&Status{Source: SourceMemcgThreshold, Name: name, Path: filepath.Join(dir, "memory.usage_in_bytes")}),
	}
	if s.closed {
		m.status.Reason = ErrClosed.Error()
		return m, ErrClosed
	}
	s.onClose = append(s.onClose, m.dropLocked)
	return m, m.armLocked(usage)
}

// Arm replaces the threshold with one at usage bytes. The new registration is
// made before the old one is dropped (closing its eventfd unregisters it in
// the kernel), so no crossing is missed in between. If arming fails, the old
// registration is dropped too (a threshold at a stale level misleads) and the
// source is inactive until an Arm succeeds.
func (m *MemcgThreshold) Arm(usage int64) error {
	m.set.mu.Lock()
	defer m.set.mu.Unlock()
	if m.set.closed {
		return ErrClosed
	}
	return m.armLocked(usage)
}

// Armed is the usage the threshold is armed at, 0 when it is not armed.
func (m *MemcgThreshold) Armed() int64 {
	m.set.mu.Lock()
	defer m.set.mu.Unlock()
	return m.armed
}

// Status returns the source's current status.
func (m *MemcgThreshold) Status() Status {
	m.set.mu.Lock()
	defer m.set.mu.Unlock()
	return *m.status
}

func (m *MemcgThreshold) armLocked(usage int64) error {
	if usage <= 0 {
		return fmt.Errorf("wakeup: memcg threshold %d bytes for %s must be positive", usage, m.dir)
	}
	err := m.registerLocked(usage)
	if err != nil {
		m.dropLocked()
		m.set.deactivate(m.status, "arming failed", err)
		return err
	}
	m.set.activate(m.status, "armed at "+strconv.FormatInt(usage, 10)+" bytes")
	return nil
}

func (m *MemcgThreshold) registerLocked(usage int64) error {
	if m.usageFd < 0 {
		fd, err := unix.Open(filepath.Join(m.dir, "memory.usage_in_bytes"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("wakeup: open %s: %w", filepath.Join(m.dir, "memory.usage_in_bytes"), err)
		}
		m.usageFd = fd
	}
	if m.ctlFd < 0 {
		fd, err := unix.Open(filepath.Join(m.dir, "cgroup.event_control"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("wakeup: open %s: %w", filepath.Join(m.dir, "cgroup.event_control"), err)
		}
		m.ctlFd = fd
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("wakeup: eventfd: %w", err)
	}
	line := fmt.Sprintf("%d %d %d", efd, m.usageFd, usage)
	if _, err := unix.Write(m.ctlFd, []byte(line)); err != nil {
		unix.Close(efd)
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("wakeup: %s rejected %q (not a cgroup v1 memory controller?): %w", filepath.Join(m.dir, "cgroup.event_control"), line, err)
		}
		return fmt.Errorf("wakeup: write %q to %s: %w", line, filepath.Join(m.dir, "cgroup.event_control"), err)
	}
	tok, err := m.set.register(&registration{kind: regMemcg, fd: efd, status: m.status}, unix.EPOLLIN)
	if err != nil {
		unix.Close(efd)
		return err
	}
	if m.tok != 0 {
		m.set.unregister(m.tok)
	}
	m.tok, m.armed = tok, usage
	return nil
}

// dropLocked removes the registration and closes the files.
func (m *MemcgThreshold) dropLocked() {
	if m.tok != 0 {
		m.set.unregister(m.tok)
		m.tok = 0
	}
	for _, fd := range []*int{&m.usageFd, &m.ctlFd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	m.armed = 0
}
