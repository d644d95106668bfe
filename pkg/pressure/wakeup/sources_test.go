// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"slices"
	"testing"

	"github.com/evictd/evictd/pkg/pressure"
)

func TestSourcesOn(t *testing.T) {
	all := Sources{Memcg: true, PSI: true, MemoryEvents: true}
	for _, tt := range []struct {
		name   string
		layout pressure.Layout
		want   []Source
	}{
		{"v1 with PSI", pressure.Layout{Mode: pressure.ModeV1, ProcPressureDir: "/proc/pressure"},
			[]Source{SourceMemcgThreshold, SourcePSI, SourcePoll, SourceKick}},
		{"hybrid, memory on v1", pressure.Layout{Mode: pressure.ModeHybrid, ProcPressureDir: "/proc/pressure"},
			[]Source{SourceMemcgThreshold, SourcePSI, SourcePoll, SourceKick}},
		{"v2 with PSI", pressure.Layout{Mode: pressure.ModeV2, ProcPressureDir: "/proc/pressure"},
			[]Source{SourcePSI, SourceMemoryEvents, SourcePoll, SourceKick}},
		{"v2 without PSI", pressure.Layout{Mode: pressure.ModeV2},
			[]Source{SourceMemoryEvents, SourcePoll, SourceKick}},
	} {
		if got := all.On(tt.layout).List(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := (Sources{PSI: true}).On(pressure.Layout{Mode: pressure.ModeV2, ProcPressureDir: "/proc/pressure"}).List(); !slices.Equal(got,
		[]Source{SourcePSI, SourcePoll, SourceKick}) {
		t.Errorf("--wakeup-sources=psi on v2: %v, want psi, poll and kick only", got)
	}
}
