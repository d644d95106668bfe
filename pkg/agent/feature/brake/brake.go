// SPDX-License-Identifier: Apache-2.0

// Package brake is the node brake's side of the pass (feature.Feature): it
// tells the brake (pkg/nodebrake) which resources are in a pressure
// episode after each acting pass, and holds an eviction back until its
// episode's brake is on the Node, so that the victim's replacement finds
// the taint there.
package brake

import (
	"context"
	"fmt"
	"time"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/nodebrake"
)

// Braker puts the brake on and lifts it (*nodebrake.Brake).
type Braker interface {
	Sync(map[nodebrake.Resource]nodebrake.Want)
	// WaitOn waits, within its own bound, until r's brake is on.
	WaitOn(ctx context.Context, r nodebrake.Resource) bool
}

// Feature follows the pass for a Braker.
type Feature struct {
	feature.Nop
	b Braker
}

// New is the node brake's feature.
func New(b Braker) *Feature { return &Feature{b: b} }

// Resource maps an episode onto the brake the kubelet would have put on
// for it: both memory signals' onto memory, both filesystems' onto disk.
// memory.high's episodes throttle, not evict: they keep no pod away.
func Resource(r episode.Resource) (nodebrake.Resource, bool) {
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

// Episodes tells the brake which resources' episodes are open. The message
// names the earliest open episode's start only, so that it stays the same
// while the episode lasts and a write is a change, not a pass.
func (f *Feature) Episodes(e feature.Episodes) {
	since := map[nodebrake.Resource]time.Time{}
	for _, ep := range e.Open {
		r, ok := Resource(episode.Resource(ep.Resource))
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
	f.b.Sync(want)
}

// BeforeCall holds an eviction of a braked resource's episode until its
// brake is on the Node.
func (f *Feature) BeforeCall(ctx context.Context, resource string) {
	if r, ok := Resource(episode.Resource(resource)); ok {
		f.b.WaitOn(ctx, r)
	}
}
