// SPDX-License-Identifier: Apache-2.0

package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evictions_total", Help: "h"}, []string{"signal", "result"})
	reg.MustRegister(c)
	c.WithLabelValues("memory.available", "evicted").Add(3)
	c.WithLabelValues("memory.available", "dry_run").Add(1)
	c.WithLabelValues("nodefs.available", "evicted").Add(7)

	tests := []struct {
		name   string
		family string
		want   map[string]string
		value  float64
	}{
		{"both labels", "evictions_total", map[string]string{"signal": "nodefs.available", "result": "evicted"}, 7},
		{"one label", "evictions_total", map[string]string{"result": "dry_run"}, 1},
		{"no such series", "evictions_total", map[string]string{"result": "pdb_blocked"}, 0},
		{"no such family", "other_total", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Counter(reg, tt.family, tt.want)
			if err != nil || got != tt.value {
				t.Fatalf("Counter(%s, %v) = %v, %v; want %v", tt.family, tt.want, got, err, tt.value)
			}
		})
	}
}
