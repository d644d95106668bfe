#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Puts Debian's promtool (from the prometheus package, fetched with apt-get
# download and unpacked with dpkg-deb -x, never installed: no prometheus
# service on the machine) into the given directory; test/deploy runs its
# `test rules` on deploy/monitoring/tests. Skipped when the binary there is
# already the candidate version.
#
# Why not a build from Prometheus's module: promtool compiles every service
# discovery plugin (AWS, Azure, GCE, Kubernetes...), about 5 CPU-minutes that
# a cold CI run spent beside the VM node's timed tests. The distribution's
# promtool (2.x on Debian 12) also checks the rules against the older engine
# operators still run; test/deploy's alerts_eval_test.go evaluates them with
# the Prometheus 3 engine from its own module.
set -euo pipefail
out=$(mkdir -p "${1:?usage: get-promtool.sh OUTDIR}" && cd "$1" && pwd)

candidate() { apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}'; }
want=$(candidate)
if [ -z "$want" ] || [ "$want" = "(none)" ]; then
  # A fresh machine's package lists may be empty.
  [ "$(id -u)" = 0 ] || { echo "get-promtool.sh: no prometheus package known to apt, and apt-get update needs root" >&2; exit 1; }
  apt-get update -qq
  want=$(candidate)
fi
if [ -z "$want" ] || [ "$want" = "(none)" ]; then
  echo "get-promtool.sh: apt knows no prometheus package (the package lists: $(apt-cache policy 2>/dev/null | grep -c http) sources)" >&2
  exit 1
fi
stamp="$out/.promtool-version"
if [ -x "$out/promtool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "promtool $want is already in $out"
  exit 0
fi
# An interrupted fetch must not leave a stamp that vouches for it.
rm -f "$stamp"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq "prometheus=$want" 2>&1 | grep -v 'unsandboxed as root' || true)
deb=$(ls "$work"/prometheus_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "get-promtool.sh: apt-get download prometheus=$want gave no package" >&2; exit 1; }
dpkg-deb -x "$deb" "$work/x"
# Renamed into place, so a test running the old binary keeps it.
install -m 0755 "$work/x/usr/bin/promtool" "$out/promtool.tmp"
mv -f "$out/promtool.tmp" "$out/promtool"
echo "$want" > "$stamp"
echo "promtool $want from Debian's prometheus package: $("$out/promtool" --version 2>&1 | head -1)"
