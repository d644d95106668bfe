// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

// TestHealthSets: /readyz's named checks fail exactly when Readyz does and
// say which part failed; /healthz's when Healthz does.
func TestHealthSets(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	for _, tc := range []struct {
		name        string
		synced      bool
		obs         time.Time
		problem     error
		wantFailing string // check names, comma-separated, in order
	}{
		{"ready", true, t0.Add(-time.Second), nil, ""},
		{"not synced, not observed", false, time.Time{}, nil, "informers,observing"},
		{"synced, a node signal unreadable", true, t0.Add(-time.Second), errors.New("memory.available: cannot read"), "observing"},
		{"not synced but observing", false, t0.Add(-time.Second), nil, "informers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Health{Housekeeping: time.Second, Synced: func() bool { return tc.synced }, Loop: fakePasses{tc.obs, tc.obs, tc.problem},
				Clock: clk, Started: func() time.Time { return t0.Add(-time.Minute) }}
			live, ready := h.Sets()
			if got := ready.Names(); !slices.Equal(got, []string{CheckInformers, CheckObserving}) {
				t.Errorf("readyz checks %v", got)
			}
			if got := live.Names(); !slices.Equal(got, []string{CheckLoop}) {
				t.Errorf("healthz checks %v", got)
			}
			err := ready.Check()
			var failing []string
			if err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					name, _, _ := strings.Cut(line, ": ")
					failing = append(failing, name)
				}
			}
			if got := strings.Join(failing, ","); got != tc.wantFailing {
				t.Errorf("failing checks %q (%v), want %q", got, err, tc.wantFailing)
			}
			if live.Check() != nil {
				t.Errorf("live.Check() = %v, want nil (the loop passed a second ago)", live.Check())
			}
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fakePasses struct {
	obs, pass time.Time
	problem   error
}

func (f fakePasses) LastObservation() time.Time { return f.obs }
func (f fakePasses) LastPass() time.Time        { return f.pass }
func (f fakePasses) Problem() error             { return f.problem }

func TestHealth(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	tests := []struct {
		name            string
		synced          bool
		started         time.Time
		lastObs, lastPs time.Time
		problem         error
		ready, healthy  string // "" = ok, else a substring of the error
	}{
		{"starting: informers not synced", false, time.Time{}, time.Time{}, time.Time{}, nil, "not synced", ""},
		{"synced, no observation yet", true, t0, time.Time{}, time.Time{}, nil, "no observation", ""},
		{"fresh observation", true, t0.Add(-time.Minute), t0.Add(-time.Second), t0.Add(-time.Second), nil, "", ""},
		// 1s housekeeping: ready within 5×1s+5s.
		{"stale observation", true, t0.Add(-time.Minute), t0.Add(-11 * time.Second), t0.Add(-time.Second), nil, "ago", ""},
		{"loop stuck for more than two minutes", true, t0.Add(-time.Hour), t0.Add(-3 * time.Minute), t0.Add(-3 * time.Minute), nil, "ago", "has not finished a pass"},
		{"started recently, first pass still running", true, t0.Add(-time.Minute), time.Time{}, time.Time{}, nil, "no observation", ""},
		// Blind is not ready, however busy the loop is.
		{"observation fails", true, t0.Add(-time.Minute), time.Time{}, t0.Add(-time.Second), errors.New("no kubepods cgroup under /"), "no kubepods cgroup", ""},
		{"a node signal unreadable", true, t0.Add(-time.Minute), t0.Add(-time.Second), t0.Add(-time.Second), errors.New("memory.available: cannot read"), "memory.available", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := Health{Housekeeping: time.Second, Synced: func() bool { return tc.synced }, Loop: fakePasses{tc.lastObs, tc.lastPs, tc.problem},
				Clock: clk, Started: func() time.Time { return tc.started }}
			check := func(what string, err error, want string) {
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v, want ok", what, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: %v, want an error containing %q", what, err, want)
				}
			}
			_, ready := h.Sets()
			check("readyz", ready.Check(), tc.ready)
			check("healthz", h.Healthz(), tc.healthy)
		})
	}
}
