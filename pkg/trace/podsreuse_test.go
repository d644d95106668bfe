// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/pressure"
)

// TestReusedObservationPods: a pass whose observation reuses an earlier
// pass's pod figures (pressure.PodReads) leaves them out of its line, and
// reads back whole, its ephemeral figures as old as the pass had them;
// every chunk, the first one kept included, begins with
// the figures whole, and a pass that read them afresh writes them.
func TestReusedObservationPods(t *testing.T) {
	const pods, passes, every = 50, 300, 10
	r := NewRecorder(Header{Node: "node-a"}, MinBudget)
	f := newFigures(7)
	var recorded []*pressure.Observation
	var read *pressure.Observation // the last observation that read the pods
	for i := range passes {
		at := t0.Add(time.Duration(i) * time.Second)
		obs := makeObs(at, pods, f)
		if i%every != 0 {
			// The node read afresh, the pods carried from the last read as
			// the observer carries them: their ephemeral figures older.
			age := at.Sub(read.Time)
			obs.Summary.Pods, obs.Pods, obs.PodsAge = read.Summary.Pods, slices.Clone(read.Pods), age
			for j := range obs.Pods {
				if obs.Pods[j].EphemeralParts != nil {
					obs.Pods[j].EphemeralAge += age
				}
			}
		} else {
			// Every third pod with an ephemeral-storage figure, walked a
			// while before.
			for j := 0; j < pods; j += 3 {
				obs.Pods[j].EphemeralParts = &pressure.EphemeralParts{}
				obs.Pods[j].EphemeralAge = time.Duration(j) * time.Second
			}
			read = obs
		}
		recorded = append(recorded, obs)
		r.Begin(uint64(i+1), 0, at, Wakeup{Source: "timer"})
		r.Observed(obs, nil, at, true)
		r.End()
	}
	tr, _ := export(t, r)
	if tr.Header.Dropped == 0 {
		t.Fatal("nothing dropped: the test does not reach the budget")
	}
	asBefore := 0
	for _, p := range tr.Passes {
		want := recorded[p.N-1]
		o := p.Observation
		if o == nil || !reflect.DeepEqual(o.Pods, want.Pods) || o.PodsAge != want.PodsAge {
			t.Fatalf("pass %d: observation's pods read back differ (age %v, want %v)", p.N, o.PodsAge, want.PodsAge)
		}
		wt, ht := summaryTimes(want.Summary), summaryTimes(o.Summary)
		if len(wt) != len(ht) {
			t.Fatalf("pass %d: %d summary times read back, want %d", p.N, len(ht), len(wt))
		}
		for k, w := range wt {
			if !ht[k].Equal(w) {
				t.Errorf("pass %d: %s read back as %v, want %v", p.N, k, ht[k], w)
			}
		}
		if *o.Summary.Pods[pods-1].Memory.WorkingSetBytes != *want.Summary.Pods[pods-1].Memory.WorkingSetBytes {
			t.Errorf("pass %d: pod figures read back differ", p.N)
		}
		if p.ObservationPodsAsBefore {
			asBefore++
			if want.PodsAge == 0 {
				t.Errorf("pass %d read the pods afresh and left them out", p.N)
			}
		}
	}
	if asBefore == 0 {
		t.Error("no pass left its reused pods out")
	}
	if tr.Passes[0].ObservationPodsAsBefore {
		t.Errorf("the first pass kept (%d) refers to pods before it", tr.Passes[0].N)
	}
	for _, p := range sealedFirstPasses(t, r) {
		if p.ObservationPodsAsBefore || len(p.Observation.Summary.Pods) != pods {
			t.Errorf("the chunk beginning with pass %d does not hold the pods' figures", p.N)
		}
	}
	t.Logf("%d passes kept of %d, %d of them without their reused pods", len(tr.Passes), passes, asBefore)
}
