#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The v2 fast path's detection latency on the VM node (test/vmnode, build tags
# vmnode and vmnodebench, TestNodeLatency): a one-step crossing of
# memory.available<300Mi, timed in the guest, against evictd's "threshold met",
# per wake-up configuration. Run by `make bench-latency-node`, which builds the
# images first. Prints the result table (also in _output/bench/latency-node.txt);
# the full log is _output/bench/latency-node.log. Exits non-zero only when the
# benchmark could not run.
#
#   EVICTD_BENCH_TRIALS=N   trials per configuration and step (default 8)
#   EVICTD_BENCH_STEPS=S    comma-separated steps to run: plain, at-limit (default both)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${EVICTD_BENCH_OUT:-_output/bench}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
log="$out/latency-node.log"
rm -f "$out/latency-node.txt"
echo "latency-node: running TestNodeLatency (a quarter of an hour; full output in $log)"
EVICTD_BENCH_OUT="$out" go test -count=1 -tags vmnode,vmnodebench -v -timeout 60m -run '^TestNodeLatency$' ./test/vmnode >"$log" 2>&1
rc=$?
if [ "$rc" != 0 ] || [ ! -s "$out/latency-node.txt" ]; then
  echo "latency-node: the benchmark could not run (go test exit $rc); end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
echo
cat "$out/latency-node.txt"
