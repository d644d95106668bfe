// SPDX-License-Identifier: Apache-2.0

package predict

import "time"

// A fill rate is only extrapolated (to act before a threshold is met, or to
// shorten a grace period) when it comes from a sustained trend: a fall that
// has gone on for a while, steadily, and is still going on. The fill rate
// itself (Rate) reacts within a second and is right to: it sizes the poll
// interval, where a false alarm costs a few extra reads. A wrong
// extrapolation costs a pod: a workload that allocates a few hundred MiB in
// two or three quick bursts and then holds them looks, over a 2 s fit, like a
// fill of hundreds of MiB/s heading straight for the threshold.
//
// The trend is a least-squares line through the samples of the last
// MinTrendSpan or so (at least MinTrendSamples of them, none before the last
// release), and it is sustained only when all of these hold:
//
//   - the line falls and explains at least MinTrendR2 of the variance;
//   - the first TrendEdge of the span falls at least MinEdgeShare as fast as
//     the line: the fall was already under way MinTrendSpan ago, it is not
//     a recent jump that a long flat stretch before it dilutes;
//   - the last TrendEdge falls at least MinEdgeShare as fast as the line: a
//     fill that stopped stops being a trend within TrendEdge.
const (
	// MinTrendSpan is the shortest span of samples a trend is fitted to,
	// and so about the shortest fall that is ever extrapolated. Three
	// seconds is three times TrendEdge, so that the first and the last
	// TrendEdge are separate stretches with a stretch between them; a
	// burst of allocations that ends within a second or two can therefore
	// never fall in both, and is never taken for a trend. It is also well
	// above the 2 s fit of the fill rate, so a trend is always more than
	// what the rate alone has seen. The cost: a fill that takes a node from
	// quiet to a hard threshold in less than about MinTrendSpan is met by
	// the threshold itself, never predicted. That is the case the hard
	// threshold's own margin (evictd's default is 200 MiB above the
	// kubelet's) and the event-driven wake-ups exist for.
	MinTrendSpan = 3 * time.Second
	// MaxTrendSpan bounds how far back the fit reaches for its oldest
	// sample when samples are sparse (slow polling): evidence older than
	// this says nothing about the fill going on now.
	MaxTrendSpan = 2 * MinTrendSpan
	// MinTrendSamples is the fewest samples a trend is fitted to: at least
	// MinEdgeSamples at each end, and with five degrees of freedom a
	// least-squares line whose R² means something (two or three points are
	// always close to a line). Six samples over three seconds is one every
	// 0.6 s or faster, which the adaptive poll reaches well before a fill
	// at any rate it could act on gets close to a threshold (it polls every
	// headroom / 1000 MiB/s / 2).
	MinTrendSamples = 6
	// MinTrendR2 is the share of the variance of the samples that the
	// fitted line must explain. A single step of any height, anywhere in
	// the span, explains at most 3p(1−p) ≤ 75% of it (p: where the step
	// falls in the span), so one burst never passes, however clean. A
	// steady fall at rate r over span T with sample jitter σ explains
	// (rT)²/12 / ((rT)²/12 + σ²), at least 80% once rT ≥ 6.9σ: with 4 MiB
	// of jitter over 3 s, any fill faster than about 9 MiB/s passes. Slower
	// fills need no prediction: at 9 MiB/s the default 2 s lead is 18 MiB.
	MinTrendR2 = 0.8
	// TrendEdge is the length of the first and the last stretch of the
	// span whose own slopes are checked, and so how long a fill must have
	// stopped before it is no longer sustained (see MinTrendSpan).
	TrendEdge = time.Second
	// MinEdgeSamples is the fewest samples an edge's slope is fitted to;
	// with sparse samples an edge reaches past TrendEdge to get them.
	MinEdgeSamples = 3
	// MinEdgeShare is how fast, relative to the whole line, each edge must
	// fall. One half lets a fill slow down as the kernel starts reclaiming
	// or speed up as a leak accelerates and jitter move an edge's slope,
	// while a stretch that does not fall at all (before a fill started,
	// after it stopped) always fails.
	MinEdgeShare = 0.5
)

// trendGap is the spacing below which trend samples are merged: a new
// sample replaces the newest one when that is less than trendGap after the
// one before it. Every kept sample but the newest is then at least trendGap
// from the next, so trendSlots samples always cover more than MaxTrendSpan,
// whatever the poll interval (wake-ups can come faster than the 100 ms
// fastest poll), and the fit never handles more than trendSlots samples.
const (
	trendSlots = 64
	trendGap   = 100 * time.Millisecond
)

// Reasons a trend is not sustained (Trend.Why).
const (
	WhyTooShort     = "samples span less than the minimum trend span"
	WhyTooFew       = "too few samples over the trend span"
	WhyNotFalling   = "not falling"
	WhyInconsistent = "the fall is not steady (a straight line fits it poorly)"
	WhyTooRecent    = "the fall started less than the trend span ago"
	WhyStopped      = "the fall has stopped"
)

// Trend is the least-squares fit of the samples of the last MinTrendSpan
// (see MinTrendSpan for the rules).
type Trend struct {
	// Sustained reports that every rule holds: the fall may be
	// extrapolated.
	Sustained bool
	// Why says which rule failed; empty when Sustained.
	Why string
	// Rate is the fitted fill rate in bytes per second, positive while
	// available memory falls; 0 with fewer than two samples.
	Rate float64
	// R2 is the share of the samples' variance the line explains.
	R2 float64
	// Span and Samples describe the samples fitted.
	Span    time.Duration
	Samples int
}

// Trend fits the recent samples and reports whether they make a sustained
// fall. It does not allocate.
func (e *Estimator) Trend() Trend {
	if !e.trendValid {
		e.trendFit = e.fitTrend()
		e.trendValid = true
	}
	return e.trendFit
}

// Sustained reports whether available memory is falling in a sustained
// trend (see MinTrendSpan): only then is its fill rate extrapolated.
func (e *Estimator) Sustained() bool { return e.Trend().Sustained }

func (e *Estimator) trendSlot(i int) int {
	if s := e.trendHead + i; s < trendSlots {
		return s
	}
	return e.trendHead + i - trendSlots
}

// pushTrend records s in the trend ring, merging it into the newest entry
// when that is closer than trendGap to the one before it.
func (e *Estimator) pushTrend(s sample) {
	e.trendValid = false
	if e.trendN > 0 {
		newest := e.trend[e.trendSlot(e.trendN-1)]
		merge := s.ns == newest.ns
		if e.trendN >= 2 && newest.ns-e.trend[e.trendSlot(e.trendN-2)].ns < int64(trendGap) {
			merge = true
		}
		if merge {
			e.trend[e.trendSlot(e.trendN-1)] = s
			return
		}
	}
	if e.trendN == trendSlots {
		e.trendHead = e.trendSlot(1)
		e.trendN--
	}
	e.trend[e.trendSlot(e.trendN)] = s
	e.trendN++
}

func (e *Estimator) fitTrend() Trend {
	if e.trendN == 0 {
		return Trend{Why: WhyTooShort}
	}
	last := e.trendN - 1
	newest := e.trend[e.trendSlot(last)]
	// The smallest stretch ending now that spans MinTrendSpan, within one
	// segment (no release in it) and MaxTrendSpan.
	first := last
	for i := last - 1; i >= 0; i-- {
		s := e.trend[e.trendSlot(i)]
		if s.segment != newest.segment || newest.ns-s.ns > int64(MaxTrendSpan) {
			break
		}
		first = i
		if newest.ns-s.ns >= int64(MinTrendSpan) {
			break
		}
	}
	oldest := e.trend[e.trendSlot(first)]
	t := Trend{Span: time.Duration(newest.ns - oldest.ns), Samples: last - first + 1}
	if t.Samples >= 2 {
		t.Rate, t.R2 = e.fitLine(first, last)
	}
	switch {
	case t.Span < MinTrendSpan:
		t.Why = WhyTooShort
		return t
	case t.Samples < MinTrendSamples:
		t.Why = WhyTooFew
		return t
	case !(t.Rate > 0):
		t.Why = WhyNotFalling
		return t
	case t.R2 < MinTrendR2:
		t.Why = WhyInconsistent
		return t
	}
	// The first and the last TrendEdge, with at least MinEdgeSamples each.
	head := first + MinEdgeSamples - 1
	for head < last && e.trend[e.trendSlot(head+1)].ns-oldest.ns <= int64(TrendEdge) {
		head++
	}
	tail := last - MinEdgeSamples + 1
	for tail > first && newest.ns-e.trend[e.trendSlot(tail-1)].ns <= int64(TrendEdge) {
		tail--
	}
	if r, _ := e.fitLine(first, head); !(r >= MinEdgeShare*t.Rate) {
		t.Why = WhyTooRecent
		return t
	}
	if r, _ := e.fitLine(tail, last); !(r >= MinEdgeShare*t.Rate) {
		t.Why = WhyStopped
		return t
	}
	t.Sustained = true
	return t
}

// fitLine fits a least-squares line to the trend samples from offset i to j
// (inclusive, from trendHead) and returns its fill rate in bytes per second
// (positive while falling) and R², the share of the variance it explains.
func (e *Estimator) fitLine(i, j int) (rate, r2 float64) {
	n := float64(j - i + 1)
	// Centre on the newest sample: the values stay small and exact.
	ref := e.trend[e.trendSlot(j)]
	var sx, sy float64
	for k := i; k <= j; k++ {
		s := e.trend[e.trendSlot(k)]
		sx += float64(s.ns-ref.ns) / 1e9
		sy += float64(s.available) - float64(ref.available)
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, syy float64
	for k := i; k <= j; k++ {
		s := e.trend[e.trendSlot(k)]
		dx := float64(s.ns-ref.ns)/1e9 - mx
		dy := float64(s.available) - float64(ref.available) - my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if !(sxx > 0) {
		return 0, 0
	}
	rate = -sxy / sxx
	if syy > 0 {
		r2 = sxy * sxy / (sxx * syy)
	}
	if rate != rate || r2 != r2 { // NaN from extreme inputs
		return 0, 0
	}
	return rate, r2
}
