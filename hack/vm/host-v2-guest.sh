#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The guest's half of hack/vm/host-v2.sh: runs, as root with CI=true in the guest's cgroup v2
# root, each test binary of OUTDIR/plan in its package's directory, as go test runs one, and
# writes its -test.v=test2json output to OUTDIR/raw/BINARY.out and "BINARY STATUS SECONDS" to
# OUTDIR/times.txt.
#
#   host-v2-guest.sh REPO OUTDIR TIMEOUT_SECONDS
#
# The checkout is copied onto the guest's scratch disk (/dev/vda, ext4) and mounted over its
# own path, with _output (the binaries, OUTDIR) still the host's; TMPDIR is on that disk too.
set -u
# All in one function, read whole before it runs: the checkout may change during the run.
main() {
repo=$1
out=$2
limit=$3
scratch=/run/host-v2
mkdir -p "$scratch"
mount -t ext4 /dev/vda "$scratch" || { echo "host-v2 guest: cannot mount the scratch disk"; exit 1; }
mkdir -p "$scratch/src/_output" "$scratch/tmp"
chmod 1777 "$scratch/tmp"
tar -C "$repo" --exclude=./_output -cf - . | tar -C "$scratch/src" -xf - ||
  { echo "host-v2 guest: cannot copy $repo"; exit 1; }
mount --rbind "$repo/_output" "$scratch/src/_output"
mount --rbind "$scratch/src" "$repo"
export TMPDIR=$scratch/tmp
echo "host-v2 guest: $(nproc) CPUs, $(awk '/MemTotal/ { print int($2 / 1024) " MiB" }' /proc/meminfo)," \
  "cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# The hierarchy root hands memory and pids to the groups the tests make below it, as systemd
# does on a v2 host.
echo "+memory +pids" >/sys/fs/cgroup/cgroup.subtree_control
while read -r dir bin ipath run; do
  name=${bin##*/}
  args=(-test.v=test2json -test.paniconexit0 -test.count=1 -test.timeout "${limit}s")
  [ "$run" = - ] || args+=(-test.run "$run")
  s=$(date +%s)
  echo "host-v2 guest: $ipath at $(date -u +%H:%M:%S)"
  (cd "$dir" && timeout --kill-after=30 $((limit + 60)) "$bin" "${args[@]}") >"$out/raw/$name.out" 2>&1
  rc=$?
  echo "$name $rc $(($(date +%s) - s))" >>"$out/times.txt"
  echo "host-v2 guest: $ipath exited $rc in $(($(date +%s) - s))s"
  sync
done <"$out/plan"
}
main "$@"
