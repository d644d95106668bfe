// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// killLaneGo stands in for the go command in hack/test.sh: it runs the real
// one, except that "go test" kills the lane it runs in (the runner's direct
// child among its hack/test.sh ancestors) with SIGKILL, as the OOM killer
// or a crash of the shell would, and then fails.
const killLaneGo = `#!/usr/bin/env bash
if [ "$1" != test ]; then exec "$REAL_GO" "$@"; fi
# The first unbroken run of hack/test.sh ancestors: this run's subshells, its lane and its runner.
# Above the runner is the test that started it, and maybe a gate's own hack/test.sh: not ours.
chain=()
p=$$
while [ "$p" -gt 1 ]; do
  if tr '\0' ' ' </proc/$p/cmdline | grep -q 'hack/test.sh'; then
    chain+=("$p")
  elif [ "${#chain[@]}" -gt 0 ]; then
    break
  fi
  p=$(awk '{print $4}' /proc/$p/stat)
done
# chain runs from the innermost hack/test.sh process to the runner itself.
n=${#chain[@]}
if [ "$n" -lt 2 ]; then echo "fake go: no lane above me" >&2; exit 3; fi
kill -KILL "${chain[$((n - 2))]}"
exit 1
`

// A lane that dies leaves its stages without a result: the run must fail,
// naming them, not print a table of the stages that did finish.
func TestDeadLaneFailsTheRun(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("this test reads /proc: %v", err)
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "go")
	if err := os.WriteFile(fake, []byte(killLaneGo), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	cmd := exec.Command("bash", "hack/test.sh")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "GO="+fake, "REAL_GO="+realGo, "TEST_LOGS="+logs,
		"TEST_STAGES=tools test-image test-sbom", "TEST_TIER=gate")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("hack/test.sh exited 0 with its deploy lane killed:\n%s", out)
	}
	summary, rerr := os.ReadFile(filepath.Join(logs, "summary.txt"))
	if rerr != nil {
		t.Fatalf("no summary: %v\n%s", rerr, out)
	}
	if strings.HasSuffix(strings.TrimSpace(string(summary)), " 0 failed") || !strings.Contains(string(summary), "1 passed") {
		t.Errorf("summary %q; want the tools stage passed and the lane's stages failed\n%s", summary, out)
	}
	for _, want := range []string{"lane deploy: killed by signal 9", "test-image       FAILED", "test-sbom        FAILED", "no result"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("hack/test.sh's output lacks %q:\n%s", want, out)
		}
	}
}

// recordMake stands in for make in hack/test.sh: it notes how it was called
// and fails, so that any stage that reaches it shows.
const recordMake = `#!/usr/bin/env bash
echo "make $*" >>"$MAKE_CALLS"
exit 1
`

// E2E_NODE_RUN asks make test-node for some node tests only (docs/testing.md):
// the race detector, the fuzz targets and the cgroup v2 host tiers, none of
// them a node test, are left out, each recorded as having nothing to run.
func TestNodeRunLeavesTheHostChecksOut(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "make"), []byte(recordMake), 0o755); err != nil {
		t.Fatal(err)
	}
	logs, calls := filepath.Join(dir, "logs"), filepath.Join(dir, "make-calls")
	cmd := exec.Command("bash", "hack/test.sh")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "MAKE_CALLS="+calls,
		"TEST_LOGS="+logs, "TEST_TIER=node", "TEST_STAGES=tools race fuzz host-v2", "E2E_NODE_RUN=^TestNodeParity$")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("hack/test.sh: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Errorf("with E2E_NODE_RUN set, hack/test.sh ran %s", b)
	}
	for _, stage := range []string{"race", "fuzz", "host-v2"} {
		b, err := os.ReadFile(filepath.Join(logs, stage+".result"))
		if err != nil || !strings.HasPrefix(string(b), "none ") {
			t.Errorf("stage %s: result %q (%v); want none, as nothing was to run\n%s", stage, b, err, out)
		}
	}
}
