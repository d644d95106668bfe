#!/usr/bin/env bash
# Overhead (issue 6): evictd's CPU time and resident memory with 110 pods
# on a 4 GiB simulated node, idle and under pressure (a pod growing at 500
# MiB/s, evicted again and again), EVICTD_BENCH_PHASE (default 60s) each.
#
#   hack/bench-overhead.sh       (needs root, cgroup v1 and `make build cluster-bins`)
#
# Prints the result table (also in _output/bench/overhead.txt); exits non-zero only
# when the benchmark could not run, never for a missed goal.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/bench-common.sh
run_bench overhead TestOverhead
