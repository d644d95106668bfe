#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Detection latency: a pod takes a 1 GiB simulated node across
# memory.available<300Mi in one step (one 300 MiB MAP_POPULATE), and the time
# from the crossing (timed by the test from the node cgroup's usage) to evictd's
# Eviction reaching the API server (requestReceivedTimestamp in its audit log)
# is measured EVICTD_BENCH_TRIALS times (default 20) per wake-up source
# configuration: memcg eventfd, timer only every 1 s, adaptive polling, and
# evictd as built. Prints median and p99 per configuration.
#
#   hack/bench-latency.sh       (needs root, cgroup v1 and `make build cluster-bins`)
#
# Prints the result table (also in _output/bench/latency.txt); exits non-zero only
# when the benchmark could not run, never for a missed goal.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/bench-common.sh
run_bench latency TestLatency
