// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"net/http"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/agent/feature/brake"
	"github.com/evictd/evictd/pkg/agent/feature/shadowmode"
	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/exitgrace"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/pkg/trace"
)

// The optional parts of the agent, built from the options: the node
// brake, the trace, and the features they plug into the loop.

// newNodeBrake returns the node brake. With the brake on it puts the brake
// on during episodes; with --node-brake=false, in dry run and in shadow
// mode (a dry run) it puts none on, but still lifts what an earlier agent
// left on this node (Options.LiftOnly), once it acts: a leftover of an
// agent killed mid-episode, or of one run before the brake was turned
// off, would otherwise keep pods off the node for good. Before lifting, it
// reads the node lease fresh (Options.Owns): a hand-over may have given
// the node to another agent, whose brake it must leave on, and at exit,
// when nothing renews the lease any more, the lift writes only while the
// lease as read is still this agent's. A brake found on at start is kept
// for the pressure transition period (Options.TransitionPeriod).
func newNodeBrake(o *options.Options, client *kube.Client, watcher *podwatch.Watcher, lease *nodelease.Runner, m *metrics.Metrics, log *zap.Logger, clk clock.WithTicker) (*nodebrake.Brake, error) {
	liftOnly := true
	switch {
	case !o.NodeBrake:
		log.Info("--" + options.FlagNodeBrake + "=false: no condition or taint on the node during pressure; the scheduler may place new pods here while evictd evicts (a brake an earlier evictd left here is still lifted)")
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
	var owns func(context.Context) (nodebrake.Ownership, error)
	switch {
	case lease != nil:
		owns = func(ctx context.Context) (nodebrake.Ownership, error) {
			h, err := lease.ReadHold(ctx)
			return nodebrake.Ownership{Mine: h.NoOther, Until: h.Until}, err
		}
	case o.NodeLease:
		// A dry run takes no lease, and must not lift the brake of the
		// agent that holds it.
		owns = func(ctx context.Context) (nodebrake.Ownership, error) {
			h, err := nodelease.ReadHold(ctx, client, o.NodeLeaseNamespace, o.NodeName, "", clk.Now())
			return nodebrake.Ownership{Mine: h.NoOther, Until: h.Until}, err
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
		Owns: owns, LiftOnly: liftOnly, ExitLimit: exitgrace.BrakeLift, TransitionPeriod: o.Config.TransitionPeriod(), Install: o.Install,
		Clock: clk, Log: log.Named("brake"), Wrote: m.NodeBrakeWrite, Applied: applied,
	})
}

// traceHandler serves the trace, gzipped JSON lines, as a download.
func traceHandler(rec *trace.Recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rec == nil {
			http.Error(w, "no trace: evictd runs with --"+options.FlagTraceSize+"=0", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		w.Header().Set("Content-Disposition", `attachment; filename="evictd-trace.jsonl.gz"`)
		_, _ = rec.WriteTo(w)
	})
}

// tracerOrNil keeps a nil *trace.Recorder a nil agent.Tracer.
func tracerOrNil(r *trace.Recorder) agent.Tracer {
	if r == nil {
		return nil
	}
	return r
}

// optionalFeatures are the features the options turned on (package
// feature): the node lease's pace (nil: no lease), the node brake's (nil:
// off) and shadow mode's (nil: off).
func optionalFeatures(lease feature.Feature, b *nodebrake.Brake, rec *shadow.Recorder) []feature.Feature {
	var out []feature.Feature
	if lease != nil {
		out = append(out, lease)
	}
	if b != nil {
		out = append(out, brake.New(b))
	}
	if rec != nil {
		out = append(out, shadowmode.New(rec))
	}
	return out
}
