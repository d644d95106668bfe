// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The demo's names (test/cmd/demo): its namespace, the hog, and the pods
// it must never evict.
const (
	demoNamespace = "demo"
	demoHog       = "memory-leak"
)

var demoProtected = []string{"web-frontend", "database", "node-agent", "node-proxy-demo-node"}

// TestNodeDemoV2 runs `make demo`'s story on cgroup v2: test/cmd/demo
// --verify runs inside the guest (a real cgroup v2 kernel), so its
// simulated node (package nodesim) makes its cgroups in the unified
// hierarchy and evictd reads them there with the demo's --cgroup-root and
// --node-cgroup, against this host's control plane. The demo checks its own
// story; from the host, the test also watches the demo's pods and checks
// that the hog ended by the Eviction API (DisruptionTarget
// EvictionByEvictionAPI), the protected pods by nothing, and none by the OOM
// killer.
//
// It is the first of the shared node's tests (file name node_0): a
// DaemonSet tolerates every taint, so one left by a later test (the evictd
// DaemonSet of pods_test.go) would put a pod on the demo's node too.
func TestNodeDemoV2(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	if out, err := n.Sh(ctx, "cat /sys/fs/cgroup/cgroup.controllers"); err != nil || !strings.Contains(out, "memory") {
		t.Fatalf("the guest's /sys/fs/cgroup is not cgroup v2 with memory: %q, %v", out, err)
	}
	if ds, err := n.Cluster.Admin.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{}); err != nil || len(ds.Items) > 0 {
		t.Fatalf("DaemonSets in the cluster (%v, %v): one would put a pod on the demo's node; this test must run before any", ds, err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "bin")
	for _, b := range []string{"demo", "evictd", "workload"} {
		if !isFile(filepath.Join(bin, b)) {
			t.Fatalf("missing %s (make build)", filepath.Join(bin, b))
		}
	}
	// The out share is writable in the guest at its host path.
	work := filepath.Join(n.OutDir, "demo")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	admin := guestKubeconfig(t, n.Cluster.AdminKubeconfig, filepath.Join(work, "admin.kubeconfig"))
	evictd := guestKubeconfig(t, n.Cluster.EvictdKubeconfig, filepath.Join(work, "evictd.kubeconfig"))

	fates := watchPodFates(t, n, demoNamespace)
	began := time.Now()
	r, err := n.Exec(ctx, []string{filepath.Join(bin, "demo"), "--kubeconfig=" + admin, "--evictd-kubeconfig=" + evictd,
		"--bin-dir=" + bin, "--work-dir=" + work, "--verify"}, WithTimeout(4*time.Minute))
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the demo in the guest ended with %d after %s (%.1f s in the guest); its output:\n%s\n%s", r.ExitCode, took.Round(time.Second), r.Seconds, r.Stdout, r.Stderr)
	if err := r.Err(); err != nil {
		if b, rerr := os.ReadFile(filepath.Join(work, "node.log")); rerr == nil {
			t.Logf("the simulated node's log:\n%s", tail(string(b), 40))
		}
		t.Fatalf("demo --verify failed: %v", err)
	}
	for _, want := range []string{"cgroup v2 on this host", "(cgroup v2: /sys/fs/cgroup/evictd-test-", "Verified: evictd evicted " + demoHog} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}

	got := fates.all()
	if got[demoHog] != ByEvictd {
		t.Errorf("the hog %s ended by %q; want %q (an Eviction API call)", demoHog, got[demoHog], ByEvictd)
	}
	for _, p := range demoProtected {
		if got[p] != "" {
			t.Errorf("protected pod %s ended by %q; want it kept", p, got[p])
		}
	}
	for p, by := range got {
		if by == ByOOM || by == ByKubelet {
			t.Errorf("pod %s ended by %s; want no OOM kill and no kubelet (nodesim plays it) eviction", p, by)
		}
	}
	t.Logf("fates seen from the host: %v", got)
}

// guestKubeconfig writes a copy of the kubeconfig at src that reaches the API
// server the way the guest does, through the agent's relay at the service
// IP (the serving certificate names it), and returns its path.
func guestKubeconfig(t *testing.T, src, dst string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + framework.ServiceIP.String() + ":443"
	}
	if err := clientcmd.WriteToFile(*kc, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}
