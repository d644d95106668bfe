// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// nodeBrakeMetrics show the node brake (pkg/nodebrake): evictd's condition
// and taint on its own Node during a pressure episode. Every write is
// counted, as every write evictd makes to the cluster shows somewhere.
type nodeBrakeMetrics struct {
	on     *prometheus.GaugeVec
	writes *prometheus.CounterVec
	// since says how long a brake has been on in a way that outlives the
	// agent (the alert EvictdNodeBrakeHeldLong): a `for:` on
	// evictd_node_brake_on restarts with every agent, whose new pod's
	// series begins anew, and loses the hours a brake already held.
	since *prometheus.GaugeVec

	mu sync.Mutex
	// set is the since each resource's series holds; off when this agent
	// last saw that brake off.
	set, off map[string]time.Time
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
	n.since = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "node_brake", Name: "since_timestamp_seconds",
		Help: "Unix time at which evictd's brake for the resource went on on its Node: the lastTransitionTime of its condition, which the Node keeps across agents (one killed outright and its successor keeping the brake on); until this agent's copy of the Node shows it, the time this agent saw it on. No series while the brake is off.",
	}, []string{"resource"})
	n.set, n.off = map[string]time.Time{}, map[string]time.Time{}
	m.own = append(m.own, n.on, n.writes, n.since)
}

// SetNodeBrake records whether the brake for resource is on the Node and,
// while it is, since when: since is the lastTransitionTime of its condition
// on this agent's copy of the Node (nodebrake.OnSince), zero while that
// copy does not show it True yet (the write that put it on is newer).
func (m *Metrics) SetNodeBrake(resource string, on bool, since time.Time) {
	if m == nil {
		return
	}
	n := &m.nodeBrake
	n.on.WithLabelValues(resource).Set(boolValue(on))
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if !on {
		n.since.DeleteLabelValues(resource)
		delete(n.set, resource)
		n.off[resource] = now
		return
	}
	// A condition True from before this agent last saw the brake off is
	// not this brake's: a copy of the Node older than our own lift. The
	// Node stores whole seconds.
	if since.Before(n.off[resource].Truncate(time.Second)) {
		since = time.Time{}
	}
	if since.IsZero() {
		if _, ok := n.set[resource]; ok {
			return
		}
		since = now
	}
	n.set[resource] = since
	n.since.WithLabelValues(resource).Set(float64(since.UnixNano()) / 1e9)
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
