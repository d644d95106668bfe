// SPDX-License-Identifier: Apache-2.0

package predict

import (
	"math"
	"testing"
	"time"
)

const mi = 1 << 20

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type point struct {
	at    time.Duration // since t0
	avail int64
}

// linear returns n samples every step, starting at start and falling by rate
// bytes per second.
func linear(n int, step time.Duration, start int64, rate float64) []point {
	out := make([]point, n)
	for i := range out {
		at := time.Duration(i) * step
		out[i] = point{at: at, avail: start - int64(rate*at.Seconds())}
	}
	return out
}

func push(e *Estimator, pts []point) {
	for _, p := range pts {
		e.Push(t0.Add(p.at), p.avail)
	}
}

func within(got, want, tol float64) bool {
	if want == 0 {
		return math.Abs(got) <= tol
	}
	return math.Abs(got-want) <= tol*math.Abs(want)
}

func TestEstimatorRate(t *testing.T) {
	jitter := func(pts []point, amp int64) []point {
		for i := range pts {
			if i%2 == 0 {
				pts[i].avail += amp
			} else {
				pts[i].avail -= amp
			}
		}
		return pts
	}
	stepUp := func(pts []point, from int, by int64) []point {
		for i := from; i < len(pts); i++ {
			pts[i].avail += by
		}
		return pts
	}
	tests := []struct {
		name   string
		window time.Duration
		pts    []point
		want   float64 // bytes/s
		tol    float64 // relative, absolute when want is 0
		len    int
	}{
		{name: "no samples", window: 2 * time.Second, want: 0, len: 0},
		{name: "one sample", window: 2 * time.Second, pts: linear(1, 0, 4<<30, 0), want: 0, len: 1},
		{name: "steady fall 100Mi/s", window: 2 * time.Second,
			pts: linear(10, 100*time.Millisecond, 4<<30, 100*mi), want: 100 * mi, tol: 0.001, len: 10},
		{name: "fast fall 1000Mi/s at 50ms", window: time.Second,
			pts: linear(12, 50*time.Millisecond, 4<<30, 1000*mi), want: 1000 * mi, tol: 0.001, len: 12},
		{name: "rising is negative", window: 2 * time.Second,
			pts: linear(8, 100*time.Millisecond, 1<<30, -50*mi), want: -50 * mi, tol: 0.001, len: 8},
		{name: "flat", window: 2 * time.Second,
			pts: linear(8, 100*time.Millisecond, 1<<30, 0), want: 0, tol: 1, len: 8},
		{name: "jitter of 8Mi around a 100Mi/s fall", window: 2 * time.Second,
			pts: jitter(linear(12, 100*time.Millisecond, 4<<30, 100*mi), 4*mi), want: 100 * mi, tol: 0.15, len: 12},
		{name: "eviction frees 500Mi mid-window while a pod keeps filling", window: 2 * time.Second,
			pts: stepUp(linear(12, 100*time.Millisecond, 4<<30, 200*mi), 6, 500*mi), want: 200 * mi, tol: 0.001, len: 12},
		{name: "relaxed polling: the newest three samples even outside the window", window: 2 * time.Second,
			pts: linear(5, 10*time.Second, 4<<30, 10*mi), want: 10 * mi, tol: 0.001, len: MinFitSamples},
		{name: "samples older than the window are ignored", window: time.Second,
			pts: append(linear(5, 100*time.Millisecond, 1<<30, -500*mi),
				shift(linear(6, 200*time.Millisecond, 3<<30, 100*mi), 10*time.Second)...),
			want: 100 * mi, tol: 0.001, len: 6},
		{name: "uneven spacing", window: 3 * time.Second,
			pts: []point{{0, 4000 * mi}, {50 * time.Millisecond, 3990 * mi}, {700 * time.Millisecond, 3860 * mi},
				{800 * time.Millisecond, 3840 * mi}, {2 * time.Second, 3600 * mi}},
			want: 200 * mi, tol: 0.001, len: 5},
		{name: "more samples than the ring keeps", window: 10 * time.Second,
			pts: append(linear(20, 100*time.Millisecond, 4<<30, -300*mi),
				shift(linear(MaxSamples, 100*time.Millisecond, 4<<30, 300*mi), 2*time.Second)...),
			want: 300 * mi, tol: 0.001, len: MaxSamples},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEstimator(Options{Window: tc.window})
			if err != nil {
				t.Fatal(err)
			}
			push(e, tc.pts)
			if got := e.Rate(); !within(got, tc.want, tc.tol) {
				t.Errorf("Rate() = %.0f B/s (%.1f Mi/s), want %.1f Mi/s ± %g", got, got/mi, tc.want/mi, tc.tol)
			}
			if got := e.Len(); got != tc.len {
				t.Errorf("Len() = %d, want %d", got, tc.len)
			}
		})
	}
}

func shift(pts []point, by time.Duration) []point {
	for i := range pts {
		pts[i].at += by
	}
	return pts
}

func TestEstimatorReleaseSteps(t *testing.T) {
	tests := []struct {
		name  string
		pts   func() []point
		check func(rate float64) bool
		want  string
	}{
		{
			name:  "rises just under the release step are a trend: a recovering node",
			pts:   func() []point { return linear(12, 100*time.Millisecond, 1<<30, -630*mi) },
			check: func(r float64) bool { return within(r, -630*mi, 0.001) },
			want:  "-630 Mi/s",
		},
		{
			name: "two releases in the window, pod still filling",
			pts: func() []point {
				pts := linear(16, 100*time.Millisecond, 4<<30, 150*mi)
				for i := range pts {
					if i >= 5 {
						pts[i].avail += 300 * mi
					}
					if i >= 11 {
						pts[i].avail += 80 * mi
					}
				}
				return pts
			},
			check: func(r float64) bool { return within(r, 150*mi, 0.001) },
			want:  "150 Mi/s",
		},
		{
			name:  "falls never split, however steep: 100Mi per 100ms sample",
			pts:   func() []point { return linear(12, 100*time.Millisecond, 4<<30, 1000*mi) },
			check: func(r float64) bool { return within(r, 1000*mi, 0.001) },
			want:  "1000 Mi/s",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := NewEstimator(Options{Window: 2 * time.Second, ReleaseStep: 64 * mi})
			push(e, tc.pts())
			if r := e.Rate(); !tc.check(r) {
				t.Errorf("Rate() = %.1f Mi/s, want %s", r/mi, tc.want)
			}
		})
	}
}

func TestEstimatorReplacingAReleaseUndoesIt(t *testing.T) {
	e, _ := NewEstimator(Options{Window: 2 * time.Second, ReleaseStep: 64 * mi})
	push(e, linear(5, 100*time.Millisecond, 1000*mi, 100*mi)) // ends at 960Mi, t=400ms
	e.Push(t0.Add(500*time.Millisecond), 1460*mi)             // a release of 500Mi...
	e.Push(t0.Add(500*time.Millisecond), 950*mi)              // ...re-read: it was not
	e.Push(t0.Add(600*time.Millisecond), 940*mi)
	if r := e.Rate(); !within(r, 100*mi, 0.001) {
		t.Errorf("Rate() = %.1f Mi/s after the release was overwritten, want 100", r/mi)
	}
}

func TestEstimatorPushEdgeCases(t *testing.T) {
	e, _ := NewEstimator(Options{Window: 2 * time.Second})
	e.Push(t0, 1000*mi)
	e.Push(t0.Add(100*time.Millisecond), 990*mi)
	e.Push(t0.Add(100*time.Millisecond), 980*mi) // same instant: replaces
	if _, a, _ := e.Latest(); a != 980*mi {
		t.Errorf("after a same-time push Latest = %d, want %d", a, 980*mi)
	}
	if got := e.Len(); got != 2 {
		t.Errorf("after a same-time push Len = %d, want 2", got)
	}
	if got := e.Rate(); !within(got, 200*mi, 0.001) {
		t.Errorf("Rate = %.1f Mi/s, want 200", got/mi)
	}
	e.Push(t0.Add(50*time.Millisecond), 970*mi) // clock went backwards
	if got := e.Len(); got != 1 {
		t.Errorf("after a backwards push Len = %d, want 1 (history dropped)", got)
	}
	if got := e.Rate(); got != 0 {
		t.Errorf("after a backwards push Rate = %v, want 0", got)
	}
	e.Reset()
	if _, _, ok := e.Latest(); ok || e.TimeLeft(0) != Never {
		t.Errorf("after Reset: Latest ok=%v TimeLeft=%v, want no sample and Never", ok, e.TimeLeft(0))
	}
}

func TestNewEstimatorOptions(t *testing.T) {
	tests := []struct {
		o       Options
		window  time.Duration
		wantErr bool
	}{
		{o: Options{}, window: DefaultWindow},
		{o: Options{Window: time.Second, ReleaseStep: 1}, window: time.Second},
		{o: Options{Window: -time.Second}, wantErr: true},
		{o: Options{ReleaseStep: -1}, wantErr: true},
	}
	for _, tc := range tests {
		e, err := NewEstimator(tc.o)
		if (err != nil) != tc.wantErr {
			t.Errorf("NewEstimator(%+v) error = %v, want error %v", tc.o, err, tc.wantErr)
			continue
		}
		if err == nil && e.Window() != tc.window {
			t.Errorf("NewEstimator(%+v).Window() = %s, want %s", tc.o, e.Window(), tc.window)
		}
	}
}

func TestTimeLeft(t *testing.T) {
	tests := []struct {
		name                 string
		available, threshold int64
		rate                 float64
		want                 time.Duration
	}{
		{"already below", 200 * mi, 300 * mi, 100 * mi, 0},
		{"below and rising", 200 * mi, 300 * mi, -100 * mi, 0},
		{"at the threshold, falling", 300 * mi, 300 * mi, 100 * mi, 0},
		{"at the threshold, flat", 300 * mi, 300 * mi, 0, Never},
		{"falling 100Mi/s with 520Mi to go", 820 * mi, 300 * mi, 100 * mi, 5200 * time.Millisecond},
		{"flat", 820 * mi, 300 * mi, 0, Never},
		{"rising", 820 * mi, 300 * mi, -1, Never},
		{"NaN rate", 820 * mi, 300 * mi, math.NaN(), Never},
		{"+Inf rate", 820 * mi, 300 * mi, math.Inf(1), 0},
		{"-Inf rate", 820 * mi, 300 * mi, math.Inf(-1), Never},
		{"a trickle too slow to represent", math.MaxInt64, math.MinInt64, 1e-9, Never},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TimeLeft(tc.available, tc.threshold, tc.rate); got != tc.want {
				t.Errorf("TimeLeft(%d, %d, %g) = %v, want %v", tc.available, tc.threshold, tc.rate, got, tc.want)
			}
		})
	}
}

func TestNearest(t *testing.T) {
	tests := []struct {
		name       string
		available  int64
		thresholds []int64
		want       int64
		ok         bool
	}{
		{"none", 100, nil, 0, false},
		{"all below available", 1000, []int64{100, 300, 200}, 300, true},
		{"one already crossed", 250, []int64{100, 300, 200}, 200, true},
		{"equal is not crossed yet", 300, []int64{300, 100}, 300, true},
		{"all crossed", 50, []int64{100, 300}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Nearest(tc.available, tc.thresholds)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Nearest(%d, %v) = %d, %v; want %d, %v", tc.available, tc.thresholds, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestActEarly(t *testing.T) {
	// 550Mi available, threshold 300Mi, falling 100Mi/s for 4 s (a
	// sustained trend): 2.5 s left.
	e, _ := NewEstimator(Options{Window: 2 * time.Second})
	push(e, linear(41, 100*time.Millisecond, 950*mi, 100*mi))
	if _, a, _ := e.Latest(); a != 550*mi {
		t.Fatalf("fixture: latest available %d, want %d", a, 550*mi)
	}
	tests := []struct {
		reclaim time.Duration
		want    bool
	}{
		{3 * time.Second, true},
		{2500 * time.Millisecond, true},
		{2 * time.Second, false},
		{0, false},
	}
	for _, tc := range tests {
		if got := e.ActEarly(300*mi, tc.reclaim); got != tc.want {
			t.Errorf("ActEarly(300Mi, reclaim %s) with 2.5s left = %v, want %v", tc.reclaim, got, tc.want)
		}
	}
	flat, _ := NewEstimator(Options{Window: 2 * time.Second})
	push(flat, linear(10, 100*time.Millisecond, 640*mi, 0))
	if flat.ActEarly(300*mi, time.Hour) {
		t.Errorf("ActEarly on a flat series = true, want false")
	}
	// The same 2.5 s left, from a fall of only one second: no trend yet.
	young, _ := NewEstimator(Options{Window: 2 * time.Second})
	push(young, linear(11, 100*time.Millisecond, 650*mi, 100*mi))
	if young.ActEarly(300*mi, time.Hour) {
		t.Errorf("ActEarly on a fall of 1s = true, want false (trend %+v)", young.Trend())
	}
}

func TestEstimatorDoesNotAllocate(t *testing.T) {
	e, _ := NewEstimator(Options{Window: 2 * time.Second})
	at, avail := t0, int64(8<<30)
	allocs := testing.AllocsPerRun(1000, func() {
		at = at.Add(100 * time.Millisecond)
		avail -= 10 * mi
		e.Push(at, avail)
		_ = e.TimeLeft(300 * mi)
		_ = e.Sustained()
	})
	if allocs != 0 {
		t.Errorf("Push+TimeLeft+Sustained allocates %.1f times per call, want 0", allocs)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1}, 2},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 4, 4, 1, 9, 9}, 4},
		{[]float64{7, 1, 3, 9, 5, 2, 8, 6}, 5.5},
		{[]float64{-1, -1, -1, -1}, -1},
	}
	for _, tc := range tests {
		in := append([]float64(nil), tc.in...)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzEstimator(f *testing.F) {
	f.Add(int64(2000), []byte{1, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 63, 0, 0, 0, 0})
	f.Add(int64(1), []byte{})
	f.Add(int64(-5), []byte{255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, windowMs int64, raw []byte) {
		if windowMs > math.MaxInt64/int64(time.Millisecond) {
			return
		}
		e, err := NewEstimator(Options{Window: time.Duration(windowMs) * time.Millisecond})
		if windowMs < 0 {
			if err == nil {
				t.Fatalf("window %dms accepted", windowMs)
			}
			return
		}
		if err != nil {
			t.Fatalf("window %dms rejected: %v", windowMs, err)
		}
		// Each 12-byte record: signed 32-bit step in µs, 64-bit available.
		at := t0
		for len(raw) >= 12 {
			step := int32(uint32(raw[0]) | uint32(raw[1])<<8 | uint32(raw[2])<<16 | uint32(raw[3])<<24)
			var avail int64
			for i := 0; i < 8; i++ {
				avail |= int64(raw[4+i]) << (8 * i)
			}
			raw = raw[12:]
			at = at.Add(time.Duration(step) * time.Microsecond)
			e.Push(at, avail)

			r := e.Rate()
			if math.IsNaN(r) || math.IsInf(r, 0) {
				t.Fatalf("Rate() = %v", r)
			}
			if n := e.Len(); n < 1 || n > MaxSamples {
				t.Fatalf("Len() = %d", n)
			}
			tr := e.Trend()
			switch {
			case math.IsNaN(tr.Rate) || math.IsInf(tr.Rate, 0):
				t.Fatalf("Trend().Rate = %v", tr.Rate)
			case !(tr.R2 >= 0 && tr.R2 <= 1+1e-9):
				t.Fatalf("Trend().R2 = %v", tr.R2)
			case tr.Samples < 1 || tr.Samples > trendSlots || tr.Span < 0 || tr.Span > MaxTrendSpan:
				t.Fatalf("Trend() fitted %d samples over %v", tr.Samples, tr.Span)
			case tr.Sustained != (tr.Why == ""):
				t.Fatalf("Trend() sustained %v, why %q", tr.Sustained, tr.Why)
			case tr.Sustained && (tr.Rate <= 0 || tr.R2 < MinTrendR2 || tr.Span < MinTrendSpan || tr.Samples < MinTrendSamples):
				t.Fatalf("Trend() sustained with %+v", tr)
			}
			for _, th := range []int64{math.MinInt64, 0, avail, 300 * mi, math.MaxInt64} {
				left := e.TimeLeft(th)
				if left < 0 {
					t.Fatalf("TimeLeft(%d) = %v", th, left)
				}
				if avail < th && left != 0 {
					t.Fatalf("available %d below threshold %d but TimeLeft = %v", avail, th, left)
				}
				if r <= 0 && avail >= th && left != Never {
					t.Fatalf("rate %v not falling but TimeLeft(%d) = %v", r, th, left)
				}
				g, err := DefaultGracePolicy().Fit(30, Crossing{Threshold: th, TimeLeft: left, Rate: r})
				if err != nil {
					t.Fatal(err)
				}
				if g.Seconds < 1 || g.Seconds > 30 {
					t.Fatalf("grace %ds outside [1, 30] for time left %v", g.Seconds, left)
				}
			}
		}
	})
}

func BenchmarkPushTimeLeft(b *testing.B) {
	e, at, avail := fullEstimator(Options{Window: 2 * time.Second})
	b.ReportAllocs()
	b.ResetTimer()
	var sink time.Duration
	for i := 0; i < b.N; i++ {
		at = at.Add(100 * time.Millisecond)
		// Jitter keeps the selection from seeing already-ordered input.
		avail -= 10*mi + int64(i%7-3)*mi
		e.Push(at, avail)
		sink += e.TimeLeft(300 * mi)
		if e.Sustained() {
			sink++
		}
	}
	_ = sink
}

// fullEstimator returns an estimator whose rings are full of a steady fall
// (the worst case for the pairwise fit and the trend), and the last sample.
func fullEstimator(o Options) (*Estimator, time.Time, int64) {
	e, _ := NewEstimator(o)
	at, avail := t0, int64(8<<30)
	for i := 0; i < trendSlots; i++ {
		at = at.Add(100 * time.Millisecond)
		avail -= 10 * mi
		e.Push(at, avail)
	}
	return e, at, avail
}
