#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The demo behind `make demo` (which builds evictd, the workload, the cluster
# and demo commands and the three control plane binaries first: make
# demo-bins): starts the test control plane (test/cmd/cluster), then
# test/cmd/demo, which runs a simulated 1 GiB node, starts evictd against it,
# creates pods and a memory hog and tells what happens. Everything it starts
# is stopped and removed at the end, also on Ctrl-C; the logs (evictd's, the
# node's, the control plane's) stay in _output/demo, replaced by the next
# run. Needs root: the simulated node is made of real cgroups and processes,
# on cgroup v1 (the memory and pids hierarchies) or v2 (the unified
# hierarchy), whichever the host mounts at /sys/fs/cgroup.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/_output/bin"
cd "$root"

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: run as root: the simulated node creates cgroups (sudo make demo)" >&2
  exit 1
fi
cg=/sys/fs/cgroup
if [ -e "$cg/cgroup.controllers" ]; then
  for c in memory pids; do
    if ! grep -qw "$c" "$cg/cgroup.controllers"; then
      echo "demo: cgroup v2 at $cg has no $c controller (cgroup.controllers: $(cat "$cg/cgroup.controllers"))" >&2
      exit 1
    fi
  done
  echo "cgroup v2 (the unified hierarchy at $cg): the simulated node's cgroups go there."
elif [ -e "$cg/memory/memory.limit_in_bytes" ] && [ -e "$cg/pids/cgroup.procs" ]; then
  echo "cgroup v1 (the memory and pids hierarchies under $cg): the simulated node's cgroups go there."
else
  echo "demo: neither cgroup v2 (no $cg/cgroup.controllers) nor the cgroup v1 memory and pids hierarchies under $cg" >&2
  exit 1
fi
for b in evictd workload cluster demo etcd kube-apiserver kube-controller-manager; do
  if [ ! -x "$bin/$b" ]; then
    echo "demo: $bin/$b is missing: run make demo-bins, or make demo" >&2
    exit 1
  fi
done

# Kept after the demo; the scratch directory (kubeconfigs, the control plane's data) is not.
logs="$root/_output/demo"
rm -rf "$logs"
mkdir -p "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/evictd-demo.XXXXXX")
cluster_pid=""
cleanup() {
  local code=$?
  # A second Ctrl-C must not cut the cleanup short.
  trap '' INT TERM HUP
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    echo "Stopping the control plane..."
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
  fi
  if [ "$code" -ne 0 ] && [ "$code" -ne 130 ] && [ -s "$logs/node.log" ]; then
    echo "The simulated node's log ended with:" >&2
    tail -n 20 "$logs/node.log" >&2
  fi
  rm -rf "$work"
  echo "The demo's logs are kept in ${logs#"$root"/}: $(cd "$logs" && ls | tr '\n' ' ')"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'exit 129' HUP

echo "Starting a local Kubernetes control plane (about 10 s)..."
"$bin/cluster" --env-file "$work/cluster.env" >"$logs/cluster.log" 2>&1 &
cluster_pid=$!
for _ in $(seq 1 180); do
  [ -s "$work/cluster.env" ] && break
  if ! kill -0 "$cluster_pid" 2>/dev/null; then
    echo "demo: the control plane did not start; its log:" >&2
    tail -n 30 "$logs/cluster.log" >&2
    exit 1
  fi
  sleep 1
done
if [ ! -s "$work/cluster.env" ]; then
  echo "demo: the control plane was not ready after 3 minutes" >&2
  exit 1
fi
# shellcheck disable=SC1091
. "$work/cluster.env"

# DEMO_SCRAPE_DIR (make dashboard-picture): keep evictd's /metrics every second there.
# --verify: the demo ends in an error unless its story held (the leak evicted, the protected pods
# kept, no OOM kill, the brake on and lifted), so a run that shows something else says so.
"$bin/demo" --kubeconfig "$KUBECONFIG" --evictd-kubeconfig "$EVICTD_KUBECONFIG" --verify \
  --bin-dir "$bin" --work-dir "$work" --log-dir "$logs" ${DEMO_SCRAPE_DIR:+--scrape-dir "$DEMO_SCRAPE_DIR"}
