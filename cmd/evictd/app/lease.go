// SPDX-License-Identifier: Apache-2.0

package app

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/agent/feature/leasepace"
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
		API: client, Namespace: o.NodeLeaseNamespace, Node: o.NodeName, Identity: nodelease.Identity(), Install: o.Install,
		Duration: o.NodeLeaseDuration, IdleDuration: o.NodeLeaseIdle, Pods: watcher.Pods, Synced: watcher.Synced, Clock: clk, Log: log.Named("lease"),
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

// leasePaceWait bounds an eviction call's wait for the lease's renewal at
// the active pace (leasepace.Feature.BeforeCall): one lease write, made as
// soon as pressure came near.
const leasePaceWait = 2 * time.Second

// leasePace is the lease's feature (nil without a lease): the active pace
// near pressure, the idle pace otherwise.
func leasePace(o *options.Options, r *nodelease.Runner) feature.Feature {
	if r == nil {
		return nil
	}
	return leasepace.New(r, o.NodeLeaseDuration, leasePaceWait)
}

// leaseActing is the loop's gate (agent.Deps.Acting): nil, always acting, when no
// lease is taken.
func leaseActing(r *nodelease.Runner) func() bool {
	if r == nil {
		return nil
	}
	return r.Acting
}
