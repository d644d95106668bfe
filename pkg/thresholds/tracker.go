// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Tracker is the threshold state machine. Feed it every new set of
// observations; it remembers when each threshold was first met, which ones
// were acted on (so minimum reclaim can hold them), and when each pressure
// condition was last seen (for the transition period). It follows the
// kubelet's synchronize() steps 4–6 with two deliberate differences, both
// noted where they happen. A Tracker is not safe for concurrent use.
type Tracker struct {
	thresholds []Threshold
	transition time.Duration
	clk        clock.PassiveClock

	// Indexed like thresholds.
	firstMet []time.Time // zero when not met
	acted    []bool      // acted on at the previous Update

	lastPressure map[v1.NodeConditionType]time.Time
	lastObserved map[Signal]time.Time
}

// NewTracker returns a Tracker for thresholds. transitionPeriod is how long a
// pressure condition stays reported after its last threshold cleared.
func NewTracker(thresholds []Threshold, transitionPeriod time.Duration, clk clock.PassiveClock) *Tracker {
	ts := actionOrder(thresholds)
	return &Tracker{
		thresholds:   ts,
		transition:   transitionPeriod,
		clk:          clk,
		firstMet:     make([]time.Time, len(ts)),
		acted:        make([]bool, len(ts)),
		lastPressure: map[v1.NodeConditionType]time.Time{},
		lastObserved: map[Signal]time.Time{},
	}
}

// actionOrder is a copy of ths in action order: memory first, and on one
// signal hard before soft.
func actionOrder(ths []Threshold) []Threshold {
	ts := append([]Threshold(nil), ths...)
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].Signal != ts[j].Signal {
			return lessSignal(ts[i].Signal, ts[j].Signal)
		}
		return ts[i].Hard() && !ts[j].Hard()
	})
	return ts
}

// SetThresholds tracks ths from the next Update on, as when the kubelet's
// thresholds moved evictd's (pkg/agent's placement after a kubelet
// restart). A threshold of the same signal and kind (hard or soft) as one
// tracked keeps its state: when it was first met, whether it was acted on
// (so minimum reclaim, now against the new value, can hold it). One with no
// such match starts unmet; a tracked one with none is dropped.
func (t *Tracker) SetThresholds(ths []Threshold) {
	type key struct {
		s    Signal
		hard bool
	}
	was := make(map[key]int, len(t.thresholds))
	for i, th := range t.thresholds {
		was[key{th.Signal, th.Hard()}] = i
	}
	ts := actionOrder(ths)
	firstMet, acted := make([]time.Time, len(ts)), make([]bool, len(ts))
	for i, th := range ts {
		if j, ok := was[key{th.Signal, th.Hard()}]; ok {
			firstMet[i], acted[i] = t.firstMet[j], t.acted[j]
		}
	}
	t.thresholds, t.firstMet, t.acted = ts, firstMet, acted
}

// Thresholds returns the tracked thresholds in action order.
func (t *Tracker) Thresholds() []Threshold {
	return append([]Threshold(nil), t.thresholds...)
}

// Status is what one Update concluded. Every list is in action order.
type Status struct {
	// Time is the clock's time at the Update.
	Time time.Time
	// Met are the thresholds the observations cross right now, ignoring
	// grace periods and minimum reclaim.
	Met []Threshold
	// Pending are soft thresholds that are met but still inside their grace
	// period.
	Pending []PendingThreshold
	// Active are the thresholds to act on: hard ones that are met, soft ones
	// met for longer than their grace period, and acted-on ones that
	// minimum reclaim still holds.
	Active []ActiveThreshold
	// Pressure tells, for MemoryPressure, DiskPressure and PIDPressure,
	// whether the condition holds: one of its signals' thresholds is met
	// (grace ignored) or was within the transition period.
	Pressure map[v1.NodeConditionType]bool
}

// PendingThreshold is a soft threshold waiting out its grace period.
type PendingThreshold struct {
	Threshold
	// Since is when it was first met in the current episode.
	Since time.Time
	// Remaining is how much of the grace period is left.
	Remaining time.Duration
}

// ActiveThreshold is a threshold to act on.
type ActiveThreshold struct {
	Threshold
	Observation Observation
	// Since is when it was first met in the current episode.
	Since time.Time
	// HeldByMinReclaim is true when the observation no longer crosses the
	// threshold and only minimum reclaim keeps it active.
	HeldByMinReclaim bool
	// Reclaim is how much must be freed to clear it:
	// threshold + minimum reclaim − available, in the signal's unit.
	Reclaim int64
	// Stale is true when the observation is not newer than the one seen at
	// the previous Update; acting twice on the same reading would evict for
	// pressure that an earlier eviction may already have relieved (the
	// kubelet's thresholdsUpdatedStats).
	Stale bool
}

// First returns the threshold to act on now, if any: the first active one
// with a fresh observation.
func (s Status) First() (ActiveThreshold, bool) {
	for _, a := range s.Active {
		if !a.Stale {
			return a, true
		}
	}
	return ActiveThreshold{}, false
}

// Held returns the active thresholds kept only by minimum reclaim.
func (s Status) Held() []ActiveThreshold {
	var out []ActiveThreshold
	for _, a := range s.Active {
		if a.HeldByMinReclaim {
			out = append(out, a)
		}
	}
	return out
}

// Update evaluates obs at the clock's current time and advances the state.
func (t *Tracker) Update(obs map[Signal]Observation) Status {
	now := t.clk.Now()
	st := Status{Time: now, Pressure: make(map[v1.NodeConditionType]bool, 3)}
	for i, th := range t.thresholds {
		o, ok := obs[th.Signal]
		if !ok {
			// No reading: like the kubelet, the threshold is not met, and
			// its episode ends.
			t.firstMet[i], t.acted[i] = time.Time{}, false
			continue
		}
		amount := th.Value.Amount(o.Capacity)
		target := amount
		if th.MinReclaim != nil {
			target = addClamp(amount, th.MinReclaim.Amount(o.Capacity))
		}
		metNow := amount > o.Available
		held := !metNow && t.acted[i] && target > o.Available
		if !metNow && !held {
			t.firstMet[i], t.acted[i] = time.Time{}, false
			continue
		}
		if t.firstMet[i].IsZero() {
			t.firstMet[i] = now
		}
		if metNow {
			st.Met = append(st.Met, th)
		}
		t.lastPressure[th.Signal.Condition()] = now

		if elapsed := now.Sub(t.firstMet[i]); elapsed < th.GracePeriod {
			st.Pending = append(st.Pending, PendingThreshold{Threshold: th, Since: t.firstMet[i], Remaining: th.GracePeriod - elapsed})
			t.acted[i] = false
			continue
		}
		prev, seen := t.lastObserved[th.Signal]
		st.Active = append(st.Active, ActiveThreshold{
			Threshold:        th,
			Observation:      o,
			Since:            t.firstMet[i],
			HeldByMinReclaim: held,
			Reclaim:          target - o.Available,
			Stale:            seen && !o.Time.After(prev),
		})
		t.acted[i] = true
	}
	for s, o := range obs {
		t.lastObserved[s] = o.Time
	}
	for _, c := range Conditions() {
		at, ok := t.lastPressure[c]
		// The kubelet keeps a condition only while now−at < period, which
		// with a zero period never reports pressure at all; here a
		// condition seen at this very Update always holds.
		st.Pressure[c] = ok && (at.Equal(now) || now.Sub(at) < t.transition)
	}
	return st
}
