// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary describes a sample of durations.
type Summary struct {
	N                     int
	Min, Median, P99, Max time.Duration
	Mean                  time.Duration
}

// Summarize computes the order statistics of xs with the nearest-rank
// method: the q-quantile is the smallest value with at least q·N values at or
// below it. With fewer than 100 samples the p99 is therefore the maximum,
// which is the honest reading of a small sample. An empty sample gives a
// zero Summary whose String says so.
func Summarize(xs []time.Duration) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return Summary{
		N:      len(s),
		Min:    s[0],
		Median: nearestRank(s, 0.5),
		P99:    nearestRank(s, 0.99),
		Max:    s[len(s)-1],
		Mean:   sum / time.Duration(len(s)),
	}
}

// nearestRank is the q-quantile of the sorted, non-empty s.
func nearestRank(s []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// String is "n=20 median=12ms p99=40ms min=3ms max=40ms", or "no samples".
func (s Summary) String() string {
	if s.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("n=%d median=%s p99=%s min=%s max=%s", s.N, Ms(s.Median), Ms(s.P99), Ms(s.Min), Ms(s.Max))
}

// Ms formats d in milliseconds with one decimal, the unit every latency
// table uses.
func Ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// Ratio is a/b as "0.25", "n/a" when b is zero (nothing to compare with).
func Ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// Sample is a reading of a growing quantity.
type Sample struct {
	At    time.Time
	Bytes int64
}

// FillRate is the growth rate, in bytes per second, of a series of samples
// between the first sample at or above from and the first at or above to,
// or its highest sample when it never reaches to. It is 0 when the series
// never reaches from or has no later sample above it.
func FillRate(s []Sample, from, to int64) float64 {
	start := -1
	for i, x := range s {
		if x.Bytes >= from {
			start = i
			break
		}
	}
	if start < 0 {
		return 0
	}
	end := start
	for i := start + 1; i < len(s); i++ {
		if s[i].Bytes > s[end].Bytes {
			end = i
		}
		if s[i].Bytes >= to {
			end = i
			break
		}
	}
	dt := s[end].At.Sub(s[start].At).Seconds()
	if end == start || dt <= 0 {
		return 0
	}
	return float64(s[end].Bytes-s[start].Bytes) / dt
}

// MedianOf is the median of get over xs (the mean of the middle two for an
// even count), 0 for none: the figure a benchmark reports over its runs.
func MedianOf[T any](xs []T, get func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = get(x)
	}
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m]
	}
	return (vs[m-1] + vs[m]) / 2
}
