// SPDX-License-Identifier: Apache-2.0

// Package stall measures memory stall: the share of a sliding window in
// which tasks of a group (the node, kubepods, a pod) waited on memory, from
// the cumulative stall totals PSI reports (the "total=" of a pressure file,
// in microseconds). PSI's own avg10/avg60/avg300 are exponential averages
// refreshed every 2 s; a difference of totals over a window the operator
// chooses reacts as soon as the stall does, and it is exactly what a PSI
// trigger of the same window measures, so a trigger and a poll agree on
// when a threshold is crossed.
//
// The package is pure: readings and times come from the caller.
package stall

import (
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/thresholds"
)

// Groups the agent tracks besides pods.
const (
	Node     = "node"
	Kubepods = "kubepods"
)

// maxSamples bounds one group's history: at the fastest poll (10 ms) a
// 10 s window would otherwise keep a thousand samples per pod.
const maxSamples = 128

// sample is one reading of a group's totals.
type sample struct {
	at         time.Time
	some, full uint64 // µs
}

// Shares are the shares of the window stalled, in [0, 1].
type Shares struct {
	Some, Full float64
	// Window is the stretch the shares are over, At its end (the latest
	// reading); SomeStalled and FullStalled the µs stalled in it.
	Window                   time.Duration
	At                       time.Time
	SomeStalled, FullStalled int64
}

// Tracker keeps each group's recent readings.
type Tracker struct {
	window time.Duration
	groups map[string][]sample
}

// New returns a tracker of shares over window (> 0).
func New(window time.Duration) *Tracker {
	return &Tracker{window: window, groups: map[string][]sample{}}
}

// Add records a reading of group's pressure file taken at at. A reading
// older than the group's latest is ignored; a total that went down (the
// group was removed and made again under the same name) starts the group's
// history afresh.
func (t *Tracker) Add(group string, at time.Time, psi *statsapi.PSIStats) {
	if psi == nil {
		return
	}
	s := sample{at: at, some: psi.Some.Total, full: psi.Full.Total}
	h := t.groups[group]
	if n := len(h); n > 0 {
		last := h[n-1]
		if !at.After(last.at) {
			return
		}
		if s.some < last.some || s.full < last.full {
			h = h[:0]
		}
	}
	h = append(h, s)
	// Keep one reading at or before the window's start, to interpolate
	// the totals there.
	start := at.Add(-t.window)
	drop := 0
	for drop+1 < len(h) && !h[drop+1].at.After(start) {
		drop++
	}
	if drop > 0 {
		h = append(h[:0], h[drop:]...)
	}
	if len(h) > maxSamples {
		// Thin the middle, never the ends: every other reading.
		thin := h[:1]
		for i := 1; i < len(h)-1; i += 2 {
			thin = append(thin, h[i])
		}
		h = append(thin, h[len(h)-1])
	}
	t.groups[group] = h
}

// Share is group's stall over the window ending at its latest reading. A
// group watched for less than a window counts no stall before its first
// reading, so a short history can only understate the share: evictd never
// acts on a stall it has not seen for a whole window's worth of time. The
// totals at the window's start are interpolated between the readings
// around it; when those are more than a window apart (passes missed, or
// polled less often than the window), the stall between them may all have
// been before the start, and spreading it evenly would overstate the
// share, so the start counts the most the totals could have reached by
// then: the share is the least the window can have held.
func (t *Tracker) Share(group string) (Shares, bool) {
	h := t.groups[group]
	if len(h) < 2 {
		return Shares{}, false
	}
	last := h[len(h)-1]
	start := last.at.Add(-t.window)
	some, full := h[0].some, h[0].full
	if h[0].at.Before(start) {
		// h[1] is after start (Add keeps only one reading before it).
		a, b := h[0], h[1]
		if b.at.Sub(a.at) <= t.window {
			f := float64(start.Sub(a.at)) / float64(b.at.Sub(a.at))
			some = a.some + uint64(f*float64(b.some-a.some))
			full = a.full + uint64(f*float64(b.full-a.full))
		} else {
			// A group stalls at most all of the time.
			most := uint64(start.Sub(a.at).Microseconds())
			some = min(b.some, a.some+most)
			full = min(b.full, a.full+most)
		}
	}
	w := t.window.Microseconds()
	sh := Shares{
		Window:      t.window,
		At:          last.at,
		SomeStalled: min(int64(last.some-some), w),
		FullStalled: min(int64(last.full-full), w),
	}
	sh.Some = float64(sh.SomeStalled) / float64(w)
	sh.Full = float64(sh.FullStalled) / float64(w)
	return sh, true
}

// Retain forgets the groups keep refuses (pods that are gone).
func (t *Tracker) Retain(keep func(group string) bool) {
	for g := range t.groups {
		if !keep(g) {
			delete(t.groups, g)
		}
	}
}

// Observation is a stall signal as a threshold observation: its capacity
// is the window in µs and what is "available" the time not stalled, so a
// threshold "stalled more than P" is met when less than 1 − P of the window
// was free of stall (thresholds.StallValue).
func Observation(sh Shares, full bool) thresholds.Observation {
	w := sh.Window.Microseconds()
	stalled := sh.SomeStalled
	if full {
		stalled = sh.FullStalled
	}
	return thresholds.Observation{Available: w - stalled, Capacity: w, Time: sh.At}
}

// Observations gives the stall signals of the node and kubepods groups.
func (t *Tracker) Observations() map[thresholds.Signal]thresholds.Observation {
	out := map[thresholds.Signal]thresholds.Observation{}
	for _, g := range []struct {
		group      string
		some, full thresholds.Signal
	}{
		{Node, thresholds.MemoryPressureSome, thresholds.MemoryPressureFull},
		{Kubepods, thresholds.AllocatableMemoryPressureSome, thresholds.AllocatableMemoryPressureFull},
	} {
		sh, ok := t.Share(g.group)
		if !ok {
			continue
		}
		out[g.some] = Observation(sh, false)
		out[g.full] = Observation(sh, true)
	}
	return out
}

// GroupOf is the group a stall signal measures.
func GroupOf(s thresholds.Signal) string {
	if s.Allocatable() {
		return Kubepods
	}
	return Node
}

// PodGroup is the group name of a pod's cgroup, by UID.
func PodGroup(uid string) string { return "pod/" + uid }
