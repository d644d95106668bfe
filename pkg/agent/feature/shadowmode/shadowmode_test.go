// SPDX-License-Identifier: Apache-2.0

package shadowmode

import (
	"reflect"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/shadow"
)

type told struct{ lines []string }

func (r *told) EpisodeStarted(resource string, at time.Time) {
	r.lines = append(r.lines, "started "+resource+" "+at.Format(time.TimeOnly))
}

func (r *told) Pass(at time.Time) {
	r.lines = append(r.lines, "pass "+at.Format(time.TimeOnly))
}

func (r *told) WouldEvict(resource string, a shadow.Action) {
	r.lines = append(r.lines, "would evict "+a.Pod+" for "+resource+"/"+a.Signal+" at "+a.At.Format(time.TimeOnly))
}

func (r *told) EpisodeEnded(resource string, at time.Time) {
	r.lines = append(r.lines, "ended "+resource+" "+at.Format(time.TimeOnly))
}

// TestFeature: the recorder hears each episode's start (at its start) and
// end (at the pass that ended it), each pass between the two (the OOM
// kills it saw are the episodes' just started, and the ones ending), and
// only the dry run's verdicts as would-be evictions: an answer the API
// server gave is no shadow's.
func TestFeature(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC) }
	r := &told{}
	f := New(r)
	f.Episodes(feature.Episodes{Now: at(1), Started: []feature.Episode{{Resource: "memory", Start: at(1)}},
		Open: []feature.Episode{{Resource: "memory", Start: at(1)}, {Resource: "nodefs", Start: at(0)}}})
	for _, res := range []evict.Result{evict.DryRun, evict.Evicted, evict.PDBBlocked} {
		f.Answered(feature.Answer{Resource: "memory", Pod: "ns/" + string(res), Signal: "memory.available", Result: string(res), At: at(2)})
	}
	f.Episodes(feature.Episodes{Now: at(9), Ended: []feature.Episode{{Resource: "memory", Start: at(1)}}})
	want := []string{
		"started memory 03:04:01",
		"pass 03:04:01",
		"would evict ns/dry_run for memory/memory.available at 03:04:02",
		"pass 03:04:09",
		"ended memory 03:04:09",
	}
	if !reflect.DeepEqual(r.lines, want) {
		t.Errorf("the recorder was told\n%q\nwant\n%q", r.lines, want)
	}
}

// TestEpisodeResourcesKnown: pkg/shadow, below the loop, knows every
// resource of the loop's episodes by name: which of the kubelet's
// evictions relieve it (who acted first in an episode).
func TestEpisodeResourcesKnown(t *testing.T) {
	for _, r := range episode.Resources() {
		if shadow.KubeletResourcesFor(string(r)) == nil {
			t.Errorf("episode resource %q: pkg/shadow knows no kubelet eviction for it", r)
		}
	}
}
