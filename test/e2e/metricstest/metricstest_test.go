// SPDX-License-Identifier: Apache-2.0

package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evictions_total", Help: "h"}, []string{"signal", "result"})
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "threshold_met", Help: "h"}, []string{"signal"})
	reg.MustRegister(c, g)
	c.WithLabelValues("memory.available", "evicted").Add(3)
	c.WithLabelValues("memory.available", "dry_run").Add(1)
	c.WithLabelValues("memory.available", "error") // created at 0
	c.WithLabelValues("nodefs.available", "evicted").Add(7)
	g.WithLabelValues("memory.available").Set(1)

	tests := []struct {
		name    string
		family  string
		want    map[string]string
		value   float64
		wantErr []string // each in the error
	}{
		{"both labels", "evictions_total", map[string]string{"signal": "nodefs.available", "result": "evicted"}, 7, nil},
		{"one label", "evictions_total", map[string]string{"result": "dry_run"}, 1, nil},
		{"a series at 0", "evictions_total", map[string]string{"result": "error"}, 0, nil},
		{"a gauge", "threshold_met", map[string]string{"signal": "memory.available"}, 1, nil},
		// Not there: an error, not a 0.
		{"no such series", "evictions_total", map[string]string{"result": "pdb_blocked"}, 0,
			[]string{`evictions_total: no series with labels {result="pdb_blocked"}`, `evictions_total{result="dry_run",signal="memory.available"}`}},
		{"no such family", "other_total", nil, 0, []string{"no metric family other_total"}},
		// Two series match: which one is meant is the test's to say.
		{"ambiguous", "evictions_total", map[string]string{"result": "evicted"}, 0,
			[]string{`2 series with labels {result="evicted"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Counter(reg, tt.family, tt.want)
			if tt.wantErr == nil {
				if err != nil || got != tt.value {
					t.Fatalf("Counter(%s, %v) = %v, %v; want %v", tt.family, tt.want, got, err, tt.value)
				}
				return
			}
			if err == nil {
				t.Fatalf("Counter(%s, %v) = %v, nil; want an error", tt.family, tt.want, got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
