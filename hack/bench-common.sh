# SPDX-License-Identifier: Apache-2.0
# Shared by hack/bench-latency.sh, hack/bench-oom.sh, hack/bench-overhead.sh and
# hack/bench-scale.sh (sourced, not run): runs one benchmark test of ./test/bench and prints its
# result table.
#
#   run_bench NAME TEST
#
# NAME is the table's file name (_output/bench/NAME.txt), TEST the Go test
# function. The test's full output goes to _output/bench/NAME.log, evictd's
# logs to _output/bench/NAME-*-evictd.log. Goal misses are in the table and
# do not fail the script; it exits 1 only when the benchmark could not run
# (no root or cgroups, missing binaries, a cluster or pod that did not come
# up), printing the end of the log.
#
# Knobs, passed through to the test (see `go doc ./test/bench`):
# EVICTD_BENCH_TRIALS, EVICTD_BENCH_CONFIGS, EVICTD_BENCH_RATES,
# EVICTD_BENCH_PHASE, EVICTD_BENCH_AGENTS, EVICTD_BENCH_SCALE_PHASES;
# EVICTD_BENCH_OUT changes the output directory.

run_bench() {
	local name="$1" test="$2"
	local go="${GO:-go}"
	local out="${EVICTD_BENCH_OUT:-_output/bench}"
	mkdir -p "$out"
	out="$(cd "$out" && pwd)"
	local log="$out/$name.log" table="$out/$name.txt"
	rm -f "$table"
	echo "$name: running $test (minutes; full output in $log)"
	local rc=0
	EVICTD_BENCH=1 EVICTD_BENCH_OUT="$out" \
		"$go" test -count=1 -v -run "^${test}\$" -timeout 90m ./test/bench/ >"$log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] || [ ! -s "$table" ]; then
		echo "$name: the benchmark could not run (go test exit $rc); end of $log:" >&2
		grep -E -- '--- (FAIL|SKIP)|skipping:|_test\.go:[0-9]+:' "$log" | tail -n 40 >&2 || true
		tail -n 20 "$log" >&2
		return 1
	fi
	echo
	cat "$table"
}
