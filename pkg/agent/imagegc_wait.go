// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/thresholds"
)

// imageGCChance is what the unused images count toward s now: all of them
// until the kubelet has had imagegc.Patience to delete them, then nothing;
// the log says when it stops.
func (l *Loop) imageGCChance(s thresholds.Signal, unused int64, now time.Time) int64 {
	count, ended, waited := l.learned.imageGC.Count(s, unused, now)
	if ended {
		l.deps.Log.Info("no longer deferring to the kubelet's image garbage collection: the unused images stayed",
			zap.String("signal", string(s)), zap.Int64("unusedImageBytes", unused), zap.Duration("waited", waited.Round(time.Second)))
	}
	return count
}
