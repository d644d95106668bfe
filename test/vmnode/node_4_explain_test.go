// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestNodeExplainPortForward runs docs/decide.md's commands for a running
// agent as written, NODE being this node: the grant to alice, the kubectl
// port-forward to the node's evictd pod (through the API server and the
// kubelet; the test cluster's egress proxy stands in for the network a
// control plane has to its nodes) and evictd explain --node at the
// forward's local end, as alice. Through the same forward, a caller the API
// server knows but who has no grant is refused: the token that reaches the
// agent is the caller's own.
func TestNodeExplainPortForward(t *testing.T) {
	n := sharedNode(t)
	pod := evictdPod(t, n)
	bin, err := framework.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	framework.RequireBinary(t, "kubectl")
	framework.RequireBinary(t, "evictd")
	lines, err := framework.DocShellLines("docs/decide.md")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// sh runs a documented line with bash, the repository's binaries first
	// on PATH, as the kubeconfig's user.
	sh := func(ctx context.Context, line, kubeconfig string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "bash", "-c", strings.ReplaceAll(line, "NODE", n.Name))
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
		return cmd
	}

	var grant, forward, explain string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "kubectl create clusterrolebinding ") && strings.Contains(l, "evictd-explain-reader"):
			grant = l
		case strings.HasPrefix(l, "kubectl -n evictd-system port-forward "):
			forward = l
		case strings.HasPrefix(l, "evictd explain --node NODE --address "):
			explain = l
		}
	}
	if grant == "" || forward == "" || explain == "" {
		t.Fatalf("docs/decide.md's commands for a running agent not found (grant %q, port-forward %q, explain %q)", grant, forward, explain)
	}

	if out, err := sh(ctx, grant, n.Cluster.AdminKubeconfig).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", grant, err, out)
	}
	t.Cleanup(func() {
		name := strings.Fields(grant)[3]
		_ = n.Cluster.Admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	n.Cluster.WaitForGrant(t, framework.DocUser, "/explain")

	// The forward runs until the test ends; its first line says it is up.
	pf := sh(ctx, forward, n.Cluster.AdminKubeconfig)
	var pfErr bytes.Buffer
	pf.Stderr = &pfErr
	stdout, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = pf.Process.Kill()
		_ = pf.Wait()
	}()
	up := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "Forwarding from 127.0.0.1:") {
				up <- s.Text()
			}
		}
		close(up)
	}()
	select {
	case l, ok := <-up:
		if !ok {
			t.Fatalf("%s ended before forwarding: %s\n%s", forward, pfErr.String(), n.Diagnostics())
		}
		t.Logf("%s (%s after start)", l, time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatalf("%s: no forward within the test's time: %s", forward, pfErr.String())
	}

	var out, errb bytes.Buffer
	cmd := sh(ctx, explain, n.Cluster.DocUserKubeconfig)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s, as %s: %v\n%s\nport-forward: %s", explain, framework.DocUser, err, errb.String(), pfErr.String())
	}
	text := out.String()
	for _, want := range []string{"node " + n.Name + ", observed at ", "memory.available: ", "pods, in eviction order:",
		pod.Namespace + "/" + pod.Name} {
		if !strings.Contains(text, want) {
			t.Errorf("%s prints no %q:\n%s", explain, want, text)
		}
	}

	// A token the API server accepts, of an identity with no grant.
	tr, err := n.Cluster.Admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nobody := filepath.Join(t.TempDir(), "nobody.kubeconfig")
	if err := n.Cluster.WriteKubeconfig(nobody, "nobody", tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	msg, err := sh(ctx, explain, nobody).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "403 Forbidden") {
		t.Errorf("%s as a ServiceAccount without the grant: %v, %q; want a failure naming the 403", explain, err, msg)
	}
}
