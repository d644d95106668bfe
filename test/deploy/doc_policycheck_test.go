// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
)

// kustomizeCheck is the first command of docs/install.md's kustomize
// install (section 7), before `kubectl apply -k deploy/`.
func kustomizeCheck(t *testing.T) string {
	t.Helper()
	md := readFile(t, "docs/install.md")
	_, section, ok := strings.Cut(md, "\n## 7. Install with kustomize\n")
	if !ok {
		t.Fatal("docs/install.md has no section \"## 7. Install with kustomize\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var cmds []string
	for _, m := range fenceRE.FindAllStringSubmatch(section, -1) {
		if m[1] == "sh" || m[1] == "bash" || m[1] == "shell" {
			cmds = append(cmds, shellLines(m[2])...)
		}
	}
	if len(cmds) < 2 || cmds[1] != cmdKustomizeApply {
		t.Fatalf("docs/install.md, section 7, runs %q; want one check command, then %q", cmds, cmdKustomizeApply)
	}
	return cmds[0]
}

// runAsUser runs cmd with bash in the repository, kubectl first on PATH,
// against the API server of kubeconfig, and returns its output and error.
func runAsUser(t *testing.T, kubeconfig, cmd string) (string, error) {
	t.Helper()
	kubectl := framework.RequireBinary(t, "kubectl")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x := exec.CommandContext(ctx, "bash", "-c", cmd)
	home := t.TempDir()
	x.Dir = repoPath(t)
	x.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig, "HOME="+home)
	out, err := x.CombinedOutput()
	return string(out), err
}

// TestDocKustomizePolicyCheck: docs/install.md's kustomize install starts
// with one check command, run here as written against real API servers:
// it exits 0 on one that serves the ValidatingAdmissionPolicy v1 API, and
// exits non-zero, with the error docs/install.md tells the reader to stop
// on, against one that does not (the resource turned off with
// --runtime-config, as on a cluster before 1.30).
func TestDocKustomizePolicyCheck(t *testing.T) {
	cmd := kustomizeCheck(t)
	const stop = `the server doesn't have a resource type "validatingadmissionpolicies"`
	if doc := strings.Join(strings.Fields(readFile(t, "docs/install.md")), " "); !strings.Contains(doc, "`error: "+stop+"`") {
		t.Errorf("docs/install.md does not quote the error that stops the reader: `error: %s`", stop)
	}

	served := framework.Start(t)
	if out, err := runAsUser(t, served.AdminKubeconfig, cmd); err != nil {
		t.Errorf("%s, against an API server that serves the policies: %v\n%s", cmd, err, out)
	}

	// A cluster before 1.30: neither the resources nor the admission
	// plugin (which would wait for them forever). Its identity is a bare
	// ServiceAccount: evictd's manifest holds the policies it cannot store.
	identity := filepath.Join(t.TempDir(), "identity.yaml")
	if err := os.WriteFile(identity, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: policy-check}\n---\n"+
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: identity, namespace: policy-check}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	without := framework.Start(t, func(cfg *framework.Config) {
		cfg.Manifest = identity
		cfg.APIServerArgs = append(cfg.APIServerArgs,
			"--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false",
			"--disable-admission-plugins=ValidatingAdmissionPolicy")
	})
	out, err := runAsUser(t, without.AdminKubeconfig, cmd)
	if err == nil || !strings.Contains(out, stop) {
		t.Errorf("%s, against an API server without the policies: %v, %q; want a non-zero exit saying %q", cmd, err, out, stop)
	}
}
