// SPDX-License-Identifier: Apache-2.0

package deploy

import (
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

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The files whose commands a user copies; the chart's NOTES are added as
// rendered for the default release.
var docFiles = []string{"README.md", "docs/install.md", "deploy/helm/evictd/README.md", "docs/runbook.md"}

const notesFile = "NOTES.txt (release evictd in evictd-system)"

// lifecycleVerbs are the commands that change what is installed: each one
// the docs show must run, as written, in TestDocCommands.
var lifecycleVerbs = map[string][]string{
	"helm":    {"install", "upgrade", "rollback", "uninstall"},
	"kubectl": {"apply", "delete", "create", "label", "patch", "taint"},
}

var (
	fenceRE  = regexp.MustCompile("(?ms)^[ \t]*```([a-z]*)[ \t]*\n(.*?)^[ \t]*```")
	inlineRE = regexp.MustCompile("`([^`]+)`")
)

// lifecycleVerb is the helm or kubectl subcommand of cmd when it is one of
// lifecycleVerbs, else "". kubectl's namespace flag may come first. A
// mention in prose ("the next `helm upgrade`") has no argument and is no
// command.
func lifecycleVerb(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) < 3 {
		return ""
	}
	verbs, ok := lifecycleVerbs[f[0]]
	if !ok {
		return ""
	}
	i := 1
	for f[0] == "kubectl" && i < len(f) {
		switch {
		case f[i] == "-n" || f[i] == "--namespace":
			i += 2
			continue
		case strings.HasPrefix(f[i], "--namespace="):
			i++
			continue
		}
		break
	}
	if i < len(f) && slices.Contains(verbs, f[i]) {
		return f[i]
	}
	return ""
}

// commandsIn returns the shell commands of a Markdown text: each line of a
// fenced sh/bash/shell block (continuation lines joined, a trailing comment
// after two spaces dropped) and each inline code span.
func commandsIn(md string) []string {
	var out []string
	for _, m := range fenceRE.FindAllStringSubmatch(md, -1) {
		if lang := m[1]; lang != "" && lang != "sh" && lang != "bash" && lang != "shell" {
			continue
		}
		out = append(out, shellLines(m[2])...)
	}
	prose := fenceRE.ReplaceAllString(md, "")
	for _, m := range inlineRE.FindAllStringSubmatch(prose, -1) {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

var trailingComment = regexp.MustCompile(`\s{2,}#.*$`)

func shellLines(block string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasSuffix(l, `\`) {
			cur += strings.TrimSuffix(l, `\`)
			continue
		}
		l = trailingComment.ReplaceAllString(cur+l, "")
		cur = ""
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return out
}

// renderNotes renders the chart's NOTES as `helm install evictd -n
// evictd-system` prints them with values.
func renderNotes(t *testing.T, valuesYAML string) string {
	t.Helper()
	rel, err := dryRunInstall(t, defaultRelease, defaultNamespace, valuesYAML)
	if err != nil {
		t.Fatal(err)
	}
	return rel.Info.Notes
}

// docLifecycleCommands maps each install/upgrade/rollback/uninstall/apply/
// delete command the docs show to where they show it.
func docLifecycleCommands(t *testing.T) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	add := func(where string, cmds []string) {
		for _, c := range cmds {
			if lifecycleVerb(c) != "" && !slices.Contains(found[c], where) {
				found[c] = append(found[c], where)
			}
		}
	}
	for _, f := range docFiles {
		b, err := os.ReadFile(repoPath(t, f))
		if err != nil {
			t.Fatal(err)
		}
		add(f, commandsIn(string(b)))
	}
	add(notesFile, shellLines(renderNotes(t, "")))
	return found
}

// Commands the docs give; the test runs each verbatim.
const (
	cmdKustomizeApply  = "kubectl apply -k deploy/"
	cmdKustomizeDelete = "kubectl delete -k deploy/ --ignore-not-found"
	cmdCleanupApply    = "kubectl apply -k deploy/cleanup/"
	cmdCleanupWait     = "kubectl -n evictd-system wait --for=condition=Complete --timeout=5m job/evictd-cleanup"
	cmdOwnNodeApply    = "kubectl apply -f deploy/own-node-evictions.yaml"
	cmdOwnNodeDelete   = "kubectl delete -f deploy/own-node-evictions.yaml"
	cmdKeepAwayApply   = "kubectl apply -f deploy/brake-besteffort-only.yaml"
	cmdKeepAwayDelete  = "kubectl delete -f deploy/brake-besteffort-only.yaml"
	cmdStop            = `kubectl -n evictd-system patch daemonset evictd --type merge -p '{"spec":{"template":{"spec":{"nodeSelector":{"evictd.io/emergency-stop":"true"}}}}}'`
	cmdUnstop          = `kubectl -n evictd-system patch daemonset evictd --type json -p '[{"op":"remove","path":"/spec/template/spec/nodeSelector/evictd.io~1emergency-stop"}]'`
	cmdLiftBrake       = "kubectl taint node NODE evictd.io/memory-pressure-" // NODE: the node, node-linux here
	cmdLiftCondition   = `kubectl patch node NODE --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"EvictdMemoryPressure","status":"False","reason":"LiftedByHand","message":"evictd brake lifted by hand: no evictd acted on the node"}]}}'`
	cmdCreateNS        = "kubectl create namespace evictd-system"
	cmdLabelNS         = "kubectl label namespace evictd-system pod-security.kubernetes.io/enforce=privileged"
	cmdGKEQuota        = "kubectl apply -f deploy/gke/critical-pods-quota.yaml"
	cmdInstall         = "helm install evictd deploy/helm/evictd -n evictd-system --set image.repository=registry.example.com/evictd --set image.tag=0.2.0-dev"
	cmdNotesExplain    = "kubectl create clusterrolebinding alice-evictd-explain --clusterrole=evictd-evictd-system-explain-reader --user=alice"
	cmdNotesUpgrade    = "helm upgrade evictd deploy/helm/evictd -n evictd-system --reset-then-reuse-values --set image.repository=registry.example.com/evictd --set image.tag=0.2.0-dev"
	cmdUpgrade         = "helm upgrade evictd deploy/helm/evictd -n evictd-system --reset-then-reuse-values --set image.tag=0.2.0"
	cmdRollback        = "helm rollback evictd -n evictd-system"
	cmdUninstall       = "helm uninstall evictd -n evictd-system"
	cmdDeleteNS        = "kubectl delete namespace evictd-system"
	cmdInstallPreset   = "helm install evictd deploy/helm/evictd -n evictd-system -f deploy/helm/evictd/presets/k3s.yaml --set image.repository=registry.example.com/evictd --set image.tag=0.2.0-dev"

	// The uninstall when its cleanup Job cannot run: the Job's command from
	// a workstation, then the release without its hook.
	cmdCleanupByHand    = "evictd cleanup --delete-daemonset evictd-system/evictd"
	cmdUninstallNoHooks = "helm uninstall evictd -n evictd-system --no-hooks"
)

// TestDocCommands runs every install, upgrade, rollback, uninstall, apply,
// delete, create, label, patch and taint command of README.md,
// docs/install.md, the chart's README and NOTES and docs/runbook.md,
// verbatim (the runbook's NODE is node-linux), with the real helm and
// kubectl against the test API server, in a user's order: the runbook's
// lift of a brake left on a node, the kustomize install with the opt-in policies (own-node evictions, the
// brake for BestEffort pods only), the runbook's emergency stop and its
// undo, and their removal (the cleanup Job first, on a stand-in kubelet); the Helm install (the namespace first, GKE's quota), NOTES'
// grant of the secure port's /explain, NOTES' upgrade to the user's image, an upgrade, a rollback, the uninstall; a
// preset's install, removed as when the cleanup Job cannot run (evictd
// cleanup from the workstation, then the uninstall without hooks). Each must exit 0, what it installs must be there, and
// after each removal nothing it installed may be left. A documented
// command the test does not run fails it, by name.
//
// The cluster has four Node objects and no kubelet: Linux, Windows, a
// virtual-kubelet node and an EKS Fargate node; the DaemonSet must want a
// pod on the Linux one alone. Those pods cannot fit a node with no
// allocatable resources, so they stay unscheduled, and nothing waits for
// them.
func TestDocCommands(t *testing.T) {
	start := time.Now()
	// Every documented command must be in the scenario below, and every
	// command of the scenario in the docs, so neither drifts from the other.
	scenario := []string{cmdLiftBrake, cmdLiftCondition, cmdKustomizeApply, cmdOwnNodeApply, cmdKeepAwayApply, cmdStop, cmdUnstop, cmdKeepAwayDelete, cmdOwnNodeDelete, cmdCleanupApply, cmdKustomizeDelete, cmdCreateNS, cmdLabelNS, cmdGKEQuota,
		cmdInstall, cmdNotesExplain, cmdNotesUpgrade, cmdUpgrade, cmdRollback, cmdUninstall, cmdDeleteNS, cmdInstallPreset, cmdUninstallNoHooks}
	docs := docLifecycleCommands(t)
	// README.md's fenced commands are TestNewcomerPath's to run.
	newcomer := newcomerPath(t)
	for _, c := range keys(docs) {
		if !slices.Contains(scenario, c) && !slices.Contains(newcomer, c) {
			t.Errorf("%s: %q is documented, and no test runs it", strings.Join(docs[c], ", "), c)
		}
	}
	for _, c := range scenario {
		if _, ok := docs[c]; !ok {
			t.Errorf("the test runs %q, which no doc shows any more", c)
		}
	}
	// Not helm's or kubectl's, so not among the commands found above.
	if !slices.Contains(commandsIn(readFile(t, "docs/install.md")), cmdCleanupByHand) {
		t.Errorf("the test runs %q, which docs/install.md does not show any more", cmdCleanupByHand)
	}
	if t.Failed() {
		t.FailNow()
	}

	d := startDocShell(t, "doc-test-identity")
	// evictd on PATH, as the docs' `evictd cleanup` finds it on a
	// workstation.
	for i, e := range d.env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			d.env[i] = "PATH=" + filepath.Dir(framework.RequireBinary(t, "evictd")) + ":" + p
		}
	}
	c, env, root := d.c, d.env, d.root
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	for _, n := range []struct {
		name   string
		labels map[string]string
	}{
		{"linux", map[string]string{"kubernetes.io/os": "linux"}},
		{"windows", map[string]string{"kubernetes.io/os": "windows"}},
		{"virtual", map[string]string{"kubernetes.io/os": "linux", "type": "virtual-kubelet"}},
		{"fargate", map[string]string{"kubernetes.io/os": "linux", "eks.amazonaws.com/compute-type": "fargate"}},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + n.name, Labels: n.labels}}
		if _, err := c.Admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	ran := map[string]bool{}
	run := func(cmd string) string {
		t.Helper()
		out := d.run(ctx, t, strings.ReplaceAll(cmd, "NODE", "node-linux"), 2*time.Minute)
		ran[cmd] = true
		return out
	}

	// The runbook's lift, by hand, of a brake left on a node (with the
	// default effect).
	brakeTaint := corev1.Taint{Key: "evictd.io/memory-pressure", Effect: corev1.TaintEffectPreferNoSchedule}
	setTaints(ctx, t, c, "node-linux", []corev1.Taint{brakeTaint})
	run(cmdLiftBrake)
	if n, err := c.Admin.CoreV1().Nodes().Get(ctx, "node-linux", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == brakeTaint.Key }) {
		t.Errorf("after %q node-linux has the taints %v; want none of evictd's", cmdLiftBrake, n.Spec.Taints)
	}
	// And of its condition, left True: set False, the kubelet's and the
	// controllers' conditions as they were.
	brakeCond := corev1.NodeCondition{Type: "EvictdMemoryPressure", Status: corev1.ConditionTrue,
		Reason: "EvictdPressureEpisode", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	setCondition(ctx, t, c, "node-linux", brakeCond)
	before := nodeConditions(ctx, t, c, "node-linux")
	run(cmdLiftCondition)
	after := nodeConditions(ctx, t, c, "node-linux")
	if got := after[brakeCond.Type]; got != corev1.ConditionFalse {
		t.Errorf("after %q node-linux's %s is %q; want False", cmdLiftCondition, brakeCond.Type, got)
	}
	delete(before, brakeCond.Type)
	delete(after, brakeCond.Type)
	if !maps.Equal(before, after) {
		t.Errorf("%q changed node-linux's other conditions: %v, then %v", cmdLiftCondition, before, after)
	}

	// kustomize.
	manifest, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ownNode, err := framework.ReadManifest(repoPath(t, "deploy", "own-node-evictions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	keepAway, err := framework.ReadManifest(repoPath(t, "deploy", "brake-besteffort-only.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run(cmdKustomizeApply)
	requireExist(ctx, t, c, manifest)
	run(cmdOwnNodeApply)
	requireExist(ctx, t, c, ownNode)
	run(cmdKeepAwayApply)
	requireExist(ctx, t, c, keepAway)
	dsWants(ctx, t, c, "evictd", 1)
	run(cmdStop)
	dsWants(ctx, t, c, "evictd", 0)
	run(cmdUnstop)
	dsWants(ctx, t, c, "evictd", 1)
	// Not in the kustomization: `kubectl delete -k deploy/` would leave it
	// checking every eviction in the cluster.
	run(cmdOwnNodeDelete)
	requireGone(ctx, t, c, ownNode)
	run(cmdKeepAwayDelete)
	requireGone(ctx, t, c, keepAway)
	// The uninstall's cleanup Job runs evictd cleanup, as the real evictd
	// binary on a stand-in kubelet (no node here has one); so do the Helm
	// uninstalls' below, the chart's pre-delete hook.
	c.StandInKubelet(t, defaultNamespace, "app.kubernetes.io/name=evictd-cleanup", "node-linux", framework.RequireBinary(t, "evictd"))
	run(cmdCleanupApply)
	run(cmdCleanupWait)
	run(cmdKustomizeDelete)
	requireGone(ctx, t, c, manifest)

	// Helm.
	rendered, err := render(t, "image: {repository: registry.example.com/evictd, tag: 0.2.0-dev}")
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(defaultNamespace)
	run(cmdCreateNS)
	run(cmdLabelNS)
	quota, err := framework.ReadManifest(repoPath(t, "deploy", "gke", "critical-pods-quota.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run(cmdGKEQuota)
	requireExist(ctx, t, c, quota)
	// The value of earlier versions is refused, with what to do instead.
	refused := exec.CommandContext(ctx, "bash", "-c", cmdInstall+" --set namespace.create=true")
	refused.Dir, refused.Env = root, env
	if out, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(out), "namespace.create=true is no longer supported") {
		t.Errorf("helm install --set namespace.create=true: %v\n%s\nwant it refused, saying to create the namespace first", err, out)
	}
	out := run(cmdInstall)
	if !strings.Contains(out, "STATUS: deployed") {
		t.Errorf("%s:\n%s", cmdInstall, out)
	}
	requireExist(ctx, t, c, rendered)
	dsWants(ctx, t, c, "evictd", 1)
	// NOTES' grant of the secure port's /explain: alice may get
	// nodes/explain of evictd.io on any node, and nodes/shadow (shadow
	// mode's reports) and nodes/trace, and nothing more: not nodes/metrics,
	// and not the API server's own paths. Not the release's, so removed
	// here, by hand.
	run(cmdNotesExplain)
	mayGet := func(sub string) *authzv1.SubjectAccessReview {
		t.Helper()
		spec := authzv1.SubjectAccessReviewSpec{User: "alice",
			ResourceAttributes: &authzv1.ResourceAttributes{Group: "evictd.io", Resource: "nodes", Subresource: sub, Name: "node-linux", Verb: "get"}}
		if strings.HasPrefix(sub, "/") {
			spec.ResourceAttributes, spec.NonResourceAttributes = nil, &authzv1.NonResourceAttributes{Path: sub, Verb: "get"}
		}
		sar, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar
	}
	// The API server's RBAC authorizer reads bindings from its informer, so
	// a binding just created is seen a moment later (CI once asked before):
	// wait until the grant shows, then every answer must be the final one.
	for deadline := time.Now().Add(30 * time.Second); !mayGet("explain").Status.Allowed && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	for _, sub := range []string{"explain", "shadow", "trace", "metrics", "/explain", "/metrics"} {
		want := !strings.HasPrefix(sub, "/") && sub != "metrics"
		if sar := mayGet(sub); sar.Status.Allowed != want {
			t.Errorf("after %q, alice may get %s: %v; want %v (%s)", cmdNotesExplain, sub, sar.Status.Allowed, want, sar.Status.Reason)
		}
	}
	if err := c.Admin.RbacV1().ClusterRoleBindings().Delete(ctx, "alice-evictd-explain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantImage := func(img string) {
		t.Helper()
		ds, err := c.Admin.AppsV1().DaemonSets(defaultNamespace).Get(ctx, "evictd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Spec.Template.Spec.Containers[0].Image; got != img {
			t.Errorf("the DaemonSet runs %s; want %s", got, img)
		}
	}
	run(cmdNotesUpgrade)
	wantImage("registry.example.com/evictd:0.2.0-dev")
	run(cmdUpgrade)
	wantImage("registry.example.com/evictd:0.2.0")
	run(cmdRollback)
	wantImage("registry.example.com/evictd:0.2.0-dev")
	run(cmdUninstall)
	requireGone(ctx, t, c, rendered)
	run(cmdDeleteNS)
	requireGone(ctx, t, c, []*unstructured.Unstructured{ns})
	requireGone(ctx, t, c, quota)

	// A preset's install, then the same removal.
	run(cmdCreateNS)
	run(cmdLabelNS)
	run(cmdInstallPreset)
	preset, err := render(t, "image: {repository: registry.example.com/evictd, tag: 0.2.0-dev}\n"+readFile(t, "deploy/helm/evictd/presets/k3s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	requireExist(ctx, t, c, preset)
	run(cmdCleanupByHand)
	requireGone(ctx, t, c, []*unstructured.Unstructured{find(t, preset, "DaemonSet", "evictd")})
	run(cmdUninstallNoHooks)
	if _, err := c.Admin.BatchV1().Jobs(defaultNamespace).Get(ctx, "evictd-cleanup", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after %q, the cleanup Job: %v; want none (no hook runs)", cmdUninstallNoHooks, err)
	}
	run(cmdDeleteNS)
	requireGone(ctx, t, c, append(preset, ns))

	for _, cmd := range scenario {
		if !ran[cmd] {
			t.Errorf("%q was not run", cmd)
		}
	}
	t.Logf("%d documented commands run in %s", len(scenario), time.Since(start).Round(time.Second))
}

type errMissing string

func (e errMissing) Error() string { return string(e) }

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func requireExist(ctx context.Context, t *testing.T, c *framework.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		ri, err := c.ResourceFor(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("after the install, %s: %v", key(o), err)
		}
	}
}

// requireGone waits until none of objs exists (a namespace's deletion and
// the garbage collector's take a moment).
func requireGone(ctx context.Context, t *testing.T, c *framework.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for _, o := range objs {
		ri, err := c.ResourceFor(o)
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("after the removal, %s is left (%v)", key(o), err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// dsWants waits for the DaemonSet controller to have seen the DaemonSet's
// current spec and to want pods on n nodes.
func dsWants(ctx context.Context, t *testing.T, c *framework.Cluster, name string, n int32) {
	t.Helper()
	var got int32
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ds, err := c.Admin.AppsV1().DaemonSets(defaultNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = ds.Status.DesiredNumberScheduled
		if ds.Status.ObservedGeneration == ds.Generation && got == n {
			return
		}
	}
	t.Fatalf("DaemonSet %s wants pods on %d nodes; want %d (of node-linux, -windows, -virtual, -fargate)", name, got, n)
}

// setTaints gives the Node these taints.
// setCondition sets cond among node's conditions, by its type.
func setCondition(ctx context.Context, t *testing.T, c *framework.Cluster, node string, cond corev1.NodeCondition) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = append(slices.DeleteFunc(n.Status.Conditions, func(x corev1.NodeCondition) bool {
			return x.Type == cond.Type
		}), cond)
		_, err = c.Admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// nodeConditions is node's conditions' status by type.
func nodeConditions(ctx context.Context, t *testing.T, c *framework.Cluster, node string) map[corev1.NodeConditionType]corev1.ConditionStatus {
	t.Helper()
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, x := range n.Status.Conditions {
		out[x.Type] = x.Status
	}
	return out
}

func setTaints(ctx context.Context, t *testing.T, c *framework.Cluster, node string, taints []corev1.Taint) {
	t.Helper()
	// The node lifecycle controller writes a new Node too (its taints):
	// a conflict is a write of its, not a failure.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = append(slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return strings.HasPrefix(t.Key, "evictd.io/")
		}), taints...)
		_, err = c.Admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
