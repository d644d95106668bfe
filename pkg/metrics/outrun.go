// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/pkg/thresholds"
)

// memoryBackBuckets: from an accepted eviction to the victim's memory back,
// half a second on a quiet node, seconds on a loaded one.
var memoryBackBuckets = []float64{0.25, 0.5, 1, 2, 3, 5, 10, 30}

// outrunMetrics say whether the node's evictions are quick enough for its
// memory thresholds (pkg/agent/outrun).
type outrunMetrics struct {
	memoryBack *prometheus.HistogramVec
	outruns    *prometheus.CounterVec
}

func (m *Metrics) initOutrun() {
	o := &m.outrun
	o.memoryBack = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "eviction", Name: "memory_back_seconds",
		Help:    "Time from the API server accepting a hard memory eviction to the first observation that finds the victim's cgroup empty (its memory back): what an eviction takes on this node, and what --act-early's lead follows.",
		Buckets: memoryBackBuckets,
	}, []string{"signal"})
	o.outruns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "threshold", Name: "outrun_total",
		Help: "Falls of a memory signal, sustained and already within the hard threshold (and --act-early's band above it), fast enough to use up that room in less time than the last eviction took to give memory back (evictd_eviction_memory_back_seconds): the kernel's OOM killer may strike before a victim is gone. Raise the threshold or run with --actuator (docs/runbook.md).",
	}, []string{"signal"})
	// Both memory signals have a series from the start, so that an
	// increase() over them reads 0, not nothing, on a node that never had one.
	for _, s := range []thresholds.Signal{thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable} {
		o.outruns.WithLabelValues(string(s))
	}
	m.own = append(m.own, o.memoryBack, o.outruns)
}

// EvictionMemoryBack records how long a hard memory victim of signal s took
// from the accepted eviction to its memory being back.
func (m *Metrics) EvictionMemoryBack(s thresholds.Signal, took time.Duration) {
	if m == nil {
		return
	}
	m.outrun.memoryBack.WithLabelValues(string(s)).Observe(took.Seconds())
}

// ThresholdOutrun counts a fall of signal s that outruns its threshold.
func (m *Metrics) ThresholdOutrun(s thresholds.Signal) {
	if m == nil {
		return
	}
	m.outrun.outruns.WithLabelValues(string(s)).Inc()
}
