// SPDX-License-Identifier: Apache-2.0

// Package metricstest reads single series back from a Prometheus registry,
// for tests that check what evictd counted.
package metricstest

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/internal/metrictest"
)

// Counter returns the value of the one series of family name whose labels
// include want: a counter's, a gauge's or an untyped metric's. A family that
// is not gathered, no series or more than one matching want, or a histogram
// or summary family is an error naming the family and the labels and listing
// the series there are, never a 0: a test that wants a counter at 0 must not
// pass because the metric was renamed or a label changed. A polling loop
// that waits for a series to appear takes the error as "not yet".
//
// It is internal/metrictest.Lookup; a test that means "no such series" says
// so with internal/metrictest.Absent.
func Counter(g prometheus.Gatherer, name string, want map[string]string) (float64, error) {
	return metrictest.Lookup(g, name, want)
}
