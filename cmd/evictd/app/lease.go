// SPDX-License-Identifier: Apache-2.0

package app

import (
	"sync/atomic"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/pkg/options"
)

// CheckNodeLease names the /readyz check that fails while another evictd
// holds this node's lease (or it cannot be read or written).
const CheckNodeLease = "node-lease"

// KickNodeLease: this agent has just started to act (it acquired the node
// lease); its passes until then only observed.
const KickNodeLease = "node_lease"

// newNodeLease returns the node lease's runner, or nil when this agent
// takes none: --node-lease=false, or dry run, where it evicts nothing and
// must not hold the lease from the agent that does.
func newNodeLease(o *options.Options, client *kube.Client, watcher *podwatch.Watcher, m *metrics.Metrics, kick func(string), log *zap.Logger, clk clock.WithTicker) (*nodelease.Runner, error) {
	switch {
	case !o.NodeLease:
		log.Warn("--" + options.FlagNodeLease + "=false: acting without the node lease; a second evictd on this node would act too")
		return nil, nil
	case o.Evict.DryRun:
		log.Info("dry run: no node lease taken; this agent evicts nothing, and leaves the lease to the one that does")
		return nil, nil
	}
	var acting atomic.Bool
	return nodelease.NewRunner(nodelease.Options{
		API: client, Namespace: o.NodeLeaseNamespace, Node: o.NodeName, Identity: nodelease.Identity(),
		Duration: o.NodeLeaseDuration, Pods: watcher.Pods, Clock: clk, Log: log.Named("lease"),
		NodeUID: func() types.UID {
			if n := watcher.Node(); n != nil {
				return n.UID
			}
			return ""
		},
		Held: func(held bool) {
			m.SetNodeLeaseHeld(held)
			if held && !acting.Swap(true) {
				// A pass now, not a housekeeping interval later.
				kick(KickNodeLease)
			}
			if !held {
				acting.Store(false)
			}
		},
		Failed: m.NodeLeaseError,
	})
}

// leaseActing is the loop's gate (agent.Deps.Acting): nil, always acting, when no
// lease is taken.
func leaseActing(r *nodelease.Runner) func() bool {
	if r == nil {
		return nil
	}
	return r.Acting
}
