// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/pkg/thresholds"
)

// kubeletMetrics are the kubelet's own thresholds as evictd last read them
// (at start, and again after each kubelet restart), and whether evictd's
// sit above them (docs/run.md, "Thresholds above the node's kubelet's").
type kubeletMetrics struct {
	known          prometheus.Gauge
	unknown        *prometheus.GaugeVec
	restarts       prometheus.Counter
	thresholdBytes *prometheus.GaugeVec
	thresholdCount *prometheus.GaugeVec
	belowKubelet   *prometheus.GaugeVec
	compared       *prometheus.GaugeVec
}

func (m *Metrics) initKubelet() {
	k := &m.kubelet
	k.known = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "kubelet", Name: "thresholds_known",
		Help: "1 when evictd's last read of the node's kubelet eviction thresholds succeeded (at start, and again after each kubelet restart: its process flags and config file, or kubeadm's files); 0 when it failed (the log and /readyz's kubelet-thresholds check say why and how to fix it; evictd keeps its own defaults, or after a restart what it placed above the kubelet's last reading) or evictd was told not to look (--kubelet-thresholds=ignore).",
	})
	k.restarts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "kubelet", Name: "restarts_total",
		Help: "Kubelet processes evictd saw start after its own start (another PID, or the same PID started anew); each is followed by a new read of the kubelet's thresholds and evictd's placement above them.",
	})
	m.own = append(m.own, k.known, k.restarts)
	k.unknown = m.gaugeVec("kubelet", "thresholds_unknown",
		"1 for why evictd's last read of the kubelet's thresholds failed, while evictd_kubelet_thresholds_known is 0; no series when it is 1. reason: not-found (no kubelet process, no kubeadm files), embedded (k3s, MicroK8s), not-mounted (a file's directory is not visible under --host-root), missing (the file is not in its directory, which is), relative-path (a relative --config or --config-dir, and the kubelet's working directory cannot be read), proc-hidden (the host's /proc hides the kubelet process: hidepid), invalid (a file or flag the kubelet refuses too), unreadable (a file that cannot be read), ignored (--kubelet-thresholds=ignore). A failed read is tried again with back-off (docs/run.md says what to mount or grant for each reason).",
		"reason")
	k.thresholdBytes = m.gaugeVec("kubelet", "threshold_available_bytes",
		"The kubelet's hard eviction threshold in bytes, as last read, for signals measured in bytes (a percentage resolved against the capacity observed when read); no series for a signal the kubelet has no threshold on. evictd's own is evictd_threshold_available_bytes{kind=\"hard\"}.",
		"signal")
	k.thresholdCount = m.gaugeVec("kubelet", "threshold_available",
		"The kubelet's hard eviction threshold, as last read, for signals that are a count (inodes, PIDs; a percentage resolved against the capacity observed when read).",
		"signal")
	k.belowKubelet = m.gaugeVec("threshold", "below_kubelet",
		"1 when evictd's hard threshold for a signal lets the kubelet evict first: a threshold the operator set (evictd moves only its defaults) below the kubelet's, or at it on memory and PIDs (on disk the kubelet deletes unused images and dead containers at its threshold before it evicts, so evictd's at the same value is in time), else 0. Only signals the kubelet has a threshold on have a series; where evictd_kubelet_threshold_compared is 0 it says nothing.",
		"signal")
	k.compared = m.gaugeVec("kubelet", "threshold_compared",
		"1 when evictd compared its hard threshold for a signal with the kubelet's, as last read; 0 when it could not: one is a percentage, the other a quantity, and the signal's capacity was not observed (/readyz's kubelet-thresholds check warns; evictd places again once a pass has observed it). Only signals both have a threshold on have a series.",
		"signal")
}

// SetKubeletThresholdsKnown records whether the last read of the kubelet's
// thresholds succeeded; known drops the reason of an earlier failure.
func (m *Metrics) SetKubeletThresholdsKnown(known bool) {
	if m == nil {
		return
	}
	m.kubelet.known.Set(boolValue(known))
	if known {
		m.kubelet.unknown.Reset()
	}
}

// SetKubeletThresholdsUnknown records that the last read of the kubelet's
// thresholds failed, or was not made, for reason (one series at a time).
func (m *Metrics) SetKubeletThresholdsUnknown(reason string) {
	if m == nil {
		return
	}
	m.kubelet.known.Set(0)
	m.kubelet.unknown.Reset()
	m.kubelet.unknown.WithLabelValues(reason).Set(1)
}

// KubeletRestarted counts a kubelet process seen to start.
func (m *Metrics) KubeletRestarted() {
	if m == nil {
		return
	}
	m.kubelet.restarts.Inc()
}

// ResetKubeletThresholds drops the series of the kubelet's thresholds
// before a new reading sets them: a signal the restarted kubelet has no
// threshold on keeps none.
func (m *Metrics) ResetKubeletThresholds() {
	if m == nil {
		return
	}
	k := &m.kubelet
	for _, v := range []*prometheus.GaugeVec{k.thresholdBytes, k.thresholdCount, k.belowKubelet, k.compared} {
		v.Reset()
	}
}

// SetKubeletThreshold records the kubelet's hard threshold for s as an
// amount (bytes or a count, as IsCountSignal says; none when amount < 0,
// a percentage whose capacity is not known), and whether evictd's own lets
// the kubelet evict first (kubeletcfg.Placement.KubeletFirst).
func (m *Metrics) SetKubeletThreshold(s thresholds.Signal, amount int64, kubeletFirst bool) {
	if m == nil {
		return
	}
	m.kubelet.belowKubelet.WithLabelValues(string(s)).Set(boolValue(kubeletFirst))
	if amount < 0 {
		return
	}
	g := m.kubelet.thresholdBytes
	if IsCountSignal(s) {
		g = m.kubelet.thresholdCount
	}
	g.WithLabelValues(string(s)).Set(float64(amount))
}

// SetKubeletThresholdCompared records whether evictd's hard threshold for
// s could be compared with the kubelet's.
func (m *Metrics) SetKubeletThresholdCompared(s thresholds.Signal, compared bool) {
	if m == nil {
		return
	}
	m.kubelet.compared.WithLabelValues(string(s)).Set(boolValue(compared))
}
