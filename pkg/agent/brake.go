// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/nodebrake"
)

// CheckNodeBrake names the /readyz warning shown while the node brake
// cannot be written.
const CheckNodeBrake = "node-brake"

// Braker is told, after every pass of an acting agent, which resources are
// in a pressure episode, and holds an eviction back until its episode's
// brake is on the Node, within a bound (*nodebrake.Brake).
type Braker interface {
	Sync(map[nodebrake.Resource]nodebrake.Want)
	WaitOn(ctx context.Context, r nodebrake.Resource) bool
}

// brakeResource maps an episode onto the brake the kubelet would have put
// on for it: both memory signals' onto memory, both filesystems' onto disk.
// memory.high's episodes throttle, not evict: they keep no pod away.
func brakeResource(r episode.Resource) (nodebrake.Resource, bool) {
	switch r {
	case episode.Memory, episode.Stall:
		return nodebrake.Memory, true
	case episode.NodeFs, episode.ImageFs:
		return nodebrake.Disk, true
	case episode.PIDs:
		return nodebrake.PIDs, true
	}
	return "", false
}

// syncBrake tells the brake which resources' episodes are open. The message
// names the episode's start only, so that it stays the same while the
// episode lasts and a write is a change, not a pass.
func (l *Loop) syncBrake() {
	if l.deps.Brake == nil {
		return
	}
	since := map[nodebrake.Resource]time.Time{}
	for _, ep := range l.episodes.All() {
		r, ok := brakeResource(ep.Resource)
		if !ok {
			continue
		}
		if t, seen := since[r]; !seen || ep.Start.Before(t) {
			since[r] = ep.Start
		}
	}
	want := map[nodebrake.Resource]nodebrake.Want{}
	for r, t := range since {
		want[r] = nodebrake.Want{On: true, Message: fmt.Sprintf(
			"evictd: %s pressure episode since %s; it evicts here before the kubelet would, and keeps new pods away until the episode ends",
			r, t.UTC().Format(time.RFC3339))}
	}
	l.deps.Brake.Sync(want)
}
