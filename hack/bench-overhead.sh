#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Overhead: evictd's CPU time and resident memory with 110
# pods on a 4 GiB simulated node, idle and under pressure (a pod growing at
# 500 MiB/s, evicted again and again), EVICTD_BENCH_PHASE (default 60s) each.
# A baseline evictd, built from the git ref BASELINE_REF, runs the same
# scenario on the same pods in the same run, and the table shows both and
# their ratio.
#
#   hack/bench-overhead.sh       (needs root, cgroup v1 and `make build cluster-bins`)
#
#   BASELINE_REF   the baseline's git ref (default 8b1bd61, the evictd before
#                  pkg/kube replaced the clientset); "none" runs this tree only
#   EVICTD_BENCH_ROUNDS   rounds of both binaries, alternating which goes
#                  first (default 1); the comparison shows medians
#
# The baseline is built from `git archive` of the ref into
# _output/baseline/, never from the working tree, with the Makefile's flags.
# Prints the result table (also in _output/bench/overhead.txt); exits non-zero only
# when the benchmark could not run, never for a missed goal.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/bench-common.sh

ref="${BASELINE_REF:-8b1bd61}"
if [ "$ref" != none ]; then
	commit="$(git rev-parse --verify --quiet "$ref^{commit}")" || {
		echo "bench-overhead: BASELINE_REF=$ref is not a commit of this repository" >&2
		exit 2
	}
	short="$(git rev-parse --short "$commit")"
	src="_output/baseline/src-$short"
	bin="$(pwd)/_output/baseline/evictd-$short"
	if [ ! -x "$bin" ]; then
		echo "bench-overhead: building the baseline evictd from $ref ($short)"
		rm -rf "$src"
		mkdir -p "$src"
		git archive "$commit" | tar -x -C "$src"
		(cd "$src" && CGO_ENABLED=0 "${GO:-go}" build -trimpath \
			-ldflags "-s -w -X main.version=$short" -o "$bin" ./cmd/evictd)
		rm -rf "$src"
	fi
	export EVICTD_BENCH_BASELINE="$bin" EVICTD_BENCH_BASELINE_REF="$short"
fi
run_bench overhead TestOverhead
