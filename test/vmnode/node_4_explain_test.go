// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"bufio"
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
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
	lines := framework.DocLines(t, "docs/decide.md")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shell := docShell(t, t.TempDir())
	sh := func(ctx context.Context, line, kubeconfig string) *exec.Cmd {
		return shell(ctx, strings.ReplaceAll(line, "NODE", n.Name), kubeconfig)
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
	n.Cluster.WaitForResourceGrant(t, framework.DocUser, authzv1.ResourceAttributes{Group: "evictd.io", Resource: "nodes", Subresource: "explain", Name: n.Name, Verb: "get"})

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

// TestNodeDocProxyReads runs, as written, the docs' reads that go through
// the API server to the node (NODE and POD being this node and its evictd
// pod): docs/decide.md's capture of a node's data (the kubelet's Summary
// through the node proxy, its pods, the namespaces) and `evictd rank` on
// it, and on what evictd observes in its pod (kubectl exec); docs/run.md's
// /configz read through jq; docs/runbook.md's and docs/run.md's /readyz
// through the pod proxy; the runbook's other kubectl get reads; and the
// pod-proxy /explain that docs/decide.md says cannot work, which the agent
// refuses for want of the caller's credentials.
func TestNodeDocProxyReads(t *testing.T) {
	n := sharedNode(t)
	pod := evictdPod(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shell := docShell(t, t.TempDir())
	run := func(script string) (string, error) {
		out, err := shell(ctx, script, n.Cluster.AdminKubeconfig).CombinedOutput()
		return string(out), err
	}

	decide := framework.DocLines(t, "docs/decide.md")
	capture := docBlockFrom(decide, "NODE=", "kubectl get namespaces -o json > namespaces.json")
	if len(capture) != 5 {
		t.Fatalf("docs/decide.md's capture of a node's data: %q; want NODE=, the Summary, the pods, a comment, the namespaces", capture)
	}
	if !strings.HasPrefix(capture[0], "NODE=worker-1") {
		t.Fatalf("docs/decide.md's capture starts %q, want NODE=worker-1", capture[0])
	}
	capture[0] = "NODE=" + n.Name
	if out, err := run(strings.Join(capture, "\n")); err != nil {
		t.Fatalf("docs/decide.md's capture of %s: %v\n%s", n.Name, err, out)
	}
	rank := ""
	for _, l := range decide {
		if strings.HasPrefix(l, "evictd rank --summary summary.json --pods pods.json ") && !strings.Contains(l, "--signal") && !strings.Contains(l, "-o json") {
			rank = l
			break
		}
	}
	if rank == "" {
		t.Fatal("docs/decide.md shows no `evictd rank --summary summary.json --pods pods.json` line")
	}
	out, err := run(rank)
	if err != nil {
		t.Fatalf("%s on %s's capture: %v\n%s", rank, n.Name, err, out)
	}
	for _, want := range []string{"RANK  POD", pod.Namespace + "/" + pod.Name, "daemonset: owned by DaemonSet evictd"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s on %s's capture prints no %q:\n%s", rank, n.Name, want, out)
		}
	}

	// What evictd itself measured, from its pod, in place of the Summary
	// (decide.md's kubectl exec line), ranks the same pods.
	observe := regexp.MustCompile("`(kubectl exec -n evictd-system POD -- /evictd observe [^`]*)`").FindStringSubmatch(readDoc(t, "docs/decide.md"))
	if observe == nil {
		t.Fatal("docs/decide.md no longer shows the kubectl exec of evictd observe; update this test")
	}
	obsRank := strings.Replace(rank, "--summary summary.json", "--summary obs.json", 1)
	out, err = run(strings.ReplaceAll(observe[1], "POD", pod.Name) + " > obs.json\n" + obsRank)
	if err != nil {
		t.Fatalf("%s, then %s: %v\n%s", observe[1], obsRank, err, out)
	}
	if !strings.Contains(out, pod.Namespace+"/"+pod.Name) {
		t.Errorf("%s on evictd's own observation prints no %s:\n%s", obsRank, pod.Name, out)
	}

	// run.md's check of the kubelet's thresholds by hand: its /configz
	// through the node proxy, cut by jq (hack/vm/prepare.sh installs it).
	var configz string
	for _, l := range framework.DocLines(t, "docs/run.md") {
		if strings.Contains(l, "/proxy/configz") {
			configz = l
		}
	}
	if configz == "" {
		t.Fatal("docs/run.md no longer shows the kubelet's /configz read; update this test")
	}
	out, err = run(strings.ReplaceAll(configz, "NODE", n.Name))
	if err != nil {
		t.Fatalf("%s: %v\n%s", configz, err, out)
	}
	// The guest's kubelet runs its default hard thresholds.
	if !strings.Contains(out, `"evictionHard"`) || !strings.Contains(out, `"memory.available": "100Mi"`) {
		t.Errorf("%s prints no evictionHard with memory.available 100Mi:\n%s", configz, out)
	}

	// /readyz through the pod proxy, as the runbook and run.md show it.
	runbook := readDoc(t, "docs/runbook.md")
	runbookLines := framework.DocLines(t, "docs/runbook.md")
	podLine := docBlockFrom(runbookLines, "POD=$(kubectl -n evictd-system get pods", "POD=$(kubectl -n evictd-system get pods")
	readyz := regexp.MustCompile("`(kubectl get --raw\\s+\"/api/v1/namespaces/evictd-system/pods/\\$\\{POD#pod/\\}:9731/proxy/readyz\\?verbose\")`").
		FindAllStringSubmatch(runbook, -1)
	if len(podLine) != 1 || len(readyz) == 0 {
		t.Fatalf("docs/runbook.md: POD line %q, %d /readyz reads; want one and at least one", podLine, len(readyz))
	}
	reads := map[string]bool{}
	for _, r := range readyz {
		reads[strings.ReplaceAll(podLine[0], "NODE", n.Name)+"\n"+strings.Join(strings.Fields(r[1]), " ")] = true
	}
	for _, l := range framework.DocLines(t, "docs/run.md") {
		if strings.Contains(l, "/proxy/readyz") {
			reads[strings.ReplaceAll(l, "POD", pod.Name)] = true
		}
	}
	if len(reads) != 2 {
		t.Fatalf("the docs' /readyz reads through the pod proxy: %q; want the runbook's and run.md's", slices.Collect(maps.Keys(reads)))
	}
	for script := range reads {
		out, err := run(script)
		if err != nil {
			t.Errorf("%s: %v\n%s", script, err, out)
			continue
		}
		for _, want := range []string{"[+]informers ok", "[+]node-lease ok", "readyz check passed"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s prints no %q:\n%s", script, want, out)
			}
		}
	}

	// The runbook's other reads (kubectl get ...), as an operator on call
	// runs them on this node; each must answer, and the lease's holder must
	// be this node's evictd pod.
	gets := regexp.MustCompile("`(kubectl (?:-n [a-z-]+ )?get [^`]*)`").FindAllStringSubmatch(strings.Join(strings.Fields(runbook), " "), -1)
	ranGets := 0
	for _, g := range gets {
		line := g[1]
		if strings.Contains(line, "/proxy/") || strings.HasSuffix(line, " -o yaml") || strings.Contains(line, "servicemonitor") {
			// The pod proxy's, above; "kubectl get pod -o yaml" of a pod an
			// alert names; the Prometheus operator's resources, not on this
			// cluster.
			continue
		}
		out, err := run(strings.ReplaceAll(podLine[0]+"\n"+line, "NODE", n.Name))
		if err != nil {
			t.Errorf("docs/runbook.md's %s: %v\n%s", line, err, out)
			continue
		}
		ranGets++
		if strings.Contains(line, "get lease evictd-NODE") && !strings.Contains(out, pod.Name) {
			t.Errorf("docs/runbook.md's %s names no %s as the holder:\n%s", line, pod.Name, out)
		}
	}
	if ranGets < 5 {
		t.Errorf("ran %d of docs/runbook.md's kubectl get reads (%q), want at least 5", ranGets, gets)
	}

	// docs/decide.md: /explain cannot be read through the pod proxy, which
	// carries no credentials to the agent (the caller here is the admin).
	explain := regexp.MustCompile("`(kubectl get --raw /api/v1/namespaces/evictd-system/pods/[^`]*/proxy/explain)`").
		FindStringSubmatch(readDoc(t, "docs/decide.md"))
	if explain == nil {
		t.Fatal("docs/decide.md no longer shows the pod-proxy /explain that cannot work; update this test")
	}
	// The admin's own credentials are good (the reads above took them), so
	// the 401 kubectl reports is the agent's, relayed by the proxy.
	out, err = run(strings.ReplaceAll(explain[1], "POD", pod.Name))
	if err == nil || !strings.Contains(out, "the server has asked for the client to provide credentials") {
		t.Errorf("%s as the cluster's admin: %v\n%s\nwant the agent's 401 (no credentials reach it)", explain[1], err, out)
	} else {
		t.Logf("%s: %s", explain[1], strings.TrimSpace(out))
	}
}

// docShell returns a runner of the docs' command lines: bash in dir, the
// repository's kubectl and evictd first on PATH, as the kubeconfig's user;
// -x, so that a failure shows which line failed and how it expanded.
func docShell(t *testing.T, dir string) func(ctx context.Context, script, kubeconfig string) *exec.Cmd {
	t.Helper()
	bin, err := framework.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	framework.RequireBinary(t, "kubectl")
	framework.RequireBinary(t, "evictd")
	return func(ctx context.Context, script, kubeconfig string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "bash", "-xc", "set -e\n"+script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
		return cmd
	}
}

// docBlockFrom is the lines from the first that starts with first up to
// the next one that starts with last, both included; nil when first is not
// there.
func docBlockFrom(lines []string, first, last string) []string {
	for i, l := range lines {
		if !strings.HasPrefix(l, first) {
			continue
		}
		for j := i; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], last) {
				return lines[i : j+1]
			}
		}
		return nil
	}
	return nil
}

// readDoc is the repository's file rel.
func readDoc(t *testing.T, rel string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
