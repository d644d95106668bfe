// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/thresholds"
)

// imageGCChance starts the kubelet's chance at the unused images of s, or
// ends it once it has had imagegc.Patience to delete them (a decision
// counts them as nothing from then on: imagegc.Chance.Counts); the log
// says when it ends.
func (l *Loop) imageGCChance(s thresholds.Signal, unused int64, now time.Time) {
	if _, ended, waited := l.learned.imageGC.Count(s, unused, now); ended {
		l.deps.Log.Info("no longer deferring to the kubelet's image garbage collection: the unused images stayed",
			zap.String("signal", string(s)), zap.Int64("unusedImageBytes", unused), zap.Duration("waited", waited.Round(time.Second)))
	}
}
