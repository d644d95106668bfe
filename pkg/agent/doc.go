// SPDX-License-Identifier: Apache-2.0

// Package agent is evictd's loop: one pass (Loop.Step) observes the node,
// assesses it against kubelet-compatible thresholds, decides which pod to
// evict, evicts it through the Eviction API, and says how long to wait for
// the next wake-up; the loop keeps across passes what it learned of the
// node and the pods it holds back.
//
// Each step of a pass is a file of its own here (observe.go, assess.go,
// act.go, explain.go, pacing.go), and each part of a step a package below
// it: the decision in pkg/agent/decide, the pods in flight in
// pkg/agent/inflight, the episodes in pkg/agent/episode, the informers in
// pkg/agent/podwatch, the arming of event-driven wake-ups in
// pkg/agent/fastpath, signal families in pkg/agent/family, and the optional
// features behind one seam, pkg/agent/feature. The loop is built from
// options (pkg/options) by the wiring (cmd/evictd/app), or by a replay
// (Replay, with the player of pkg/trace/play). docs/architecture.md walks
// one pass.
package agent
