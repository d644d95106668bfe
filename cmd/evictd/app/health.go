// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/healthz"
	"github.com/evictd/evictd/pkg/kubeletplace"
)

// Check names under /healthz and /readyz: operators exclude or query them
// by name (/readyz/informers, ?exclude=observing), so they are stable.
const (
	CheckLoop      = "loop"
	CheckInformers = "informers"
	CheckObserving = "observing"
	// CheckNodeBrake warns while the node brake cannot be written.
	CheckNodeBrake = "node-brake"
	// CheckKubeletThresholds warns, and never fails (kubeletplace.Check).
	CheckKubeletThresholds = kubeletplace.Check
)

// Sets returns the named checks served at /healthz (live) and /readyz
// (ready). Callers add their own to these sets before serving: a failing
// one with Add, a passing one that carries a warning with AddWarning.
func (h Health) Sets() (live, ready *healthz.Set) {
	live = healthz.New("healthz")
	live.Add(CheckLoop, h.Healthz)
	ready = healthz.New("readyz")
	ready.Add(CheckInformers, h.Informers)
	ready.Add(CheckObserving, h.Observing)
	return live, ready
}

// Health holds the /healthz and /readyz checks.
type Health struct {
	Housekeeping time.Duration
	// Synced reports whether the informers have synced.
	Synced func() bool
	Loop   interface {
		LastObservation() time.Time
		LastPass() time.Time
		Problem() error
	}
	Clock clock.PassiveClock
	// Started is when the loop started (zero before).
	Started func() time.Time
}

// ReadyWindow is how recent the last successful observation must be.
func (h Health) ReadyWindow() time.Duration { return 5*h.Housekeeping + 5*time.Second }

// StuckWindow is how long the loop may go without finishing a pass before
// /healthz fails (a restart is then the way out).
func (h Health) StuckWindow() time.Duration { return max(10*h.Housekeeping, 2*time.Minute) }

// Informers fails until the pod and namespace informers have synced.
func (h Health) Informers() error {
	if !h.Synced() {
		return errors.New("informers have not synced yet")
	}
	return nil
}

// Observing fails while the loop cannot protect the node as it should
// (agent.Loop.Problem) or has not observed it within ReadyWindow.
func (h Health) Observing() error {
	if err := h.Loop.Problem(); err != nil {
		return err
	}
	last := h.Loop.LastObservation()
	if last.IsZero() {
		return errors.New("no observation has succeeded yet")
	}
	if age := h.Clock.Since(last); age > h.ReadyWindow() {
		return fmt.Errorf("last successful observation was %v ago (more than %v)", age.Round(time.Millisecond), h.ReadyWindow())
	}
	return nil
}

// Healthz fails only when the loop is stuck: started, and no pass has
// finished within StuckWindow. Waiting for the API server is not a reason
// to restart.
func (h Health) Healthz() error {
	start := h.Started()
	if start.IsZero() {
		return nil
	}
	last := h.Loop.LastPass()
	if last.Before(start) {
		last = start
	}
	if age := h.Clock.Since(last); age > h.StuckWindow() {
		return fmt.Errorf("the agent loop has not finished a pass for %v", age.Round(time.Second))
	}
	return nil
}
