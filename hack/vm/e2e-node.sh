#!/usr/bin/env bash
# Runs the VM node's tests (test/vmnode, build tag vmnode) and ends with one line,
# "N passed, N failed", counting top-level tests; a skipped test counts as failed under CI=true.
# The full verbose log is kept in _output/e2e-node.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=_output/e2e-node.log
mkdir -p _output
go test -count=1 -tags vmnode -v -timeout "${E2E_NODE_TIMEOUT:-80m}" ${E2E_NODE_RUN:+-run "$E2E_NODE_RUN"} ./test/vmnode 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
passed=$(grep -c '^--- PASS' "$log")
failed=$(grep -c '^--- FAIL' "$log")
skipped=$(grep -c '^--- SKIP' "$log")
if [ "${CI:-}" = true ]; then
  failed=$((failed + skipped))
  skipped=0
fi
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
  # The test binary died (panic, timeout, build error) before reporting a test as failed.
  failed=1
fi
echo "${passed} passed, ${failed} failed$([ "$skipped" != 0 ] && echo ", ${skipped} skipped")"
[ "$rc" = 0 ] && [ "$failed" = 0 ]
