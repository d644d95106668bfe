// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"
)

// MemcgThreshold is a cgroup v1 memory threshold notification on one cgroup
// directory. The kernel signals when the cgroup's memory.usage_in_bytes
// (hierarchical: descendants count) crosses the armed value, in either
// direction. Arming at a value usage has already passed yields no event until
// usage falls back and rises again, so the caller checks the current value
// itself after each Arm (its next poll does).
//
// The registration is containerd/cgroups' cgroup1 RegisterMemoryEvent with a
// MemoryThresholdEvent: it makes the eventfd, writes it with
// memory.usage_in_bytes to cgroup.event_control, closes the usage file and
// hands the eventfd over. That fits this source's lifecycle: the eventfd is
// ours, sits in the epoll set, and closing it is what unregisters the
// threshold in the kernel (on re-arm, drop and Set.Close).
type MemcgThreshold struct {
	set    *Set
	status *Status
	dir    string
	tok    int32
	armed  int64
}

// AddMemcgThreshold arms a threshold notification on the memory cgroup
// directory dir (e.g. the node's root memcg or kubepods) at usage bytes. It
// always returns a handle: when the error is non-nil the source is reported
// inactive (and logged) until a later Arm succeeds.
func (s *Set) AddMemcgThreshold(name, dir string, usage int64) (*MemcgThreshold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &MemcgThreshold{
		set: s, dir: dir,
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
	efd, err := registerThreshold(m.dir, usage)
	if err != nil {
		return err
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

// registerThreshold registers a threshold at usage bytes on the memory cgroup
// directory dir and returns its eventfd, non-blocking like every fd of the
// set. Errors name the directory and the value.
func registerThreshold(dir string, usage int64) (int, error) {
	cg, err := cgroup1.Load(memcgPath(dir), cgroup1.WithHierarchy(memcgHierarchy(dir)))
	if err != nil {
		// Load reports a missing directory as ErrCgroupDeleted, which names nothing.
		return -1, fmt.Errorf("wakeup: memory cgroup %s: %w", dir, err)
	}
	efd, err := cg.RegisterMemoryEvent(cgroup1.MemoryThresholdEvent(uint64(usage), false))
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return -1, fmt.Errorf("wakeup: %s rejected a threshold at %d bytes (not a cgroup v1 memory controller?): %w", filepath.Join(dir, "cgroup.event_control"), usage, err)
		}
		return -1, fmt.Errorf("wakeup: registering a threshold at %d bytes on %s: %w", usage, dir, err)
	}
	// The library makes a blocking eventfd; the set reads it after epoll
	// says so, and must never block on a spurious wake-up.
	if err := unix.SetNonblock(int(efd), true); err != nil {
		unix.Close(int(efd))
		return -1, fmt.Errorf("wakeup: eventfd of %s: %w", dir, err)
	}
	return int(efd), nil
}

// The library addresses a v1 cgroup as a hierarchy root, <x>/memory, plus a
// path inside it, while callers hand this package the cgroup's directory,
// which need not be below a directory named memory (tests use any tree).
// Taking <x> as dir's parent and the path as ../<base>, the library's
// filepath.Join of the two cleans back to exactly dir.
func memcgHierarchy(dir string) cgroup1.Hierarchy {
	return func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(filepath.Dir(dir))}, nil
	}
}

func memcgPath(dir string) cgroup1.Path {
	return cgroup1.StaticPath(filepath.Join("..", filepath.Base(dir)))
}

// dropLocked removes the registration, closing its eventfd.
func (m *MemcgThreshold) dropLocked() {
	if m.tok != 0 {
		m.set.unregister(m.tok)
		m.tok = 0
	}
	m.armed = 0
}
