// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/test/e2e/framework"
)

// TestExplainEndpoint: the running agent's explanation on its secure port,
// asked as three callers the real API server knows, with the manifest's
// RBAC (evictd bound to system:auth-delegator, the ClusterRoles
// evictd-explain-reader and evictd-metrics-reader, granting get on
// nodes/explain, nodes/shadow, nodes/trace and nodes/metrics of evictd.io): a reader gets every
// pod's place in the order of memory.available, a caller without the
// grant is refused (403), a request without a token too (401), and a
// scraper bound to the metrics reader gets /metrics and not /explain.
// `evictd explain --node NODE --address ...` prints the same order as
// the reader.
func TestExplainEndpoint(t *testing.T) {
	m := newMemoryNode(t, "explain")
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--secure-bind-address=127.0.0.1:0")...)
	addr := e.secureAddress()
	ctx := context.Background()
	ns := m.c.Namespace(t, "callers")
	reader := callerToken(t, m.c, ns, "reader", "evictd-explain-reader")
	nobody := callerToken(t, m.c, ns, "nobody", "")
	scraper := callerToken(t, m.c, ns, "scraper", "evictd-metrics-reader")

	for _, tc := range []struct {
		who, token, path string
		want             int
		body             string
	}{
		{"no token", "", "/explain", http.StatusUnauthorized, "no bearer token"},
		{"a token the API server does not accept", "not-a-token", "/explain", http.StatusUnauthorized, "does not accept this token"},
		{"a caller without the grant", nobody, "/explain", http.StatusForbidden, `cannot get nodes/explain in the API group evictd.io (node "explain")`},
		{"the metrics scraper on /explain", scraper, "/explain", http.StatusForbidden, `cannot get nodes/explain in the API group evictd.io`},
		{"the reader on /metrics", reader, "/metrics", http.StatusForbidden, `cannot get nodes/metrics in the API group evictd.io`},
		{"the metrics scraper on /trace", scraper, "/trace", http.StatusForbidden, `cannot get nodes/trace in the API group evictd.io`},
		{"the metrics scraper on /metrics", scraper, "/metrics", http.StatusOK, "evictd_ready"},
		{"the reader", reader, "/explain", http.StatusOK, `"node":"explain"`},
	} {
		code, body := secureGet(t, addr, tc.path, tc.token)
		if code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("%s: GET %s answered %d, want %d with %q:\n%s", tc.who, tc.path, code, tc.want, tc.body, firstLines(body, 5))
		}
	}

	// Ready, the agent has listed the pods; its explanation is of the
	// pass after, which may come a housekeeping interval later.
	var live agent.Live
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := secureGet(t, addr, "/explain", reader)
		live = agent.Live{}
		if err := json.Unmarshal([]byte(body), &live); err != nil {
			t.Fatalf("/explain is not an explanation: %v\n%s", err, firstLines(body, 5))
		}
		if len(live.Signals) > 0 && len(live.Signals[0].Pods) >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if live.ObservedAt.IsZero() || live.StandingBy || len(live.Signals) == 0 || live.Signals[0].Signal != "memory.available" {
		t.Fatalf("explanation %+v: want an observation, acting, memory.available first", live)
	}
	mem := live.Signals[0]
	var ranked, refused []string
	for _, p := range mem.Pods {
		if p.Rank > 0 {
			ranked = append(ranked, p.Name)
			continue
		}
		refused = append(refused, p.Name+": "+p.Why)
	}
	// The order of the memory scenarios (TestMemoryPressureHard): batch over
	// its request of nothing, then web, then db; the critical and the static
	// pods never.
	if want := []string{"batch", "web", "db"}; !slices.Equal(ranked, want) {
		t.Errorf("ranked %v, want %v", ranked, want)
	}
	for _, name := range []string{"critical", "static"} {
		if !slices.ContainsFunc(refused, func(s string) bool { return strings.HasPrefix(s, name) }) {
			t.Errorf("pod %s not among those that cannot be chosen: %q", name, refused)
		}
	}
	if len(mem.Next) != 1 || mem.Next[0].Name != "batch" || mem.Need != 0 {
		t.Errorf("need %d, next %+v: want nothing to free and batch first to go", mem.Need, mem.Next)
	}

	// The commands docs/decide.md shows for a running agent, as written but
	// for NODE and the port-forward's local end (here the agent's own
	// loopback address). Its kubectl port-forward needs a kubelet, which
	// this cluster has not: test/vmnode's TestNodeExplainPortForward runs
	// it on the VM node.
	kubeconfig := filepath.Join(t.TempDir(), "reader.kubeconfig")
	writeTokenKubeconfig(t, m.c, kubeconfig, reader)
	ran := 0
	for _, line := range framework.DocLines(t, "docs/decide.md") {
		args := strings.Fields(strings.NewReplacer("NODE", "explain", "127.0.0.1:9732", addr).Replace(line))
		var cmd *exec.Cmd
		switch {
		case args[0] == "evictd" && args[1] == "explain" && slices.Contains(args, "--node"):
			cmd = exec.CommandContext(ctx, framework.RequireBinary(t, "evictd"), args[1:]...)
			cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig)
		case args[0] == "kubectl" && args[1] == "create" && args[2] == "clusterrolebinding":
			cmd = exec.CommandContext(ctx, framework.RequireBinary(t, "kubectl"), append([]string{"--kubeconfig", m.c.AdminKubeconfig}, args[1:]...)...)
		default:
			continue
		}
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, stderr.String())
		}
		ran++
		if args[0] == "kubectl" {
			continue
		}
		text := out.String()
		for _, want := range []string{"node explain, observed at ", "memory.available: ", "nothing to free; the first to go would be:",
			"1. " + m.ns + "/batch", "1     " + m.ns + "/batch", "2     " + m.ns + "/web", "3     " + m.ns + "/db", "-     " + m.ns + "/critical"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s prints no %q:\n%s", line, want, text)
			}
		}
	}
	if ran != 2 {
		t.Errorf("ran %d of docs/decide.md's commands for a running agent, want its clusterrolebinding and its evictd explain --node", ran)
	}
	// The grant the docs make lets its user read /explain.
	m.c.WaitForResourceGrant(t, "alice", authzv1.ResourceAttributes{Group: "evictd.io", Resource: "nodes", Subresource: "explain", Name: "explain", Verb: "get"})

	// Without the grant: one clear line, a failing exit.
	writeTokenKubeconfig(t, m.c, kubeconfig, nobody)
	cmd := exec.CommandContext(ctx, framework.RequireBinary(t, "evictd"), "explain", "--node", "explain", "--address", addr, "--kubeconfig", kubeconfig)
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "403 Forbidden") {
		t.Errorf("evictd explain --node as a caller without the grant: %v, %q; want a failure naming the 403", err, msg)
	}
}

// callerToken makes a ServiceAccount in ns, binds it to clusterRole (none
// when empty) and returns a token of it.
func callerToken(t *testing.T, c *framework.Cluster, ns, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}
		if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		})
		role, err := c.Admin.RbacV1().ClusterRoles().Get(ctx, clusterRole, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		user := "system:serviceaccount:" + ns + ":" + name
		switch {
		case len(role.Rules) == 0:
			t.Fatalf("ClusterRole %s grants nothing", clusterRole)
		case len(role.Rules[0].NonResourceURLs) > 0:
			c.WaitForGrant(t, user, role.Rules[0].NonResourceURLs[0])
		case len(role.Rules[0].APIGroups) > 0 && len(role.Rules[0].Resources) > 0 && len(role.Rules[0].Verbs) > 0:
			resource, sub, _ := strings.Cut(role.Rules[0].Resources[0], "/")
			c.WaitForResourceGrant(t, user, authzv1.ResourceAttributes{Group: role.Rules[0].APIGroups[0], Resource: resource, Subresource: sub,
				Name: "any", Verb: role.Rules[0].Verbs[0]})
		default:
			t.Fatalf("ClusterRole %s: a first rule of neither paths nor resources: %+v", clusterRole, role.Rules[0])
		}
	}
	tr, err := c.Admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// secureGet asks the secure port; its certificate is self-signed.
// secureAddress is the address of the agent's secure port, from its
// "evictd starting" line.
func (e *evictd) secureAddress() string {
	e.t.Helper()
	addr := e.waitLog(30*time.Second, "evictd starting", nil).Str("secureAddress")
	if addr == "" {
		e.t.Fatal(`the "evictd starting" line names no secureAddress`)
	}
	return addr
}

func secureGet(t *testing.T, addr, path, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// One connection a request, closed after: the secure port serves a
	// few connections at once, and idle ones left open would hold them.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

func writeTokenKubeconfig(t *testing.T, c *framework.Cluster, path, token string) {
	t.Helper()
	if err := c.WriteKubeconfig(path, "caller", token); err != nil {
		t.Fatal(err)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
