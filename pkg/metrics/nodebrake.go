// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// nodeBrakeMetrics show the node brake (pkg/nodebrake): evictd's condition
// and taint on its own Node during a pressure episode. Every write is
// counted, as every write evictd makes to the cluster shows somewhere.
type nodeBrakeMetrics struct {
	on     *prometheus.GaugeVec
	writes *prometheus.CounterVec
}

func (m *Metrics) initNodeBrake() {
	n := &m.nodeBrake
	n.on = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "node_brake", Name: "on",
		Help: "1 while evictd's brake for the resource (memory, disk, pids) is on its Node: its condition (EvictdMemoryPressure, EvictdDiskPressure, EvictdPIDPressure) True and, unless --node-brake-taint-effect=None, its taint (evictd.io/<resource>-pressure) set, so the scheduler keeps new pods off this node (with PreferNoSchedule, the default, whenever another node fits). No series while the brake is off (--node-brake=false, dry run) or has not been written yet.",
	}, []string{"resource"})
	n.writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "node_brake", Name: "writes_total",
		Help: "Writes of the node brake to evictd's own Node, by object (condition: a patch of nodes/status; taint: a patch of nodes) and result (ok, error). Errors other than conflicts keep the /readyz warning node-brake on; the log says why (usually a missing patch grant or the admission policy refusing a token without the node-name claim).",
	}, []string{"object", "result"})
	m.own = append(m.own, n.on, n.writes)
}

// SetNodeBrake records whether the brake for resource is on the Node.
func (m *Metrics) SetNodeBrake(resource string, on bool) {
	if m == nil {
		return
	}
	m.nodeBrake.on.WithLabelValues(resource).Set(boolValue(on))
}

// NodeBrakeWrite counts one write of the brake (object "condition" or
// "taint") and its outcome.
func (m *Metrics) NodeBrakeWrite(object string, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.nodeBrake.writes.WithLabelValues(object, result).Inc()
}

// NodeBrakeEnabled creates the write counters at 0, so that an alert on
// their increase sees the first write too.
func (m *Metrics) NodeBrakeEnabled() {
	if m == nil {
		return
	}
	for _, object := range []string{"condition", "taint"} {
		for _, result := range []string{"ok", "error"} {
			m.nodeBrake.writes.WithLabelValues(object, result)
		}
	}
}
