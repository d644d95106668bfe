// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/thresholds"
)

// forgetImageGCWaits drops the kubelet's chance of the disk signals no
// longer active in st (the whole pass's status): the next time their
// threshold holds, the wait starts afresh.
func (l *Loop) forgetImageGCWaits(st thresholds.Status) {
	if len(l.imageGCSince) == 0 {
		return
	}
	active := map[thresholds.Signal]bool{}
	for _, a := range st.Active {
		active[a.Signal] = true
	}
	for s := range l.imageGCSince {
		if !active[s] {
			delete(l.imageGCSince, s)
			delete(l.imageGCGaveUp, s)
		}
	}
}

// imageGCChance is what the unused images count toward s now: all of them
// until the kubelet has had imagegc.Patience to delete them, then nothing.
func (l *Loop) imageGCChance(s thresholds.Signal, unused int64, now time.Time) int64 {
	if unused <= 0 {
		return unused
	}
	since, ok := l.imageGCSince[s]
	if !ok {
		l.imageGCSince[s] = now
		return unused
	}
	if now.Sub(since) < imagegc.Patience {
		return unused
	}
	if !l.imageGCGaveUp[s] {
		l.imageGCGaveUp[s] = true
		l.log.Info("no longer deferring to the kubelet's image garbage collection: the unused images stayed",
			zap.String("signal", string(s)), zap.Int64("unusedImageBytes", unused), zap.Duration("waited", now.Sub(since).Round(time.Second)))
	}
	return 0
}
