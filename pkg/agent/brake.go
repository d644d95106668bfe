// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/exitgrace"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
)

// CheckNodeBrake names the /readyz warning shown while the node brake
// cannot be written.
const CheckNodeBrake = "node-brake"

// Braker is told, after every pass of an acting agent, which resources are
// in a pressure episode, and holds an eviction back until its episode's
// brake is on the Node, within a bound (*nodebrake.Brake).
type Braker interface {
	Sync(map[nodebrake.Resource]nodebrake.Want)
	WaitOn(ctx context.Context, r nodebrake.Resource) bool
}

// brakeResource maps an episode onto the brake the kubelet would have put
// on for it: both memory signals' onto memory, both filesystems' onto disk.
// memory.high's episodes throttle, not evict: they keep no pod away.
func brakeResource(r episode.Resource) (nodebrake.Resource, bool) {
	switch r {
	case episode.Memory, episode.Stall:
		return nodebrake.Memory, true
	case episode.NodeFs, episode.ImageFs:
		return nodebrake.Disk, true
	case episode.PIDs:
		return nodebrake.PIDs, true
	}
	return "", false
}

// syncBrake tells the brake which resources' episodes are open. The message
// names the episode's start only, so that it stays the same while the
// episode lasts and a write is a change, not a pass.
func (l *Loop) syncBrake() {
	if l.deps.Brake == nil {
		return
	}
	since := map[nodebrake.Resource]time.Time{}
	for _, ep := range l.episodes.All() {
		r, ok := brakeResource(ep.Resource)
		if !ok {
			continue
		}
		if t, seen := since[r]; !seen || ep.Start.Before(t) {
			since[r] = ep.Start
		}
	}
	want := map[nodebrake.Resource]nodebrake.Want{}
	for r, t := range since {
		want[r] = nodebrake.Want{On: true, Message: fmt.Sprintf(
			"evictd: %s pressure episode since %s; it evicts here before the kubelet would, and keeps new pods away until the episode ends",
			r, t.UTC().Format(time.RFC3339))}
	}
	l.deps.Brake.Sync(want)
}

// newNodeBrake returns the node brake. With the brake on it puts the brake
// on during episodes; with --node-brake=false, in dry run and in shadow
// mode (a dry run) it puts none on, but still lifts what an earlier agent
// left on this node (Options.LiftOnly), once it acts: a leftover of an
// agent killed mid-episode, or of one run before the brake was turned
// off, would otherwise keep pods off the node for good. Before lifting, it
// reads the node lease fresh (Options.Owns): a hand-over may have given
// the node to another agent, whose brake it must leave on.
func newNodeBrake(o *Options, client *kube.Client, watcher *podwatch.Watcher, lease *nodelease.Runner, m *metrics.Metrics, log *zap.Logger, clk clock.WithTicker) (*nodebrake.Brake, error) {
	liftOnly := true
	switch {
	case !o.NodeBrake:
		log.Info("--" + FlagNodeBrake + "=false: no condition or taint on the node during pressure; the scheduler may place new pods here while evictd evicts (a brake an earlier evictd left here is still lifted)")
	case o.Evict.DryRun:
		log.Info("dry run: the node brake puts nothing on (no condition, no taint); a brake an earlier evictd left here is still lifted")
	default:
		liftOnly = false
	}
	var effect v1.TaintEffect
	if !liftOnly {
		var err error
		if effect, err = nodebrake.ParseEffect(o.NodeBrakeTaintEffect); err != nil {
			return nil, err
		}
		m.NodeBrakeEnabled()
	}
	var owns func(context.Context) (bool, error)
	switch {
	case lease != nil:
		owns = lease.NoOtherHolder
	case o.NodeLease:
		// A dry run takes no lease, and must not lift the brake of the
		// agent that holds it.
		owns = func(ctx context.Context) (bool, error) {
			return nodelease.NoOtherHolder(ctx, client, o.NodeLeaseNamespace, o.NodeName, "", clk.Now())
		}
	}
	applied := func(r nodebrake.Resource, on bool) {
		m.SetNodeBrake(string(r), on, nodebrake.OnSince(watcher.Node(), r))
	}
	if liftOnly {
		applied = nil // evictd_node_brake_on has no series with the brake off (docs/metrics.md)
	}
	return nodebrake.New(nodebrake.Options{
		API: client, Node: o.NodeName, Current: watcher.Node, Effect: effect, Acting: leaseActing(lease),
		Owns: owns, LiftOnly: liftOnly, ExitLimit: exitgrace.BrakeLift,
		Clock: clk, Log: log.Named("brake"), Wrote: m.NodeBrakeWrite, Applied: applied,
	})
}
