// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/pkg/thresholds"
)

// outrunMetrics say whether the node's evictions are quick enough for its
// memory thresholds (pkg/agent/outrun).
type outrunMetrics struct {
	lead    prometheus.Gauge
	outruns *prometheus.CounterVec
}

func (m *Metrics) initOutrun() {
	o := &m.outrun
	o.lead = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "eviction", Name: "lead_seconds",
		Help: "The time an eviction takes on this node from the API server accepting it to the victim's memory being back, a moving average over evictd's own hard memory victims (--act-early's lead; 2 s until the first is measured).",
	})
	o.outruns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "threshold", Name: "outrun_total",
		Help: "Falls of a memory signal, sustained and already within the hard threshold (and --act-early's band above it), fast enough to use up that room in less than evictd_eviction_lead_seconds: the kernel's OOM killer may strike before a victim is gone. Raise the threshold or run with --actuator (docs/runbook.md).",
	}, []string{"signal"})
	// Both memory signals have a series from the start, so that an
	// increase() over them reads 0, not nothing, on a node that never had one.
	for _, s := range []thresholds.Signal{thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable} {
		o.outruns.WithLabelValues(string(s))
	}
	m.own = append(m.own, o.lead, o.outruns)
}

// SetEvictionLead records the measured eviction lead.
func (m *Metrics) SetEvictionLead(d time.Duration) {
	if m == nil {
		return
	}
	m.outrun.lead.Set(d.Seconds())
}

// ThresholdOutrun counts a fall of signal s that outruns its threshold.
func (m *Metrics) ThresholdOutrun(s thresholds.Signal) {
	if m == nil {
		return
	}
	m.outrun.outruns.WithLabelValues(string(s)).Inc()
}
