// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/actuator"
	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/shadow"
)

// apiSide is what the agent reads of and writes to the cluster: the
// informers, the evictor and its Events, the node lease and brake, and
// what they serve (the actuator, shadow mode's recorder).
type apiSide struct {
	watcher *podwatch.Watcher
	// events is nil in dry run; podEvents its Emit.
	events    *evict.EventWriter
	podEvents agent.PodEventer
	evictor   agent.Evictor
	// requests is the EvictionRequest evictor (--eviction-request), or nil.
	requests *evictreq.Evictor
	act      agent.Actuator
	lease    *nodelease.Runner
	brake    *nodebrake.Brake
	shadow   *shadow.Recorder
}

// newAPISide builds the API side; onDelete is told each pod the informers
// see deleted.
func newAPISide(o *options.Options, client *kube.Client, node *nodeSide, m *metrics.Metrics, clk clock.WithTicker, log, evictLog *zap.Logger, onDelete func(*v1.Pod)) (*apiSide, error) {
	a := &apiSide{}
	if !o.Evict.DryRun {
		a.events = evict.NewEventWriter(client, install.Instance(o.Install, o.NodeName), log.Named("events"), clk)
		a.podEvents = a.events.Emit
	}
	a.shadow = newShadow(o, m, log.Named("shadow"))
	// Shadow mode reads the kubelet's evictions from the pods of the node,
	// which the informer watches anyway: no watch of its own.
	var kubeletEvicted func(*v1.Pod)
	if a.shadow != nil {
		kubeletEvicted = a.shadow.KubeletEvicted
	}
	var err error
	a.watcher, err = podwatch.New(podwatch.Options{
		Client: client, NodeName: o.NodeName, Namespaces: o.Config.HasSelectors(), Log: log.Named("podwatch"),
		SyncTimeout: o.InformerSyncTimeout, Evicted: kubeletEvicted, OnDelete: func(p *v1.Pod) {
			onDelete(p)
			if a.lease != nil {
				// The pod of the lease's holder may be the one gone
				// (nodelease.Peer.Gone). Set before the informers start.
				a.lease.Kick()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	// An eviction answered tells the informers, backing off after an API
	// outage, that the server is back: the victim's deletion must be seen
	// now, not up to a minute later.
	evictAPI := answerNoter{PodAPI: client, note: a.watcher.Answered}
	ev, err := evict.New(evict.Config{Options: o.Evict, Client: evictAPI, NodeName: o.NodeName, Events: a.events, Metrics: m, Logger: evictLog, Clock: clk})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", options.ErrUsage, err)
	}
	a.evictor = ev
	if o.EvictionRequest {
		a.requests, err = evictreq.New(evictreq.Config{Imperative: ev, API: client, Pods: podByName(a.watcher), ResponderWait: o.EvictionRequestWait, Install: o.Install,
			Served: m.SetEvictionRequestServed, Logger: evictLog.Named("request"), Clock: clk})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", options.ErrUsage, err)
		}
		a.evictor = a.requests
		m.SetEvictionRequestServed(true)
	}

	switch {
	case o.Actuator && o.Evict.DryRun:
		log.Info("the actuator writes nothing in dry run: --actuator is off")
	case o.Actuator:
		a.act = actuator.New(node.layout).Following(node.obsv.Layout)
	}
	node.placed.EmitBelow(kubeletplace.Emitter(a.podEvents), o.NodeName)
	node.placer.Emit = kubeletplace.Emitter(a.podEvents)

	if a.lease, err = newNodeLease(o, client, a.watcher, m, node.set.Kick, log, clk); err != nil {
		return nil, fmt.Errorf("%w: %w", options.ErrUsage, err)
	}
	if a.brake, err = newNodeBrake(o, client, a.watcher, a.lease, m, log, clk); err != nil {
		return nil, fmt.Errorf("%w: %w", options.ErrUsage, err)
	}
	return a, nil
}

// podByName looks a pod of the node up in the informer's cache: an open
// EvictionRequest waits on its pod's state there, not on GETs.
func podByName(w *podwatch.Watcher) func(namespace, name string) *v1.Pod {
	return func(namespace, name string) *v1.Pod {
		for _, p := range w.Pods() {
			if p.Namespace == namespace && p.Name == name {
				return p
			}
		}
		return nil
	}
}

// flushEvents writes the Events still queued, within eventFlushTimeout.
func (a *apiSide) flushEvents(log *zap.Logger) {
	if a.events == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventFlushTimeout)
	defer cancel()
	if err := a.events.Shutdown(ctx); err != nil {
		log.Warn("events not all written", logging.Err(err))
	}
}
