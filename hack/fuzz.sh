#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every fuzz target of the module for FUZZTIME each.
#
#   hack/fuzz.sh [FUZZTIME] [PACKAGE...]    (default 10s each; make fuzz runs it with 60s)
#
# FUZZTIME is go test's -fuzztime: a duration (10s) or a count of inputs
# (5000x). PACKAGE narrows the run (default ./...).
#
# Targets are discovered, not listed: every "func FuzzXxx(f *testing.F)" in the test files
# go list gives each package. go test -fuzz builds one instrumented test
# binary for the one target it runs; here each package's binary is built
# once (go test -c -fuzz) and runs each of its targets in turn, as go test
# would run it: in the package's directory, its corpus in the build cache's
# fuzz directory. A failing input is kept under the package's
# testdata/fuzz/<target>/, where it becomes a regression test that go test
# runs with the unit tests; the run then fails.
#
# The run ends with "fuzz: N targets ... K failed" and exits 1 when a target
# failed (a finding, or its package did not build) or there is none.
# -trimpath is added to the caller's GOFLAGS, as hack/test.sh does.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-${FUZZTIME:-10s}}
[ "$#" -gt 0 ] && shift
GO=${GO:-go}
export GOFLAGS="-trimpath${GOFLAGS:+ $GOFLAGS}"
minimize=${FUZZMINIMIZETIME:-2s}
bins=_output/fuzz
mkdir -p "$bins"
fuzzcache=$("$GO" env GOCACHE)/fuzz

# fuzz_target PKG DIR BIN TARGET: runs one target for FUZZTIME. Go's fuzzing coordinator can end
# a duration-bound run that found nothing with "context deadline exceeded" and a failure, when
# its deadline fires while a worker's input is in flight, more often on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27). A finding always writes its input under
# testdata/fuzz/TARGET; a run that failed with that line alone and wrote no input is run once
# more, and its second run decides.
fuzz_target() {
  local pkg=$1 dir=$2 bin=$3 t=$4 out before try
  out=$(mktemp)
  for try in 1 2; do
    echo "== $pkg $t for $fuzztime"
    before=$(find "$dir/testdata/fuzz/$t" -type f 2>/dev/null | wc -l)
    (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${t}\$" -test.fuzztime "$fuzztime" \
      -test.fuzzminimizetime "$minimize" -test.fuzzcachedir "$fuzzcache/$pkg" -test.paniconexit0) 2>&1 | tee "$out"
    if [ "${PIPESTATUS[0]}" = 0 ]; then
      rm -f "$out"
      return 0
    fi
    if [ "$try" = 1 ] && [ "$(find "$dir/testdata/fuzz/$t" -type f 2>/dev/null | wc -l)" = "$before" ] &&
      grep -A1 -x -- "--- FAIL: $t ([0-9.]*s)" "$out" | tail -n1 | grep -qx '    context deadline exceeded'; then
      echo "== $pkg $t: ended on the fuzzing coordinator's deadline with no input written (go.dev/issue/75804): once more"
      continue
    fi
    rm -f "$out"
    return 1
  done
}

t0=$(date +%s)
built=0
ran=0
failed=()
# One line a package: its import path, its directory and its test files.
listing=$("$GO" list -f '{{.ImportPath}} {{.Dir}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}' "${@:-./...}") || {
  echo "fuzz: go list failed" >&2
  exit 1
}
while read -r pkg dir files; do
  [ -n "$files" ] || continue
  # shellcheck disable=SC2086 # the file names are go list's, without spaces
  targets=$(cd "$dir" && sed -n -E 's/^func (Fuzz[A-Za-z0-9_]*)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\).*/\1/p' $files | sort -u)
  [ -n "$targets" ] || continue
  bin=$PWD/$bins/$(echo "$pkg" | tr / _).test
  s=$(date +%s)
  echo "== $pkg: building its fuzzing test binary"
  if ! "$GO" test -c -fuzz=. -o "$bin" "$pkg"; then
    for t in $targets; do failed+=("$pkg $t: its test binary did not build"); done
    continue
  fi
  built=$((built + $(date +%s) - s))
  for t in $targets; do
    ran=$((ran + 1))
    if ! fuzz_target "$pkg" "$dir" "$bin" "$t"; then
      failed+=("$pkg $t (its failing input, if any, is under $dir/testdata/fuzz/$t/)")
    fi
  done
done <<<"$listing"
echo
if [ "$ran" -eq 0 ] && [ "${#failed[@]}" -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz: $ran targets run for $fuzztime each in $(($(date +%s) - t0))s (${built}s of it building), ${#failed[@]} failed"
for f in "${failed[@]}"; do
  echo "FAIL: $f"
done
[ "${#failed[@]}" -eq 0 ]
