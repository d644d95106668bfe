// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"slices"
	"sync"

	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// thresholdSwap carries thresholds placed anew while the agent runs (the
// kubelet restarted with other thresholds: pkg/kubeletplace) into the loop.
// The loop takes them between passes only: a pass decides on one set, and
// its state (the tracker, the wake-up sources' arming) is the loop
// goroutine's alone.
type thresholdSwap struct {
	mu      sync.Mutex
	pending []thresholds.Threshold
	// placed is what pending was placed against, for the trace of the pass
	// that takes it; nil when handed over without (a replay's).
	placed *trace.Placement
	has    bool
}

// thresholdSetter is an Arming that arms at thresholds given anew
// (*fastpath.Manager).
type thresholdSetter interface {
	SetThresholds([]thresholds.Threshold)
}

// SetThresholds hands the loop a new set of thresholds; it decides with
// them from the start of its next pass on. Safe to call from any
// goroutine; a later call before that pass replaces an earlier one.
func (l *Loop) SetThresholds(ths []thresholds.Threshold) { l.setThresholds(ths, nil) }

// PlacedAnew hands the loop thresholds placed anew above the kubelet's
// (kubeletplace.Placer), with what they were placed against: the pass that takes
// them keeps that in its trace, so that a replay places at the same pass.
func (l *Loop) PlacedAnew(ths []thresholds.Threshold, placed trace.Placement) {
	l.setThresholds(ths, &placed)
}

func (l *Loop) setThresholds(ths []thresholds.Threshold, placed *trace.Placement) {
	l.inbox.swap.mu.Lock()
	l.inbox.swap.pending, l.inbox.swap.placed, l.inbox.swap.has = slices.Clone(ths), placed, true
	l.inbox.swap.mu.Unlock()
}

// takeThresholds, at a pass's start, switches to the thresholds handed
// over since the last pass: the tracker keeps each one's state (an episode
// under way goes on against the new value), the wake-up sources re-arm at
// the new values at this pass's Sync, and the threshold metrics follow
// from this pass on.
func (l *Loop) takeThresholds() {
	l.inbox.swap.mu.Lock()
	ths, placed, has := l.inbox.swap.pending, l.inbox.swap.placed, l.inbox.swap.has
	l.inbox.swap.pending, l.inbox.swap.placed, l.inbox.swap.has = nil, nil, false
	l.inbox.swap.mu.Unlock()
	if !has {
		return
	}
	if placed != nil && l.deps.Trace != nil {
		placed.Thresholds = thresholdStrings(ths)
		l.deps.Trace.Placed(*placed)
	}
	// A placement that moved nothing is for the trace only (Placer.Place
	// hands each over): the tracker and the wake-up sources stay as armed.
	if slices.Equal(thresholdStrings(ths), thresholdStrings(l.cfg.Thresholds)) {
		return
	}
	l.cfg.Thresholds = ths
	l.tracker.SetThresholds(ths)
	if s, ok := l.deps.Arming.(thresholdSetter); ok {
		s.SetThresholds(ths)
	}
}

// LastView is what placement needs of the last pass's observation (each
// signal's figures, and the disk layout), for any goroutine; false before
// a pass has published one.
func (l *Loop) LastView() (map[thresholds.Signal]thresholds.Observation, fslayout.Layout, bool) {
	st := l.published.explained.Load()
	if st == nil || st.obs == nil {
		return nil, "", false
	}
	return thresholds.Observe(st.obs.Summary), st.obs.Node.DiskLayout, true
}
