#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make test: every stage CI runs, each timed, and one closing line whatever happens.
#
# Each stage prints "=== stage NAME: start HH:MM:SS UTC" and "=== stage NAME: ok|FAILED in Ns";
# the run ends with the stage table and, as its very last line, "N passed, N failed" over every
# stage: the top-level tests of each go test stage (counted by test/cmd/testreport, which under
# CI=true also counts a skip outside the benchmark packages as a failure), plus one for each
# stage that is not a test run (a build, a download). A stage whose prerequisite failed is not
# run and counts as one failure. A stage that names the tests it runs (node-imagefs,
# node-cgroupfs) also counts one failure for each named test that did not run (testreport's
# --expect-run), so a renamed test cannot leave its stage passing with fewer tests.
#
# Most stages run one after another. Three things overlap, because they wait on something else
# than the CPU or take only the CPU the timed tests leave (docs/ci.md has the measurements):
#   - the downloads (apt-get for the VM node, the tool modules' go mod download) run in the
#     background from the start;
#   - the checks (verify, test-image, test-dashboard, test-sbom, deploy-tools, deploy-lint, test-deploy: compilers and
#     linters, no timing in them) run in a lane of their own under nice 19 from the end of build
#     on, taking the CPU the timed tests leave, never theirs;
#   - e2e (about a quarter of one core: its tests mostly wait on grace periods and soaks) runs in
#     a lane beside the node's stages, from when the node's images are made (node-ready rewrites
#     nothing e2e runs after that). unit, which compiles, runs before both.
# Every go command runs with -trimpath, as make build does: the build, the tests and go vet then
# share one compile of each package in the build cache, where the flag apart made two (a cold
# run compiled client-go and its kin once for build and again for unit).
# The VM node's tests run as two stages, each its own go test process with its own control plane
# and VM: "node" (the one-disk node) and then "node-imagefs" (the node with a dedicated imagefs
# and swap). Not at once: on two cores each guest wants about one core, and two together ran
# every test about twice as slow and failed one (docs/ci.md).
# A lane's start and end lines are printed as they happen, its output whole when it ends
# (_output/test/lane-NAME.log).
#
# CI kills a run at 90 minutes. Every stage gets at most what is left of TEST_BUDGET (seconds,
# default 5400) less a margin, so a hang ends with go test's own timeout report (the goroutine
# dump names the test) or timeout(1) on a build, and this script still prints its table.
#
# TEST_STAGES (space-separated names) runs only those stages.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
export GOFLAGS="-trimpath${GOFLAGS:+ $GOFLAGS}"
budget=${TEST_BUDGET:-5400}
margin=${TEST_MARGIN:-150}
t0=$(date +%s)
deadline=$((t0 + budget - margin))
logs=_output/test
mkdir -p "$logs"
rm -f "$logs"/*.result "$logs"/*.rc "$logs/summary.txt"
# Start and end lines go to the run's own output even from a lane whose output is a file.
exec 3>&1

now() { date -u +%H:%M:%S; }
left() { echo $((deadline - $(date +%s))); }
# The timeout a stage gets: its own cap, but never past the deadline.
cap() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
say() { echo "$*"; if [ -n "${in_lane:-}" ]; then echo "$*" >&3; fi; }

wanted() { [ -z "${TEST_STAGES:-}" ] || [[ " $TEST_STAGES " == *" $1 "* ]]; }

# record NAME STATUS SECONDS PASSED FAILED SKIPPED: the stage's result, in a file, since lanes
# are subshells.
record() {
  echo "$2 $3 $4 $5 $6" >"$logs/$1.result"
  say "=== stage $1: $2 in $3s ($(now) UTC)"
}
status() { local r; read -r r _ 2>/dev/null <"$logs/$1.result" && echo "$r" || echo none; }

# needs NAME DEP...: true when every DEP ran and passed, or was left out by TEST_STAGES.
needs() {
  local name=$1 d; shift
  wanted "$name" || return 1
  for d in "$@"; do
    case $(status "$d") in FAILED | not-run)
      say "=== stage $name: not run, because $d failed"
      record "$name" not-run 0 0 1 0
      return 1 ;;
    esac
  done
}

# await NAME: until the stage NAME (of another lane) has a result, or it is not to run.
await() {
  wanted "$1" || return 0
  while [ ! -e "$logs/$1.result" ] && [ "$(left)" -gt 0 ]; do sleep 2; done
}

# step NAME MAXSECONDS CMD...: a stage that is not a test run; counts as one.
step() {
  local name=$1 max=$2 s rc; shift 2
  wanted "$name" || return 0
  s=$(date +%s)
  say "=== stage $name: start $(now) UTC"
  timeout --kill-after=30 "$(cap "$max")" "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && say "=== stage $name: stopped by its timeout"
  if [ "$rc" = 0 ]; then
    record "$name" ok $(($(date +%s) - s)) 1 0 0
  else
    record "$name" FAILED $(($(date +%s) - s)) 0 1 0
  fi
}

# gotest NAME MAXSECONDS DIR [--quiet] [--expect-run PATTERN] GO-TEST-ARGS...: go test -json
# through testreport. --expect-run gives testreport the stage's -run pattern when it lists test
# names (^(TestA|TestB)$): a name no test ran under (renamed, removed, behind another build tag)
# fails the stage, named, where it would pass with fewer tests.
gotest() {
  local name=$1 max=$2 dir=$3 s rc c; shift 3
  local -a ropts=()
  wanted "$name" || return 0
  while :; do
    case ${1:-} in
      --quiet) ropts+=(--quiet); shift ;;
      --expect-run) ropts+=(--expect-run "$2"); shift 2 ;;
      *) break ;;
    esac
  done
  s=$(date +%s)
  say "=== stage $name: start $(now) UTC"
  rm -f "$logs/$name.counts"
  # go test's timeout is the budget's; timeout(1) only backs it up, should the binary not exit.
  (cd "$dir" && timeout --kill-after=30 $(($(cap "$max") + 60)) \
    "$GO" test -json -count=1 -timeout "$(cap "$max")s" "$@" 2>&1) \
    | tee "$logs/$name.json" \
    | "$report" "${ropts[@]}" --allow-skip "$allow_skip" --counts "$logs/$name.counts"
  rc=${PIPESTATUS[0]}
  if [ -s "$logs/$name.counts" ]; then read -r -a c <"$logs/$name.counts"; else c=(0 1 0); fi
  # go test failed but no test did (a vet error, a killed binary): one failure.
  if [ "$rc" != 0 ] && [ "${c[1]}" = 0 ]; then c[1]=1; fi
  if [ "${c[1]}" = 0 ]; then
    record "$name" ok $(($(date +%s) - s)) "${c[0]}" 0 "${c[2]}"
  else
    record "$name" FAILED $(($(date +%s) - s)) "${c[0]}" "${c[1]}" "${c[2]}"
  fi
}

# background NAME MAXSECONDS CMD...: a job that waits on the network and the disk more than on
# the CPU; join NAME later waits for it and counts it as a stage.
declare -A bg_pid
background() {
  local name=$1 max=$2; shift 2
  say "=== background $name: start $(now) UTC (log $logs/$name.log)"
  ( s=$(date +%s); timeout --kill-after=30 "$(cap "$max")" "$@" >"$logs/$name.log" 2>&1; rc=$?
    echo "$rc $(($(date +%s) - s))" >"$logs/$name.rc" ) &
  bg_pid[$name]=$!
}
join() {
  local name=$1 s rc took
  [ -n "${bg_pid[$name]:-}" ] || return 0
  s=$(date +%s)
  wait "${bg_pid[$name]}"
  read -r rc took <"$logs/$name.rc" 2>/dev/null || { rc=1; took=0; }
  cat "$logs/$name.log"
  say "=== stage $name: ran ${took}s in the background, waited $(($(date +%s) - s))s for it"
  if [ "$rc" = 0 ]; then record "$name" ok "$took" 1 0 0; else record "$name" FAILED "$took" 0 1 0; fi
}

# lane NAME NICE FUNCTION: runs FUNCTION in the background, its output into lane-NAME.log.
declare -A lane_pid
lane() {
  local name=$1 n=$2 fn=$3
  say "=== lane $name: start $(now) UTC (output in $logs/lane-$name.log when it ends)"
  ( in_lane=$name; renice -n "$n" -p $BASHPID >/dev/null; "$fn" ) >"$logs/lane-$name.log" 2>&1 &
  lane_pid[$name]=$!
}
end_lane() {
  [ -n "${lane_pid[$1]:-}" ] || return 0
  wait "${lane_pid[$1]}"
  echo "=== lane $1: ended; its output:"
  cat "$logs/lane-$1.log"
  echo "=== lane $1: end of its output"
}

stages=(tools modules vm-prepare modules-tools build cluster-bins unit e2e node-ready node
  node-imagefs node-cgroupfs verify test-image test-dashboard test-sbom deploy-tools deploy-lint test-deploy)
finish() {
  local name r secs p f sk passed=0 failed=0 skipped=0
  echo
  echo "=== stages (total $(($(date +%s) - t0))s, started $(date -u -d "@$t0" +%H:%M:%S) UTC)"
  for name in "${stages[@]}"; do
    [ -e "$logs/$name.result" ] || continue
    read -r r secs p f sk <"$logs/$name.result"
    printf '%-16s %-8s %6ss %5s passed %3s failed\n' "$name" "$r" "$secs" "$p" "$f"
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + sk))
  done
  failed=$((failed + ${1:-0}))
  echo "$passed passed, $failed failed$([ "$skipped" != 0 ] && echo ", $skipped skipped")" | tee "$logs/summary.txt"
  [ "$failed" = 0 ]
  exit
}
trap 'echo "=== interrupted"; kill $(jobs -p) 2>/dev/null; finish 1' INT TERM

# Benchmarks asked for by name skip on purpose, in CI too.
allow_skip=github.com/evictd/evictd/test/bench
report=$PWD/_output/bin/testreport

rm -f "$report"
step tools 600 "$GO" build -o "$report" ./test/cmd/testreport
if [ ! -x "$report" ]; then
  echo "=== cannot build test/cmd/testreport: no stage can be counted"
  finish 1
fi

# The VM node's pieces (apt-get of QEMU, the Debian kernel, runc and the CNI plugins:
# hack/vm/prepare.sh) and the other modules' downloads (the control plane's is the largest).
if wanted node-ready; then background vm-prepare 1800 hack/vm/prepare.sh _output/vm; fi
if wanted cluster-bins; then
  background modules-tools 1800 bash -c "set -e; for m in hack/cluster hack/node hack/image hack/dashboard hack/sbom test/deploy; do \
    echo \"go mod download in \$m\"; (cd \$m && $GO mod download); done"
fi
step modules 1800 "$GO" mod download

# Under nice 19 a check waits for the CPU the tests leave it, so its own cap is the budget's.
checks() {
  step verify "$budget" make --no-print-directory verify
  gotest test-image "$budget" hack/image --quiet ./...
  gotest test-dashboard "$budget" hack/dashboard --quiet ./...
  gotest test-sbom "$budget" hack/sbom --quiet ./...
  await cluster-bins
  if needs test-deploy cluster-bins verify; then
    # The real tools test-deploy runs: promtool for the alerts' unit tests (TestPromtoolRules;
    # Debian's, from the package lists vm-prepare's apt-get update fetched) and helm for the
    # documented commands (TestDocCommands).
    await vm-prepare
    step deploy-tools "$budget" bash -c "hack/get-promtool.sh _output/tools && make --no-print-directory _output/tools/helm"
    step deploy-lint "$budget" bash -c "cd test/deploy && $GO vet ./... && ../../_output/tools/staticcheck ./..."
    gotest test-deploy "$budget" test/deploy --quiet ./...
  fi
}
# Both nodes of the suite run the systemd cgroup driver, as kubeadm and the distributions do
# (systemd as the guest's PID 1, containerd and the kubelet as its units); the node-cgroupfs stage
# boots the one-disk node again with the cgroupfs driver for its layout, parity with the kubelet and
# one eviction beside protected pods. EVICTD_NODE_CGROUP_DRIVER picks a node's driver.
#
# The tests of the node with a dedicated imagefs and swap (test/vmnode/node_7 to node_9), run by
# node-imagefs in a fresh process (a fresh control plane, no node before its own); the one-disk
# node's process skips them and runs everything else, a test added there included.
# E2E_NODE_RUN (a go test -run pattern) narrows all three.
imagefs_tests=(TestNodeDedicatedImageFs TestNodeSwapRanking TestNodeStallThrash TestNodeBusyNoStall)
cgroupfs_tests=(TestNodeCgroupLayout TestNodeParity TestNodeProtectedPods)
# The one-disk node's systemd process skips these too: the cgroupfs node runs them, and nothing in
# them depends on the driver but the cgroups evictd reads, which every other test reads on systemd.
# TestNodeProtectedPods (static, critical and PDB-guarded pods, the brake) took 225 s more on systemd.
cgroupfs_only=(TestNodeProtectedPods)
anchored() { local IFS='|'; echo "^($*)\$"; }
# node_tests NAME [--expect-run PATTERN] GO-TEST-ARGS...
node_tests() {
  local name=$1; shift
  local -a expect=()
  if [ "${1:-}" = --expect-run ]; then expect=(--expect-run "$2"); shift 2; fi
  needs "$name" node-ready && gotest "$name" 4800 . "${expect[@]}" -tags vmnode "$@" ./test/vmnode
}
# named NAME DRIVER TESTS...: a node stage that runs the tests it names, and fails for any of
# them that did not run.
named() {
  local name=$1 driver=$2 pattern run; shift 2
  mapfile -t run < <(narrowed "$@")
  [ "${#run[@]}" -gt 0 ] || return 0
  pattern=$(anchored "${run[@]}")
  EVICTD_NODE_CGROUP_DRIVER=$driver node_tests "$name" --expect-run "$pattern" -run "$pattern"
}
# narrowed NAME...: the names E2E_NODE_RUN matches, all of them without it.
narrowed() {
  if [ -n "${E2E_NODE_RUN:-}" ]; then
    printf '%s\n' "$@" | grep -E -e "$E2E_NODE_RUN" || true
  else
    printf '%s\n' "$@"
  fi
}
# listed PATTERN: the test names of a -run pattern that only lists names (TestA|TestB,
# ^(TestA|TestB)$), one a line; nothing for any other pattern.
listed() {
  local p=$1
  p=${p#^}; p=${p%\$}; p=${p#(}; p=${p%)}
  [[ $p =~ ^[A-Za-z_][A-Za-z0-9_]*(\|[A-Za-z_][A-Za-z0-9_]*)*$ ]] && tr '|' '\n' <<<"$p"
}
# The one-disk node runs every test but the imagefs node's and cgroupfs_only; narrowed to a list of
# names, it fails for any of its own that did not run (a name another stage runs is left to it).
node_onedisk() {
  local -a own=() expect=()
  if [ -n "${E2E_NODE_RUN:-}" ]; then
    mapfile -t own < <(listed "$E2E_NODE_RUN" | grep -v -x -F -f <(printf '%s\n' "${imagefs_tests[@]}" "${cgroupfs_only[@]}") || true)
    [ "${#own[@]}" -gt 0 ] && expect=(--expect-run "$(anchored "${own[@]}")")
  fi
  EVICTD_NODE_CGROUP_DRIVER=systemd node_tests node "${expect[@]}" ${E2E_NODE_RUN:+-run "$E2E_NODE_RUN"} \
    -skip "$(anchored "${imagefs_tests[@]}" "${cgroupfs_only[@]}")"
}
node_imagefs() { named node-imagefs systemd "${imagefs_tests[@]}"; }
node_cgroupfs() { named node-cgroupfs cgroupfs "${cgroupfs_tests[@]}"; }
any_wanted() { local s; for s in "$@"; do wanted "$s" && return 0; done; return 1; }

step build 1200 make --no-print-directory build
any_wanted verify test-image test-dashboard test-sbom deploy-tools deploy-lint test-deploy && lane checks 19 checks
join modules-tools
step cluster-bins 2400 make --no-print-directory cluster-bins
# Four packages at a time: their tests mostly wait (API outages, grace periods, stalls), so on two
# cores the link of their binaries is what bounds it (go test -p 4: 58-61 s against 87 s at -p 2).
# shellcheck disable=SC2046
if wanted unit; then gotest unit 1800 . --quiet -p 4 $("$GO" list ./... | grep -v /test/e2e); fi
join vm-prepare
needs node-ready vm-prepare && step node-ready 1800 make --no-print-directory node-ready
e2e() { gotest e2e 3000 . -p 1 ./test/e2e/...; }
needs e2e build cluster-bins && lane e2e 0 e2e
node_onedisk
node_imagefs
node_cgroupfs
end_lane e2e
end_lane checks
finish
