// SPDX-License-Identifier: Apache-2.0

// Package memlock keeps evictd's own pages in RAM while the node it guards
// thrashes: the kernel then cannot drop its code or data to make room, so
// evictd does not stall on page faults in the pressure it is there to
// relieve. The lock is mlockall(MCL_CURRENT|MCL_FUTURE|MCL_ONFAULT), as
// earlyoom does: only pages evictd touches are locked, as it touches them.
//
// A refused lock never stops evictd: Lock reports why, and the caller logs
// it and sets evictd_memory_locked to 0.
package memlock

import (
	"errors"
	"fmt"
	"syscall"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/logging"
)

// Result is what became of the lock.
type Result struct {
	// Wanted is whether the lock was asked for (evictd run --lock-memory).
	Wanted bool
	// Locked is whether the kernel locked the memory.
	Locked bool
	// Err is the kernel's refusal, and Reason what it means and what to
	// grant; both empty when Locked or not Wanted.
	Err    error
	Reason string
}

// Lock calls lock when wanted and explains a refusal. It never fails:
// evictd runs unlocked rather than not at all.
func Lock(wanted bool, lock func() error) Result {
	if !wanted {
		return Result{}
	}
	err := lock()
	if err == nil {
		return Result{Wanted: true, Locked: true}
	}
	return Result{Wanted: true, Err: err, Reason: explain(err)}
}

// explain turns mlockall's errors (mlockall(2)) into what an operator can
// do about them.
func explain(err error) string {
	switch {
	case errors.Is(err, syscall.EPERM):
		return "RLIMIT_MEMLOCK is 0 and the container lacks CAP_IPC_LOCK: add IPC_LOCK to the container's securityContext.capabilities"
	case errors.Is(err, syscall.ENOMEM):
		return "the container lacks CAP_IPC_LOCK and evictd's mappings exceed RLIMIT_MEMLOCK: add IPC_LOCK to the container's securityContext.capabilities"
	case errors.Is(err, syscall.EINVAL):
		return "the kernel does not know MCL_ONFAULT (Linux before 4.4); locking without it would fault in every mapping and overrun the memory limit"
	case errors.Is(err, errors.ErrUnsupported):
		return "memory locking is implemented on Linux only"
	}
	return fmt.Sprintf("mlockall failed unexpectedly: %v", err)
}

// Gauge is where the outcome is published (evictd_memory_locked).
type Gauge interface {
	SetMemoryLocked(locked bool)
}

// Report logs the outcome, one line, a warning when a wanted lock was
// refused, and sets the gauge.
func (r Result) Report(log *zap.Logger, g Gauge) {
	g.SetMemoryLocked(r.Locked)
	switch {
	case r.Locked:
		log.Info("memory locked: evictd's pages stay in RAM once touched")
	case !r.Wanted:
		log.Info("memory not locked: turned off")
	default:
		log.Warn("memory not locked; evictd runs on, but the node's pressure can page it out",
			zap.String("reason", r.Reason), logging.Err(r.Err))
	}
}
