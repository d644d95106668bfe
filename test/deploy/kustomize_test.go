// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/test/e2e/framework"
)

// kustomize runs the real `kubectl kustomize dir` and returns its output
// and error.
func kustomize(t *testing.T, dir string) (string, error) {
	t.Helper()
	out, err := exec.Command(framework.RequireBinary(t, "kubectl"), "kustomize", dir).CombinedOutput()
	return string(out), err
}

// overlayDir makes a directory with deploy/ (a link to the repository's)
// and the overlay's files under ov/, as a user's kustomization next to a
// copy of deploy/; it returns ov's path.
func overlayDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(repoPath(t, "deploy"), filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "ov")
	if err := os.Mkdir(ov, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(ov, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ov
}

// TestKustomizeImageIsVersion: `kubectl apply -k deploy/` (and
// deploy/cleanup/, the uninstall's Job) runs the image evictd:VERSION, the
// tag `make image` gives the image it builds, built by the real kubectl.
func TestKustomizeImageIsVersion(t *testing.T) {
	want := "evictd:" + repoVersion(t)
	for dir, kind := range map[string]string{"deploy": "DaemonSet", "deploy/cleanup": "Job"} {
		out, err := kustomize(t, repoPath(t, dir))
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
		}
		objs, err := framework.ParseManifest(strings.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			n++
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				if img := c.(map[string]any)["image"]; img != want {
					t.Errorf("kubectl apply -k %s/ runs the image %v; want %s (the VERSION file's)", dir, img, want)
				}
			}
		}
		if n != 1 {
			t.Errorf("kubectl kustomize %s: %d %ss; want 1", dir, n, kind)
		}
	}
}

const namespaceSource = `apiVersion: v1
kind: ConfigMap
metadata:
  name: evictd-namespace
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  namespace: other
`

// TestKustomizeNamespaceOverlay: a kustomize `namespace:` over deploy/ or
// deploy/cleanup/ fails at build time with a message naming the way that
// works, the component deploy/components/namespace (docs/install.md).
func TestKustomizeNamespaceOverlay(t *testing.T) {
	for _, base := range []string{"deploy", "deploy/cleanup"} {
		ov := overlayDir(t, map[string]string{"kustomization.yaml": "resources: [../" + base + "]\nnamespace: other\n"})
		out, err := kustomize(t, ov)
		if err == nil || !strings.Contains(out, "use the component deploy/components/namespace instead") {
			t.Errorf("kubectl kustomize of %s with namespace: other: %v\n%.2000s\nwant it refused, naming deploy/components/namespace", base, err, out)
		}
	}
}

// TestKustomizeNamespaceComponent builds deploy/ and deploy/cleanup/ into
// the namespace "other" with deploy/components/namespace, as
// docs/install.md shows, with the real kubectl, applies the first to the
// test API server with `kubectl apply -k`, and proves the agent's identity
// there, other/evictd, is what the manifest's is in evictd-system: as a
// token bound to its pod on node-a it writes its Lease other/evictd-node-a,
// in its own namespace, and the admission policies match it (the
// Lease of another node, a label on its Node and an eviction with an unbound
// token are refused, each by its policy).
func TestKustomizeNamespaceComponent(t *testing.T) {
	kubectl := framework.RequireBinary(t, "kubectl")
	ov := overlayDir(t, map[string]string{
		"namespace.yaml":     namespaceSource,
		"kustomization.yaml": "resources: [../deploy, namespace.yaml]\ncomponents: [../deploy/components/namespace]\n",
	})
	cleanup := overlayDir(t, map[string]string{
		"namespace.yaml":     namespaceSource,
		"kustomization.yaml": "resources: [../deploy/cleanup, namespace.yaml]\ncomponents: [../deploy/components/namespace]\n",
	})
	built := map[string]string{}
	for what, dir := range map[string]string{"deploy": ov, "deploy/cleanup": cleanup} {
		out, err := kustomize(t, dir)
		if err != nil {
			t.Fatalf("kubectl kustomize of %s with the component: %v\n%s", what, err, out)
		}
		// Nothing may still name the old namespace: a subject, a policy's
		// match or the Job's DaemonSet left there would bind nothing.
		if i := strings.Index(out, "evictd-system"); i >= 0 {
			t.Errorf("%s with the component still names evictd-system: ...%s...", what, out[max(0, i-300):min(len(out), i+100)])
		}
		built[what] = out
	}
	if !strings.Contains(built["deploy/cleanup"], "- other/evictd\n") {
		t.Errorf("the cleanup Job with the component does not delete other/evictd:\n%s", built["deploy/cleanup"])
	}
	manifest := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(manifest, []byte(built["deploy"]), 0o644); err != nil {
		t.Fatal(err)
	}
	c := framework.Start(t, func(cfg *framework.Config) { cfg.Manifest = manifest })
	if want := (types.NamespacedName{Namespace: "other", Name: "evictd"}); c.EvictdServiceAccount != want {
		t.Fatalf("the built manifest's agent is %s; want %s", c.EvictdServiceAccount, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apply := exec.CommandContext(ctx, kubectl, "apply", "-k", ov)
	apply.Env = append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k (the overlay): %v\n%s", err, out)
	}
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := c.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfgA, _ := c.EvictdNodeToken(t, "node-a")
	asA, err := kubernetes.NewForConfig(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	refusedBy := func(policy string, err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), fmt.Sprintf("ValidatingAdmissionPolicy '%s'", policy))
	}
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "other"}}
	}
	// The policies are loaded through an informer: wait for the Lease
	// policy's refusal of another node's Lease, then every answer is final.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = asA.CoordinationV1().Leases("other").Create(ctx, lease("evictd-node-b"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusedBy("evictd-leases", last), nil
	}); err != nil {
		t.Fatalf("node-a's agent in other creates other/evictd-node-b: %v; want evictd-leases' refusal", last)
	}
	if _, err := asA.CoordinationV1().Leases("other").Create(ctx, lease("evictd-node-a"), metav1.CreateOptions{}); err != nil {
		t.Errorf("node-a's agent in other creates its Lease other/evictd-node-a: %v; want it allowed", err)
	}
	// Never in kube-node-lease, where node evictd-node-a's kubelet would
	// keep its heartbeat under that very name.
	heartbeat := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "evictd-node-a", Namespace: "kube-node-lease"}}
	if _, err := asA.CoordinationV1().Leases("kube-node-lease").Create(ctx, heartbeat, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node-a's agent in other creates kube-node-lease/evictd-node-a: %v; want it forbidden", err)
	}
	patch := []byte(`{"metadata":{"labels":{"evictd.test/label":"x"}}}`)
	if _, err := asA.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, patch, metav1.PatchOptions{}); !refusedBy("evictd-node-writes", err) {
		t.Errorf("node-a's agent in other labels its Node: %v; want evictd-node-writes' refusal", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "example.test/c"}}}}
	if _, err := c.Admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "default"}}
	if err := c.EvictdClient.PolicyV1().Evictions("default").Evict(ctx, ev); !refusedBy("evictd-evictions", err) {
		t.Errorf("an eviction by other/evictd with an unbound token: %v; want evictd-evictions' refusal", err)
	}
}

// TestKustomizeWithoutFlowControl builds docs/install.md's kustomization
// that leaves out the FlowSchema and PriorityLevelConfiguration (for an
// installer who may not create them) over deploy/, with the real kubectl:
// it renders every object of deploy/ but those two.
func TestKustomizeWithoutFlowControl(t *testing.T) {
	kustomization := strings.ReplaceAll(docYAMLBlock(t, "docs/install.md", `"kind": "FlowSchema"`),
		"github.com/evictd/evictd//deploy?ref=<version>", "../deploy")
	out, err := kustomize(t, overlayDir(t, map[string]string{"kustomization.yaml": kustomization}))
	if err != nil {
		t.Fatalf("kubectl kustomize of docs/install.md's kustomization: %v\n%s", err, out)
	}
	without, err := framework.ParseManifest(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	base, err := kustomize(t, repoPath(t, "deploy"))
	if err != nil {
		t.Fatalf("kubectl kustomize deploy: %v\n%s", err, base)
	}
	all, err := framework.ParseManifest(strings.NewReader(base))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := range byKey(t, all) {
		if !strings.HasPrefix(k, "FlowSchema ") && !strings.HasPrefix(k, "PriorityLevelConfiguration ") {
			want = append(want, k)
		}
	}
	slices.Sort(want)
	if got := keys(byKey(t, without)); !slices.Equal(got, want) || len(want) != len(all)-2 {
		t.Errorf("docs/install.md's kustomization renders %v; want deploy/'s objects but its FlowSchema and PriorityLevelConfiguration, %v", got, want)
	}
}

// docYAMLBlock is the first yaml block of the doc at rel that holds what.
func docYAMLBlock(t *testing.T, rel, what string) string {
	t.Helper()
	var block []string
	in := false
	for _, l := range strings.Split(readFile(t, rel), "\n") {
		switch {
		case l == "```yaml":
			in, block = true, nil
		case l == "```" && in:
			in = false
			if b := strings.Join(block, "\n"); strings.Contains(b, what) {
				return b
			}
		case in:
			block = append(block, l)
		}
	}
	t.Fatalf("%s has no yaml block with %s", rel, what)
	return ""
}

// TestKustomizeShadowComponent builds docs/install.md's kustomization with
// the component deploy/components/shadow over deploy/, with the real
// kubectl: every object is what the chart renders with shadow.enabled (the
// agents' arguments end in --shadow, nothing else differs from deploy/).
// The component composes with deploy/components/namespace and a patch of
// deploy/patches, as the doc says, and without it the agents enforce.
func TestKustomizeShadowComponent(t *testing.T) {
	kustomization := docYAMLBlock(t, "docs/install.md", "deploy/components/shadow")
	kustomization = strings.ReplaceAll(kustomization, "github.com/evictd/evictd//deploy/components/shadow?ref=<version>", "../deploy/components/shadow")
	kustomization = strings.ReplaceAll(kustomization, "github.com/evictd/evictd//deploy?ref=<version>", "../deploy")
	out, err := kustomize(t, overlayDir(t, map[string]string{"kustomization.yaml": kustomization}))
	if err != nil {
		t.Fatalf("kubectl kustomize of docs/install.md's shadow kustomization: %v\n%s", err, out)
	}
	objs, err := framework.ParseManifest(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	equalsChart(t, objs, "shadow: {enabled: true}", "deploy/ with deploy/components/shadow")
	args := func(objs []*unstructured.Unstructured) []any {
		t.Helper()
		cs := nested[[]any](t, find(t, objs, "DaemonSet", "evictd"), "spec", "template", "spec", "containers")
		return cs[0].(map[string]any)["args"].([]any)
	}
	base, err := kustomize(t, repoPath(t, "deploy"))
	if err != nil {
		t.Fatalf("kubectl kustomize deploy: %v\n%s", err, base)
	}
	plain, err := framework.ParseManifest(strings.NewReader(base))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := args(objs), append(slices.Clone(args(plain)), "--shadow"); !slices.Equal(got, want) || slices.Contains(args(plain), any("--shadow")) {
		t.Errorf("the agents' arguments with the component: %v; want deploy/'s %v and --shadow", got, args(plain))
	}

	// With a distribution's patch and another namespace.
	composed := overlayDir(t, map[string]string{
		"namespace.yaml": namespaceSource,
		"k3s.yaml":       readFile(t, "deploy/patches/k3s.yaml"),
		"kustomization.yaml": "resources: [../deploy, namespace.yaml]\n" +
			"components: [../deploy/components/namespace, ../deploy/components/shadow]\n" +
			"patches:\n  - path: k3s.yaml\n    target: {kind: DaemonSet, name: evictd}\n",
	})
	out, err = kustomize(t, composed)
	if err != nil {
		t.Fatalf("kubectl kustomize of the shadow component with the namespace component and the k3s patch: %v\n%s", err, out)
	}
	objs, err = framework.ParseManifest(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	ds := find(t, objs, "DaemonSet", "evictd")
	got := args(objs)
	if ds.GetNamespace() != "other" || got[len(got)-1] != "--shadow" || !slices.Contains(got, any("--image-fs=/var/lib/rancher/k3s/agent/containerd")) {
		t.Errorf("composed: the DaemonSet in %q with arguments %v; want it in other, k3s's image store, --shadow last", ds.GetNamespace(), got)
	}
}
