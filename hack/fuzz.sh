#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every fuzz target of the module for FUZZTIME each.
#
#   hack/fuzz.sh [FUZZTIME]      (make fuzz runs it with 60s)
#
# Targets are discovered, not listed: every package's "func Fuzz*" as
# `go test -list` reports them. A failing input is kept by the go tool under
# the package's testdata/fuzz/<target>/, where it becomes a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime="${1:-60s}"
GO="${GO:-go}"
ran=0
failed=()
for pkg in $("$GO" list ./...); do
	if ! list=$("$GO" test -list '^Fuzz' "$pkg" 2>&1); then
		echo "$list"
		failed+=("$pkg: go test -list failed")
		continue
	fi
	targets=$(printf '%s\n' "$list" | grep '^Fuzz' || true)
	for t in $targets; do
		echo "== $pkg $t for $fuzztime"
		ran=$((ran + 1))
		if ! "$GO" test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime 2s "$pkg"; then
			failed+=("$pkg $t")
		fi
	done
done
echo
if [ "$ran" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz: $ran targets run for $fuzztime each, ${#failed[@]} failed"
for f in "${failed[@]}"; do
	echo "FAIL: $f"
done
[ "${#failed[@]}" -eq 0 ]
