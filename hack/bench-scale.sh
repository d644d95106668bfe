#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Scale: what N evictd agents cost the control plane. N simulated nodes on the
# test control plane, each with the kubelet's node heartbeat (its Lease
# controller) and an evictd whose token is bound to its pod on that node, the
# shipped RBAC and admission policies in force; phases: the heartbeats alone,
# the agents' start-up, idle, a memory episode on every node at once, its end
# (until every brake is lifted, about 5 minutes), and an API server restart.
# The API server's audit log attributes each request to its sender; its
# /metrics, etcd's and /proc give etcd operations, watches, CPU and memory.
# About 15 minutes at the defaults.
#
#   hack/bench-scale.sh       (needs root, cgroup v1 and `make build cluster-bins`)
#
#   SCALE_AGENTS   agents, one per simulated node (default 50)
#   SCALE_PHASES   phase lengths, e.g. idle=3m,restart=60s; the names and their
#                  defaults: baseline=60s, idle=120s, episode=30s (at least;
#                  it lasts until every hog is gone), outage=20s, restart=90s
#
#   SCALE_MODE=own-node  instead, what the opt-in own-node eviction policy
#                  (deploy/own-node-evictions.yaml) costs the API server: its
#                  memory and an eviction's round trip with the policy on and
#                  off, at OWNNODE_PODS pods (default 1000,5000,20000) spread
#                  over namespaces of 50 and as many in one namespace
#                  (TestOwnNodeCost; EVICTD_BENCH_TRIALS rounds, default 3;
#                  table in _output/bench/ownnode.txt; about 15 minutes)
#
# Prints the result tables (also in _output/bench/scale.txt; the audit log
# is _output/bench/scale-audit.log, each agent's log scale-NODE-evictd.log);
# exits non-zero only when the benchmark could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/bench-common.sh

if [ "${SCALE_MODE:-}" = own-node ]; then
	export EVICTD_BENCH_OWNNODE_PODS="${OWNNODE_PODS:-}"
	run_bench ownnode TestOwnNodeCost
	exit
elif [ -n "${SCALE_MODE:-}" ]; then
	echo "bench-scale: SCALE_MODE=$SCALE_MODE: want own-node, or unset for the fleet" >&2
	exit 2
fi

export EVICTD_BENCH_AGENTS="${SCALE_AGENTS:-50}"
export EVICTD_BENCH_SCALE_PHASES="${SCALE_PHASES:-}"
run_bench scale TestScale
