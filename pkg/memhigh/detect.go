// SPDX-License-Identifier: Apache-2.0

// Package memhigh detects containers stuck at memory.high (docs/memhigh.md):
// with memory.high set, a container that keeps hitting it (memory.events
// high), keeps reaching memory.max without being OOM-killed (memory.events
// max), or keeps losing time to memory stall (its memory.pressure) is
// throttled for ever, and only a userspace agent acts on it: the kernel's
// cgroup-v2 documentation leaves memory.high's enforcement past throttling
// to one, and the kubelet has none (KEP-5986 proposes it, not merged).
//
// read.go reads a pod's container cgroups; the Detector is pure: samples
// and times come from the caller.
package memhigh

import (
	"fmt"
	"sort"
	"time"
)

// Signal names which of a container's figures is over its threshold.
type Signal string

// The three signals, in the order a container's is reported.
const (
	// HighEvents is the rate of memory.events high: how often the
	// container was throttled into direct reclaim for being over
	// memory.high.
	HighEvents Signal = "high"
	// MaxEvents is the rate of memory.events max: how often it was about
	// to go over memory.max.
	MaxEvents Signal = "max"
	// PressureSome is the share of the window its tasks stalled on memory.
	PressureSome Signal = "pressure"
)

// Signals lists the signals in report order.
func Signals() []Signal { return []Signal{HighEvents, MaxEvents, PressureSome} }

// Thresholds say when a container is stuck. A zero rate or share leaves its
// signal out.
type Thresholds struct {
	// HighRate and MaxRate are memory.events high and max per second,
	// over Window.
	HighRate, MaxRate float64
	// Some is the share of Window stalled, in (0, 1).
	Some float64
	// Window is what the rates and the share are measured over.
	Window time.Duration
	// Grace is how long a container must stay stuck to be a target.
	Grace time.Duration
}

// Enabled reports whether any signal has a threshold.
func (t Thresholds) Enabled() bool { return t.HighRate > 0 || t.MaxRate > 0 || t.Some > 0 }

// Validate names the first bad value.
func (t Thresholds) Validate() error {
	switch {
	case t.HighRate < 0:
		return fmt.Errorf("memory.high event rate %g must not be negative", t.HighRate)
	case t.MaxRate < 0:
		return fmt.Errorf("memory.max event rate %g must not be negative", t.MaxRate)
	case t.Some < 0 || t.Some >= 1:
		return fmt.Errorf("memory.high pressure share %g must be within [0, 1)", t.Some)
	case t.Enabled() && t.Window <= 0:
		return fmt.Errorf("memory.high window %s must be positive", t.Window)
	case t.Grace < 0:
		return fmt.Errorf("memory.high grace period %s must not be negative", t.Grace)
	}
	return nil
}

// State is one container's memory.high state after a sample, or the
// pod's own (ContainerID PodLevel).
type State struct {
	PodUID, ContainerID string
	// Cgroup is the container's or pod's cgroup (Sample.Cgroup).
	Cgroup string
	// HighSet: memory.high is set; a container without it is never stuck.
	HighSet bool
	High    uint64
	// HighRate and MaxRate are events per second over Span, Some the share
	// of Span stalled (-1 without PSI); Span is 0 until two samples.
	HighRate, MaxRate, Some float64
	Span                    time.Duration
	// Over are the signals above their thresholds now, in report order.
	Over []Signal
	// Since is when the container became stuck (zero when it is not);
	// Stuck says whether it has been for the grace period.
	Since time.Time
	Stuck bool
}

// IsPodLevel reports whether the state is the pod's own cgroup's, not a
// container's.
func (s State) IsPodLevel() bool { return s.ContainerID == PodLevel }

// StuckFor is how long the container has been over a threshold at now.
func (s State) StuckFor(now time.Time) time.Duration {
	if s.Since.IsZero() {
		return 0
	}
	return now.Sub(s.Since)
}

// Describe says, for Events and logs, which figure is over and by how much.
func (s State) Describe(th Thresholds) string {
	if len(s.Over) == 0 {
		return "not over any memory.high threshold"
	}
	switch s.Over[0] {
	case HighEvents:
		return fmt.Sprintf("memory.events high %.1f/s over %s (threshold %g/s)", s.HighRate, s.Span.Round(time.Second), th.HighRate)
	case MaxEvents:
		return fmt.Sprintf("memory.events max %.1f/s over %s (threshold %g/s)", s.MaxRate, s.Span.Round(time.Second), th.MaxRate)
	}
	return fmt.Sprintf("memory.pressure some %.1f%% over %s (threshold %g%%)", s.Some*100, s.Span.Round(time.Second), th.Some*100)
}

// reading is one sample's counters at a time.
type reading struct {
	at              time.Time
	high, max, some uint64
	psi             bool
}

// maxReadings bounds a container's history: a pass every 10 ms would keep
// thousands over a 30 s window. Readings closer together than
// window/maxReadings are thinned, never the oldest (the one the rates are
// measured from) nor the newest, so that a window of any length at any pass
// rate is still measured whole, with at most maxReadings+2 readings.
const maxReadings = 64

type history struct {
	readings []reading
	since    time.Time
}

// Detector keeps each container's recent readings and stuck time.
type Detector struct {
	th    Thresholds
	conts map[string]*history
}

// NewDetector returns a detector for th (validated).
func NewDetector(th Thresholds) *Detector {
	return &Detector{th: th, conts: map[string]*history{}}
}

// Thresholds are the detector's thresholds.
func (d *Detector) Thresholds() Thresholds { return d.th }

func key(podUID, id string) string { return podUID + "/" + id }

// Observe takes the samples of one pass, read at now, and returns every
// sampled container's state, by pod UID then container ID. A container not
// in samples (gone, or its files unreadable in this pass) is forgotten: its
// stuck time starts again from nothing, so a signal evictd could not read
// never evicts.
func (d *Detector) Observe(now time.Time, samples []Sample) []State {
	seen := make(map[string]bool, len(samples))
	out := make([]State, 0, len(samples))
	for _, s := range samples {
		k := key(s.PodUID, s.ContainerID)
		seen[k] = true
		h := d.conts[k]
		if h == nil {
			h = &history{}
			d.conts[k] = h
		}
		h.add(reading{at: now, high: s.HighEvents, max: s.MaxEvents, some: s.SomeTotal, psi: s.HasPSI}, d.th.Window)
		out = append(out, d.state(s, h, now))
	}
	for k := range d.conts {
		if !seen[k] {
			delete(d.conts, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PodUID != out[j].PodUID {
			return out[i].PodUID < out[j].PodUID
		}
		return out[i].ContainerID < out[j].ContainerID
	})
	return out
}

// Forget drops a container's readings and stuck time: after its memory.high
// was relaxed, its old rates say nothing of it, and it must be stuck for a
// whole grace period again to be a target.
func (d *Detector) Forget(podUID, containerID string) {
	delete(d.conts, key(podUID, containerID))
}

// add appends r and drops the readings older than the window's start but
// the last one before it, which measures the whole window. A counter that
// went back (a container restarted in the same cgroup) starts afresh, and
// so does a reading more than a window after the one before it: the family
// was not observed in between (the agent stood by, or could not observe),
// and a rate over the gap would spread a burst in it over minutes, while
// the stuck time would run on across time nobody watched. Starting afresh
// leaves one reading, which is over nothing, so the stuck time restarts too.
//
// The newest reading replaces the one before it while that one is less than
// window/maxReadings after its own predecessor. Thinning by time, not by
// count as pkg/stall does, keeps the oldest reading within one spacing of
// the window's start: halving the middle each time a count is reached
// leaves the oldest part sparsest, and the oldest reading could then stay
// up to most of a window before the start (a 30 s window measured over 42 s
// at 10 ms passes). pkg/stall interpolates across that gap; a rate taken
// between two readings cannot.
func (h *history) add(r reading, window time.Duration) {
	if n := len(h.readings); n > 0 {
		last := h.readings[n-1]
		if !r.at.After(last.at) || r.at.Sub(last.at) > window ||
			r.high < last.high || r.max < last.max || r.some < last.some || r.psi != last.psi {
			h.readings = h.readings[:0]
		}
	}
	// Rounded up, so that maxReadings spacings never fall short of the
	// window and the bound holds for any window.
	spacing := (window + maxReadings - 1) / maxReadings
	if n := len(h.readings); n >= 2 && h.readings[n-1].at.Sub(h.readings[n-2].at) < spacing {
		h.readings[n-1] = r
	} else {
		h.readings = append(h.readings, r)
	}
	start := r.at.Add(-window)
	drop := 0
	for drop+1 < len(h.readings) && !h.readings[drop+1].at.After(start) {
		drop++
	}
	if drop > 0 {
		h.readings = append(h.readings[:0], h.readings[drop:]...)
	}
}

func (d *Detector) state(s Sample, h *history, now time.Time) State {
	st := State{PodUID: s.PodUID, ContainerID: s.ContainerID, Cgroup: s.Cgroup, HighSet: s.HighSet, High: s.High, Some: -1}
	first, last := h.readings[0], h.readings[len(h.readings)-1]
	st.Span = last.at.Sub(first.at)
	if st.Span > 0 {
		secs := st.Span.Seconds()
		st.HighRate = float64(last.high-first.high) / secs
		st.MaxRate = float64(last.max-first.max) / secs
		if last.psi {
			st.Some = min(float64(last.some-first.some)/float64(st.Span.Microseconds()), 1)
		}
	}
	// A rate over less than half the window is a burst, not a state: the
	// first readings of a new container say nothing yet.
	if s.HighSet && st.Span*2 >= d.th.Window {
		if d.th.HighRate > 0 && st.HighRate > d.th.HighRate {
			st.Over = append(st.Over, HighEvents)
		}
		if d.th.MaxRate > 0 && st.MaxRate > d.th.MaxRate {
			st.Over = append(st.Over, MaxEvents)
		}
		if d.th.Some > 0 && st.Some > d.th.Some {
			st.Over = append(st.Over, PressureSome)
		}
	}
	if len(st.Over) == 0 {
		h.since = time.Time{}
	} else if h.since.IsZero() {
		h.since = now
	}
	st.Since = h.since
	st.Stuck = !h.since.IsZero() && now.Sub(h.since) >= d.th.Grace
	return st
}
