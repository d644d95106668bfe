#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The host tiers on a cgroup v2-only host: the unit tests of the packages that touch cgroups and
# the host e2e tests that read memory, run as root with CI=true in the VM guest (hack/vm), whose
# kernel mounts cgroup v2 alone (cgroup_no_v1=all), as today's distributions and CI runners do.
# This project's machines mount the memory controller on cgroup v1, so without the guest the
# tests' v2 side would never run.
#
#   hack/vm/host-v2.sh [OUTDIR]        (default _output/host-v2; needs root, like make test-node)
#
# On the host: the VM's pieces (hack/vm/prepare.sh _output/vm), evictd and the control plane
# (make build cluster-bins), and one test binary a package (go test -c, CGO_ENABLED=0). In the
# guest: the host's root read-only under a tmpfs (as hack/vm/node.sh makes the node's root), so
# every host path is the same file there, but for the checkout, copied onto an ext4 scratch disk
# with TMPDIR (host-v2-guest.sh); each binary runs in its package's directory as go test runs it,
# with -test.v=test2json, its output into OUTDIR/raw. Back on the host, go tool test2json turns
# that output into OUTDIR/host-v2.json, a go test -json stream for test/cmd/testreport, and
# OUTDIR/times.txt says how long each binary took in the guest. Under TCG, alone on 2 cores, the
# default plan took 463 s in the guest (test/e2e/agent 271 of them); beside make test-node's node
# stages, sharing the cores with the node's guest, the stage took 1,622 s in one run.
#
# Environment:
#   HOST_V2_PARTS       "unit e2e" (default), or one of them
#   HOST_V2_UNIT_PKGS   the unit part's packages (default: those outside test/e2e whose tests
#                       make cgroups or read the host's; "all" for every one)
#   HOST_V2_UNIT_RUN    the unit part's -run pattern (default: every test)
#   HOST_V2_E2E_RUN     the e2e part's -run pattern (default: the tests that read memory through
#                       the simulated node's cgroups, e2e_memory below); "all" for the whole suite
#   HOST_V2_CPUS, HOST_V2_MEMORY_MIB   the guest's (default 2 and 4096)
#   HOST_V2_TIMEOUT     seconds the guest may run in all (default 3600); each binary gets it too
#   HOST_V2_READY_TIMEOUT  how long an e2e test waits for its control plane in the guest
#                       (EVICTD_E2E_READY_TIMEOUT, default 15m: it takes 2-5 minutes there)
#   HOST_V2_REPLAY_REPEATS  how many times each e2e agent's trace is replayed in the guest
#                       (EVICTD_E2E_REPLAY_REPEATS, default 1: the host's run replays each 20
#                       times; in the guest, TestOwnMemoryLimit's 20 took 24 minutes)
#
# Exit status 0 when the guest ran every binary and each passed; the JSON says which test did not.
set -euo pipefail
# All in one function, read whole before it runs: the checkout may change during the run.
main() {
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd -P)
cd "$repo"
out=$(mkdir -p "${1:-_output/host-v2}" && cd "${1:-_output/host-v2}" && pwd -P)
GO=${GO:-go}
parts=${HOST_V2_PARTS:-unit e2e}
cpus=${HOST_V2_CPUS:-2}
mem=${HOST_V2_MEMORY_MIB:-4096}
limit=${HOST_V2_TIMEOUT:-3600}
vm=$repo/_output/vm
say() { echo "host-v2.sh: $*"; }

# e2e_memory: the host e2e tests that read the simulated node's memory cgroups by their files
# (memory.max or memory.limit_in_bytes, memory.current or memory.usage_in_bytes, memory.events or
# memory.oom_control) and so once assumed v1: the actuator's containment, the fault root's broken
# files, evictd's own memory cgroup, the smoke test of the stand-in, and one eviction under
# pressure, whose baseline reads every pod's working set. The other tests that sample the node's
# memory share TestMemoryPressureHard's helpers. Each starts its own control plane, some 3 minutes
# in the guest; HOST_V2_E2E_RUN=all runs every test.
e2e_memory='^(TestActuatorContainsHardVictim|TestFaultUnreadableCgroupFiles|TestOwnMemoryLimit|TestSmoke|TestMemoryPressureHard)$'

whole() { [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "host-v2.sh: $1=$2: want a whole number of at least 1" >&2; exit 2; }; }
whole HOST_V2_CPUS "$cpus"
if [ "$(id -u)" != 0 ]; then
  echo "host-v2.sh: needs root (the VM's pieces come from apt-get; the tests make cgroups)" >&2
  exit 1
fi
rm -rf "$out/bin" "$out/raw"
mkdir -p "$out/bin" "$out/raw"
: >"$out/plan"
: >"$out/times.txt"
rm -f "$out/host-v2.json" "$out/expect-run"

t=$(date +%s)
"$here/prepare.sh" "$vm"
make --no-print-directory build cluster-bins
say "VM pieces, evictd and the control plane ready in $(($(date +%s) - t))s"

# plan PKGS RUN: builds each package's test binary and adds a line to the guest's plan:
# its directory, binary, import path and -run pattern.
plan() {
  local run=$1 dir ipath bin; shift
  t=$(date +%s)
  CGO_ENABLED=0 "$GO" test -c -trimpath -o "$out/bin/" "$@"
  while read -r dir ipath; do
    bin=$out/bin/${ipath##*/}.test
    [ -x "$bin" ] || continue # no test files
    # A package with no test under the pattern is not booted for. The list is read whole: with
    # pipefail, grep -q quitting at its first match would fail the pipeline whenever the
    # binary was still writing (SIGPIPE), and drop a package that has the tests.
    if [ -n "$run" ]; then
      listed=$(cd "$dir" && "$bin" -test.list "$run") || { echo "host-v2.sh: $bin -test.list failed" >&2; exit 1; }
      grep -q '^Test' <<<"$listed" || continue
    fi
    echo "$dir $bin $ipath ${run:--}" >>"$out/plan"
  done < <("$GO" list -f '{{.Dir}} {{.ImportPath}}' "$@")
  say "built $(wc -l <"$out/plan") test binaries so far in $(($(date +%s) - t))s"
}
for p in $parts; do
  case $p in
    unit)
      pkgs=${HOST_V2_UNIT_PKGS:-}
      if [ "$pkgs" = all ]; then
        pkgs=$("$GO" list ./... | grep -v /test/e2e)
      elif [ -z "$pkgs" ]; then
        # Those whose tests make cgroups (cgrouptest, nodesim) or read the host's: the two
        # helpers' own, and every other that uses them or opens the cgroup mount or PSI files.
        pkgs=$( { echo ./internal/cgrouptest; echo ./test/nodesim; grep -rlE --include='*_test.go' \
          'cgrouptest\.|nodesim\.|\("/sys/fs/cgroup|\("/proc/pressure' cmd pkg internal test |
          xargs -n1 dirname | grep -v -e '^test/e2e' -e '^test/bench' -e '^test/vmnode' -e '^test/deploy' |
          sed 's|^|./|'; } | sort -u)
      fi
      # shellcheck disable=SC2086
      plan "${HOST_V2_UNIT_RUN:-}" $pkgs
      ;;
    e2e)
      run=${HOST_V2_E2E_RUN:-$e2e_memory}
      [ "$run" = all ] && run=
      plan "$run" ./test/e2e/...
      # A pattern that names its tests: each must run (testreport --expect-run, in make
      # test-host-v2 and make test-node), so a test renamed or a package left out fails.
      if [[ $run =~ ^\^\((Test[A-Za-z0-9_]+\|)*Test[A-Za-z0-9_]+\)\$$ ]]; then
        echo "--expect-run $run" >"$out/expect-run"
      fi
      ;;
    *) echo "host-v2.sh: HOST_V2_PARTS: unknown part $p (want unit, e2e)" >&2; exit 2 ;;
  esac
done

# The guest's /init runs boot.sh with busybox sh; it makes the root the tests run in and runs
# host-v2-guest.sh there with the host's bash.
cat >"$out/boot.sh" <<EOF
set -u
ip link set lo up
r=/node
mkdir -p /rw \$r
mount -t tmpfs -o mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay \$r || exit 1
mount -t proc proc \$r/proc
mount -t sysfs sysfs \$r/sys
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 \$r/sys/fs/cgroup || exit 1
mount -t devtmpfs devtmpfs \$r/dev
mkdir -p \$r/dev/pts \$r/dev/shm
mount -t devpts devpts \$r/dev/pts
mount -t tmpfs -o mode=1777 tmpfs \$r/dev/shm
mount -t tmpfs -o mode=755 tmpfs \$r/run
mkdir -p \$r$out
mount --bind /out \$r$out || exit 1
echo "host-v2: root ready at uptime \$(cut -d' ' -f1 /proc/uptime)s"
chroot \$r /usr/bin/env -i PATH=$(dirname "$(command -v "$GO")"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root CI=true GOROOT=$("$GO" env GOROOT) EVICTD_E2E_READY_TIMEOUT=${HOST_V2_READY_TIMEOUT:-15m} EVICTD_E2E_REPLAY_REPEATS=${HOST_V2_REPLAY_REPEATS:-1} /bin/bash $repo/hack/vm/host-v2-guest.sh $repo $out $limit
EOF

# The guest's scratch disk, ext4 as a host's root or /tmp is: the tests' TMPDIR and a copy of
# the checkout (host-v2-guest.sh), where the 9p share and the overlay above it would answer
# differently (no file handles, other inode numbers) from any real host's filesystem.
scratch=$out/scratch.img
rm -f "$scratch"
truncate -s 8G "$scratch"
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$scratch"

kernel=$vm/vmlinux
[ -s "$kernel" ] || kernel=$vm/vmlinuz
say "booting the guest ($cpus vCPUs, $mem MiB) to run $(wc -l <"$out/plan") test binaries; console in $out/console.log"
t=$(date +%s)
rc=0
timeout --kill-after=10 $((limit + 300)) qemu-system-x86_64 -accel tcg -cpu max,-erms,-fsrm \
  -smp "$cpus" -m "$mem" -nographic -no-reboot -nic none \
  -kernel "$kernel" -initrd "$vm/initramfs.cpio.gz" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 evictd.cmd=/out/boot.sh" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=${out//,/,,},mount_tag=out,security_model=none" \
  -drive "file=${scratch//,/,,},format=raw,if=virtio,cache=unsafe" \
  </dev/null >"$out/console.log" 2>&1 || rc=$?
guest=$(($(date +%s) - t))
rm -f "$scratch"
say "the guest ran ${guest}s (QEMU exit $rc): $(grep -a -o 'evictd-vm: command exited [0-9]*' "$out/console.log" || echo 'no exit line')"

# The JSON: each binary's output through test2json, in the plan's order. A binary that never
# ran (the guest died first) is a failed package of its own in the stream.
fail=0
while read -r dir bin ipath run; do
  name=${bin##*/}
  if [ -s "$out/raw/$name.out" ]; then
    "$GO" tool test2json -p "$ipath" <"$out/raw/$name.out" >>"$out/host-v2.json"
  else
    printf '{"Action":"output","Package":"%s","Output":"host-v2.sh: %s did not run in the guest\\n"}\n{"Action":"fail","Package":"%s"}\n' \
      "$ipath" "$name" "$ipath" >>"$out/host-v2.json"
  fi
  r=$(awk -v b="$name" '$1 == b { print $2 }' "$out/times.txt")
  [ "$r" = 0 ] || fail=1
done <"$out/plan"
say "times in the guest (binary, exit status, seconds):"
cat "$out/times.txt"
say "go test -json stream: $out/host-v2.json"
[ "$fail" = 0 ]
}
main "$@"
