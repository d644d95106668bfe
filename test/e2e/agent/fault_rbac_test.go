// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/test/e2e/agent/evictdproc"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// rbacTenantLabel selects the namespaces of the fenced priority group.
const rbacTenantLabel = "evictd.io/tenant"

// rbacGroupConfig has one priority group that selects its namespaces by
// label, which makes evictd watch namespaces. The group is fenced at offset
// 0: its pods all look like priority 0 from outside.
const rbacGroupConfig = `apiVersion: evictd.io/v1alpha1
kind: EvictdConfiguration
priorityGroups:
  - name: tenants
    namespaceSelector:
      matchLabels:
        ` + rbacTenantLabel + `: "true"
    offset: 0
    fence: true
`

// TestFaultRBACNamespaceSelector: a priority group with a namespaceSelector
// makes evictd list and watch namespaces.
//
//   - With the ClusterRole as shipped in deploy/daemonset.yaml (the
//     framework applies it and gives evictd that ServiceAccount's token),
//     evictd syncs, becomes ready and ranks by the group: under pressure,
//     in dry run, the tenant's pod of priority 10000 goes before another
//     namespace's pod of priority 1000, which only namespace labels can
//     explain.
//   - With the namespaces rule taken out of the ClusterRole, evictd exits
//     non-zero within seconds with one error line that names namespaces and
//     the refused verb, instead of hanging unready while /healthz passes.
func TestFaultRBACNamespaceSelector(t *testing.T) {
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "rbac-ns", MemoryBytes: nodeMemory})
	tenant := c.Namespace(t, "tenant")
	other := c.Namespace(t, "other")
	ctx := context.Background()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, rbacTenantLabel)
	if _, err := c.Admin.CoreV1().Namespaces().Patch(ctx, tenant, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := createRunning(t, c.Admin,
		podSpec{name: "greedy", priorityClass: classHigh, holdMiB: 40}.pod(tenant, node.Name),
		podSpec{name: "plain", priorityClass: classMid, holdMiB: 40}.pod(other, node.Name))
	waitHolding(t, node, mapValues(pods)...)

	cfg := filepath.Join(t.TempDir(), "evictd.yaml")
	if err := os.WriteFile(cfg, []byte(rbacGroupConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	// memory.available is always below 994Mi on this 1 GiB node with 80 MiB
	// held, so the threshold is met from the first observation; dry run
	// names the victims in order without evicting anything.
	flags := []string{"--config=" + cfg, "--dry-run",
		"--eviction-hard=memory.available<994Mi,allocatableMemory.available<none,nodefs.available<none," +
			"nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none"}

	t.Run("shipped ClusterRole", func(t *testing.T) {
		e := startEvictd(t, c, node, flags...) // fails unless /readyz is 200 within 60 s
		synced := e.waitLog(30*time.Second, "informers synced", nil)
		if n, ok := synced.Num("namespaces"); !ok || n < 2 {
			t.Errorf("informers synced with %v namespaces (present: %v), want the namespace informer to hold at least %s and %s: %s",
				n, ok, tenant, other, synced.Raw)
		}
		first := e.waitLog(evictionTimeout, "would evict pod", nil)
		t.Logf("informers synced: %s", synced.Raw)
		t.Logf("first would-be victim: %s", first.Raw)
		if want := podKey(pods["greedy"]); first.Pod != want {
			t.Errorf("first would-be victim %s, want %s: its fenced group (selected by namespace label) makes it priority 0, below %s's 1000",
				first.Pod, want, podKey(pods["plain"]))
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if code := e.get(rctx, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz answered %d after the sync, want 200", code)
		}
		if errs := rbacErrorLines(e.logs()); len(errs) > 0 {
			t.Errorf("error lines with the shipped ClusterRole:\n%s", strings.Join(errs, "\n"))
		}
	})

	t.Run("namespaces grant removed", func(t *testing.T) {
		removeNamespacesGrant(t, c)
		bin := framework.RequireBinary(t, "evictd")
		args := append([]string{
			"--kubeconfig=" + c.EvictdKubeconfig,
			"--node-name=" + node.Name,
			"--host-root=" + node.HostRoot,
			"--cgroup-root=" + node.CgroupRoot,
			"--node-cgroup=" + node.CgroupRoot,
			"--node-brake=false", // the unbound test token may not write the Node
		}, flags...)
		start := time.Now()
		p, err := evictdproc.Start(evictdproc.Options{Bin: bin, Args: args, LogPath: filepath.Join(t.TempDir(), "evictd.log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("started %s %s", bin, strings.Join(p.Args(), " "))
		// A give-up, not a figure: a hang shows as a failure here, not as
		// a test timeout. "At once, not after retrying" is told by what
		// evictd logs (one error line naming the forbidden verb, below): an
		// evictd that kept retrying the forbidden list would hang until
		// its sync deadline (kube.DefaultSyncTimeout, 2m, well past
		// this) and then fail with that deadline's error instead.
		const patience = 60 * time.Second
		for !p.Exited() && time.Since(start) < patience {
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		exited := p.Exited()
		healthz := 0
		if !exited {
			hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			healthz = p.Get(hctx, "/healthz")
			cancel()
		}
		killed, code, err := p.Stop(stopGrace)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("evictd log (%s):\n%s", p.LogPath(), p.Tail(40))
			}
		})
		if !exited {
			t.Fatalf("evictd still running %s after start without list/watch on namespaces (/healthz %d, killed on stop: %v): it hangs instead of failing",
				patience, healthz, killed)
		}
		t.Logf("evictd exited %s after start with code %d", took.Round(time.Millisecond), code)
		if err != nil || code == 0 {
			t.Errorf("exit code %d (%v), want non-zero", code, err)
		}
		if code != 1 {
			t.Errorf("exit code %d, want 1 (a run-time failure, not bad usage)", code)
		}
		logs, err := p.Logs()
		if err != nil {
			t.Fatal(err)
		}
		errs := rbacErrorLines(logs)
		if len(errs) != 1 {
			t.Fatalf("%d error lines, want exactly one:\n%s", len(errs), strings.Join(errs, "\n"))
		}
		// evictd's own figure, for the record: from its first line to the
		// error it exits with.
		for _, l := range logs {
			if l.Raw == errs[0] && len(logs) > 0 && !logs[0].TS.IsZero() {
				t.Logf("evictd's log: the error %s after its first line", l.TS.Sub(logs[0].TS).Round(time.Millisecond))
			}
		}
		sa := "system:serviceaccount:" + c.EvictdServiceAccount.Namespace + ":" + c.EvictdServiceAccount.Name
		// The verb is the reflector's first call: since client-go 1.35 (WatchListClient on by
		// default) its initial list is a watch with sendInitialEvents, against an API server
		// that serves one (this test's does); a list against an older one.
		if !regexp.MustCompile(`cannot (list|watch) namespaces: forbidden`).MatchString(errs[0]) {
			t.Errorf("the error line lacks %q: %s", "cannot list|watch namespaces: forbidden", errs[0])
		}
		for _, want := range []string{"forbidden for " + sa, "list and watch on namespaces", "namespaceSelector"} {
			if !strings.Contains(errs[0], want) {
				t.Errorf("the error line lacks %q: %s", want, errs[0])
			}
		}
		for _, l := range logs {
			if l.Msg == "informers synced" {
				t.Errorf("evictd logged %q without list on namespaces", l.Msg)
			}
		}
	})
}

// rbacErrorLines are the raw log lines at error level or worse, and lines
// that are not JSON at all.
func rbacErrorLines(logs []logEntry) []string {
	var out []string
	for _, l := range logs {
		switch l.Level {
		case "error", "dpanic", "panic", "fatal", "unparsed":
			out = append(out, l.Raw)
		}
	}
	return out
}

// removeNamespacesGrant takes every rule naming namespaces out of evictd's
// ClusterRole, puts the role back in t.Cleanup, and waits until the API
// server denies evictd's ServiceAccount the list.
func removeNamespacesGrant(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	roles := c.Admin.RbacV1().ClusterRoles()
	role, err := roles.Get(ctx, "evictd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := slices.Clone(role.Rules)
	role.Rules = slices.DeleteFunc(slices.Clone(role.Rules), func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "namespaces")
	})
	t.Logf("ClusterRole evictd: %d rules, %d without namespaces", len(orig), len(role.Rules))
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r, err := roles.Get(ctx, "evictd", metav1.GetOptions{})
		if err == nil {
			r.Rules = orig
			_, err = roles.Update(ctx, r, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restore ClusterRole evictd: %v", err)
		}
	})
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := c.EvictdClient.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "namespaces"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return !r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("list namespaces still allowed to evictd's ServiceAccount: %v", err)
	}
}
