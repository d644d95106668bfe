// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent/episode"
)

// staleDiskFigures are the pods whose disk figures were walked before the
// disk episode's first observation: its eviction is put off until the next
// pass, kicked at once, walks them first (rewalkStale).
//
// A pod's ephemeral storage is walked at most every refresh period (10 s
// by default): the walk is the costly part of an observation. A pod that
// began writing since its last walk is the one filling the disk, yet its
// figure says nothing; ranked on it, the quiet pods went first, each
// freeing next to nothing, until every pod on the node was gone
// (TestDiskPressure: a writer at 40 MiB/s, walked as it started). The
// kubelet's ranking reads cadvisor's cached figures the same way; evictd
// pays one more pass (the walk of the stale pods, within the pass budget)
// to decide on what the pods hold now.
func (l *Loop) staleDiskFigures(ep *episode.Episode, v *view) []string {
	if ep.Resource != episode.NodeFs && ep.Resource != episode.ImageFs {
		return nil
	}
	if _, ok := l.deps.Observer.(ephemeralRemeasurer); !ok {
		return nil // figures it cannot walk again are as fresh as they get
	}
	var stale []string
	for _, p := range v.obs.Summary.Pods {
		if fs := p.EphemeralStorage; fs != nil && fs.Time.Time.Before(ep.ObservedFrom) {
			stale = append(stale, p.PodRef.UID)
		}
	}
	return stale
}

// rewalkStale has the next pass, kicked at once, walk the stale pods first.
func (l *Loop) rewalkStale(ep *episode.Episode, stale []string) {
	l.held.rewalk = stale
	l.deps.Log.Debug("eviction deferred", zap.String("resource", string(ep.Resource)), zap.Int("stalePods", len(stale)),
		zap.String("reason", ReasonStaleDiskFigures))
	l.deps.Waker.Kick(KickDiskFigures)
}

// ReasonStaleDiskFigures is why a disk eviction waits for a walk.
const ReasonStaleDiskFigures = "pods' disk figures predate the episode: walking them again"
