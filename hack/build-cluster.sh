#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the tools module
# in hack/cluster into the given directory. A build is skipped when the three
# binaries exist and were built from the same tools module (a hash stamp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:?usage: build-cluster.sh OUTDIR}" && cd "$1" && pwd)
stamp="$out/.cluster-stamp"
want=$(cat "$here/cluster/go.mod" "$here/cluster/go.sum" "$here/cluster/tools.go" "$0" | sha256sum | cut -d' ' -f1)

if [ -x "$out/etcd" ] && [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] \
   && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "cluster binaries are up to date in $out"
  exit 0
fi

cd "$here/cluster"
start=$(date +%s)
echo "building the test control plane from Go modules (about 10 minutes from a cold cache)..."
go build -o "$out/etcd" go.etcd.io/etcd/server/v3
go build -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -o "$out/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
echo "$want" > "$stamp"
echo "cluster binaries built in $(( $(date +%s) - start ))s"
