// SPDX-License-Identifier: Apache-2.0

package memhigh

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var testThresholds = Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: 10 * time.Second, Grace: 30 * time.Second}

// container is a scripted container: its counters grow by these per second.
type container struct {
	id                string
	highSet           bool
	highPerSec        uint64
	maxPerSec         uint64
	stallShare        float64 // of each second
	high, max, stallµ uint64
	highNs, maxNs     uint64
}

func (c *container) step(dt time.Duration) Sample {
	// In events·ns, so that 50/s over 10 ms passes counts one event every
	// other pass rather than none.
	c.highNs += c.highPerSec * uint64(dt)
	c.maxNs += c.maxPerSec * uint64(dt)
	c.high, c.max = c.highNs/uint64(time.Second), c.maxNs/uint64(time.Second)
	c.stallµ += uint64(c.stallShare * float64(dt.Microseconds()))
	s := Sample{PodUID: "pod-" + c.id, ContainerID: c.id, HighSet: c.highSet, HighEvents: c.high, MaxEvents: c.max, SomeTotal: c.stallµ, HasPSI: true}
	if c.highSet {
		s.High = 512 << 20
	}
	return s
}

// run samples the containers every second for secs seconds and returns,
// per container, when it was first Stuck (missing: never), and the last
// states.
func run(d *Detector, from time.Time, secs int, cs ...*container) (map[string]time.Time, []State) {
	return runEvery(d, from, time.Second, secs, cs...)
}

// runEvery is run with passes every `every`, n of them.
func runEvery(d *Detector, from time.Time, every time.Duration, n int, cs ...*container) (map[string]time.Time, []State) {
	first := map[string]time.Time{}
	var last []State
	for i := 1; i <= n; i++ {
		now := from.Add(time.Duration(i) * every)
		var samples []Sample
		for _, c := range cs {
			samples = append(samples, c.step(every))
		}
		last = d.Observe(now, samples)
		for _, st := range last {
			if _, ok := first[st.ContainerID]; !ok && st.Stuck {
				first[st.ContainerID] = now
			}
		}
	}
	return first, last
}

// Each signal alone makes a container with memory.high set stuck once it
// has been over its threshold for the grace period, and not before.
func TestStuckAfterGrace(t *testing.T) {
	for _, c := range []*container{
		{id: "high", highSet: true, highPerSec: 50},
		{id: "max", highSet: true, maxPerSec: 3},
		{id: "pressure", highSet: true, stallShare: 0.3},
	} {
		t.Run(c.id, func(t *testing.T) {
			d := NewDetector(testThresholds)
			first, last := run(d, t0, 60, c)
			// Over once half a window of readings shows it (the first at
			// 1 s, so at 6 s), stuck a grace period (30 s) later.
			if want := t0.Add(36 * time.Second); !first[c.id].Equal(want) {
				t.Errorf("stuck at %v, want %v", first[c.id].Sub(t0), want.Sub(t0))
			}
			if st := last[0]; !slices.Equal(st.Over, []Signal{Signal(c.id)}) || !strings.Contains(st.Describe(testThresholds), "over 10s") {
				t.Errorf("state %+v (%s), want over on %s only", st, st.Describe(testThresholds), c.id)
			}
		})
	}
}

// A container that stops hitting memory.high before the grace period is
// never stuck, and its stuck time starts again when it resumes.
func TestStopsBeforeGrace(t *testing.T) {
	d := NewDetector(testThresholds)
	c := &container{id: "c", highSet: true, highPerSec: 50}
	first, _ := run(d, t0, 20, c) // over from 5 s to 20 s: 15 s of 30
	c.highPerSec = 0
	more, last := run(d, t0.Add(20*time.Second), 30, c)
	if len(first)+len(more) != 0 {
		t.Errorf("stuck at %v %v, want never", first, more)
	}
	if st := last[0]; len(st.Over) != 0 || !st.Since.IsZero() {
		t.Errorf("after it stopped: %+v, want not over", st)
	}
	c.highPerSec = 50
	again, _ := run(d, t0.Add(50*time.Second), 40, c)
	// The window still held no events 5 s in: over when the rate over
	// the 10 s window passes 10/s (3 s), stuck 30 s later.
	if got := again["c"].Sub(t0.Add(50 * time.Second)); got < 30*time.Second {
		t.Errorf("stuck %v after resuming, want at least the 30 s grace", got)
	}
}

// Without memory.high (it reads "max") a container is never over, however
// often it reaches memory.max or stalls: memory.max is the kernel's to
// enforce, and a stall without memory.high is the stall family's.
func TestNoMemoryHighNeverStuck(t *testing.T) {
	d := NewDetector(testThresholds)
	c := &container{id: "c", highPerSec: 500, maxPerSec: 50, stallShare: 0.9}
	first, last := run(d, t0, 120, c)
	if len(first) != 0 || len(last[0].Over) != 0 {
		t.Errorf("stuck %v, state %+v; want never over without memory.high", first, last[0])
	}
}

// A busy container below its memory.high (no high or max events, a little
// stall) sees nothing.
func TestBusyBelowHigh(t *testing.T) {
	d := NewDetector(testThresholds)
	c := &container{id: "c", highSet: true, stallShare: 0.02}
	first, last := run(d, t0, 120, c)
	if len(first) != 0 || len(last[0].Over) != 0 {
		t.Errorf("stuck %v, state %+v; want nothing", first, last[0])
	}
	if st := last[0]; st.HighRate != 0 || st.Some < 0.019 || st.Some > 0.021 {
		t.Errorf("rates %+v, want no events and a 2%% stall share", st)
	}
}

// A container missing from a pass (gone, or its files unreadable) is
// forgotten: the next reading starts its history, and its stuck time,
// afresh.
func TestMissingForgets(t *testing.T) {
	d := NewDetector(testThresholds)
	c := &container{id: "c", highSet: true, highPerSec: 50}
	run(d, t0, 30, c)
	d.Observe(t0.Add(31*time.Second), nil)
	first, _ := run(d, t0.Add(31*time.Second), 30, c)
	if got, ok := first["c"]; ok && got.Sub(t0.Add(31*time.Second)) < 30*time.Second {
		t.Errorf("stuck %v after a missed pass, want the grace period again", got.Sub(t0.Add(31*time.Second)))
	}
}

// Time the detector did not watch (the agent standing by without its node
// lease, or failing to observe) is a break: a burst in it must not be
// spread over the gap into a rate, nor the stuck time from before it count.
func TestGapIsABreak(t *testing.T) {
	d := NewDetector(testThresholds)
	c := &container{id: "c", highSet: true, highPerSec: 50}
	first, _ := run(d, t0, 10, c) // over from 6 s
	if len(first) != 0 {
		t.Fatalf("stuck at %v before the gap, want not yet", first)
	}
	// 90 s unwatched, hitting memory.high for the first 2 s of it only:
	// 1200 events, 13/s spread over the gap, above the 10/s threshold.
	c.highPerSec = 600
	c.step(2 * time.Second)
	c.highPerSec = 0
	s := c.step(88 * time.Second)
	st := d.Observe(t0.Add(100*time.Second), []Sample{s})[0]
	if st.Stuck || len(st.Over) != 0 || st.Span > testThresholds.Window+time.Second {
		t.Errorf("first reading after a 90 s gap: stuck %v, over %v at %.1f/s over %s; want not over, measured over at most the %s window",
			st.Stuck, st.Over, st.HighRate, st.Span, testThresholds.Window)
	}
}

// A counter that went back (a new cgroup with the same name) restarts the
// history rather than reading a huge rate.
func TestCounterReset(t *testing.T) {
	d := NewDetector(testThresholds)
	d.Observe(t0, []Sample{{PodUID: "p", ContainerID: "c", HighSet: true, HighEvents: 1 << 40}})
	st := d.Observe(t0.Add(10*time.Second), []Sample{{PodUID: "p", ContainerID: "c", HighSet: true, HighEvents: 5}})
	if st[0].HighRate != 0 || len(st[0].Over) != 0 {
		t.Errorf("state %+v after a counter reset, want no rate", st[0])
	}
}

func TestThresholdsValidate(t *testing.T) {
	for _, tc := range []struct {
		th   Thresholds
		want string
	}{
		{Thresholds{HighRate: -1, Window: time.Second}, "event rate -1"},
		{Thresholds{Some: 1, Window: time.Second}, "pressure share 1"},
		{Thresholds{HighRate: 1}, "window 0s"},
		{Thresholds{HighRate: 1, Window: time.Second, Grace: -time.Second}, "grace period -1s"},
	} {
		if err := tc.th.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want it to name %q", tc.th, err, tc.want)
		}
	}
	if err := testThresholds.Validate(); err != nil {
		t.Error(err)
	}
}

// The window is measured whatever the pass rate: at 100 ms passes (the
// agent's fast path) a whole default window is far more readings than the
// history's bound, and at 1 s passes so is a 5-minute window. Each must
// still be measured over at least half the window, or it never fires.
func TestLongWindowsFire(t *testing.T) {
	for _, tc := range []struct {
		name   string
		every  time.Duration
		window time.Duration
	}{
		// config.DefaultMemoryHighWindow (the config package imports this
		// one, so its constants cannot be used here).
		{"100ms passes, default 30s window", 100 * time.Millisecond, 30 * time.Second},
		{"10ms passes, default 30s window", 10 * time.Millisecond, 30 * time.Second},
		// config.MaxStallWindow, the longest memoryHighWindow allowed.
		{"1s passes, 5m window", time.Second, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The other values are config's defaults too (DefaultMemoryHigh*).
			th := Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: tc.window, Grace: time.Minute}
			d := NewDetector(th)
			c := &container{id: "c", highSet: true, highPerSec: 50}
			// Half a window to be over, the grace to be stuck, then a whole
			// window more so that the rate is over the full window.
			n := int((tc.window/2 + th.Grace + tc.window) / tc.every)
			first, last := runEvery(d, t0, tc.every, n, c)
			st := last[0]
			if !slices.Equal(st.Over, []Signal{HighEvents}) || st.Span*2 < tc.window || !st.Stuck {
				t.Fatalf("after %s: over %v, span %s, stuck %v; want over on high, over at least half the %s window, stuck",
					time.Duration(n)*tc.every, st.Over, st.Span, st.Stuck, tc.window)
			}
			if math.Abs(st.HighRate-50) > 0.5 || st.Span < tc.window {
				t.Errorf("high rate %.2f/s over %s, want 50/s over the whole %s window", st.HighRate, st.Span, tc.window)
			}
			// Over once the readings span half the window (the first is one
			// pass in), stuck a grace period later.
			want := t0.Add(tc.every + tc.window/2 + th.Grace)
			if got, ok := first["c"]; !ok || got.Before(want) || got.After(want.Add(tc.every)) {
				t.Errorf("stuck at %v, want at %v", got.Sub(t0), want.Sub(t0))
			}
		})
	}
}

// Thousands of 10 ms passes keep a bounded history, and its rates stay
// those of the window: the oldest reading kept sits just before the
// window's start, never a stretch before it that would dilute a rate that
// changed.
func TestHistoryBoundedRatesTrue(t *testing.T) {
	const every = 10 * time.Millisecond
	th := Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: 30 * time.Second, Grace: time.Minute}
	d := NewDetector(th)
	// 100/s and 30 % stalled for 40 s, then nothing: at 60 s the window
	// holds 10 s of it.
	c := &container{id: "c", highSet: true, highPerSec: 100, stallShare: 0.3}
	perWindow := int(th.Window / every)
	var highs, stalls []uint64
	for i := 1; i <= 6000; i++ {
		if i == 4000 {
			c.highPerSec, c.stallShare = 0, 0
		}
		s := c.step(every)
		highs, stalls = append(highs, s.HighEvents), append(stalls, s.SomeTotal)
		st := d.Observe(t0.Add(time.Duration(i)*every), []Sample{s})[0]
		if n := len(d.conts[key(s.PodUID, s.ContainerID)].readings); n > maxReadings+2 {
			t.Fatalf("pass %d: %d readings kept, want at most %d", i, n, maxReadings+2)
		}
		if i <= perWindow {
			continue
		}
		j := i - 1 - perWindow // the pass at the window's start
		wantHigh := float64(highs[i-1]-highs[j]) / th.Window.Seconds()
		wantSome := float64(stalls[i-1]-stalls[j]) / float64(th.Window.Microseconds())
		// The oldest reading is at most one spacing (window/maxReadings)
		// and one pass before the window's start: 2 % of the peak rate.
		if math.Abs(st.HighRate-wantHigh) > 2 || math.Abs(st.Some-wantSome) > 0.006 || st.Span < th.Window || st.Span > th.Window+th.Window/maxReadings+every {
			t.Fatalf("pass %d (%s): high %.2f/s, stalled %.3f over %s; want %.2f/s, %.3f over the %s window",
				i, time.Duration(i)*every, st.HighRate, st.Some, st.Span, wantHigh, wantSome, th.Window)
		}
	}
}
