// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent/outrun"
	"github.com/evictd/evictd/pkg/thresholds"
)

// checkOutrun tells the operator, once a fall, when memory falls faster than
// the hard threshold's room lasts for an eviction on this node (package
// outrun). It changes no decision: evictd acts as it would; what it cannot
// do is make the node stop a pod sooner.
func (l *Loop) checkOutrun(v *view) {
	actEarly := l.cfg.Decide.ActEarly
	room := map[thresholds.Signal]outrun.Fall{}
	for _, th := range l.cfg.Thresholds {
		if !th.Hard() || (th.Signal != thresholds.MemoryAvailable && th.Signal != thresholds.AllocatableMemoryAvailable) {
			continue
		}
		o, ok := v.signals[th.Signal]
		if !ok {
			continue
		}
		f := outrun.Fall{
			Amount: th.Value.Amount(o.Capacity), ActEarly: actEarly, Available: o.Available,
			Rate: v.rates[th.Signal], Sustained: v.trends[th.Signal], Lead: l.lead.LastTook(),
		}
		// Of two hard thresholds on one signal, the larger is where evictd
		// acts first.
		if prev, seen := room[th.Signal]; !seen || f.Amount > prev.Amount {
			room[th.Signal] = f
		}
	}
	for s, f := range room {
		if !l.outrun.Update(s, f) {
			continue
		}
		l.deps.Metrics.ThresholdOutrun(s)
		l.log.Warn("memory falls faster than the threshold covers: at this rate its room is gone before an eviction on this node gives memory back, and the kernel's OOM killer may strike before the victim is gone; raise the threshold, or run with --actuator",
			zap.String("signal", string(s)), zap.Float64("fillMiBps", f.Rate/(1<<20)),
			zap.Int64("thresholdBytes", f.Amount), zap.Int64("roomBytes", f.Room()), zap.Int64("availableBytes", f.Available),
			zap.Duration("roomLasts", f.Cover()), zap.Duration("lastEvictionTook", f.Lead))
	}
}
