// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
)

// docShell is where the docs' commands run as a user runs them: bash in
// the repository, the real helm and kubectl first on PATH, the test API
// server's admin kubeconfig, and a HOME of their own.
type docShell struct {
	c    *framework.Cluster
	env  []string
	root string
}

// startDocShell starts a test API server with the DaemonSet and Job
// controllers (the uninstall's cleanup Job) for the docs' commands. The
// framework sets up an identity from a manifest; the docs' commands create
// evictd-system themselves, so that identity lives in identityNS.
func startDocShell(t *testing.T, identityNS string) *docShell {
	t.Helper()
	kubectl := framework.RequireBinary(t, "kubectl")
	helm := repoPath(t, "_output", "tools", "helm")
	if st, err := os.Stat(helm); err != nil || st.Mode()&0o111 == 0 {
		framework.Require(t, errMissing("no executable "+helm+" (make _output/tools/helm)"))
	}
	identity := filepath.Join(t.TempDir(), "identity.yaml")
	if err := os.WriteFile(identity, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+identityNS+"}\n---\n"+
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: identity, namespace: "+identityNS+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := framework.Start(t, func(cfg *framework.Config) {
		cfg.Manifest = identity
		cfg.RealNodes = true // the DaemonSet controller (and the scheduler)
		cfg.Controllers = []string{"job"}
	})
	home := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(helm)+":"+filepath.Dir(kubectl)+":"+os.Getenv("PATH"),
		"KUBECONFIG="+c.AdminKubeconfig, "HOME="+home, "XDG_CACHE_HOME="+home+"/cache",
		"XDG_CONFIG_HOME="+home+"/config", "XDG_DATA_HOME="+home+"/data")
	return &docShell{c: c, env: env, root: repoPath(t)}
}

// run runs cmd with bash and fails the test, with its output, unless it
// exits 0 within timeout.
func (d *docShell) run(ctx context.Context, t *testing.T, cmd string, timeout time.Duration) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	x := exec.CommandContext(cctx, "bash", "-c", cmd)
	x.Dir, x.Env = d.root, d.env
	began := time.Now()
	out, err := x.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	t.Logf("%s (%s)", cmd, time.Since(began).Round(time.Millisecond))
	return string(out)
}
