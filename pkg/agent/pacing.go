// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

// pacing is the state of the adaptive poll.
type pacing struct {
	prev       time.Duration
	burstUntil time.Time
}

// woke notes a wake-up: after an event the loop polls fast for a while.
func (p *pacing) woke(w wakeup.Wakeup, now time.Time, burst time.Duration) {
	if w.Source != wakeup.SourcePoll && w.Source != "" {
		p.burstUntil = now.Add(burst)
	}
}

// nextWait sizes the wait until the next observation.
func (l *Loop) nextWait(sig map[thresholds.Signal]thresholds.Observation) time.Duration {
	now := l.clk.Now()
	wait := l.cfg.Housekeeping
	if l.cfg.Adaptive {
		p := l.cfg.Poll
		if p.Max == 0 || p.Max > l.cfg.Housekeeping {
			p.Max = l.cfg.Housekeeping
		}
		for s, e := range l.learned.estimates {
			o, ok := sig[s]
			if !ok {
				continue
			}
			ps := p
			if l.deps.Arming != nil && l.cfg.EventFillRate > 0 && l.deps.Arming.EventDriven(s) {
				ps.AssumedFillRate = l.cfg.EventFillRate
			}
			var amounts []int64
			for _, th := range l.cfg.Thresholds {
				if th.Signal == s {
					amounts = append(amounts, th.Value.Amount(o.Capacity))
				}
			}
			if len(amounts) == 0 {
				continue
			}
			next, ok := predict.Nearest(o.Available, amounts)
			if !ok {
				next = o.Available // below every threshold: poll fast
			}
			wait = min(wait, ps.Next(wakeup.PollInput{Available: o.Available, Threshold: next, FillRate: e.Rate(), Previous: l.learned.pace.prev}))
		}
		if now.Before(l.learned.pace.burstUntil) {
			fast := p.Min
			if fast == 0 {
				fast = wakeup.DefaultPollMin
			}
			wait = min(wait, fast)
		}
		l.learned.pace.prev = wait
	}
	for _, ep := range l.episodes.All() {
		if ep.RetryAt.After(now) && !ep.CapReached {
			wait = min(wait, max(ep.RetryAt.Sub(now), 10*time.Millisecond))
		}
		// The next pod asked after a pause for PodDisruptionBudget
		// refusals, when the pause ends rather than a housekeeping later.
		if ep.PDBPauseUntil.After(now) && !ep.CapReached {
			wait = min(wait, max(ep.PDBPauseUntil.Sub(now), 10*time.Millisecond))
		}
	}
	return wait
}
