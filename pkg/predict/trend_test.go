// SPDX-License-Identifier: Apache-2.0

package predict

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// curve is available memory as a function of time since t0.
type curve func(at time.Duration) float64

// sampled returns the curve read every step from 0 to d (inclusive), each
// reading off by up to ±noise bytes of deterministic pseudo-random jitter.
func sampled(c curve, step, d time.Duration, noise int64) []point {
	var out []point
	x := uint32(12345)
	for at := time.Duration(0); at <= d; at += step {
		x = x*1664525 + 1013904223 // an LCG: the same jitter on every run
		j := int64(0)
		if noise > 0 {
			j = int64(x>>8)%(2*noise+1) - noise
		}
		out = append(out, point{at: at, avail: int64(c(at)) + j})
	}
	return out
}

// flat is a constant curve.
func flat(v float64) curve { return func(time.Duration) float64 { return v } }

// leak falls at rate bytes/s from start from time from on.
func leak(start, rate float64, from time.Duration) curve {
	return func(at time.Duration) float64 {
		if at <= from {
			return start
		}
		return start - rate*(at-from).Seconds()
	}
}

// bursts falls by size in each burst, the bursts starting at the given
// times and each taking took, and holds between and after them.
func bursts(start, size float64, took time.Duration, at ...time.Duration) curve {
	return func(t time.Duration) float64 {
		v := start
		for _, b := range at {
			switch {
			case t >= b+took:
				v -= size
			case t > b:
				v -= size * float64(t-b) / float64(took)
			}
		}
		return v
	}
}

// stopAt holds c's value from time stop on.
func stopAt(c curve, stop time.Duration) curve {
	return func(at time.Duration) float64 { return c(min(at, stop)) }
}

func trendOf(t *testing.T, pts []point) Trend {
	t.Helper()
	e, err := NewEstimator(Options{})
	if err != nil {
		t.Fatal(err)
	}
	push(e, pts)
	tr := e.Trend()
	if tr.Sustained != e.Sustained() {
		t.Fatalf("Trend().Sustained %v != Sustained() %v", tr.Sustained, e.Sustained())
	}
	return tr
}

func describe(tr Trend) string {
	return fmt.Sprintf("sustained %v (%q): rate %.1f Mi/s, R² %.3f, %d samples over %s",
		tr.Sustained, tr.Why, tr.Rate/mi, tr.R2, tr.Samples, tr.Span)
}

func TestTrend(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		pts  []point
		want []string // acceptable Trend.Why; none for sustained
		rate float64
	}{
		{name: "no samples", want: []string{WhyTooShort}},
		{name: "steady leak 50Mi/s with ±3Mi jitter", rate: 50 * mi,
			pts: sampled(leak(900*mi, 50*mi, 0), 100*ms, 4*time.Second, 3*mi)},
		{name: "slow leak 12Mi/s with ±3Mi jitter", rate: 12 * mi,
			pts: sampled(leak(900*mi, 12*mi, 0), 100*ms, 5*time.Second, 3*mi)},
		{name: "fast leak 500Mi/s", rate: 500 * mi,
			pts: sampled(leak(3000*mi, 500*mi, 0), 100*ms, 3500*ms, 0)},
		{name: "leak, only 2.5s of samples", want: []string{WhyTooShort},
			pts: sampled(leak(900*mi, 50*mi, 0), 100*ms, 2500*ms, 0)},
		{name: "too few samples: five over four seconds", want: []string{WhyTooFew},
			pts: sampled(leak(900*mi, 50*mi, 0), time.Second, 4*time.Second, 0)},
		{name: "sparse but enough: seven over three seconds", rate: 50 * mi,
			pts: sampled(leak(900*mi, 50*mi, 0), 500*ms, 3*time.Second, 0)},
		{name: "housekeeping polls 10s apart", want: []string{WhyTooShort},
			pts: sampled(leak(900*mi, 10*mi, 0), 10*time.Second, 60*time.Second, 0)},
		{name: "noisy flat ±8Mi", want: []string{WhyInconsistent, WhyNotFalling},
			pts: sampled(flat(700*mi), 100*ms, 5*time.Second, 8*mi)},
		{name: "perfectly flat", want: []string{WhyNotFalling},
			pts: sampled(flat(700*mi), 100*ms, 5*time.Second, 0)},
		{name: "rising", want: []string{WhyNotFalling},
			pts: sampled(leak(300*mi, -40*mi, 0), 100*ms, 5*time.Second, 0)},
		{name: "single 300Mi step mid-span, clean", want: []string{WhyInconsistent},
			pts: sampled(bursts(900*mi, 300*mi, 50*ms, 3500*ms), 100*ms, 5*time.Second, 0)},
		{name: "leak started 1s ago after a flat stretch", want: []string{WhyInconsistent, WhyTooRecent},
			pts: sampled(leak(900*mi, 100*mi, 4*time.Second), 100*ms, 5*time.Second, 0)},
		{name: "leak started 2s ago after a flat stretch", want: []string{WhyTooRecent},
			pts: sampled(leak(900*mi, 100*mi, 4*time.Second), 100*ms, 6*time.Second, 0)},
		{name: "leak started 3.5s ago after a flat stretch", rate: 100 * mi,
			pts: sampled(leak(900*mi, 100*mi, 4*time.Second), 100*ms, 7500*ms, 0)},
		{name: "leak stopped 1s ago", want: []string{WhyStopped},
			pts: sampled(stopAt(leak(900*mi, 100*mi, 0), 4*time.Second), 100*ms, 5*time.Second, 0)},
		{name: "leak in 40Mi chunks every 400ms: a trend", rate: 100 * mi,
			pts: sampled(bursts(900*mi, 40*mi, 50*ms, 0, 400*ms, 800*ms, 1200*ms, 1600*ms, 2000*ms, 2400*ms, 2800*ms, 3200*ms, 3600*ms),
				100*ms, 3800*ms, 0)},
		{name: "wake-ups every 10ms for 5s: the history is thinned, not cut short", rate: 80 * mi,
			pts: sampled(leak(900*mi, 80*mi, 0), 10*ms, 5*time.Second, mi)},
		{name: "an eviction's release restarts the trend", want: []string{WhyTooShort},
			pts: append(sampled(leak(900*mi, 80*mi, 0), 100*ms, 5*time.Second, 0),
				shift(sampled(leak(800*mi, 80*mi, 0), 100*ms, 2*time.Second, 0), 5100*ms)...)},
		{name: "an eviction's release, then 3s more of the leak", rate: 80 * mi,
			pts: append(sampled(leak(900*mi, 80*mi, 0), 100*ms, 5*time.Second, 0),
				shift(sampled(leak(800*mi, 80*mi, 0), 100*ms, 3200*ms, 0), 5100*ms)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := trendOf(t, tc.pts)
			if tr.Sustained != (len(tc.want) == 0) || (len(tc.want) > 0 && !slices.Contains(tc.want, tr.Why)) {
				t.Fatalf("got %s; want why one of %q", describe(tr), tc.want)
			}
			if len(tc.want) == 0 && !within(tr.Rate, tc.rate, 0.1) {
				t.Errorf("got %s; want rate %.1f Mi/s ± 10%%", describe(tr), tc.rate/mi)
			}
		})
	}
}

// TestTrendNeverSustainedByBursts replays, sample by sample at the 100 ms
// fast poll, allocations in bursts that stop: the pattern that two
// consecutive falls over a 2 s fit used to extrapolate. At no point of the
// bursts or the plateau after them may the fall count as sustained.
func TestTrendNeverSustainedByBursts(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		c    curve
	}{
		{"three 150Mi bursts 300ms apart", bursts(850*mi, 150*mi, 100*ms, 5*time.Second, 5300*ms, 5600*ms)},
		{"four 100Mi bursts 400ms apart", bursts(850*mi, 100*mi, 100*ms, 5*time.Second, 5400*ms, 5800*ms, 6200*ms)},
		{"one 450Mi step", bursts(850*mi, 450*mi, 50*ms, 5*time.Second)},
		{"a 1.5s ramp of 450Mi", stopAt(leak(850*mi, 300*mi, 5*time.Second), 6500*ms)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, noise := range []int64{0, 3 * mi} {
				e, err := NewEstimator(Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range sampled(tc.c, 100*ms, 25*time.Second, noise) {
					e.Push(t0.Add(p.at), p.avail)
					if tr := e.Trend(); tr.Sustained {
						t.Fatalf("noise ±%dMi: sustained at %s (available %dMi, rate %.0fMi/s): %s",
							noise/mi, p.at, p.avail/mi, e.Rate()/mi, describe(tr))
					}
				}
			}
		})
	}
}

// TestTrendStopsQuickly: a fill that was sustained stops counting within
// TrendEdge of its end, at any fill rate and poll interval.
func TestTrendStopsQuickly(t *testing.T) {
	const ms = time.Millisecond
	for _, rate := range []float64{20 * mi, 100 * mi, 400 * mi} {
		for _, step := range []time.Duration{50 * ms, 100 * ms, 250 * ms} {
			t.Run(fmt.Sprintf("%.0fMi/s every %s", rate/mi, step), func(t *testing.T) {
				const stop = 5 * time.Second
				e, err := NewEstimator(Options{})
				if err != nil {
					t.Fatal(err)
				}
				var stoppedAt time.Duration = -1
				for _, p := range sampled(stopAt(leak(4000*mi, rate, 0), stop), step, 10*time.Second, 2*mi) {
					e.Push(t0.Add(p.at), p.avail)
					tr := e.Trend()
					switch {
					case p.at == stop && !tr.Sustained:
						t.Fatalf("not sustained at the end of a %s fill: %s", stop, describe(tr))
					case p.at > stop && !tr.Sustained && stoppedAt < 0:
						stoppedAt = p.at - stop
					case p.at > stop && tr.Sustained && stoppedAt >= 0:
						t.Fatalf("sustained again %s after the fill stopped: %s", p.at-stop, describe(tr))
					}
				}
				if stoppedAt < 0 || stoppedAt > TrendEdge {
					t.Fatalf("still sustained %s after the fill stopped, want at most %s", stoppedAt, TrendEdge)
				}
				t.Logf("not sustained %s after the fill stopped", stoppedAt)
			})
		}
	}
}

// TestTrendOnsetTakesTheSpan: a leak becomes sustained once it has gone on
// for about MinTrendSpan, not sooner.
func TestTrendOnsetTakesTheSpan(t *testing.T) {
	const (
		ms    = time.Millisecond
		onset = 5 * time.Second
	)
	e, err := NewEstimator(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var first time.Duration = -1
	for _, p := range sampled(leak(4000*mi, 60*mi, onset), 100*ms, 15*time.Second, 2*mi) {
		e.Push(t0.Add(p.at), p.avail)
		if e.Sustained() && first < 0 {
			first = p.at - onset
		}
	}
	if first < 0 {
		t.Fatalf("a 10s leak never became sustained: %s", describe(e.Trend()))
	}
	if first < MinTrendSpan-TrendEdge || first > MinTrendSpan+TrendEdge {
		t.Fatalf("sustained %s after the leak began, want about %s", first, MinTrendSpan)
	}
	t.Logf("sustained %s after the leak began", first)
}

func TestTrendRingThinning(t *testing.T) {
	e, err := NewEstimator(Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Readings every 7 ms for 10 s: far more than the ring holds.
	for at := time.Duration(0); at <= 10*time.Second; at += 7 * time.Millisecond {
		e.Push(t0.Add(at), 4000*mi-int64(30*mi*at.Seconds()))
	}
	if e.trendN != trendSlots {
		t.Fatalf("trend ring holds %d samples, want it full (%d)", e.trendN, trendSlots)
	}
	newest := e.trend[e.trendSlot(e.trendN-1)]
	if _, a, _ := e.Latest(); newest.available != a {
		t.Errorf("the trend's newest sample is %d, want the latest reading %d", newest.available, a)
	}
	for i := 1; i < e.trendN-1; i++ {
		if gap := e.trend[e.trendSlot(i)].ns - e.trend[e.trendSlot(i-1)].ns; gap < int64(trendGap) {
			t.Fatalf("kept samples %d and %d are %s apart, want at least %s", i-1, i, time.Duration(gap), trendGap)
		}
	}
	if span := time.Duration(newest.ns - e.trend[e.trendHead].ns); span < MaxTrendSpan {
		t.Errorf("the ring covers %s, want at least MaxTrendSpan %s", span, MaxTrendSpan)
	}
	// Reset forgets the trend with the samples.
	e.Reset()
	if tr := e.Trend(); tr.Sustained || tr.Samples != 0 {
		t.Errorf("after Reset: %s", describe(tr))
	}
	// A clock that goes backwards starts the trend again as well.
	e2, _ := NewEstimator(Options{})
	push(e2, sampled(leak(900*mi, 50*mi, 0), 100*time.Millisecond, 4*time.Second, 0))
	if !e2.Sustained() {
		t.Fatalf("fixture: not sustained: %s", describe(e2.Trend()))
	}
	e2.Push(t0.Add(time.Second), 600*mi)
	if tr := e2.Trend(); tr.Sustained || tr.Samples != 1 {
		t.Errorf("after the clock went back: %s, want one sample", describe(tr))
	}
}

func TestFitLineExtremes(t *testing.T) {
	e, _ := NewEstimator(Options{})
	e.Push(t0, math.MaxInt64)
	e.Push(t0.Add(time.Second), math.MinInt64)
	e.Push(t0.Add(2*time.Second), math.MaxInt64)
	tr := e.Trend()
	if math.IsNaN(tr.Rate) || math.IsInf(tr.Rate, 0) || math.IsNaN(tr.R2) || tr.Sustained {
		t.Fatalf("extreme inputs: %s", describe(tr))
	}
}

func BenchmarkPushSustained(b *testing.B) {
	e, at, avail := fullEstimator(Options{})
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		at = at.Add(100 * time.Millisecond)
		avail -= 10*mi + int64(i%7-3)*mi
		e.Push(at, avail)
		if e.Sustained() {
			n++
		}
	}
	if n == 0 {
		b.Fatal("a steady fall was never sustained")
	}
}
