#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the VM node's container runtime from the tools module in hack/node into the given
# directory: containerd 2, its client ctr and its runc shim containerd-shim-runc-v2 (Debian
# packages only containerd 1.x; Kubernetes 1.36 and later want 2.0 or later). runc and the CNI
# plugins stay Debian's (hack/vm/prepare.sh). A build is skipped when the binaries exist and were
# built from the same module (a hash stamp of the module files and this script), and the binaries
# are copied from the machine's cache (hack/cache.sh) when an earlier run built them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/cache.sh
. "$here/cache.sh"
out=$(mkdir -p "${1:?usage: build-node.sh OUTDIR}" && cd "$1" && pwd)
stamp="$out/.node-stamp"
bins=(containerd ctr containerd-shim-runc-v2)
want=$(cat "$here/node/go.mod" "$here/node/go.sum" "$here/node/tools.go" "$here/build-node.sh" \
  | sha256sum | cut -d' ' -f1)

up_to_date=true
for b in "${bins[@]}"; do [ -x "$out/$b" ] || up_to_date=false; done
if $up_to_date && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "node runtime binaries are up to date in $out"
  cache_put node "$want" "$out" "${bins[@]}"
  exit 0
fi
rm -f "$stamp"
if cache_get node "$want" "$out"; then
  echo "$want" > "$stamp"
  echo "node runtime binaries copied from the cache ($(cache_root)/node-$want)"
  exit 0
fi
cd "$here/node"
start=$(date +%s)
echo "building containerd from Go modules (a few minutes from a cold cache)..."
mod=github.com/containerd/containerd/v2
ver=$(go list -m -f '{{.Version}}' "$mod")
# containerd reports its version (ctr version, the CRI's RuntimeVersion) from these.
ldflags="-X $mod/version.Version=$ver -X $mod/version.Package=$mod -s -w"
tmp="$out/.build-node.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
# Static and without cgo, as containerd's own static release (its Makefile's tags): the guest
# runs them from the host's root, but nothing here needs the host's libc. Without cgo the btrfs
# snapshotter is left out, which the node does not use.
CGO_ENABLED=0 go build -tags "urfave_cli_no_docs osusergo netgo static_build" -ldflags "$ldflags" \
  -o "$tmp/" "${bins[@]/#/$mod/cmd/}"
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$out/$b"; done
rm -rf "$tmp"
echo "$want" > "$stamp"
cache_put node "$want" "$out" "${bins[@]}"
echo "node runtime ($ver) built in $(( $(date +%s) - start ))s"
