// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Trace is what the trace of passes (pkg/trace's Recorder) tells at each
// scrape.
type Trace interface {
	// Size is the compressed bytes the trace holds.
	Size() int
	// Oldest is the time of its oldest pass; zero when it holds none.
	Oldest() time.Time
}

// initTrace registers the trace's gauges, read at each scrape (so they
// cost the loop nothing). No series until SetTrace (--trace-size=0: none).
func (m *Metrics) initTrace() {
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "trace", Name: "bytes",
		Help: "Compressed bytes the trace of passes holds for evictd replay, within --trace-size; 0 with --trace-size=0.",
	}, func() float64 {
		if t := m.trace.Load(); t != nil {
			return float64((*t).Size())
		}
		return 0
	})
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "trace", Name: "oldest_pass_timestamp_seconds",
		Help: "Unix time of the oldest pass the trace holds: how far back an export of it reaches (time() minus this is the trace's span); 0 while it holds none or with --trace-size=0.",
	}, func() float64 {
		if t := m.trace.Load(); t != nil {
			if at := (*t).Oldest(); !at.IsZero() {
				return float64(at.UnixNano()) / 1e9
			}
		}
		return 0
	})
	m.own = append(m.own, bytes, oldest)
}

// SetTrace gives the trace's gauges their source.
func (m *Metrics) SetTrace(t Trace) {
	if m == nil || t == nil {
		return
	}
	m.trace.Store(&t)
}
