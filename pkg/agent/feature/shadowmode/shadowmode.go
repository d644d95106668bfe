// SPDX-License-Identifier: Apache-2.0

// Package shadowmode is shadow mode's side of the pass (feature.Feature):
// it tells the shadow recorder (pkg/shadow) each pressure episode and each
// eviction a dry run would have made, for the report that lines them up
// with the kubelet's at the episode's end.
package shadowmode

import (
	"time"

	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/shadow"
)

// Recorder follows a dry run's episodes and would-be evictions
// (*shadow.Recorder).
type Recorder interface {
	EpisodeStarted(resource string, at time.Time)
	Pass(at time.Time)
	WouldEvict(resource string, a shadow.Action)
	EpisodeEnded(resource string, at time.Time)
}

// Feature follows the pass for a Recorder.
type Feature struct {
	feature.Nop
	r Recorder
}

// New is shadow mode's feature.
func New(r Recorder) *Feature { return &Feature{r: r} }

// Episodes tells the recorder, at every pass, the episodes that started,
// the pass (the OOM kills since the one before go to the episodes under
// way, those just started among them), and the episodes that ended.
func (f *Feature) Episodes(e feature.Episodes) {
	for _, ep := range e.Started {
		f.r.EpisodeStarted(ep.Resource, ep.Start)
	}
	f.r.Pass(e.Now)
	for _, ep := range e.Ended {
		f.r.EpisodeEnded(ep.Resource, e.Now)
	}
}

// Answered tells the recorder each eviction a dry run would have made.
func (f *Feature) Answered(a feature.Answer) {
	if a.Result != string(evict.DryRun) {
		return
	}
	f.r.WouldEvict(a.Resource, shadow.Action{Pod: a.Pod, UID: a.UID, At: a.At, Signal: a.Signal})
}
