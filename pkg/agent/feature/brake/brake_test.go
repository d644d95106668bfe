// SPDX-License-Identifier: Apache-2.0

package brake

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/feature"
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

// braker records what the feature asks of the brake.
type braker struct {
	synced []map[nodebrake.Resource]nodebrake.Want
	waited []nodebrake.Resource
}

func (b *braker) Sync(want map[nodebrake.Resource]nodebrake.Want) { b.synced = append(b.synced, want) }

func (b *braker) WaitOn(_ context.Context, r nodebrake.Resource) bool {
	b.waited = append(b.waited, r)
	return true
}

// TestFeature: the brake is wanted for each braked resource with an
// episode open, its message naming the earliest open episode's start (the
// memory brake's, for a memory episode and a later stall episode), and
// none for memory.high; an eviction waits for its resource's brake, and
// memory.high's waits for none.
func TestFeature(t *testing.T) {
	b := &braker{}
	f := New(b)
	early := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	f.Episodes(feature.Episodes{Open: []feature.Episode{
		{Resource: string(episode.Stall), Start: early.Add(time.Minute)},
		{Resource: string(episode.Memory), Start: early},
		{Resource: string(episode.MemoryHigh), Start: early},
	}})
	if len(b.synced) != 1 || len(b.synced[0]) != 1 {
		t.Fatalf("synced %v; want the memory brake alone", b.synced)
	}
	if w := b.synced[0][nodebrake.Memory]; !w.On || !strings.Contains(w.Message, "since 2026-11-25T12:00:00Z") {
		t.Errorf("the memory brake wanted %+v; want it on, naming the earliest open episode's start", w)
	}
	f.BeforeCall(context.Background(), string(episode.MemoryHigh))
	f.BeforeCall(context.Background(), string(episode.Stall))
	if want := []nodebrake.Resource{nodebrake.Memory}; !slices.Equal(b.waited, want) {
		t.Errorf("evictions waited for brakes %v; want %v: memory.high's evictions keep no pod away, so wait for none", b.waited, want)
	}
}
