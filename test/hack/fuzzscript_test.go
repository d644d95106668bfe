// SPDX-License-Identifier: Apache-2.0

package hack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo stands in for the go command hack/fuzz.sh runs: go env GOCACHE,
// go list (one package, FUZZ_PKG_DIR, with one test file) and go test -c,
// which writes a fuzzing test binary that runs FUZZ_BIN_SCRIPT.
const fakeGo = `#!/bin/sh
case "$1" in
env) echo "$FUZZ_TMP/cache" ;;
list) echo "example.com/p $FUZZ_PKG_DIR p_test.go" ;;
test)
  while [ "$#" -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
  cp "$FUZZ_BIN_SCRIPT" "$out" && chmod +x "$out" ;;
*) echo "fake go: $*" >&2; exit 2 ;;
esac
`

// TestFuzzRerunsOnlyTheCoordinatorsDeadline: hack/fuzz.sh runs a target
// once more only when its first run failed with Go's coordinator deadline
// (go.dev/issue/75804) alone and wrote no input; a finding (an input
// written), any other failure, or the deadline twice fails the run.
func TestFuzzRerunsOnlyTheCoordinatorsDeadline(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "fuzz.sh"))
	if err != nil {
		t.Fatal(err)
	}
	const deadline = "echo '--- FAIL: FuzzX (10.01s)'; echo '    context deadline exceeded'; exit 1"
	tests := []struct {
		name string
		// first and second are what the binary's first and second runs do.
		first, second string
		wantOK        bool
		wantRerun     bool
	}{
		{name: "deadline then pass", first: deadline, second: "echo ok", wantOK: true, wantRerun: true},
		{name: "deadline twice", first: deadline, second: deadline, wantRerun: true},
		{name: "finding", first: "mkdir -p testdata/fuzz/FuzzX && echo input >testdata/fuzz/FuzzX/0a1b; " + deadline, second: "echo ok"},
		{name: "other failure", first: "echo '--- FAIL: FuzzX (0.10s)'; echo '    panic: boom'; exit 1", second: "echo ok"},
		{name: "pass", first: "echo ok", second: "echo 'ran twice'; exit 1", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			pkg := filepath.Join(tmp, "p")
			write(t, filepath.Join(pkg, "p_test.go"), "package p\n\nfunc FuzzX(f *testing.F) {}\n", 0o644)
			write(t, filepath.Join(tmp, "go"), fakeGo, 0o755)
			// The binary counts its runs in a file beside the package.
			write(t, filepath.Join(tmp, "bin.sh"), "#!/bin/sh\nn=$(cat \""+tmp+"/runs\" 2>/dev/null || echo 0)\nn=$((n+1))\necho $n >\""+tmp+"/runs\"\n"+
				"if [ $n = 1 ]; then "+tt.first+"; else "+tt.second+"; fi\n", 0o755)
			repo := filepath.Join(tmp, "repo")
			write(t, filepath.Join(repo, "hack", "fuzz.sh"), string(read(t, script)), 0o755)
			cmd := exec.Command(filepath.Join(repo, "hack", "fuzz.sh"), "1s")
			cmd.Env = append(os.Environ(), "GO="+filepath.Join(tmp, "go"), "FUZZ_TMP="+tmp, "FUZZ_PKG_DIR="+pkg,
				"FUZZ_BIN_SCRIPT="+filepath.Join(tmp, "bin.sh"))
			b, err := cmd.CombinedOutput()
			out := string(b)
			if ok := err == nil; ok != tt.wantOK {
				t.Fatalf("hack/fuzz.sh succeeded %v, want %v; its output:\n%s", ok, tt.wantOK, out)
			}
			if rerun := strings.Contains(out, "once more"); rerun != tt.wantRerun {
				t.Errorf("reran %v, want %v; output:\n%s", rerun, tt.wantRerun, out)
			}
			if !tt.wantOK && !strings.Contains(out, "FAIL: example.com/p FuzzX") {
				t.Errorf("a failed run does not name its target; output:\n%s", out)
			}
		})
	}
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
