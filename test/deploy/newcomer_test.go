// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/evictd/evictd/test/e2e/framework"
)

// newcomerDoc is the page a newcomer follows from the top.
const newcomerDoc = "README.md"

// newcomerPath is the newcomer's path: every install, upgrade, uninstall,
// apply, delete, create and label command of README.md's fenced shell
// blocks, in the README's order. TestNewcomerPath runs each of them, so
// TestDocCommands takes them as run.
func newcomerPath(t *testing.T) []string {
	t.Helper()
	var path []string
	for _, c := range fencedCommands(readFile(t, newcomerDoc)) {
		if lifecycleVerb(c) != "" {
			path = append(path, c)
		}
	}
	return path
}

// fencedCommands is the shell lines of md's fenced sh, bash, shell or
// unlabelled blocks, in order (commandsIn without the inline spans).
func fencedCommands(md string) []string {
	var out []string
	for _, m := range fenceRE.FindAllStringSubmatch(md, -1) {
		if lang := m[1]; lang == "" || lang == "sh" || lang == "bash" || lang == "shell" {
			out = append(out, shellLines(m[2])...)
		}
	}
	return out
}

// TestNewcomerReadsRunElsewhere: the README's other commands need what
// this cluster has not, so each must be one another test runs as written:
// a make target CI runs (make test, the gate itself; make demo, whose
// program test/vmnode TestNodeDemoV2 runs), or a read of docs/runbook.md's, which
// test/vmnode's TestNodeDocProxyReads runs against a running agent on
// the real node (its POD line, its /readyz read, its kubectl get reads).
func TestNewcomerReadsRunElsewhere(t *testing.T) {
	runbook := commandsIn(readFile(t, "docs/runbook.md"))
	n := 0
	for _, c := range fencedCommands(readFile(t, newcomerDoc)) {
		switch {
		case lifecycleVerb(c) != "":
			continue // TestNewcomerPath's
		case c == "make test" || c == "make demo":
		case strings.HasPrefix(c, "kubectl ") || strings.HasPrefix(c, "POD=$(kubectl "):
			if !slices.Contains(runbook, c) {
				t.Errorf("%s shows %q, which no test runs: show docs/runbook.md's form (the node suite runs those), or run it in a test", newcomerDoc, c)
			}
		default:
			t.Errorf("%s shows %q, which no test runs", newcomerDoc, c)
		}
		n++
	}
	if n == 0 {
		t.Errorf("%s shows no command besides its install path; the test reads none", newcomerDoc)
	}
}

// newcomerStep reports whether TestNewcomerPath knows how to check the
// command of fields f and lifecycle verb: kubectl create, label and delete
// of a namespace, kubectl apply -f FILE, helm install, upgrade and
// uninstall.
func newcomerStep(f []string, verb string) bool {
	switch f[0] + " " + verb {
	case "kubectl create", "kubectl label", "kubectl delete":
		return f[2] == "namespace" && len(f) >= 4
	case "kubectl apply":
		return len(f) == 4 && f[2] == "-f"
	case "helm install", "helm upgrade", "helm uninstall":
		return true
	}
	return false
}

// helmValues is what a helm install or upgrade command line sets: its
// release, namespace, whether it keeps the release's earlier values
// (--reset-then-reuse-values, --reuse-values) and its --set pairs.
type helmValues struct {
	release, namespace string
	keep               bool
	set                map[string]string
}

func parseHelm(cmd string) helmValues {
	f := strings.Fields(cmd)
	h := helmValues{set: map[string]string{}}
	if len(f) > 2 {
		h.release = f[2]
	}
	for i := 3; i < len(f); i++ {
		switch a := f[i]; {
		case (a == "-n" || a == "--namespace") && i+1 < len(f):
			h.namespace = f[i+1]
		case strings.HasPrefix(a, "--namespace="):
			h.namespace = strings.TrimPrefix(a, "--namespace=")
		case a == "--reset-then-reuse-values" || a == "--reuse-values":
			h.keep = true
		case a == "--set" && i+1 < len(f):
			for _, kv := range strings.Split(f[i+1], ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					h.set[k] = v
				}
			}
		}
	}
	return h
}

// TestNewcomerPath runs README.md's path as a newcomer copies it (issue 49:
// README → shadow install → enforce → uninstall): each lifecycle command of
// its fenced shell blocks, in order, verbatim, with the real helm and
// kubectl against the test API server, and after each the state it must
// leave. The namespace, its label, GKE's quota (a ResourceQuota, which any
// API server takes) and the objects they name must be there; after a helm
// install or upgrade the release's DaemonSet runs the image and mode its
// --set values (with the earlier ones when it keeps them) ask for: --shadow
// with the events grant shadow mode needs, or neither; an upgrade that sets
// no image keeps the one the newcomer set; after the uninstall
// and the namespace's deletion nothing of the release is left. The path
// must begin in shadow mode and reach enforcement (no --shadow, no
// --dry-run) before it uninstalls. A lifecycle command this test has no
// check for fails it. The README's reads (check it works) need a running
// agent; the node suite runs them (test/vmnode TestNodeDocProxyReads, through
// docs/runbook.md's copies).
//
// The cluster has one Linux Node and no kubelet: the DaemonSet wants a pod
// there, which stays unscheduled; the uninstall's cleanup Job runs the real
// evictd binary on a stand-in kubelet.
func TestNewcomerPath(t *testing.T) {
	start := time.Now()
	path := newcomerPath(t)
	if len(path) == 0 {
		t.Fatalf("%s shows no install command in a fenced shell block", newcomerDoc)
	}
	for _, c := range fencedCommands(readFile(t, newcomerDoc)) {
		if lifecycleVerb(c) == "" {
			t.Logf("not run here (no lifecycle command; the reads need a running agent): %s", c)
		}
	}

	d := startDocShell(t, "newcomer-identity")
	c := d.c
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-linux", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	if _, err := c.Admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.StandInKubelet(t, defaultNamespace, "app.kubernetes.io/name=evictd-cleanup", node.Name, framework.RequireBinary(t, "evictd"))

	sh := func(cmd string) string {
		t.Helper()
		return d.run(ctx, t, cmd, 3*time.Minute)
	}

	var (
		values   = map[string]string{} // the release's --set values, as Helm keeps them
		released []*unstructured.Unstructured
		modes    []bool // shadow mode after each helm install or upgrade
		image    string // the image after the last one
		applied  = map[string][]*unstructured.Unstructured{}
	)
	for i, cmd := range path {
		step := func(format string, args ...any) {
			t.Helper()
			t.Errorf("%s, step %d, %q: "+format, append([]any{newcomerDoc, i + 1, cmd}, args...)...)
		}
		f := strings.Fields(cmd)
		verb := lifecycleVerb(cmd)
		if !newcomerStep(f, verb) {
			step("this test has no check for this command: add one, or show it outside the newcomer's path (docs/install.md)")
			continue
		}
		sh(cmd)
		switch f[0] + " " + verb {
		case "kubectl create":
			if _, err := c.Admin.CoreV1().Namespaces().Get(ctx, f[3], metav1.GetOptions{}); err != nil {
				step("%v", err)
			}
		case "kubectl label":
			ns, err := c.Admin.CoreV1().Namespaces().Get(ctx, f[3], metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range f[4:] {
				if k, v, _ := strings.Cut(kv, "="); ns.Labels[k] != v {
					step("namespace %s has the labels %v; want %s", f[3], ns.Labels, kv)
				}
			}
		case "kubectl apply":
			objs, err := framework.ReadManifest(repoPath(t, f[3]))
			if err != nil {
				t.Fatal(err)
			}
			requireExist(ctx, t, c, objs)
			for _, o := range objs {
				applied[o.GetNamespace()] = append(applied[o.GetNamespace()], o)
			}
		case "helm install", "helm upgrade":
			h := parseHelm(cmd)
			if verb == "install" || !h.keep {
				values = map[string]string{}
			}
			for k, v := range h.set {
				values[k] = v
			}
			objs, err := framework.ParseManifest(strings.NewReader(sh("helm get manifest " + h.release + " -n " + h.namespace)))
			if err != nil {
				t.Fatal(err)
			}
			released = objs
			requireExist(ctx, t, c, released)
			shadow, img := releaseMode(ctx, t, c, released, values, step)
			_, setsRepo := h.set["image.repository"]
			_, setsTag := h.set["image.tag"]
			if verb == "upgrade" && !setsRepo && !setsTag && img != image {
				step("the DaemonSet ran %s and now runs %s: the upgrade dropped the image the newcomer set (--reset-then-reuse-values keeps it)", image, img)
			}
			image = img
			if verb == "install" && len(modes) == 0 && !shadow {
				step("the first install is not in shadow mode (shadow.enabled=true): the newcomer's path begins there")
			}
			modes = append(modes, shadow)
		case "helm uninstall":
			if len(modes) == 0 {
				t.Fatalf("%s uninstalls before any helm install", newcomerDoc)
			}
			if modes[len(modes)-1] {
				step("the release still runs in shadow mode or dry run: the path never enforces (%v after each install or upgrade)", modes)
			}
			requireGone(ctx, t, c, released)
			released = nil
		case "kubectl delete":
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName(f[3])
			requireGone(ctx, t, c, append(applied[f[3]], ns))
			delete(applied, f[3])
		}
	}
	if released != nil {
		t.Errorf("%s's path ends with the release installed: the newcomer's path ends with the uninstall", newcomerDoc)
	}
	if len(applied) > 0 {
		t.Errorf("%s's path leaves what it applied: %v", newcomerDoc, keys(applied))
	}
	t.Logf("%d commands of %s run in %s", len(path), newcomerDoc, time.Since(start).Round(time.Second))
}

// releaseMode checks the release's DaemonSet and ClusterRole against the
// values set: the image, and shadow mode (--shadow, with list and watch of
// Events) or enforcement. It returns whether the agent would evict nothing
// (shadow mode or dry run), and its image.
func releaseMode(ctx context.Context, t *testing.T, c *framework.Cluster, objs []*unstructured.Unstructured, values map[string]string, step func(string, ...any)) (bool, string) {
	t.Helper()
	var ds, role *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "DaemonSet":
			ds = o
		case "ClusterRole":
			// The agent's: the one that creates evictions (the readers'
			// rules name URLs, not resources).
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			if !slices.ContainsFunc(rules, func(r any) bool { return r.(map[string]any)["apiGroups"] == nil }) &&
				grants(t, o, "", "pods/eviction", "create") {
				role = o
			}
		}
	}
	if ds == nil || role == nil {
		t.Fatalf("the release has no DaemonSet or no agent ClusterRole: %v, %v", ds, role)
	}
	live := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		ri, err := c.ResourceFor(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	d := live(ds)
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatalf("DaemonSet %s has no container", d.GetName())
	}
	agent := containers[0].(map[string]any)
	image, _ := agent["image"].(string)
	var args []string
	for _, a := range agent["args"].([]any) {
		args = append(args, a.(string))
	}
	if repo, ok := values["image.repository"]; ok && !strings.HasPrefix(image, repo+":") {
		step("the DaemonSet runs %s; want %s", image, repo)
	}
	if tag, ok := values["image.tag"]; ok && !strings.HasSuffix(image, ":"+tag) {
		step("the DaemonSet runs %s; want the tag %s", image, tag)
	}
	wantShadow := values["shadow.enabled"] == "true"
	if got := slices.Contains(args, "--shadow"); got != wantShadow {
		step("the DaemonSet's args %q: --shadow %v; want %v (shadow.enabled=%s)", args, got, wantShadow, values["shadow.enabled"])
	}
	if _, any := grantsEvents(t, live(role)); any {
		step("ClusterRole %s grants list or watch of events; want neither, shadow mode or not", role.GetName())
	}
	return slices.Contains(args, "--shadow") || slices.Contains(args, "--dry-run"), image
}
