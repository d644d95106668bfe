// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent/episode"
)

// diskFiguresStale puts off a disk episode's eviction while any pod's disk
// figure was walked before the episode's first observation, and has the
// next pass, kicked at once, walk those pods first.
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
func (l *Loop) diskFiguresStale(ep *episode.Episode, v *view) bool {
	if ep.Resource != episode.NodeFs && ep.Resource != episode.ImageFs {
		return false
	}
	if _, ok := l.deps.Observer.(ephemeralRemeasurer); !ok {
		return false // figures it cannot walk again are as fresh as they get
	}
	var stale []string
	for _, p := range v.obs.Summary.Pods {
		if fs := p.EphemeralStorage; fs != nil && fs.Time.Time.Before(ep.ObservedFrom) {
			stale = append(stale, p.PodRef.UID)
		}
	}
	if len(stale) == 0 {
		return false
	}
	l.rewalk = stale
	l.log.Debug("eviction deferred", zap.String("resource", string(ep.Resource)), zap.Int("stalePods", len(stale)),
		zap.String("reason", "pods' disk figures predate the episode: walking them again"))
	l.deps.Waker.Kick(KickDiskFigures)
	return true
}
