// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"slices"
	"sync"

	"github.com/evictd/evictd/pkg/thresholds"
)

// thresholdSwap carries thresholds placed anew while the agent runs (the
// kubelet restarted with other thresholds: kubelet_place.go) into the loop.
// The loop takes them between passes only: a pass decides on one set, and
// its state (the tracker, the wake-up sources' arming) is the loop
// goroutine's alone.
type thresholdSwap struct {
	mu      sync.Mutex
	pending []thresholds.Threshold
	has     bool
}

// thresholdSetter is an Arming that arms at thresholds given anew
// (*fastpath.Manager).
type thresholdSetter interface {
	SetThresholds([]thresholds.Threshold)
}

// SetThresholds hands the loop a new set of thresholds; it decides with
// them from the start of its next pass on. Safe to call from any
// goroutine; a later call before that pass replaces an earlier one.
func (l *Loop) SetThresholds(ths []thresholds.Threshold) {
	l.swap.mu.Lock()
	l.swap.pending, l.swap.has = slices.Clone(ths), true
	l.swap.mu.Unlock()
}

// takeThresholds, at a pass's start, switches to the thresholds handed
// over since the last pass: the tracker keeps each one's state (an episode
// under way goes on against the new value), the wake-up sources re-arm at
// the new values at this pass's Sync, and the threshold metrics follow
// from this pass on.
func (l *Loop) takeThresholds() {
	l.swap.mu.Lock()
	ths, has := l.swap.pending, l.swap.has
	l.swap.pending, l.swap.has = nil, false
	l.swap.mu.Unlock()
	if !has {
		return
	}
	l.cfg.Thresholds = ths
	l.tracker.SetThresholds(ths)
	if s, ok := l.deps.Arming.(thresholdSetter); ok {
		s.SetThresholds(ths)
	}
}

// lastView is what placement needs of the last pass's observation, for any
// goroutine; false before a pass has published one.
func (l *Loop) lastView() (startView, bool) {
	st := l.explained.Load()
	if st == nil || st.obs == nil {
		return startView{}, false
	}
	return startView{signals: thresholds.Observe(st.obs.Summary), diskLayout: st.obs.Node.DiskLayout}, true
}
