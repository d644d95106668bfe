#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the
# kubelet and kubectl from the tools module in hack/cluster into the given
# directory. The scheduler and the kubelet serve the VM node (test/vmnode, make
# e2e-node); kubectl runs the docs' commands in test/deploy. A
# build is skipped when the binaries exist and were built from the same tools
# module (a hash stamp of the module files and this script), and the binaries are copied from
# the machine's cache (hack/cache.sh) when an earlier run built them from the same module.
#
# CLUSTER_MODULE names another tools module of the same shape to build from instead:
# hack/build-cluster-version.sh generates one for another Kubernetes release.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/cache.sh
. "$here/cache.sh"
out=$(mkdir -p "${1:?usage: build-cluster.sh OUTDIR}" && cd "$1" && pwd)
module=${CLUSTER_MODULE:-$here/cluster}
stamp="$out/.cluster-stamp"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
want=$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" "$here/build-cluster.sh" \
  | sha256sum | cut -d' ' -f1)

up_to_date=true
for b in "${bins[@]}"; do [ -x "$out/$b" ] || up_to_date=false; done
if $up_to_date && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "cluster binaries are up to date in $out"
  cache_put cluster "$want" "$out" "${bins[@]}"
  exit 0
fi

# An interrupted build must not leave a stamp that vouches for it.
rm -f "$stamp"
if cache_get cluster "$want" "$out"; then
  echo "$want" > "$stamp"
  echo "cluster binaries copied from the cache ($(cache_root)/cluster-$want)"
  exit 0
fi
cd "$module"
start=$(date +%s)
echo "building the test control plane from Go modules (about 10 minutes from a cold cache)..."
declare -A pkg=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
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
for b in "${bins[@]}"; do pkgs+=("${pkg[$b]}"); done
CGO_ENABLED=0 go build -ldflags "$ldflags -s -w" -o "$tmp/" "${pkgs[@]}"
for b in "${bins[@]}"; do
  # go build names a binary after its package's path, less a major version (etcd's server/v3).
  p=${pkg[$b]%/v[0-9]*}
  # Renamed into place, so a running test cluster keeps its old executable instead of failing
  # with "text file busy".
  mv -f "$tmp/${p##*/}" "$out/$b"
done
rm -rf "$tmp"
echo "$want" > "$stamp"
cache_put cluster "$want" "$out" "${bins[@]}"
echo "cluster binaries built in $(( $(date +%s) - start ))s"
