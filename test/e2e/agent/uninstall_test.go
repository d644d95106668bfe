// SPDX-License-Identifier: Apache-2.0

package agent

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

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/framework"
)

// The uninstall tests cannot run the agents as the chart's or the
// manifest's DaemonSet pods: a simulated node runs a pod's processes on the
// host, with no mount namespace, so the pod's /host mounts (the host root
// evictd reads) do not exist for it. The DaemonSet controller is therefore
// off and the DaemonSets have no pods; the agent is a real `evictd run`
// process with its DaemonSet pod's identity (a token bound to a pod on the
// node). The cleanup Job's pod needs no host: the stand-in kubelet runs it
// as the real evictd binary with its ServiceAccount's token.

// cleanupRunner is the Node the cleanup Job's pod is bound to: a Node
// object with no kubelet, the stand-in kubelet's.
const cleanupRunner = "cleanup-runner"

// kubeletLease is a kubelet's heartbeat Lease of a node whose name starts
// as evictd's leases do: the uninstall must leave it.
const kubeletLease = nodelease.NamePrefix + "kubelet"

// leftBehind is a cluster in which an agent of the install id died
// mid-episode (SIGKILL: its exit lift never ran, as when an uninstall
// deletes its identity first): its memory brake on the node, its node
// lease, and an EvictionRequest of evictd's requester labelled with its
// install's mark; beside them, what the uninstall must not touch: a
// kubelet's Lease named evictd-kubelet and another requester's
// EvictionRequest.
func leftBehind(t *testing.T, name, id string) *memoryNode {
	t.Helper()
	m := newMemoryNode(t, name, framework.WithControllers("job"),
		framework.WithAPIServerArgs("--feature-gates=EvictionRequestAPI=true", "--runtime-config=lifecycle.k8s.io/v1alpha1=true"))
	ctx := context.Background()
	_, kubeconfig := m.c.EvictdNodeToken(t, m.node.Name)
	e := startBraking(t, m, kubeconfig, "--install="+id)
	_, hog := m.startHog(t, hogSpec(80, 700))
	waitEvictions(t, e, 1, evictionTimeout)
	e.waitLog(30*time.Second, "node brake on: new pods kept away until the episode ends", nil)
	e.kill()
	_ = m.c.Admin.CoreV1().Pods(hog.Namespace).Delete(ctx, hog.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})

	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: cleanupRunner, Labels: map[string]string{corev1.LabelOSStable: "linux"}}},
	} {
		if _, err := m.c.Admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kubeletLease, Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(kubeletLease), LeaseDurationSeconds: ptr.To[int32](40)}}
	if _, err := m.c.Admin.CoordinationV1().Leases(lease.Namespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ers := m.c.Admin.LifecycleV1alpha1().EvictionRequests(m.ns)
	// For the pod evictd never evicts (system-node-critical): a request is
	// owned by its pod, and goes with it.
	target := m.pods["critical"]
	ours := evictreq.Build(target, evictreq.DefaultRequester)
	ours.Labels[install.Label] = install.Mark(id)
	theirs := evictreq.Build(target, "example.com/drainer")
	theirs.Name = "drainer-" + string(target.UID)
	for _, er := range []*lifecyclev1alpha1.EvictionRequest{ours, theirs} {
		if _, err := ers.Create(ctx, er, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if left := evictdLeft(t, m); !strings.Contains(strings.Join(left, "\n"), "taint "+nodebrake.TaintKey(nodebrake.Memory)) ||
		!strings.Contains(strings.Join(left, "\n"), "lease ") || !strings.Contains(strings.Join(left, "\n"), "EvictionRequest ") {
		t.Fatalf("before the uninstall: %q; want evictd's taint, its lease and its EvictionRequest left", left)
	}
	return m
}

// evictdLeft names what evictd wrote that is on the cluster, read
// independently of pkg/cleanup: a taint of evictd's prefix, an evictd
// condition at True, a Lease evictd-* other than the kubelet's, an
// EvictionRequest of evictd's requester. It fails the test when what the
// uninstall must leave is gone.
func evictdLeft(t *testing.T, m *memoryNode) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	nodes, err := m.c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, tn := range n.Spec.Taints {
			if strings.HasPrefix(tn.Key, nodebrake.TaintPrefix) {
				left = append(left, fmt.Sprintf("taint %s on node %s", tn.ToString(), n.Name))
			}
		}
		for _, c := range n.Status.Conditions {
			if strings.HasPrefix(string(c.Type), "Evictd") && c.Status == corev1.ConditionTrue {
				left = append(left, fmt.Sprintf("condition %s=True on node %s", c.Type, n.Name))
			}
		}
	}
	// Every namespace's: an agent's Lease is in its install's namespace.
	leases, err := m.c.Admin.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubelets := 0
	for _, l := range leases.Items {
		switch {
		case l.Name == kubeletLease:
			kubelets++
		case strings.HasPrefix(l.Name, nodelease.NamePrefix):
			left = append(left, "lease "+l.Namespace+"/"+l.Name)
		}
	}
	if kubelets != 1 {
		t.Errorf("the kubelet's Lease %s is gone", kubeletLease)
	}
	ers, err := m.c.Admin.LifecycleV1alpha1().EvictionRequests("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, er := range ers.Items {
		if er.Spec.Requester == evictreq.DefaultRequester {
			left = append(left, "EvictionRequest "+er.Namespace+"/"+er.Name)
		} else {
			others++
		}
	}
	if others != 1 {
		t.Errorf("%d EvictionRequests of other requesters; want the one the test made, untouched", others)
	}
	return left
}

// docRunner runs shell commands as docs/install.md writes them, with the
// real helm, kubectl and evictd, from the repository's root, as the admin.
// A command that fails fails the test.
func docRunner(t *testing.T, c *framework.Cluster) func(cmd string) string {
	t.Helper()
	try := docTrier(t, c)
	return func(cmd string) string {
		t.Helper()
		out, err := try(cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
}

// docTrier is docRunner for a command that may fail: it returns the
// command's output and its error.
func docTrier(t *testing.T, c *framework.Cluster) func(cmd string) (string, error) {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(root, "_output", "tools", "helm")
	if st, err := os.Stat(helm); err != nil || st.Mode()&0o111 == 0 {
		framework.Require(t, fmt.Errorf("no helm at %s (make _output/tools/helm builds it): %w", helm, framework.ErrMissingBinary))
	}
	kubectl := framework.RequireBinary(t, "kubectl")
	evictd := framework.RequireBinary(t, "evictd")
	home := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(helm)+":"+filepath.Dir(kubectl)+":"+filepath.Dir(evictd)+":"+os.Getenv("PATH"),
		"KUBECONFIG="+c.AdminKubeconfig, "HOME="+home, "XDG_CACHE_HOME="+home+"/cache",
		"XDG_CONFIG_HOME="+home+"/config", "XDG_DATA_HOME="+home+"/data")
	return func(cmd string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		x := exec.CommandContext(ctx, "bash", "-c", cmd)
		x.Dir, x.Env = root, env
		began := time.Now()
		out, err := x.CombinedOutput()
		t.Logf("$ %s (%s)\n%s", cmd, time.Since(began).Round(time.Millisecond), out)
		return string(out), err
	}
}

// docSection returns the sh lines of docs/install.md from the first line
// that starts with from up to the first line of the next sh block after it
// that starts with to, both included: the commands of one documented step.
func docSection(t *testing.T, from, to string) []string {
	t.Helper()
	lines := framework.DocLines(t, "docs/install.md")
	for i, l := range lines {
		if !strings.HasPrefix(l, from) {
			continue
		}
		for j := i; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], to) {
				return lines[i : j+1]
			}
		}
	}
	t.Fatalf("docs/install.md has no commands from %q to %q", from, to)
	return nil
}

// checkNothingLeft fails the test when the uninstall left anything of
// evictd's, and checks that the stand-in kubelet ran the cleanup pod once,
// successfully.
func checkNothingLeft(t *testing.T, m *memoryNode, what string, runs []framework.PodRun) {
	t.Helper()
	if left := evictdLeft(t, m); len(left) > 0 {
		t.Errorf("after %s: left %s", what, strings.Join(left, "; "))
	}
	if len(runs) != 1 || runs[0].ExitCode != 0 {
		t.Errorf("after %s: the cleanup Job's pods ran %d times (%+v); want once, exit 0", what, len(runs), runs)
	}
}

// checkFlowControlGone fails the test when the FlowSchema or the
// PriorityLevelConfiguration name, cluster-scoped objects an install adds,
// outlived the uninstall.
func checkFlowControlGone(t *testing.T, m *memoryNode, name string) {
	t.Helper()
	ctx := context.Background()
	fc := m.c.Admin.FlowcontrolV1()
	if _, err := fc.FlowSchemas().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the FlowSchema %s after the uninstall: %v; want it deleted", name, err)
	}
	if _, err := fc.PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PriorityLevelConfiguration %s after the uninstall: %v; want it deleted", name, err)
	}
}

// TestUninstallHelm: `helm uninstall` (the real helm CLI) during a pressure
// episode's leftovers takes back all of evictd's writes through the
// chart's pre-delete hook: no evictd.io/ taint, no Evictd… condition at
// True, no evictd Lease, no EvictionRequest of evictd's; a kubelet's Lease
// named evictd-… and another requester's EvictionRequest stay. The chart
// is installed by docs/install.md's commands but for the namespace
// (evictd-helm: the test cluster's evictd-system holds the manifest's
// identity, whose objects Helm would refuse to adopt) and the image; its
// cluster-scoped FlowSchema and priority level go with it.
func TestUninstallHelm(t *testing.T) {
	m := leftBehind(t, "uninstall-helm", "evictd-helm/evictd")
	run := docRunner(t, m.c)
	const ns = "evictd-helm"
	stop := m.c.StandInKubelet(t, ns, "app.kubernetes.io/name=evictd-cleanup", cleanupRunner, framework.RequireBinary(t, "evictd"))
	var uninstall string
	for _, l := range docSection(t, "kubectl create namespace evictd-system", "kubectl label namespace evictd-system") {
		run(strings.ReplaceAll(l, "evictd-system", ns))
	}
	// The agent ran as the manifest's identity, whose Lease is in
	// evictd-system; the release's agent's would be in the release's
	// namespace, the only one its cleanup identity may delete in.
	moveAgentLease(t, m, ns)
	for _, l := range docSection(t, "helm install evictd deploy/helm/evictd", "helm install evictd deploy/helm/evictd") {
		run(strings.NewReplacer("evictd-system", ns, "registry.example.com/evictd", "evictd", "image.tag=0.2.0-dev", "image.tag=e2e").Replace(l))
	}
	// The release's own, apart from the manifest's the test cluster has.
	if _, err := m.c.Admin.FlowcontrolV1().FlowSchemas().Get(context.Background(), "evictd-"+ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("the release's FlowSchema evictd-%s after the install: %v", ns, err)
	}
	for _, l := range docSection(t, "helm uninstall evictd", "helm uninstall evictd") {
		uninstall = strings.ReplaceAll(l, "evictd-system", ns)
		run(uninstall)
	}
	checkNothingLeft(t, m, uninstall, stop())
	checkFlowControlGone(t, m, "evictd-"+ns)
	if _, err := m.c.Admin.BatchV1().Jobs(ns).Get(context.Background(), "evictd-cleanup", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cleanup Job after a successful uninstall: %v; want it deleted (hook-succeeded)", err)
	}
}

// TestUninstallHelmCleanupCannotRun: docs/install.md's Helm uninstall when
// the cleanup Job cannot run (no node runs its pod: no stand-in kubelet
// here, as when its image is never pulled or no node takes it), during a
// pressure episode's leftovers. helm uninstall fails on the Job's failure
// at its deadline, DeadlineExceeded, seen in the Job's Failed condition,
// with nothing deleted: the DaemonSet and evictd's leftovers are there.
// Then docs/install.md's recovery, its commands run as written (evictd
// cleanup from the workstation, helm uninstall --no-hooks, the namespace's
// deletion), leaves nothing of evictd's: no taint, condition, Lease or
// EvictionRequest of its, no object of the release (the FlowSchema and
// priority level, the cluster-scoped RBAC and policies), not the failed
// Job. The release is installed with cleanup.timeout 10s and
// cleanup.deadline 30s, so that the Job fails after 30 s rather than the
// default 4 minutes.
func TestUninstallHelmCleanupCannotRun(t *testing.T) {
	m := leftBehind(t, "uninstall-stuck", "evictd-helm/evictd")
	run, try := docRunner(t, m.c), docTrier(t, m.c)
	const ns = "evictd-helm"
	ctx := context.Background()
	for _, l := range docSection(t, "kubectl create namespace evictd-system", "kubectl label namespace evictd-system") {
		run(strings.ReplaceAll(l, "evictd-system", ns))
	}
	moveAgentLease(t, m, ns)
	for _, l := range docSection(t, "helm install evictd deploy/helm/evictd", "helm install evictd deploy/helm/evictd") {
		run(strings.NewReplacer("evictd-system", ns, "registry.example.com/evictd", "evictd", "image.tag=0.2.0-dev", "image.tag=e2e").Replace(l) +
			" --set cleanup.timeout=10s --set cleanup.deadline=30s")
	}
	before := evictdLeft(t, m)

	uninstall := strings.ReplaceAll(docSection(t, "helm uninstall evictd", "helm uninstall evictd")[0], "evictd-system", ns)
	out, err := try(uninstall)
	if err == nil {
		t.Fatalf("%s succeeded though no node ran its cleanup Job; want it to fail at the Job's deadline", uninstall)
	}
	const failed = "job evictd-cleanup failed: DeadlineExceeded"
	if !strings.Contains(out, failed) {
		t.Fatalf("%s: %v; want it to fail with %q, the Job's failure at its deadline:\n%s", uninstall, err, failed, out)
	}
	job, err := m.c.Admin.BatchV1().Jobs(ns).Get(ctx, "evictd-cleanup", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the failed cleanup Job: %v; want it kept, for what it says", err)
	}
	if !slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded
	}) {
		t.Errorf("the cleanup Job's conditions %+v; want Failed, DeadlineExceeded", job.Status.Conditions)
	}
	if _, err := m.c.Admin.AppsV1().DaemonSets(ns).Get(ctx, "evictd", metav1.GetOptions{}); err != nil {
		t.Errorf("the release's DaemonSet after the failed uninstall: %v; want it there, nothing deleted", err)
	}
	if after := evictdLeft(t, m); len(after) == 0 || !slices.Equal(after, before) {
		t.Errorf("after the failed uninstall evictd left %q; want what it left before, %q", after, before)
	}

	// The recovery, as written.
	recovery := docSection(t, "evictd cleanup --delete-daemonset", "kubectl delete namespace evictd-system")
	for i, l := range recovery {
		recovery[i] = strings.ReplaceAll(l, "evictd-system", ns)
		run(recovery[i])
	}
	what := strings.Join(recovery, "; ")
	if left := evictdLeft(t, m); len(left) > 0 {
		t.Errorf("after %s: left %s", what, strings.Join(left, "; "))
	}
	checkFlowControlGone(t, m, "evictd-"+ns)
	// The namespace, and the failed Job in it, go once the namespace
	// controller has emptied it.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		_, err := m.c.Admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: the namespace %s is still there (%v)", what, ns, err)
		}
	}
	// The release's cluster-scoped objects, by its labels.
	release := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=evictd,app.kubernetes.io/managed-by=Helm"}
	var left []string
	if l, err := m.c.Admin.RbacV1().ClusterRoles().List(ctx, release); err != nil {
		t.Fatal(err)
	} else {
		for _, o := range l.Items {
			left = append(left, "ClusterRole "+o.Name)
		}
	}
	if l, err := m.c.Admin.RbacV1().ClusterRoleBindings().List(ctx, release); err != nil {
		t.Fatal(err)
	} else {
		for _, o := range l.Items {
			left = append(left, "ClusterRoleBinding "+o.Name)
		}
	}
	if l, err := m.c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, release); err != nil {
		t.Fatal(err)
	} else {
		for _, o := range l.Items {
			left = append(left, "ValidatingAdmissionPolicy "+o.Name)
		}
	}
	if len(left) > 0 {
		t.Errorf("after %s, the release's %s", what, strings.Join(left, ", "))
	}
}

// TestUninstallKustomize: docs/install.md's kustomize uninstall, its
// commands run as written with the real kubectl, during a pressure
// episode's leftovers: nothing of evictd's is left, as with Helm, the
// FlowSchema and its priority level included.
func TestUninstallKustomize(t *testing.T) {
	m := leftBehind(t, "uninstall-kustomize", "evictd-system/evictd")
	run := docRunner(t, m.c)
	stop := m.c.StandInKubelet(t, "evictd-system", "app.kubernetes.io/name=evictd-cleanup", cleanupRunner, framework.RequireBinary(t, "evictd"))
	// The install, then the uninstall's steps.
	steps := docSection(t, "kubectl apply -k deploy/", "kubectl delete -k deploy/")
	for _, l := range steps {
		run(l)
	}
	checkNothingLeft(t, m, strings.Join(steps[1:], "; "), stop())
	checkFlowControlGone(t, m, "evictd")
}

// moveAgentLease moves the agent's node lease that leftBehind left in
// evictd-system to ns, as the admin: what an agent of an install in ns
// would have left.
func moveAgentLease(t *testing.T, m *memoryNode, ns string) {
	t.Helper()
	ctx := context.Background()
	leases := m.c.Admin.CoordinationV1().Leases(nodelease.FallbackNamespace)
	l, err := leases.Get(ctx, nodelease.Name(m.node.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the agent's lease left behind: %v", err)
	}
	moved := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: ns, OwnerReferences: l.OwnerReferences}, Spec: l.Spec}
	if _, err := m.c.Admin.CoordinationV1().Leases(ns).Create(ctx, moved, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDocCleanupByHand: docs/run.md's recovery for a brake left behind,
// `evictd cleanup --install NAMESPACE/NAME` run from a workstation with an
// admin's kubeconfig, takes back everything the install wrote, its agents'
// node Lease in the install's own namespace included (where the agents of
// a release in evictd-helm keep it), and leaves the kubelet's Lease and
// another requester's EvictionRequest.
func TestDocCleanupByHand(t *testing.T) {
	const id, ns = "evictd-helm/evictd", "evictd-helm"
	m := leftBehind(t, "cleanup-by-hand", id)
	ctx := context.Background()
	if _, err := m.c.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moveAgentLease(t, m, ns)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "run.md"))
	if err != nil {
		t.Fatal(err)
	}
	var command string
	if _, rest, ok := strings.Cut(string(doc), "`evictd cleanup --install "); ok {
		cmd, _, _ := strings.Cut(rest, "`")
		command = "evictd cleanup --install " + cmd
	}
	if !strings.Contains(command, "NAMESPACE/NAME") {
		t.Fatalf("docs/run.md shows no `evictd cleanup --install NAMESPACE/NAME` (found %q)", command)
	}
	args := strings.Fields(strings.ReplaceAll(command, "NAMESPACE/NAME", id))
	x := exec.Command(framework.RequireBinary(t, "evictd"), args[1:]...)
	x.Env = append(os.Environ(), "KUBECONFIG="+m.c.AdminKubeconfig, "POD_NAMESPACE=")
	out, err := x.CombinedOutput()
	t.Logf("$ %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	if left := evictdLeft(t, m); len(left) > 0 {
		t.Errorf("after %s: left %s", strings.Join(args, " "), strings.Join(left, "; "))
	}
}
