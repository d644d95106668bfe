// SPDX-License-Identifier: Apache-2.0

package brake

import (
	"testing"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/nodebrake"
)

// TestResource: each episode's resource maps onto the brake the kubelet
// would put on for it; memory.high's onto none.
func TestResource(t *testing.T) {
	for r, want := range map[episode.Resource]nodebrake.Resource{
		episode.Memory: nodebrake.Memory, episode.Stall: nodebrake.Memory,
		episode.NodeFs: nodebrake.Disk, episode.ImageFs: nodebrake.Disk, episode.PIDs: nodebrake.PIDs,
	} {
		if got, ok := Resource(r); !ok || got != want {
			t.Errorf("Resource(%s) = %s, %v; want %s", r, got, ok, want)
		}
	}
	if _, ok := Resource(episode.MemoryHigh); ok {
		t.Error("memory.high's episodes throttle; they must keep no pod away")
	}
	for _, r := range episode.Resources() {
		if _, ok := Resource(r); !ok && r != episode.MemoryHigh {
			t.Errorf("episode resource %s has no brake", r)
		}
	}
}
