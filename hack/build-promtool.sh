#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds promtool from the tools module in hack/promtool into the given
# directory; test/deploy runs its `test rules` on deploy/monitoring/tests. The
# build is skipped when the binary exists and was built from the same module
# (a hash stamp of the module files and this script), as build-cluster.sh does.
#
# Prometheus v0.309.1 compiles every service discovery plugin into promtool
# (plugins/plugins.go has no build tag to leave them out; later releases have
# remove_all_sd), so there is no tag here to shrink the build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:?usage: build-promtool.sh OUTDIR}" && cd "$1" && pwd)
module=$here/promtool
stamp="$out/.promtool-stamp"
want=$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" "$here/build-promtool.sh" \
  | sha256sum | cut -d' ' -f1)
if [ -x "$out/promtool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "promtool is up to date in $out"
  exit 0
fi
# An interrupted build must not leave a stamp that vouches for it.
rm -f "$stamp"
cd "$module"
start=$(date +%s)
# The version promtool reports is the module's own.
pver=$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$pver" \
  -o "$out/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool
# Renamed into place, so a test running the old binary keeps it.
mv -f "$out/promtool.tmp" "$out/promtool"
echo "$want" > "$stamp"
echo "promtool built in $(( $(date +%s) - start ))s"
