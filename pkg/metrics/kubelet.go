// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/pkg/thresholds"
)

// kubeletMetrics are the kubelet's own thresholds as evictd read them, and
// whether evictd's sit above them (docs/run.md, "Thresholds").
type kubeletMetrics struct {
	known          prometheus.Gauge
	thresholdBytes *prometheus.GaugeVec
	thresholdCount *prometheus.GaugeVec
	belowKubelet   *prometheus.GaugeVec
}

func (m *Metrics) initKubelet() {
	k := &m.kubelet
	k.known = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "kubelet", Name: "thresholds_known",
		Help: "1 when evictd read the node's kubelet eviction thresholds at start (its process flags and config file, or kubeadm's files); 0 when it could not (the log says why and how to fix it; evictd then keeps its own defaults) or was told not to look (--kubelet-thresholds=ignore).",
	})
	m.own = append(m.own, k.known)
	k.thresholdBytes = m.gaugeVec("kubelet", "threshold_available_bytes",
		"The kubelet's hard eviction threshold in bytes, as read at start, for signals measured in bytes (a percentage resolved against the capacity observed at start); no series for a signal the kubelet has no threshold on. evictd's own is evictd_threshold_available_bytes{kind=\"hard\"}.",
		"signal")
	k.thresholdCount = m.gaugeVec("kubelet", "threshold_available",
		"The kubelet's hard eviction threshold, as read at start, for signals that are a count (inodes, PIDs; a percentage resolved against the capacity observed at start).",
		"signal")
	k.belowKubelet = m.gaugeVec("threshold", "below_kubelet",
		"1 when evictd's hard threshold for a signal sits at or below the kubelet's, so that the kubelet evicts first: a threshold the operator set (evictd moves only its defaults), else 0. Only signals the kubelet has a threshold on have a series.",
		"signal")
}

// SetKubeletThresholdsKnown records whether the kubelet's thresholds were read.
func (m *Metrics) SetKubeletThresholdsKnown(known bool) {
	if m == nil {
		return
	}
	m.kubelet.known.Set(boolValue(known))
}

// SetKubeletThreshold records the kubelet's hard threshold for s as an
// amount (bytes or a count, as IsCountSignal says; none when amount < 0,
// a percentage whose capacity is not known), and whether evictd's own sits
// at or below it.
func (m *Metrics) SetKubeletThreshold(s thresholds.Signal, amount int64, evictdAtOrBelow bool) {
	if m == nil {
		return
	}
	m.kubelet.belowKubelet.WithLabelValues(string(s)).Set(boolValue(evictdAtOrBelow))
	if amount < 0 {
		return
	}
	g := m.kubelet.thresholdBytes
	if IsCountSignal(s) {
		g = m.kubelet.thresholdCount
	}
	g.WithLabelValues(string(s)).Set(float64(amount))
}
