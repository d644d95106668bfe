#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the
# kubelet and kubectl from the tools module in hack/cluster into the given
# directory, or only the ones named after it (make demo builds the three its
# control plane runs). The scheduler and the kubelet serve the VM node
# (test/vmnode, make e2e-node); kubectl runs the docs' commands in test/deploy
# and the e2e suite. A binary is skipped when it exists and was built from the
# same tools module (a hash stamp of the module files and this script, one per
# binary), and copied from the machine's cache (hack/cache.sh) when an earlier
# run built it from the same module.
#
# CLUSTER_MODULE names another tools module of the same shape to build from instead:
# hack/build-cluster-version.sh generates one for another Kubernetes release.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/cache.sh
. "$here/cache.sh"
usage="usage: build-cluster.sh OUTDIR [BINARY...]"
out=$(mkdir -p "${1:?$usage}" && cd "$1" && pwd)
shift
module=${CLUSTER_MODULE:-$here/cluster}
declare -A pkg=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
if [ "$#" -gt 0 ]; then
  for b in "$@"; do
    if [ -z "${pkg[$b]:-}" ]; then
      echo "build-cluster.sh: no binary $b here: the binaries are ${bins[*]}" >&2
      exit 2
    fi
  done
  bins=("$@")
fi
want=$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" "$here/build-cluster.sh" \
  | sha256sum | cut -d' ' -f1)

# Each binary's stamp and cache entry are its own, so that a build of some of them (make demo's)
# and a later one of the rest (make test's) each build only what is missing.
stamp() { echo "$out/.cluster-stamp-$1"; }
missing=()
for b in "${bins[@]}"; do
  if [ -x "$out/$b" ] && [ "$(cat "$(stamp "$b")" 2>/dev/null)" = "$want" ]; then
    cache_put "cluster-$b" "$want" "$out" "$b"
    continue
  fi
  # An interrupted build must not leave a stamp that vouches for it.
  rm -f "$(stamp "$b")"
  if cache_get "cluster-$b" "$want" "$out"; then
    echo "$want" >"$(stamp "$b")"
    echo "$b copied from the cache ($(cache_root)/cluster-$b-$want)"
    continue
  fi
  missing+=("$b")
done
if [ "${#missing[@]}" = 0 ]; then
  echo "cluster binaries up to date in $out: ${bins[*]}"
  exit 0
fi
cd "$module"
start=$(date +%s)
echo "building ${missing[*]} from Go modules (the six take about 10 minutes from a cold cache)..."
# Without these the Kubernetes commands report v0.0.0-master, and the kubelet
# registers its node with that version. The version is the module's own.
kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
kmajor=${kver#v}; kmajor=${kmajor%%.*}
kminor=${kver#v*.}; kminor=${kminor%%.*}
vpkg=k8s.io/component-base/version
ldflags="-X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=$kmajor -X $vpkg.gitMinor=$kminor"
# One go build for all of them: it schedules their packages and links together on every core (one
# build after another leaves a core idle through each link). -s -w: no symbol table or DWARF
# (smaller binaries; the link time it saves was not measured apart); stack traces come from the
# runtime's own tables and stay complete.
# Static, so the kubelet also runs in the VM guest, which has no libc.
tmp="$out/.build.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
pkgs=()
for b in "${missing[@]}"; do pkgs+=("${pkg[$b]}"); done
CGO_ENABLED=0 go build -ldflags "$ldflags -s -w" -o "$tmp/" "${pkgs[@]}"
for b in "${missing[@]}"; do
  # go build names a binary after its package's path, less a major version (etcd's server/v3).
  p=${pkg[$b]%/v[0-9]*}
  # Renamed into place, so a running test cluster keeps its old executable instead of failing
  # with "text file busy".
  mv -f "$tmp/${p##*/}" "$out/$b"
  echo "$want" >"$(stamp "$b")"
  cache_put "cluster-$b" "$want" "$out" "$b"
done
rm -rf "$tmp"
echo "${missing[*]} built in $(( $(date +%s) - start ))s"
