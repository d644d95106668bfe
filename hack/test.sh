#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make test and make test-node: the stages of one tier, each timed, and one closing line whatever
# happens. TEST_TIER picks the tier (docs/testing.md):
#   gate (make test, CI's): static checks, unit, the host e2e suite, and the node smoke: one boot
#        of the cgroup v2 guest, evictd installed from the chart, parity and one eviction;
#   node (make test-node): every other node test, on the one-disk, imagefs and cgroupfs nodes;
#        the race detector and the fuzz targets on the host beside them.
#
# Each stage prints "=== stage NAME: start HH:MM:SS UTC" and "=== stage NAME: ok|FAILED in Ns";
# the run ends with the stage table and, as its very last line, "N passed, N failed" over every
# stage: the top-level tests of each go test stage (counted by test/cmd/testreport, which under
# CI=true also counts a skip outside the benchmark packages as a failure), plus one for each
# stage that is not a test run (a build, a download). A stage whose prerequisite failed is not
# run and counts as one failure. A stage that names the tests it runs (node-smoke, node,
# node-imagefs, node-cgroupfs, e2e) also counts one failure for each named test that did not run
# (testreport's --expect-run), so a renamed test cannot leave its stage passing with fewer tests.
#
# Most stages run one after another. Three things overlap, because they wait on something else
# than the CPU or take only the CPU the tests leave:
#   - the downloads (apt-get for the VM node, the tool modules' go mod download) run in the
#     background from the start;
#   - the checks run in two lanes under nice 19 from the end of build on, taking the CPU the tests
#     leave: verify and deploy-lint (gofmt, go vet, staticcheck) in one, test-image,
#     test-dashboard, test-sbom, deploy-tools and test-deploy in the other;
#   - e2e runs in a lane beside unit, node-ready and the node smoke, from when the control plane
#     and helm are built: its tests mostly wait (grace periods, soaks, evictions), so E2E_WORKERS
#     (default 3) processes run them, each taking the next test from one queue, one test a process.
# Every go command runs with -trimpath, as make build does: the build, the tests and go vet then
# share one compile of each package in the build cache.
# A lane's start and end lines are printed as they happen, its output whole when it ends
# (_output/test/lane-NAME.log).
#
# CI kills a run at 90 minutes. Every stage gets at most what is left of TEST_BUDGET (seconds,
# default 5400) less a margin, so a hang ends with go test's own timeout report (the goroutine
# dump names the test) or timeout(1) on a build, and this script still prints its table.
#
# Every stage the run should have run ends in a result: one that has none at the end (its lane
# died, a function returned early) counts as one failure in the table ("no result"), and so does
# a lane that was killed.
#
# TEST_STAGES (space-separated names) runs only those stages of the tier. TEST_LOGS (default
# _output/test) is where the run keeps its logs, results and testreport.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
tier=${TEST_TIER:-gate}
case $tier in
  gate | node) ;;
  *) echo "hack/test.sh: TEST_TIER=$tier: want gate (make test) or node (make test-node)" >&2; exit 2 ;;
esac
export GOFLAGS="-trimpath${GOFLAGS:+ $GOFLAGS}"
budget=${TEST_BUDGET:-5400}
margin=${TEST_MARGIN:-150}
t0=$(date +%s)
deadline=$((t0 + budget - margin))
logs=${TEST_LOGS:-_output/test}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
rm -f "$logs"/*.result "$logs"/*.rc "$logs"/*.cpu "$logs/summary.txt"
# Start and end lines go to the run's own output even from a lane whose output is a file.
exec 3>&1

now() { date -u +%H:%M:%S; }
left() { echo $((deadline - $(date +%s))); }
# The timeout a stage gets: its own cap, but never past the deadline.
cap() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
say() { echo "$*"; if [ -n "${in_lane:-}" ]; then echo "$*" >&3; fi; }

# The stages of each tier, in the order of the closing table.
if [ "$tier" = gate ]; then
  stages=(tools modules vm-prepare modules-tools build cluster-bins helm e2e unit node-ready node-smoke
    verify test-image test-dashboard test-sbom deploy-tools deploy-lint test-deploy)
else
  stages=(tools modules vm-prepare modules-tools build cluster-bins helm node-ready node node-imagefs
    node-cgroupfs host-v2 node-releases race fuzz)
fi
# wanted NAME: the stage is the tier's, and TEST_STAGES (when set) names it.
wanted() {
  [[ " ${stages[*]} " == *" $1 "* ]] || return 1
  [ -z "${TEST_STAGES:-}" ] || [[ " $TEST_STAGES " == *" $1 "* ]]
}

# The CPU time each stage took (user and system, of its processes and every descendant that was
# waited for: the go commands, the compilers, the test binaries, the control planes and guests
# they start). Where the CPU went says more than the wall time when stages share the machine's
# cores. A shell's children's time also grows when it reaps a lane or a background job that ends
# meanwhile, so a stage's command runs in a subshell of its own (counted), whose only children are
# the stage's; a lane's own stages (e2e, host-v2) may instead cpu_mark their lane's shell, which
# has no other children.
hz=$(getconf CLK_TCK)
cpu_children() { local f; read -r -a f <"/proc/$BASHPID/stat"; cpu_ticks=$((f[15] + f[16])); }
cpu_mark() { cpu_children; cpu_mark_ticks=$cpu_ticks; }
# counted NAME CMD...: runs CMD in a subshell and leaves the CPU time it took for record.
counted() {
  local name=$1; shift
  ( "$@"; rc=$?; cpu_children; echo "$cpu_ticks" >"$logs/$name.cpu"; exit "$rc" )
}
# machine_ticks: the machine's busy and total CPU time since boot (/proc/stat), in clock ticks.
machine_ticks() {
  local label user nice sys idle iowait rest
  read -r label user nice sys idle iowait rest </proc/stat
  local -a r; read -r -a r <<<"$rest"
  local other=$((r[0] + r[1] + r[2]))
  echo "$((user + nice + sys + other)) $((user + nice + sys + other + idle + iowait))"
}
machine0=$(machine_ticks)

# record NAME STATUS SECONDS PASSED FAILED SKIPPED [CPUSECONDS]: the stage's result, in a file,
# since lanes are subshells. Without CPUSECONDS, what counted left, or the CPU time since this
# shell's cpu_mark.
record() {
  local cpu=${7:-} t
  if [ -z "$cpu" ] && read -r t 2>/dev/null <"$logs/$1.cpu"; then
    cpu=$((t / hz))
  elif [ -z "$cpu" ] && [ -n "${cpu_mark_ticks:-}" ]; then
    cpu_children
    cpu=$(((cpu_ticks - cpu_mark_ticks) / hz))
  fi
  rm -f "$logs/$1.cpu"
  cpu_mark_ticks=
  echo "$2 $3 $4 $5 $6 ${cpu:--}" >"$logs/$1.result"
  say "=== stage $1: $2 in $3s${cpu:+, ${cpu}s of CPU} ($(now) UTC)"
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
  counted "$name" timeout --kill-after=30 "$(cap "$max")" "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && say "=== stage $name: stopped by its timeout"
  if [ "$rc" = 0 ]; then
    record "$name" ok $(($(date +%s) - s)) 1 0 0
  else
    record "$name" FAILED $(($(date +%s) - s)) 0 1 0
  fi
}

# go test vets each package it tests with a subset of go vet's analyzers, and every dependency
# too for the facts they export: keyed apart from go vet's own run in the build cache, that is the
# same type-checking done twice. When the run has go vet's whole run over the same packages (verify
# over the main module, deploy-lint over test/deploy), go test does not vet again (-vet=off): a
# vet finding still fails the run, in that stage.
main_vet=(); wanted verify && main_vet=(-vet=off)
deploy_vet=(); wanted deploy-lint && deploy_vet=(-vet=off)

# gotest NAME MAXSECONDS DIR [--quiet] [--expect-run PATTERN] GO-TEST-ARGS...: go test -json
# through testreport. --expect-run gives testreport the stage's -run pattern when it lists test
# names (^(TestA|TestB)$): a name no test ran under (renamed, removed, behind another build tag)
# fails the stage, named, where it would pass with fewer tests.
gotest() {
  local name=$1 max=$2 dir=$3 s; shift 3
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
  (cd "$dir" && counted "$name" timeout --kill-after=30 $(($(cap "$max") + 60)) \
    "$GO" test -json -count=1 -timeout "$(cap "$max")s" "$@" 2>&1) \
    | tee "$logs/$name.json" \
    | "$report" "${ropts[@]}" --allow-skip "$allow_skip" --counts "$logs/$name.counts"
  record_counted "$name" "$s" "${PIPESTATUS[0]}"
}

# record_counted NAME START RC: a go test stage's result from testreport's counts; RC is how its
# tests' run ended: a failure that no test counted (a vet error, a killed binary) is one failure.
record_counted() {
  local name=$1 s=$2 rc=$3 c
  if [ -s "$logs/$name.counts" ]; then read -r -a c <"$logs/$name.counts"; else c=(0 1 0); fi
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
    cpu_children
    echo "$rc $(($(date +%s) - s)) $((cpu_ticks / hz))" >"$logs/$name.rc" ) &
  bg_pid[$name]=$!
}
join() {
  local name=$1 s rc took cpu
  [ -n "${bg_pid[$name]:-}" ] || return 0
  s=$(date +%s)
  wait "${bg_pid[$name]}"
  read -r rc took cpu <"$logs/$name.rc" 2>/dev/null || { rc=1; took=0; cpu=-; }
  cat "$logs/$name.log"
  say "=== stage $name: ran ${took}s in the background, waited $(($(date +%s) - s))s for it"
  if [ "$rc" = 0 ]; then record "$name" ok "$took" 1 0 0 "$cpu"; else record "$name" FAILED "$took" 0 1 0 "$cpu"; fi
}

# lane NAME NICE FUNCTION: runs FUNCTION in the background, its output into lane-NAME.log.
declare -A lane_pid
lane() {
  local name=$1 n=$2 fn=$3
  say "=== lane $name: start $(now) UTC (output in $logs/lane-$name.log when it ends)"
  ( in_lane=$name; renice -n "$n" -p $BASHPID >/dev/null; "$fn" ) >"$logs/lane-$name.log" 2>&1 &
  lane_pid[$name]=$!
}
lane_killed=0
end_lane() {
  local rc
  [ -n "${lane_pid[$1]:-}" ] || return 0
  wait "${lane_pid[$1]}"
  rc=$?
  echo "=== lane $1: ended; its output:"
  cat "$logs/lane-$1.log"
  echo "=== lane $1: end of its output"
  if [ "$rc" -gt 128 ]; then
    echo "=== lane $1: killed by signal $((rc - 128)): one failure"
    lane_killed=$((lane_killed + 1))
  fi
}

# not_needed NAME: a wanted stage that has nothing to run (E2E_NODE_RUN names none of its tests):
# a result, so that finish does not take it for a stage that died.
not_needed() { echo "none 0 0 0 0" >"$logs/$1.result"; }

finish() {
  local name r secs p f sk cpu passed=0 failed=0 skipped=0 cpus=0
  echo
  echo "=== stages (total $(($(date +%s) - t0))s, started $(date -u -d "@$t0" +%H:%M:%S) UTC; cpu: the stage's CPU seconds)"
  for name in "${stages[@]}"; do
    if [ ! -e "$logs/$name.result" ]; then
      # node-releases names the build-V and node-V stages it adds; an interrupted run stops early.
      if [ "$name" != node-releases ] && wanted "$name" && [ "${interrupted:-}" != 1 ]; then
        printf '%-16s %-8s %6ss %6ss cpu %5s passed %3s failed (no result: its lane died or it never ran)\n' "$name" FAILED - - 0 1
        failed=$((failed + 1))
      fi
      continue
    fi
    read -r r secs p f sk cpu <"$logs/$name.result"
    [ "$r" = none ] && continue
    printf '%-16s %-8s %6ss %6ss cpu %5s passed %3s failed\n' "$name" "$r" "$secs" "${cpu:--}" "$p" "$f"
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + sk))
    [[ ${cpu:-} =~ ^[0-9]+$ ]] && cpus=$((cpus + cpu))
  done
  # Whether the run was bound by the CPU: how busy the machine's CPUs were over it (this run and
  # anything else on the machine), against what its stages used.
  local b0 n0 b1 n1
  read -r b0 n0 <<<"$machine0"
  read -r b1 n1 <<<"$(machine_ticks)"
  if [ "$n1" -gt "$n0" ]; then
    echo "=== CPU: the stages used ${cpus}s; the machine's $(nproc) CPUs were busy $(((b1 - b0) * 100 / (n1 - n0)))% of the run ($(((b1 - b0) / hz))s of $(((n1 - n0) / hz))s)"
  fi
  failed=$((failed + lane_killed + ${1:-0}))
  echo "$passed passed, $failed failed$([ "$skipped" != 0 ] && echo ", $skipped skipped")" | tee "$logs/summary.txt"
  [ "$failed" = 0 ]
  exit
}
trap 'echo "=== interrupted"; interrupted=1; kill $(jobs -p) 2>/dev/null; finish 1' INT TERM

# Benchmarks asked for by name skip on purpose, in CI too.
allow_skip=github.com/evictd/evictd/test/bench
report=$logs/testreport

rm -f "$report"
step tools 600 "$GO" build -o "$report" ./test/cmd/testreport
if [ ! -x "$report" ]; then
  echo "=== cannot build test/cmd/testreport: no stage can be counted"
  finish 1
fi

# The VM node's pieces (apt-get of QEMU, the Debian kernel, runc and the CNI plugins:
# hack/vm/prepare.sh) and the other modules' downloads (the control plane's is the largest).
if wanted node-ready || wanted vm-prepare; then background vm-prepare 1800 hack/vm/prepare.sh _output/vm; fi
if wanted cluster-bins || wanted modules-tools; then
  background modules-tools 1800 bash -c "set -e; for m in hack/cluster hack/node hack/image hack/dashboard hack/sbom test/deploy; do \
    echo \"go mod download in \$m\"; (cd \$m && $GO mod download); done"
fi
step modules 1800 "$GO" mod download

# Under nice 19 a check waits for the CPU the tests leave it, so its own cap is the budget's.
# Two lanes, so that no check waits for another it does not need: staticcheck over the module
# (verify, then deploy-lint, which uses the staticcheck verify builds) in one; the chart, image,
# dashboard and SBOM tests in the other, test-deploy as soon as its tools are there.
checks() {
  step verify "$budget" make --no-print-directory verify
  step deploy-lint "$budget" bash -c "make --no-print-directory _output/tools/staticcheck && cd test/deploy && $GO vet ./... && ../../_output/tools/staticcheck ./..."
}
deploy() {
  gotest test-image "$budget" hack/image --quiet ./...
  gotest test-dashboard "$budget" hack/dashboard --quiet ./...
  gotest test-sbom "$budget" hack/sbom --quiet ./...
  await cluster-bins
  if needs test-deploy cluster-bins; then
    # The real tools test-deploy runs: promtool for the alerts' unit tests (TestPromtoolRules;
    # Debian's, from the package lists vm-prepare's apt-get update fetched) and helm for the
    # documented commands (TestDocCommands).
    await vm-prepare
    # The helm stage builds helm: not both at once.
    await helm
    step deploy-tools "$budget" bash -c "hack/get-promtool.sh _output/tools && make --no-print-directory _output/tools/helm"
    needs test-deploy deploy-tools && gotest test-deploy "$budget" test/deploy --quiet "${deploy_vet[@]}" ./...
  elif wanted deploy-tools; then
    record deploy-tools not-run 0 0 1 0 # not run either, for the same reason
  fi
}
# make test-node: both nodes of the suite run the systemd cgroup driver, as kubeadm and the
# distributions do (systemd as the guest's PID 1, containerd and the kubelet as its units); the
# node-cgroupfs stage boots the one-disk node again with the cgroupfs driver for its layout, parity
# with the kubelet and one eviction beside protected pods. EVICTD_NODE_CGROUP_DRIVER picks a node's
# driver.
#
# The tests of the node with a dedicated imagefs and swap (test/vmnode/node_7 to node_9), run by
# node-imagefs in a fresh process (a fresh control plane, no node before its own); the one-disk
# node's process skips them and runs everything else, a test added there included.
# E2E_NODE_RUN (a go test -run pattern) narrows the node stages of either tier.
imagefs_tests=(TestNodeDedicatedImageFs TestNodeSwapRanking TestNodeStallThrash TestNodeBusyNoStall)
cgroupfs_tests=(TestNodeCgroupLayout TestNodeParity TestNodeProtectedPods)
# The one-disk node's systemd process skips these too: the cgroupfs node runs them, and nothing in
# them depends on the driver but the cgroups evictd reads, which every other test reads on systemd.
# TestNodeProtectedPods (static, critical and PDB-guarded pods, the brake) took 225 s more on systemd.
# TestNodeParity's check runs on systemd twice besides: in make test's node smoke (checkParity, on
# this release and driver, through the chart's mounts) and on each other release's node; on the
# one-disk node it took 135 s of the tier's CPU-bound 40 minutes.
cgroupfs_only=(TestNodeProtectedPods TestNodeParity)
# make test's node smoke, alone on its node: the chart's install would collide with the kustomize
# install the other node tests share.
smoke_tests=(TestNodeSmoke)
# The node smoke's stage also runs the package's checks that need its build tag but no guest.
tagged_checks=(TestSelects TestContainerdConfigAsContainerdReadsIt)
# node-releases: the smoke of other Kubernetes releases (make e2e-node-smoke): their control plane,
# etcd and kubelet, built from Go modules (hack/build-cluster-version.sh; kept in the machine's
# cache), with parity and one eviction beside protected pods.
release_tests=(TestNodeParity TestNodeProtectedPods)
read -r -a releases <<<"${KUBE_RELEASES-1.36.3}"
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
  if [ "${#run[@]}" = 0 ]; then wanted "$name" && not_needed "$name"; return 0; fi
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
# The one-disk node runs every test but the imagefs node's, cgroupfs_only and the smoke, and fails
# for any of them that did not run: they are listed from the package's test files as its test
# binary has them (the vmnode tag), so a test that drops out of the run (a -skip that catches more
# than it names, a run that stops early) cannot leave the stage green with fewer tests, and a test
# added to the package is expected at once. E2E_NODE_RUN narrows the list as go test -run narrows
# the run (its top-level part).
node_onedisk() {
  local skip list
  local -a own=() expect=()
  needs node node-ready || return 0
  skip=$(anchored "${imagefs_tests[@]}" "${cgroupfs_only[@]}" "${smoke_tests[@]}")
  if ! list=$(onedisk_tests); then
    say "=== stage node: cannot list its tests (go test -list ./test/vmnode, output above)"
    record node FAILED 0 0 1 0
    return
  fi
  [ -n "$list" ] && mapfile -t own <<<"$list"
  if [ "${#own[@]}" = 0 ]; then
    # E2E_NODE_RUN names none of this node's tests.
    if [ -n "${E2E_NODE_RUN:-}" ]; then not_needed node; return 0; fi
    say "=== stage node: go test -list ./test/vmnode lists none of its tests"
    record node FAILED 0 0 1 0
    return
  fi
  expect=(--expect-run "$(anchored "${own[@]}")")
  EVICTD_NODE_CGROUP_DRIVER=systemd node_tests node "${expect[@]}" ${E2E_NODE_RUN:+-run "$E2E_NODE_RUN"} -skip "$skip"
}
# onedisk_tests: the one-disk node's tests, one a line, as node_onedisk runs them; fails when the
# package cannot be listed.
onedisk_tests() {
  local list pattern=${E2E_NODE_RUN:-}
  pattern=${pattern%%/*}
  # An empty -list is no listing at all: go test would run the tests.
  list=$("$GO" test -tags vmnode -list "${pattern:-.}" ./test/vmnode) || { echo "$list" >&2; return 1; }
  grep -E '^Test' <<<"$list" | grep -v -x -F -f <(printf '%s\n' "${imagefs_tests[@]}" "${cgroupfs_only[@]}" "${smoke_tests[@]}") || true
}
node_imagefs() { named node-imagefs systemd "${imagefs_tests[@]}"; }
node_cgroupfs() { named node-cgroupfs cgroupfs "${cgroupfs_tests[@]}"; }
node_smoke() { named node-smoke systemd "${smoke_tests[@]}" "${tagged_checks[@]}"; }
# node_releases: for each release, its binaries (a step) and then its tests (a go test stage),
# each counted in the table as node-releases.
node_releases() {
  local v dir pattern run
  wanted node-releases || return 0
  mapfile -t run < <(narrowed "${release_tests[@]}")
  [ "${#run[@]}" -gt 0 ] || return 0
  pattern=$(anchored "${run[@]}")
  for v in "${releases[@]}"; do
    v=${v#v}
    dir=_output/bin-v$v
    stages+=("build-$v" "node-$v")
    # Named by TEST_STAGES when node-releases is.
    local TEST_STAGES=${TEST_STAGES:+$TEST_STAGES build-$v node-$v}
    needs "build-$v" node-ready && step "build-$v" 2400 hack/build-cluster-version.sh "$v" "$dir"
    needs "node-$v" "build-$v" && EVICTD_KUBE_BIN_DIR=$PWD/$dir EVICTD_NODE_CGROUP_DRIVER=systemd \
      gotest "node-$v" 2400 . --expect-run "$pattern" -tags vmnode -run "$pattern" ./test/vmnode
  done
}

# e2e: the host e2e suite. Each of its tests starts its own control plane and simulated nodes
# (their cgroups and directories named for the process) and mostly waits on grace periods, soaks
# and evictions, so E2E_WORKERS processes run them side by side: the tests are listed from one
# test binary a package into a queue, and each worker takes the next and runs it alone in a
# process of its own. One testreport reads every worker's output at the end and expects every
# listed test to have run.
e2e_workers=${E2E_WORKERS:-3}
# e2e_take DIR: the queue's next line, or nothing once it is empty.
e2e_take() {
  (
    flock 9
    n=$(cat "$1/next")
    echo $((n + 1)) >"$1/next"
    sed -n "$((n + 1))p" "$1/queue"
  ) 9>"$1/queue.lock"
}
# e2e_worker DIR N: runs the queue's tests one after another until it is empty.
e2e_worker() {
  local dir=$1 i=$2 line pdir bin ipath test ts tc max rc
  while line=$(e2e_take "$dir") && [ -n "$line" ]; do
    read -r pdir bin ipath test <<<"$line"
    ts=$(date +%s)
    cpu_children
    tc=$cpu_ticks
    max=$(cap 3000)
    # As go test runs a test binary: in its package's directory, its output through test2json.
    (cd "$pdir" && timeout --kill-after=30 $((max + 60)) "$GO" tool test2json -t -p "$ipath" \
      "$bin" -test.v=test2json -test.paniconexit0 -test.count=1 -test.timeout "${max}s" -test.run "^$test\$" 2>&1) \
      >>"$dir/worker-$i.json"
    rc=$?
    # How the run ended is part of the result (testreport --exits): a binary that exits non-zero
    # with no failure of its test in the stream still fails the stage.
    echo "$ipath $test $rc" >>"$dir/exits"
    cpu_children
    echo "e2e worker $i: $test ($ipath) took $(($(date +%s) - ts))s, $(((cpu_ticks - tc) / hz))s of CPU, exit status $rc"
  done
}
e2e() {
  local dir=$logs/e2e s pdir ipath bin i rc=0
  local -a names
  wanted e2e || return 0
  s=$(date +%s)
  cpu_mark
  say "=== stage e2e: start $(now) UTC ($e2e_workers workers)"
  rm -rf "$dir" "$logs/e2e.counts"
  mkdir -p "$dir/bin"
  : >"$dir/queue"
  : >"$dir/exits"
  echo 0 >"$dir/next"
  if "$GO" test -c "${main_vet[@]}" -o "$dir/bin/" ./test/e2e/... >"$dir/build.log" 2>&1; then
    while read -r pdir ipath; do
      bin=$dir/bin/${ipath##*/}.test
      [ -x "$bin" ] || continue
      (cd "$pdir" && "$bin" -test.list '^Test') | grep '^Test' | sed "s|^|$pdir $bin $ipath |" >>"$dir/queue" || rc=1
    done < <("$GO" list -f '{{.Dir}} {{.ImportPath}}' ./test/e2e/...)
  else
    rc=1
  fi
  if [ "$rc" != 0 ] || [ ! -s "$dir/queue" ]; then
    cat "$dir/build.log"
    say "=== stage e2e: cannot build or list its tests"
    record e2e FAILED $(($(date +%s) - s)) 0 1 0
    return
  fi
  for ((i = 1; i <= e2e_workers; i++)); do e2e_worker "$dir" "$i" & done
  wait
  mapfile -t names < <(cut -d' ' -f4 "$dir/queue")
  cat "$dir"/worker-*.json >"$logs/e2e.json"
  "$report" --expect-run "$(anchored "${names[@]}")" --exits "$dir/exits" --allow-skip "$allow_skip" \
    --counts "$logs/e2e.counts" <"$logs/e2e.json"
  record_counted e2e "$s" $?
}
# host-v2 (make test-node): the host tiers' memory tests on a cgroup v2-only host, in the VM guest
# booted with cgroup v1 off: make test-host-v2 as docs/testing.md shows it (hack/vm/host-v2.sh):
# the unit tests of the packages that touch cgroups and the host e2e tests that read the simulated
# node's memory. Its go test -json stream comes back to the host and is counted here as any
# stage's; the command's own failure (the guest did not boot, a binary did not build or exited
# non-zero) is one more.
host_v2() {
  local s rc
  needs host-v2 vm-prepare build cluster-bins || return 0
  s=$(date +%s)
  cpu_mark
  say "=== stage host-v2: start $(now) UTC"
  rm -f _output/host-v2/host-v2.json "$logs/host-v2.counts"
  HOST_V2_TIMEOUT=$(cap 3600) make --no-print-directory test-host-v2 2>&1 | tee "$logs/host-v2.log"
  rc=${PIPESTATUS[0]}
  if [ -s _output/host-v2/host-v2.json ]; then
    cp _output/host-v2/host-v2.json "$logs/host-v2.json"
    # expect-run holds --expect-run and its pattern, no space in either (host-v2.sh)
    "$report" --quiet --allow-skip "$allow_skip" $(cat _output/host-v2/expect-run 2>/dev/null) \
      --counts "$logs/host-v2.counts" <"$logs/host-v2.json"
    [ "$?" != 0 ] && rc=1
  elif [ "$rc" = 0 ]; then
    rc=1 # no stream at all is no proof
  fi
  record_counted host-v2 "$s" "$rc"
}
any_wanted() { local s; for s in "$@"; do wanted "$s" && return 0; done; return 1; }

step build 1200 make --no-print-directory build
any_wanted verify deploy-lint && lane checks 19 checks
# make test-node: the race detector over the packages whose state goroutines share
# (make race: hack/race.sh), then every fuzz target for FUZZTIME (default 10 s) each (make fuzz: hack/fuzz.sh): a DATA
# RACE report or a finding fails its stage; then host-v2, the host tiers in a guest of their own.
# Beside the node's stages: race and fuzz under nice 19, taking what the node's guest leaves;
# host-v2 at nice 0, its guest sharing the host's two cores with the node's rather than left only
# what that one leaves, since its tests run control planes against deadlines. Its guest gets one
# vCPU here (HOST_V2_CPUS, 2 when make test-host-v2 runs alone): two guests of two vCPUs each on
# two cores keep preempting each other's vCPUs, and a guest whose vCPU waits on a preempted one
# spins. With two vCPUs host-v2 took 1,815 s of CPU beside the node's stages, against 463 s of
# wall time alone, and the tier 2,516 s with the machine 95 % busy.
host_checks() {
  step race "$budget" make --no-print-directory race
  step fuzz "$budget" make --no-print-directory fuzz FUZZTIME="${FUZZTIME:-10s}"
  await vm-prepare
  await cluster-bins
  await node-ready
  (renice -n 0 -p $BASHPID >/dev/null; HOST_V2_CPUS=${HOST_V2_CPUS:-1} host_v2)
}
# E2E_NODE_RUN asks for some node tests only: none of them runs then.
if [ -n "${E2E_NODE_RUN:-}" ]; then
  for s in race fuzz host-v2; do wanted "$s" && not_needed "$s"; done
elif any_wanted race fuzz host-v2; then
  lane host-checks 19 host_checks
fi
any_wanted test-image test-dashboard test-sbom deploy-tools test-deploy && lane deploy 19 deploy
join modules-tools
# The control plane and kubectl: what the e2e suite runs. The kubelet, which only the VM node runs,
# is built by node-ready (make node-ready builds every cluster binary), beside the e2e suite
# rather than before it: from empty caches the kubelet's own packages are minutes of CPU.
# A run without node-ready (TEST_STAGES) builds the kubelet here, for unit's kubelet tests.
cluster_bins=()
wanted node-ready && cluster_bins=(CLUSTER_BINS="etcd kube-apiserver kube-controller-manager kube-scheduler kubectl")
step cluster-bins 2400 make --no-print-directory cluster-bins "${cluster_bins[@]}"
# The real helm CLI: the node smoke installs evictd with it, the e2e suite's uninstall tests
# (TestUninstallHelm) run it.
step helm 1200 make --no-print-directory _output/tools/helm
# e2e from here on, beside unit and the node's stages: its tests mostly wait, and nothing after
# this rewrites what they run (make build in node-ready finds evictd's binaries up to date).
needs e2e build cluster-bins helm && lane e2e 0 e2e
join vm-prepare
# The node suite's tests need the ballast image (node-images makes it); the node smoke installs
# evictd with helm (up to date from the helm stage: go build finds nothing to do, so a run with
# TEST_STAGES naming node-ready and not helm still has it).
# node-ready before unit: it builds the kubelet, which pkg/kubeletcfg's unit tests run
# (TestKubeletCasesRealKubelet), and which the cluster-bins stage leaves out.
needs node-ready vm-prepare && step node-ready 1800 make --no-print-directory node-ready _output/tools/helm
# Four packages at a time: their tests mostly wait (API outages, grace periods, stalls), so on two
# cores the link of their binaries is what bounds it (go test -p 4: 58-61 s against 87 s at -p 2).
# The packages are listed first: a listing that failed or came back empty would leave go test to
# run the module's root package alone, and pass.
if wanted unit; then
  if unit_pkgs=$("$GO" list ./...) && mapfile -t unit_pkgs < <(grep -v /test/e2e <<<"$unit_pkgs") &&
    [ "${#unit_pkgs[@]}" -gt 1 ]; then
    gotest unit 1800 . --quiet -p 4 "${main_vet[@]}" "${unit_pkgs[@]}"
  else
    say "=== stage unit: go list ./... failed or listed no package"
    record unit FAILED 0 0 1 0
  fi
fi
node_smoke
node_onedisk
node_imagefs
node_cgroupfs
node_releases
end_lane e2e
end_lane host-checks
end_lane deploy
end_lane checks
finish
