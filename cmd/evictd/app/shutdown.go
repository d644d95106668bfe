// SPDX-License-Identifier: Apache-2.0

package app

import "go.uber.org/zap"

// stopParts are the parts of a running agent that stop, each a call that
// returns once its part has stopped.
type stopParts struct {
	// loop stops the loop; Loop.Run has returned once its eviction calls
	// under way answered.
	loop func()
	// brake ends what runs beside the loop: the node brake lifts on its
	// way out (queued Events are flushed beside it), the lease stops
	// renewing, the kubelet watch stops.
	brake func()
	// lease releases the node lease.
	lease func()
	// informers stops the informers.
	informers func()
	// serving stops the HTTP servers.
	serving func()
}

// stopStep is one named step of the way out.
type stopStep struct {
	name string
	run  func()
}

// shutdown is the way out, in order.
type shutdown []stopStep

// stopOrder is the one place the way out is written down:
//
//  1. the loop, so that no eviction starts while the rest stops;
//  2. the node brake, lifted while this agent still holds the node's
//     lease: the next agent, or none, finds the node clean, and no other
//     agent's brake is lifted by mistake;
//  3. the node lease, released only now: the next agent takes over at
//     once, not a lease later, and finds no brake of ours;
//  4. the informers, which the brake read the Node through;
//  5. serving last, so that /metrics and /readyz answer until the end.
func stopOrder(p stopParts) shutdown {
	return shutdown{
		{"the loop", p.loop},
		{"the node brake", p.brake},
		{"the node lease", p.lease},
		{"the informers", p.informers},
		{"serving", p.serving},
	}
}

// run takes each step in turn.
func (s shutdown) run(log *zap.Logger) {
	for _, step := range s {
		step.run()
		log.Debug("stopped", zap.String("part", step.name))
	}
}
