// SPDX-License-Identifier: Apache-2.0

package agent

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
