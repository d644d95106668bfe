#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Observation, ranking, trace and pass benchmarks, summarized as medians over
# COUNT runs.
#
#   hack/bench.sh [COUNT]        (make bench runs it with BENCH_COUNT, default 6)
#
# Runs every benchmark of pkg/pressure, pkg/rank, pkg/trace and pkg/agent COUNT times,
# keeps the raw output in _output/bench/bench.txt, summarizes it with
# benchstat (built here from the Go module proxy into _output/tools) and
# prints, per observation benchmark, the median ns/op and allocs/op and the
# ratio observe/floor, the trace's cost per pass against the v2
# observation's at the same pod count, and what the explanation and the
# recorded clock readings take of the agent's pass.
set -euo pipefail
cd "$(dirname "$0")/.."

count="${1:-6}"
case "$count" in
'' | *[!0-9]* | 0)
	echo "hack/bench.sh: COUNT must be a positive integer, got \"$count\"" >&2
	exit 2
	;;
esac
GO="${GO:-go}"
out=_output/bench
tools="$(pwd)/_output/tools"
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
mkdir -p "$out" "$tools"

if [ ! -x "$tools/benchstat" ] || [ "$(cat "$tools/.benchstat-version" 2>/dev/null)" != "$BENCHSTAT_VERSION" ]; then
	echo "building benchstat $BENCHSTAT_VERSION into $tools"
	GOBIN="$tools" CGO_ENABLED=0 "$GO" install "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION"
	echo "$BENCHSTAT_VERSION" >"$tools/.benchstat-version"
fi

pkgs=()
for p in ./pkg/pressure ./pkg/rank ./pkg/trace ./pkg/agent; do
	[ -d "$p" ] && pkgs+=("$p/")
done

# median(list): the median of a space-separated list of numbers, for the
# summaries below.
median='
function median(list,    n, a, i, j, t) {
	n = split(list, a, " ")
	if (n == 0) return 0
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
'

raw="$out/bench.txt"
"$GO" test -run '^$' -bench . -benchmem -count "$count" -timeout 60m "${pkgs[@]}" | tee "$raw"

echo
echo "== benchstat (medians, 95% confidence over $count runs)"
"$tools/benchstat" "$raw" | tee "$out/benchstat.txt"

echo
echo "== observation vs floor (medians over $count runs; cpu = process user+system time per op)"
# Lines look like "BenchmarkObserve/mode=v1/pods=250/kind=observe-2  200  4896535 ns/op
# 2132470 cpu-ns/op  108544 B/op  23 allocs/op". Wall time swings with whatever else
# runs on the machine; CPU time per op is the steadier figure.
awk "$median"'
function ratio(a, b) { return b > 0 ? a / b : 0 }
/^BenchmarkObserve\// {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) {
		if ($(i + 1) == "ns/op") ns[name] = ns[name] " " $i
		if ($(i + 1) == "cpu-ns/op") cpu[name] = cpu[name] " " $i
		if ($(i + 1) == "allocs/op") allocs[name] = allocs[name] " " $i
	}
	if (name ~ /kind=observe$/ && !(name in seen)) { seen[name] = 1; order[++k] = name }
}
END {
	if (k == 0) { print "no observation benchmarks found"; exit 1 }
	printf "%-18s %12s %12s %6s %12s %12s %6s %9s %16s\n", "benchmark", "observe ns", "floor ns", "ratio",
		"observe cpu", "floor cpu", "ratio", "allocs/op", "floor-open ns"
	for (i = 1; i <= k; i++) {
		o = order[i]; base = o; sub(/\/kind=observe$/, "", base)
		f = base "/kind=floor"; fo = base "/kind=floor-open"
		label = base; sub(/^BenchmarkObserve\//, "", label)
		printf "%-18s %12.0f %12.0f %6.2f %12.0f %12.0f %6.2f %9.0f %16.0f\n", label,
			median(ns[o]), median(ns[f]), ratio(median(ns[o]), median(ns[f])),
			median(cpu[o]), median(cpu[f]), ratio(median(cpu[o]), median(cpu[f])),
			median(allocs[o]), median(ns[fo])
	}
}' "$raw" | tee "$out/observe-vs-floor.txt"

echo
echo "== the trace's recording of a pass vs the observation of one (v2), medians over $count runs"
# The recorder runs after each pass's decisions; what it adds is read against
# the pass's largest fixed cost, the observation, at the kubelet's 110 pods.
awk "$median"'
/^BenchmarkRecordPass\/pods=110-/ || /^BenchmarkObserve\/mode=v2\/pods=110\/kind=observe-/ {
	name = ($1 ~ /^BenchmarkRecordPass/) ? "record" : "observe"
	for (i = 3; i < NF; i++) {
		if ($(i + 1) == "ns/op") ns[name] = ns[name] " " $i
		if ($(i + 1) == "gzB/pass") gz[name] = gz[name] " " $i
	}
}
END {
	if (!("record" in ns) || !("observe" in ns)) { print "no trace or observation benchmark at 110 pods found"; exit 1 }
	r = median(ns["record"]); o = median(ns["observe"])
	printf "%-10s %14s %14s %8s %14s\n", "pods", "record ns", "observe ns", "ratio", "gzip B/pass"
	printf "%-10s %14.0f %14.0f %8.2f %14.0f\n", 110, r, o, (o > 0 ? r / o : 0), median(gz["record"])
}' "$raw" | tee "$out/trace-vs-observe.txt"

echo
echo "== the explanation and the clock readings in a pass at 110 pods, medians over $count runs"
# BenchmarkPass (pkg/agent): the whole pass (Step) on the scripted node, idle
# and waiting for a victim in flight; publishExplanation alone on that pass's
# view; the pass with its clock readings not recorded; and the scripted
# node's own observation and pod list, which the pass pays for but the
# agent does not.
awk "$median"'
function ratio(a, b) { return b > 0 ? a / b : 0 }
/^BenchmarkPass\// {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkPass\//, "", name)
	for (i = 3; i < NF; i++) {
		if ($(i + 1) == "ns/op") ns[name] = ns[name] " " $i
		if ($(i + 1) == "cpu-ns/op") cpu[name] = cpu[name] " " $i
		if ($(i + 1) == "allocs/op") allocs[name] = allocs[name] " " $i
		if ($(i + 1) == "readings/op") rd[name] = rd[name] " " $i
	}
	base = name; sub(/\/part=[^\/]*$/, "", base)
	if (!(base in seen)) { seen[base] = 1; order[++k] = base }
}
END {
	if (k == 0) { print "no pass benchmarks found"; exit 1 }
	printf "%-24s %10s %10s %10s %10s %6s %9s %9s %9s %12s %10s\n", "benchmark", "pass ns", "pass cpu", "explain ns",
		"expl. cpu", "ratio", "allocs/op", "expl. all", "readings", "noread. cpu", "sim cpu"
	for (i = 1; i <= k; i++) {
		o = order[i]; p = o "/part=pass"; e = o "/part=explain"
		printf "%-24s %10.0f %10.0f %10.0f %10.0f %6.3f %9.0f %9.0f %9.0f %12.0f %10.0f\n", o,
			median(ns[p]), median(cpu[p]), median(ns[e]), median(cpu[e]), ratio(median(cpu[e]), median(cpu[p])),
			median(allocs[p]), median(allocs[e]), median(rd[p]), median(cpu[o "/part=pass-noreadings"]),
			median(cpu[o "/part=sim"])
	}
}' "$raw" | tee "$out/pass.txt"
