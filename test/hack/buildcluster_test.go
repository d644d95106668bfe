// SPDX-License-Identifier: Apache-2.0

package hack

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hack/build-cluster.sh builds the binaries it is given (make demo's three,
// make test's five before the kubelet), each with a stamp of its own: a
// name it does not build is refused before anything is built, and a binary
// whose stamp matches the tools module is left as it is while another is
// asked for alone.
func TestBuildClusterBinaries(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "build-cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(out string, bins ...string) (string, error) {
		cmd := exec.Command(script, append([]string{out}, bins...)...)
		// No machine cache: the test sees only what it laid out.
		cmd.Env = append(os.Environ(), "EVICTD_CACHE_DIR=off")
		b, err := cmd.CombinedOutput()
		return string(b), err
	}

	t.Run("unknown binary", func(t *testing.T) {
		out := t.TempDir()
		got, err := run(out, "etcd", "kube-proxy")
		if code := exitCode(err); code != 2 || !strings.Contains(got, "no binary kube-proxy here") {
			t.Fatalf("build-cluster.sh OUT etcd kube-proxy: exit %d, %q; want exit 2 naming kube-proxy", code, got)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("a refused run left %d files in OUT", len(entries))
		}
	})

	t.Run("stamped binary up to date", func(t *testing.T) {
		out := t.TempDir()
		want := moduleStamp(t, script)
		for _, b := range []string{"etcd", "kube-apiserver"} {
			if err := os.WriteFile(filepath.Join(out, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		// etcd's stamp matches; kube-apiserver's names an older module.
		if err := os.WriteFile(filepath.Join(out, ".cluster-stamp-etcd"), []byte(want+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, ".cluster-stamp-kube-apiserver"), []byte("older\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := run(out, "etcd")
		if err != nil || !strings.Contains(got, "cluster binaries up to date") {
			t.Fatalf("build-cluster.sh OUT etcd: %v, %q; want etcd up to date, nothing built", err, got)
		}
		if b, _ := os.ReadFile(filepath.Join(out, "etcd")); string(b) != "#!/bin/sh\n" {
			t.Errorf("the up-to-date etcd was rewritten")
		}
		if b, _ := os.ReadFile(filepath.Join(out, ".cluster-stamp-kube-apiserver")); string(b) != "older\n" {
			t.Errorf("a binary not asked for had its stamp changed to %q", b)
		}
	})
}

// moduleStamp is the hash build-cluster.sh stamps its binaries with: the
// tools module's files and the script itself.
func moduleStamp(t *testing.T, script string) string {
	t.Helper()
	module := filepath.Join(filepath.Dir(script), "cluster")
	h := sha256.New()
	for _, p := range []string{filepath.Join(module, "go.mod"), filepath.Join(module, "go.sum"), filepath.Join(module, "tools.go"), script} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
