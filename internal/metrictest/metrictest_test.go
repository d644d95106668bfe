// SPDX-License-Identifier: Apache-2.0

package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"a", "b"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "y", Help: "y"})
	reg.MustRegister(c, g)
	c.WithLabelValues("1", "2").Add(3)
	c.WithLabelValues("1", "4").Add(5)
	g.Set(7)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"x_total", map[string]string{"a": "1", "b": "4"}, 5},
		{"x_total", map[string]string{"b": "2"}, 3},
		{"x_total", map[string]string{"b": "9"}, 0},
		{"y", nil, 7},
		{"z", nil, 0},
	} {
		if got := Value(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Value(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
