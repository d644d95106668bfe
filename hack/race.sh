#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The race detector over the packages whose state goroutines share:
#
#   hack/race.sh [PACKAGE...]      (make race; no argument: the list below)
#
# go test -race -count=1 over them, its go test -json stream in
# _output/race/race.json, counted by test/cmd/testreport. The run fails
# (exit 1) on any DATA RACE report, any failed or skipped test, and its last
# lines say which: testreport's failures and count, "race: N DATA RACE
# reports" with the tests that reported them, then "race: ok" or
# "race: FAILED".
# Exit 2: the race detector cannot run here (no C compiler: -race needs cgo).
#
# -race needs cgo, so this script sets CGO_ENABLED=1 whatever the caller
# says (make exports 0 for the static binaries). Like hack/test.sh it runs
# with -trimpath added to the caller's GOFLAGS, so that a race build's
# packages stay in the build cache beside the others'. RACE_PARALLEL sets
# go test -p (default 4: the slow packages' tests mostly wait, as in the
# unit stage), RACE_TIMEOUT each test binary's -timeout (default 20m).
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
export GOFLAGS="-trimpath${GOFLAGS:+ $GOFLAGS}"
export CGO_ENABLED=1

# Each package is here because goroutines share its state, in the agent or
# in its tests:
pkgs=(
  ./pkg/agent/...        # the loop and its inbox (thresholds swapped in by the placer, the brake, the lease),
                         # podwatch's informer handlers, the pods in flight (inflight) and the lead time,
                         # each written by another goroutine than the loop that reads it
  ./pkg/nodebrake        # the brake's state, set by its watch, read by the loop
  ./pkg/nodelease        # the lease runner's renewing goroutine and the state the loop reads
  ./pkg/kubeletplace/... # the placer: the kubelet watch's placement, read by the loop and the HTTP view
  ./pkg/trace/...        # the recorder: passes from the loop, exports from the HTTP handler
  ./cmd/evictd/app/...   # evictd run's goroutines (loop, lease, servers, signals) and their shutdown
  ./pkg/metrics          # the metrics server, scraping what the loop writes
  ./pkg/evict            # the eviction calls' goroutines, their budget and the event writer's queue
  ./pkg/evictreq         # the EvictionRequest API's probe state and open requests, shared by the calls
  ./pkg/healthz          # the checks, added while the probe handler serves them
  ./pkg/authdelegate     # the delegated authn/authz caches, shared by the HTTP handlers
  ./pkg/kube/...         # the client's request metrics, registered once from any request's goroutine
  ./pkg/pressure/...     # the observer (Observe serialized, its layout read by others), the wake-up set's waiter
  ./pkg/shadow           # the shadow recorder: the loop, the pod informer and the server
)
[ "$#" -gt 0 ] && pkgs=("$@")

if ! command -v "$("$GO" env CC)" >/dev/null 2>&1; then
  echo "race: no C compiler ($("$GO" env CC)): go test -race needs cgo; install gcc" >&2
  exit 2
fi

logs=_output/race
mkdir -p "$logs"
log=$logs/race.json
"$GO" build -o "$logs/testreport" ./test/cmd/testreport || { echo "race: cannot build test/cmd/testreport" >&2; exit 1; }
s=$(date +%s)
echo "=== race: go test -race -count=1 -p ${RACE_PARALLEL:-4} (GOFLAGS=$GOFLAGS) over ${pkgs[*]}"
# Counted as every stage's tests are (test/cmd/testreport): a test that started and never
# finished fails, and so does a skip (--ci), since nothing here needs what a host may lack but gcc.
"$GO" test -json -race -count=1 -p "${RACE_PARALLEL:-4}" -timeout "${RACE_TIMEOUT:-20m}" "${pkgs[@]}" 2>&1 |
  tee "$log" | "$logs/testreport" --quiet --ci
st=("${PIPESTATUS[@]}")
rc=${st[0]}
[ "${st[2]}" != 0 ] && [ "$rc" = 0 ] && rc=1

echo
races=$(grep -o 'WARNING: DATA RACE' "$log" | wc -l)
if [ "$races" != 0 ]; then
  echo "race: $races DATA RACE reports; the tests that reported them:"
  grep -oE '"Output":"\s*--- FAIL: [^ ]+' "$log" | sed 's/.*--- FAIL: /  /' || echo "  (none failed: the reports came outside a test)"
fi
echo "race: ${#pkgs[@]} package patterns in $(($(date +%s) - s))s, $races DATA RACE reports, go test and its count exit $rc (go test -json stream $log)"
if [ "$rc" != 0 ] || [ "$races" != 0 ]; then
  echo "race: FAILED"
  exit 1
fi
echo "race: ok"
