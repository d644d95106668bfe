// SPDX-License-Identifier: Apache-2.0

// Package metricstest reads single series back from a Prometheus registry,
// for tests that check what evictd counted.
package metricstest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter returns the value of the counter family name whose series carries
// every label in want (other labels may differ; the first match counts), or
// 0 when no series matches, as a counter that was never incremented reads.
func Counter(g prometheus.Gatherer, name string, want map[string]string) (float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if matches(have, want) {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, nil
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
