// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"fmt"
	"math"
	"time"
)

// Defaults for PollPolicy's zero fields.
const (
	// DefaultPollMin is the fastest poll: lmkd's long poll period and
	// earlyoom's floor. Reading the files one poll needs costs a few
	// milliseconds for 250 pods, so 100 ms stays near 2–5% of one core only
	// while memory is actually close to a threshold.
	DefaultPollMin = 100 * time.Millisecond
	// DefaultPollMax is the kubelet's housekeeping interval.
	DefaultPollMax = 10 * time.Second
	// DefaultAssumedFillRate is the fill rate, in bytes per second, that the
	// poll alone must catch when nothing is seen falling: the fastest fill of
	// the OOM-race benchmark (1000 MiB/s). An agent whose event sources are
	// active may pass a lower rate.
	DefaultAssumedFillRate = 1000 << 20
)

// looksPerCrossing is how many polls should fit in the predicted time to the
// crossing, so that one late poll still sees it before it happens.
const looksPerCrossing = 2

// PollPolicy sizes the poll interval earlyoom-style: sleep for a fraction of
// the time the headroom lasts at the fill rate, clamped between Min and Max.
// Zero fields take the defaults.
type PollPolicy struct {
	// Min is the fastest poll interval (50–100 ms).
	Min time.Duration
	// Max is the slowest poll interval, the housekeeping interval.
	Max time.Duration
	// AssumedFillRate is the fill rate in bytes per second assumed when the
	// observed one is lower: polling must keep up with a burst that has not
	// shown in the samples yet.
	AssumedFillRate float64
}

// PollInput is what the next interval depends on.
type PollInput struct {
	// Available is the current value of the signal, in bytes.
	Available int64
	// Threshold is the nearest threshold below Available (the one the signal
	// would cross next), in bytes.
	Threshold int64
	// FillRate is the recent fill rate in bytes per second, positive while
	// Available falls (predict.Estimator.Rate).
	FillRate float64
	// Previous is the interval used last time, 0 if none. The interval grows
	// by at most a factor of two per poll, so that it relaxes back to Max
	// over several polls after a burst instead of jumping.
	Previous time.Duration
}

// Validate reports the first bad field.
func (p PollPolicy) Validate() error {
	p = p.withDefaults()
	switch {
	case p.Min < 0:
		return fmt.Errorf("wakeup: poll minimum %s must not be negative", p.Min)
	case p.Max < p.Min:
		return fmt.Errorf("wakeup: poll maximum %s is below the minimum %s", p.Max, p.Min)
	case p.AssumedFillRate < 0 || math.IsNaN(p.AssumedFillRate) || math.IsInf(p.AssumedFillRate, 0):
		return fmt.Errorf("wakeup: assumed fill rate %g bytes/s must be a finite, non-negative number", p.AssumedFillRate)
	}
	return nil
}

func (p PollPolicy) withDefaults() PollPolicy {
	if p.Min == 0 {
		p.Min = DefaultPollMin
	}
	if p.Max == 0 {
		p.Max = max(DefaultPollMax, p.Min)
	}
	if p.AssumedFillRate == 0 {
		p.AssumedFillRate = DefaultAssumedFillRate
	}
	return p
}

// Next returns the interval until the next poll: Min when the signal is at or
// below the threshold, otherwise headroom / max(FillRate, AssumedFillRate) /
// 2, clamped to [Min, Max] and to twice Previous. It assumes a validated
// policy.
func (p PollPolicy) Next(in PollInput) time.Duration {
	p = p.withDefaults()
	headroom := float64(in.Available) - float64(in.Threshold)
	if !(headroom > 0) {
		return p.Min
	}
	rate := p.AssumedFillRate
	if in.FillRate > rate { // false for NaN
		rate = in.FillRate
	}
	next := p.Max
	if rate > 0 {
		secs := headroom / rate / looksPerCrossing
		if secs < p.Max.Seconds() {
			next = time.Duration(secs * float64(time.Second))
		}
	}
	if in.Previous > 0 && next/2 > in.Previous {
		next = 2 * in.Previous
	}
	return min(max(next, p.Min), p.Max)
}
