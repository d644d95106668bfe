// SPDX-License-Identifier: Apache-2.0

package agent

import "github.com/evictd/evictd/pkg/healthz"

// Check names under /healthz and /readyz: operators exclude or query them
// by name (/readyz/informers, ?exclude=observing), so they are stable.
const (
	CheckLoop      = "loop"
	CheckInformers = "informers"
	CheckObserving = "observing"
	// CheckKubeletThresholds warns, and never fails: evictd protects the
	// node at its own thresholds whatever the kubelet's are; what the
	// warning tells is that the kubelet may evict first, without
	// PodDisruptionBudgets (kubelet_place.go).
	CheckKubeletThresholds = "kubelet-thresholds"
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
