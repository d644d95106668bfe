// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// nodeLeaseMetrics say whether this agent is the one that acts on its node
// (pkg/nodelease). The holder's name is in the log, not a label: it is a
// pod name.
type nodeLeaseMetrics struct {
	// held has no labels but is a vector so that it has no series until
	// the first SetNodeLeaseHeld: an agent that takes no lease (dry run,
	// --node-lease=false) exports none, and never looks like one waiting
	// for the lease (EvictdNodeLeaseWaiting).
	held   *prometheus.GaugeVec
	errors prometheus.Counter
}

func (m *Metrics) initNodeLease() {
	n := &m.nodeLease
	n.held = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "node_lease", Name: "held",
		Help: "1 while this evictd holds its node's Lease and acts; 0 while another evictd on the node holds it (this one only observes, not ready; the log and /readyz name the holder) or while the Lease cannot be read or written. No series in dry run or with --node-lease=false, where no Lease is taken.",
	}, nil)
	n.errors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "node_lease", Name: "errors_total",
		Help: "Failed calls on the node Lease (get, create, update, delete, watch), conflicts between agents aside; a steady rise with evictd_node_lease_held 0 is usually a missing RBAC grant in the Lease's namespace (the log and /readyz say which).",
	})
	m.own = append(m.own, n.held, n.errors)
}

// SetNodeLeaseHeld records whether this agent holds its node's Lease.
func (m *Metrics) SetNodeLeaseHeld(held bool) {
	if m == nil {
		return
	}
	m.nodeLease.held.WithLabelValues().Set(boolValue(held))
}

// NodeLeaseError counts a failed call on the node Lease.
func (m *Metrics) NodeLeaseError() {
	if m == nil {
		return
	}
	m.nodeLease.errors.Inc()
}
