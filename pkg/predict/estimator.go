// SPDX-License-Identifier: Apache-2.0

// Package predict estimates how fast available memory is being used up, when
// it will cross each eviction threshold, and how much termination grace an
// eviction can afford. It is pure: no I/O, no clock; callers pass times in.
package predict

import (
	"fmt"
	"math"
	"time"
)

// Never is the time left when available memory is not falling: it plays the
// role of +Inf and compares larger than any real duration.
const Never time.Duration = math.MaxInt64

// MaxSamples is how many recent samples the estimator keeps. Twelve samples
// span 0.6–1.2 s at the 50–100 ms fast poll interval, enough to average out a
// few MiB of jitter into a rate error of some MiB/s, and bound the pairwise
// work (66 pairs; sixteen samples would make 120) so that a push plus a
// prediction stays under a microsecond even on a busy 2-vCPU VM.
const MaxSamples = 12

// MinFitSamples is how many of the newest samples the fit always uses, even
// when they are older than the window: at the relaxed poll interval (10 s)
// the window holds a single sample, and a slow trend is still worth knowing.
const MinFitSamples = 3

// DefaultWindow is the span of samples fitted when Options.Window is zero:
// short, so that the onset of a fill shows within about a second at the fast
// poll interval, long enough to average out jitter.
const DefaultWindow = 2 * time.Second

// DefaultReleaseStep is the rise of available memory between two samples that
// is taken as a release (an eviction, a process exit, a page-cache drop)
// rather than as a trend, when Options.ReleaseStep is zero. Well above the
// few MiB of sample-to-sample jitter, well below what evicting a pod frees.
const DefaultReleaseStep = 64 << 20

const maxPairs = MaxSamples * (MaxSamples - 1) / 2

// Options configure an Estimator; zero fields take the defaults.
type Options struct {
	// Window is the span of recent samples the fill rate is fitted to; the
	// fit also never spans more than MaxSamples samples nor fewer than
	// MinFitSamples.
	Window time.Duration
	// ReleaseStep is the smallest rise, in bytes, between two consecutive
	// samples that is taken as a release and splits the window.
	ReleaseStep int64
}

type sample struct {
	ns        int64 // since Estimator.base
	available int64
	// segment counts the releases before this sample; only samples of the
	// same segment are paired.
	segment uint32
}

// Estimator estimates the fill rate of available memory (the bytes per second
// by which it falls) from the samples pushed in the last window.
//
// Two observations about available memory shape it. First, it moves in steps
// as well as trends: an eviction, a process exit or a page-cache drop raises it
// by hundreds of MiB between two samples while a leaking pod keeps filling.
// No straight-line fit survives such a step in mid-window (half the pairs of
// samples straddle it, so least squares, EWMA and even robust regressions
// report "rising"), so a rise of at least ReleaseStep between consecutive
// samples is taken as a release and splits the window: samples on either side
// of it are never compared, and the fit sees only the consumption trend of
// each stretch. (Shifting the later samples down by the rise instead would
// hide the fill of the release interval and bias the rate low.) Falls never
// split, however steep: at 1000 MiB/s and a 100 ms poll every interval falls
// by 100 MiB, and that fill is what the estimator exists to see. Second, single readings glitch; the slope is therefore the Theil–Sen
// estimator, the median of the slopes between every pair of samples of the
// same stretch, which shrugs off a few outliers, takes the uneven spacing of
// an adaptive poll as it is, and is nearly as efficient as least squares on
// ordinary jitter. The price is some lag at the onset of a fill (the median
// moves once about a third of the window's samples fall); the hard thresholds
// still fire on the current value.
//
// An Estimator is not safe for concurrent use. Its methods do not allocate.
type Estimator struct {
	window      int64 // ns
	releaseStep float64
	base        time.Time // time of the first sample since the last reset
	samples     [MaxSamples]sample
	head        int // slot of the oldest sample
	n           int
	// pair[a][b] is the fill rate between the samples in slots a (older) and
	// b (newer), computed when b is pushed, so each push costs at most
	// MaxSamples-1 divisions rather than a full pass over all pairs.
	pair   [MaxSamples][MaxSamples]float64
	slopes [maxPairs]float64 // scratch for the median

	rate      float64
	rateValid bool

	// trend keeps a longer, thinned history for Trend (see trendGap), in a
	// ring like samples.
	trend      [trendSlots]sample
	trendHead  int
	trendN     int
	trendFit   Trend
	trendValid bool
}

// NewEstimator returns an estimator configured by o.
func NewEstimator(o Options) (*Estimator, error) {
	if o.Window < 0 {
		return nil, fmt.Errorf("predict: estimator window %s must not be negative", o.Window)
	}
	if o.ReleaseStep < 0 {
		return nil, fmt.Errorf("predict: release step %d bytes must not be negative", o.ReleaseStep)
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.ReleaseStep == 0 {
		o.ReleaseStep = DefaultReleaseStep
	}
	return &Estimator{window: int64(o.Window), releaseStep: float64(o.ReleaseStep)}, nil
}

// Window is the span of samples the estimator fits.
func (e *Estimator) Window() time.Duration { return time.Duration(e.window) }

// Reset forgets every sample.
func (e *Estimator) Reset() {
	e.head, e.n = 0, 0
	e.rateValid = false
	e.trendHead, e.trendN = 0, 0
	e.trendValid = false
}

func (e *Estimator) slot(i int) int {
	if s := e.head + i; s < MaxSamples {
		return s
	}
	return e.head + i - MaxSamples
}

// Push records that available bytes were available at time at.
//
// A sample at the same time as the newest one replaces it (the later reading
// wins). A sample older than the newest one means the caller's clock went
// backwards; the history can no longer be placed on one time line, so it is
// dropped and the estimator starts again from this sample.
func (e *Estimator) Push(at time.Time, available int64) {
	e.rateValid = false
	if e.n == 0 {
		e.base = at
	}
	s := sample{ns: int64(at.Sub(e.base)), available: available}
	if e.n > 0 {
		switch newest := e.samples[e.slot(e.n-1)]; {
		case s.ns == newest.ns:
			e.n--
		case s.ns < newest.ns:
			e.Reset()
			e.base = at
			s.ns = 0
		}
	}
	if e.n > 0 {
		prev := e.samples[e.slot(e.n-1)]
		s.segment = prev.segment
		// Float64 arithmetic: int64 differences of extreme inputs overflow.
		if float64(available)-float64(prev.available) >= e.releaseStep {
			s.segment++
		}
	}
	if e.n == MaxSamples {
		e.head = e.slot(1)
		e.n--
	}
	e.pushTrend(s)
	b := e.slot(e.n)
	e.samples[b] = s
	e.n++
	for i := 0; i < e.n-1; i++ {
		a := e.slot(i)
		if dt := s.ns - e.samples[a].ns; dt > 0 {
			e.pair[a][b] = (float64(e.samples[a].available) - float64(available)) * 1e9 / float64(dt)
		}
	}
}

// Latest returns the newest sample; ok is false when there is none.
func (e *Estimator) Latest() (at time.Time, available int64, ok bool) {
	if e.n == 0 {
		return time.Time{}, 0, false
	}
	s := e.samples[e.slot(e.n-1)]
	return e.base.Add(time.Duration(s.ns)), s.available, true
}

// Len is the number of samples inside the window that the rate is fitted to.
func (e *Estimator) Len() int {
	if e.n == 0 {
		return 0
	}
	return e.n - e.firstInWindow()
}

// firstInWindow is the offset (from head) of the oldest sample within the
// window of the newest one, or of the MinFitSamples-th newest if that is
// older.
func (e *Estimator) firstInWindow() int {
	newest := e.samples[e.slot(e.n-1)].ns
	last := max(e.n-MinFitSamples, 0)
	for i := 0; i < last; i++ {
		if newest-e.samples[e.slot(i)].ns <= e.window {
			return i
		}
	}
	return last
}

// Rate is the fill rate in bytes per second: positive while available memory
// falls, negative while it rises (in steps smaller than the release step),
// 0 with fewer than two samples in the window.
func (e *Estimator) Rate() float64 {
	if e.rateValid {
		return e.rate
	}
	e.rate = e.theilSen()
	e.rateValid = true
	return e.rate
}

func (e *Estimator) theilSen() float64 {
	if e.n < 2 {
		return 0
	}
	// Slots of the window's samples, oldest first; timestamps are strictly
	// increasing (Push replaces equal ones), so every pair has a slope.
	var slots [MaxSamples]uint8
	k := 0
	for i := e.firstInWindow(); i < e.n; i++ {
		slots[k] = uint8(e.slot(i))
		k++
	}
	m := 0
	for x := 0; x < k; x++ {
		a := slots[x]
		seg, row := e.samples[a].segment, &e.pair[a]
		for _, b := range slots[x+1 : k] {
			if e.samples[b].segment != seg {
				break // every later sample is past the release too
			}
			e.slopes[m] = row[b]
			m++
		}
	}
	if m == 0 {
		return 0
	}
	r := median(e.slopes[:m])
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return 0
	}
	return r
}

// TimeLeft is the predicted time until available memory drops below
// threshold: 0 when it already has, Never when it is not falling.
func (e *Estimator) TimeLeft(threshold int64) time.Duration {
	_, avail, ok := e.Latest()
	if !ok {
		return Never
	}
	return TimeLeft(avail, threshold, e.Rate())
}

// ActEarly reports whether the crossing of threshold is predicted sooner than
// reclaim, the time an eviction takes to give memory back (measured from the
// eviction request to the pod's memory being freed), from a sustained fall
// (Sustained): acting later would let the threshold, or the kernel OOM
// killer, win the race; acting on a fall that is not a trend would evict a
// pod for pressure that may never come.
func (e *Estimator) ActEarly(threshold int64, reclaim time.Duration) bool {
	return e.TimeLeft(threshold) <= reclaim && e.Sustained()
}

// TimeLeft is the time until available, falling at rate bytes per second,
// drops below threshold: 0 when it already is below, Never when rate is not
// positive. Like the kubelet, a threshold is met only when available is
// strictly less than it.
func TimeLeft(available, threshold int64, rate float64) time.Duration {
	switch {
	case available < threshold, math.IsInf(rate, 1):
		return 0
	case !(rate > 0): // also NaN
		return Never
	}
	secs := (float64(available) - float64(threshold)) / rate
	if secs >= float64(Never)/float64(time.Second) {
		return Never
	}
	return time.Duration(secs * float64(time.Second))
}

// Nearest returns the threshold available memory will cross next: the largest
// of thresholds that available has not yet dropped below. ok is false when it
// is below all of them.
func Nearest(available int64, thresholds []int64) (threshold int64, ok bool) {
	for _, t := range thresholds {
		if t <= available && (!ok || t > threshold) {
			threshold, ok = t, true
		}
	}
	return threshold, ok
}

// median returns the median of v, reordering v. It selects instead of sorting
// so that the hot path stays linear.
func median(v []float64) float64 {
	k := len(v) / 2
	hi := selectKth(v, k)
	if len(v)%2 == 1 {
		return hi
	}
	// After selection every element before k is <= v[k].
	lo := v[0]
	for _, x := range v[1:k] {
		if x > lo {
			lo = x
		}
	}
	return lo/2 + hi/2
}

// selectKth partially orders v so that v[k] holds the k-th smallest value,
// everything before it is not larger and everything after not smaller, and
// returns it: Hoare's quickselect with a median-of-three pivot, finishing
// small ranges with an insertion sort.
func selectKth(v []float64, k int) float64 {
	lo, hi := 0, len(v)-1
	for hi-lo > 12 {
		mid := lo + (hi-lo)/2
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[mid] {
			v[hi], v[mid] = v[mid], v[hi]
		}
		pivot := v[mid]
		i, j := lo, hi
		for i <= j {
			for v[i] < pivot {
				i++
			}
			for v[j] > pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return v[k]
		}
	}
	for i := lo + 1; i <= hi; i++ {
		x := v[i]
		j := i
		for ; j > lo && v[j-1] > x; j-- {
			v[j] = v[j-1]
		}
		v[j] = x
	}
	return v[k]
}
