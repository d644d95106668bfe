// SPDX-License-Identifier: Apache-2.0

package app

import (
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
