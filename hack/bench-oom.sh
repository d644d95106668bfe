#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# OOM race: a pod grows at 100, 300 and 1000 MiB/s toward the
# limit of a 1 GiB simulated node with memory.available<300Mi while three other
# pods hold memory; counts the kernel's OOM kills and whether the documented
# eviction order was kept, for evictd as built and for the same binary at the
# kubelet's cadence (--wakeup-sources=none --housekeeping-interval=10s
# --act-early=false --fit-grace=false), EVICTD_BENCH_TRIALS trials (default 3)
# per rate.
#
#   hack/bench-oom.sh       (needs root, cgroup v1 and `make build cluster-bins`)
#
# Prints the result table (also in _output/bench/oom.txt); exits non-zero only
# when the benchmark could not run, never for a missed goal.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/bench-common.sh
run_bench oom TestOOMRace
