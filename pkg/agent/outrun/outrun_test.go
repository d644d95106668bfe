// SPDX-License-Identifier: Apache-2.0

package outrun

import (
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/thresholds"
)

const mib = 1 << 20

func TestRoomAndCover(t *testing.T) {
	f := Fall{Amount: 300 * mib, ActEarly: true, Rate: 100 * mib}
	if got, want := f.Room(), int64(450*mib); got != want {
		t.Errorf("Room with act-early = %d, want %d (the threshold and half of it)", got, want)
	}
	if got, want := f.Cover(), 4500*time.Millisecond; got != want {
		t.Errorf("Cover at 100 MiB/s = %v, want %v", got, want)
	}
	f.ActEarly = false
	if got, want := f.Room(), int64(300*mib); got != want {
		t.Errorf("Room without act-early = %d, want %d", got, want)
	}
	if got, want := f.Cover(), 3*time.Second; got != want {
		t.Errorf("Cover without act-early = %v, want %v", got, want)
	}
	f.Rate = -5 * mib
	if got := f.Cover(); got != predict.Never {
		t.Errorf("Cover while available rises = %v, want predict.Never", got)
	}
}

func TestOutrun(t *testing.T) {
	// A loaded run on the VM node: 300Mi, act-early on, 98 MiB/s, and
	// evictions that took 5 s to give memory back.
	loaded := Fall{Amount: 300 * mib, ActEarly: true, Available: 440 * mib, Rate: 98 * mib, Sustained: true, Lead: 5 * time.Second}
	for _, tc := range []struct {
		name string
		edit func(*Fall)
		want bool
	}{
		{"loaded node, fall inside the room", func(*Fall) {}, true},
		{"quiet node: memory back in 2 s", func(f *Fall) { f.Lead = 2 * time.Second }, false},
		{"slower fall: 25 MiB/s lasts 18 s", func(f *Fall) { f.Rate = 25 * mib }, false},
		{"a step, not a trend", func(f *Fall) { f.Sustained = false }, false},
		{"still above the room", func(f *Fall) { f.Available = 451 * mib }, false},
		{"at the room's top", func(f *Fall) { f.Available = 450 * mib }, true},
		{"below the threshold", func(f *Fall) { f.Available = 40 * mib }, true},
		{"without act-early the room is the threshold", func(f *Fall) { f.ActEarly = false; f.Available = 301 * mib }, false},
		{"without act-early, inside", func(f *Fall) { f.ActEarly = false; f.Available = 299 * mib; f.Lead = 3100 * time.Millisecond }, true},
		{"rising", func(f *Fall) { f.Rate = -98 * mib }, false},
		{"no lead measured", func(f *Fall) { f.Lead = 0 }, false},
		{"no threshold", func(f *Fall) { f.Amount = 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := loaded
			tc.edit(&f)
			if got := f.Outrun(); got != tc.want {
				t.Errorf("Outrun() = %v, want %v (room %d MiB, cover %v, lead %v)", got, tc.want, f.Room()/mib, f.Cover(), f.Lead)
			}
		})
	}
}

func TestTrackerTellsOncePerFall(t *testing.T) {
	var tr Tracker
	m, a := thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable
	outrun := Fall{Amount: 300 * mib, ActEarly: true, Available: 440 * mib, Rate: 98 * mib, Sustained: true, Lead: 5 * time.Second}
	step := outrun
	step.Sustained = false
	slow := outrun
	slow.Rate = 10 * mib
	back := outrun
	back.Available = 451 * mib
	steps := []struct {
		s       thresholds.Signal
		f       Fall
		wantNew bool
	}{
		{m, step, false},
		{m, outrun, true},
		{m, outrun, false}, // the same fall, a pass later
		{a, outrun, true},  // another signal's own
		{m, step, false},   // a pass that reads as a step, within the room
		{m, slow, false},   // the fill pausing while a victim goes
		{m, outrun, false}, // still the same fall
		{m, back, false},   // back above the room: the fall is over
		{m, outrun, true},  // a new fall
	}
	for i, st := range steps {
		if got := tr.Update(st.s, st.f); got != st.wantNew {
			t.Errorf("step %d: Update(%s, %+v) = %v, want %v", i, st.s, st.f, got, st.wantNew)
		}
	}
}
