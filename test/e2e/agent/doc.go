// SPDX-License-Identifier: Apache-2.0

// Package agent holds the end-to-end tests of `evictd run`: the built evictd
// binary runs as a real process with only its ServiceAccount's kubeconfig,
// against the real test control plane (package framework) and a simulated
// node on real cgroup v1 memory (package nodesim), whose pods are real
// processes of the workload binary making real memory and disk pressure.
//
// The tests assert on what really happened: pod objects in the API server,
// the kubelet stand-in's timeline of SIGTERM, SIGKILL and deletion, evictd's
// JSON log and its /metrics. Each test measures the time from the moment the
// node crossed a threshold (sampled from the node cgroup or the node's
// filesystem) to evictd's eviction, and evictd's RSS and CPU while it ran;
// TestMain prints the figures at the end.
//
// Run them with `make e2e`, or alone (as root, after `make build
// cluster-bins`):
//
//	go test -count=1 -v ./test/e2e/agent
package agent
