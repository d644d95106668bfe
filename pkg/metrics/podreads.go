// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// PodReadReasons are the values of pod_reads_total's reason label, each
// counted from 0: the pod-read decision's reasons (pkg/agent/podreads,
// whose test holds the two lists equal).
var PodReadReasons = []string{"reuse", "due", "near", "busy", "forced"}

func (m *Metrics) initPodReads() {
	m.podReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "observation", Name: "pod_reads_total",
		Help: "Observations by whether they read the pods' cgroups, and why: reason=\"reuse\" kept the last read's pod figures (no threshold near, nothing in flight), \"due\" read them because the last read was 10 s old, \"near\" because a signal was within its threshold's margin or past it, \"busy\" because an episode, a victim in flight or a signal family needs them every pass, \"forced\" because the observer reads them without asking (its first pass, after the pods could not be listed, while the kubepods cgroup cannot be read).",
	}, []string{"reason"})
	for _, r := range PodReadReasons {
		m.podReads.WithLabelValues(r)
	}
	m.own = append(m.own, m.podReads)
}

// PodReads counts one observation's pod-read decision, by its reason.
func (m *Metrics) PodReads(reason string) {
	if m == nil {
		return
	}
	m.podReads.WithLabelValues(reason).Inc()
}
