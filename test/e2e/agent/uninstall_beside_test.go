// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// The uninstall of one install beside a second one (docs/install.md, "Two
// installs"): the second's agent, a real `evictd run` with its
// DaemonSet pod's identity (as in uninstall_test.go), holds its node's
// lease in a soft memory episode, its brake on and a soft EvictionRequest
// waiting for a responder; the first install is uninstalled as the docs
// say. The uninstall must succeed, and the second's brake, lease and
// request must never be touched: watches on the Node, the request and the
// lease see every write from before the uninstall to after it, and the
// second's agent renews its lease after the uninstall ended.

// besideNode is the second install's node and pods, on a cluster that
// serves EvictionRequests and runs the Job controller (the uninstall's
// Job).
func besideNode(t *testing.T, name string) *memoryNode {
	t.Helper()
	c := framework.Start(t, framework.WithControllers("job"),
		framework.WithAPIServerArgs("--feature-gates=EvictionRequestAPI=true", "--runtime-config=lifecycle.k8s.io/v1alpha1=true"))
	createPriorityClasses(t, c)
	m := &memoryNode{c: c}
	m.node = c.StartNode(t, nodesim.Options{Name: name, MemoryBytes: nodeMemory})
	m.ns = c.Namespace(t, name)
	m.pods = createRunning(t, c.Admin, podsFor(m.ns, m.node.Name, []podSpec{
		{name: "batch", priorityClass: classLow, holdMiB: 200, grace: 2, labels: map[string]string{"app": "batch"}},
		{name: "steady", priorityClass: classHigh, holdMiB: 250, grace: 2,
			requests: res("cpu", "100m", "memory", "300Mi"), limits: res("cpu", "100m", "memory", "300Mi")},
	})...)
	waitHolding(t, m.node, mapValues(m.pods)...)
	if _, err := c.Admin.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cleanupRunner,
		Labels: map[string]string{corev1.LabelOSStable: "linux"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// secondAgent is the second install's agent in its episode, and what it
// wrote: its lease, its EvictionRequest for batch.
type secondAgent struct {
	e       *evictd
	id      string
	leaseNS string
	er      *lifecyclev1alpha1.EvictionRequest
	lease   *coordinationv1.Lease
}

// startSecond starts the second install's agent with kubeconfig (a token
// bound to its pod on the node) and env (its pod's identity), and a load
// that opens a soft memory episode lasting the test: the brake goes on,
// and batch gets an EvictionRequest that waits for a responder longer
// than the test runs. The episode cannot end while the load holds its
// memory, and the transition period keeps it open besides.
func startSecond(t *testing.T, m *memoryNode, kubeconfig, id, leaseNS string, env []string) *secondAgent {
	t.Helper()
	ctx := context.Background()
	s := &secondAgent{id: id, leaseNS: leaseNS}
	s.e = startEvictdWith(t, m.c, m.node, evictdSetup{kubeconfig: kubeconfig, env: env},
		append([]string{"--install=" + id, "--node-lease-namespace=" + leaseNS, "--node-brake=true", "--node-lease-duration=3s",
			"--eviction-pressure-transition-period=10m"}, evictionRequestFlags(2*time.Second, 30*time.Minute)...)...)
	startLoad(t, m.c, m.ns, m.node, "load")
	name := evictreq.Name(m.pods["batch"].UID)
	var err error
	deadline := time.Now().Add(90 * time.Second)
	for {
		s.er, err = m.c.Admin.LifecycleV1alpha1().EvictionRequests(m.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the second install's EvictionRequest %s/%s for batch: %v", m.ns, name, err)
	}
	if got := s.er.Labels[install.Label]; got != install.Mark(id) || s.er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction {
		t.Fatalf("the second install's EvictionRequest: label %s=%q, intent %s; want %q, Eviction", install.Label, got, s.er.Spec.Intent, install.Mark(id))
	}
	b := waitBrake(t, m, 30*time.Second, "went on", brakeState.on)
	if !strings.HasSuffix(b.cond.Message, "(evictd install "+id+")") {
		t.Errorf("the second install's condition message %q; want it to name %s", b.cond.Message, id)
	}
	s.lease, err = m.c.Admin.CoordinationV1().Leases(leaseNS).Get(ctx, nodelease.Name(m.node.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the second install's lease: %v", err)
	}
	if got := s.lease.Annotations[install.Annotation]; got != id {
		t.Fatalf("the second install's lease names install %q; want %q", got, id)
	}
	return s
}

// sawTaken records every change the uninstall makes to what the second
// install holds: the Node's brake (its memory taint, with the second's
// mark, and its condition naming it), its EvictionRequest, its lease.
type sawTaken struct {
	mu    sync.Mutex
	taken []string
	stop  func()
	// stopping: the watches are being stopped, and the errors that
	// brings are not the uninstall's.
	stopping atomic.Bool
}

func (w *sawTaken) add(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.taken = append(w.taken, what)
}

func (w *sawTaken) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.taken...)
}

// watchSecond starts watches, from the versions startSecond read, on the
// Node, the second's EvictionRequest and its lease.
func watchSecond(t *testing.T, m *memoryNode, s *secondAgent) *sawTaken {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &sawTaken{}
	node, err := m.c.Admin.CoreV1().Nodes().Get(ctx, m.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	nodeOpts, erOpts, leaseOpts := one(node.Name), one(s.er.Name), one(s.lease.Name)
	nodeOpts.ResourceVersion, erOpts.ResourceVersion, leaseOpts.ResourceVersion = node.ResourceVersion, s.er.ResourceVersion, s.lease.ResourceVersion
	watches := []struct {
		what  string
		start func() (watch.Interface, error)
		check func(watch.Event) string
	}{
		{"node", func() (watch.Interface, error) { return m.c.Admin.CoreV1().Nodes().Watch(ctx, nodeOpts) }, func(ev watch.Event) string {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				return ""
			}
			mark := install.Mark(s.id)
			taint := false
			for _, tn := range n.Spec.Taints {
				taint = taint || (tn.Key == nodebrake.TaintKey(nodebrake.Memory) && tn.Value == mark)
			}
			cond := false
			for _, c := range n.Status.Conditions {
				cond = cond || (c.Type == nodebrake.ConditionType(nodebrake.Memory) && c.Status == corev1.ConditionTrue &&
					install.OfConditionMessage(c.Message) == s.id)
			}
			if !taint || !cond {
				return fmt.Sprintf("node %s at version %s: the second install's taint there %v, its condition True %v", n.Name, n.ResourceVersion, taint, cond)
			}
			return ""
		}},
		{"EvictionRequest", func() (watch.Interface, error) {
			return m.c.Admin.LifecycleV1alpha1().EvictionRequests(m.ns).Watch(ctx, erOpts)
		}, func(ev watch.Event) string {
			er, ok := ev.Object.(*lifecyclev1alpha1.EvictionRequest)
			switch {
			case !ok:
				return ""
			case ev.Type == watch.Deleted || er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction:
				return fmt.Sprintf("EvictionRequest %s/%s %s, intent %s", er.Namespace, er.Name, ev.Type, er.Spec.Intent)
			}
			return ""
		}},
		{"lease", func() (watch.Interface, error) {
			return m.c.Admin.CoordinationV1().Leases(s.leaseNS).Watch(ctx, leaseOpts)
		}, func(ev watch.Event) string {
			l, ok := ev.Object.(*coordinationv1.Lease)
			switch {
			case !ok:
				return ""
			case ev.Type == watch.Deleted || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != *s.lease.Spec.HolderIdentity ||
				l.Annotations[install.Annotation] != s.id:
				return fmt.Sprintf("lease %s/%s %s, holder %v, install %q", l.Namespace, l.Name, ev.Type, ptr.Deref(l.Spec.HolderIdentity, ""), l.Annotations[install.Annotation])
			}
			return ""
		}},
	}
	var wg sync.WaitGroup
	for _, x := range watches {
		wi, err := x.start()
		if err != nil {
			cancel()
			t.Fatalf("watch the %s: %v", x.what, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					if w.stopping.Load() {
						continue
					}
					w.add(fmt.Sprintf("the %s's watch failed: %v", x.what, apierrors.FromObject(ev.Object)))
					continue
				}
				if taken := x.check(ev); taken != "" {
					w.add(taken)
				}
			}
		}()
		stop := wi.Stop
		prev := w.stop
		w.stop = func() {
			if prev != nil {
				prev()
			}
			stop()
		}
	}
	prev := w.stop
	w.stop = func() {
		w.stopping.Store(true)
		prev()
		cancel()
		wg.Wait()
	}
	t.Cleanup(w.stop)
	return w
}

// checkSecondKept fails the test if the uninstall touched the second
// install's state, once its agent has shown it still acts: a renewal of
// its lease after the uninstall ended (at the active pace, about a second).
func checkSecondKept(t *testing.T, m *memoryNode, s *secondAgent, w *sawTaken, ended time.Time) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := m.c.Admin.CoordinationV1().Leases(s.leaseNS).Get(ctx, s.lease.Name, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(ended) &&
			ptr.Deref(l.Spec.HolderIdentity, "") == *s.lease.Spec.HolderIdentity {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second install's agent did not renew its lease after the uninstall: %v, %v", l, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := m.c.Admin.LifecycleV1alpha1().EvictionRequests(m.ns).Get(ctx, s.er.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the second install's EvictionRequest after the uninstall: %v", err)
	}
	if b := readBrake(t, m); !b.on() {
		t.Errorf("the second install's brake after the uninstall: %+v; want it on", b)
	}
	if code, body := s.e.readyz(); code != 200 {
		t.Errorf("the second install's agent after the uninstall: /readyz %d %s; want it ready, acting", code, body)
	}
	w.stop()
	if taken := w.all(); len(taken) > 0 {
		t.Errorf("the uninstall of the first install took the second's state:\n%s", strings.Join(taken, "\n"))
	}
}

// podToken is a token of the ServiceAccount ns/sa bound to a pod of that
// ServiceAccount on node, as a DaemonSet pod of another install holds
// one (framework.EvictdNodeToken makes the manifest's), in a kubeconfig,
// and the pod's identity for the agent's environment.
func podToken(t *testing.T, c *framework.Cluster, ns, sa, pod, node string) (kubeconfig string, env []string) {
	t.Helper()
	ctx := context.Background()
	p, err := c.Admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, PriorityClassName: "system-node-critical",
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "evictd", Image: "evictd.test/workload:latest"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.Admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(c.Dir, pod+".kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, pod, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, []string{"POD_NAMESPACE=" + ns, "POD_NAME=" + pod}
}

// helmInstall runs docs/install.md's helm install for release in ns, with
// the test's image and the extra flags.
func helmInstall(t *testing.T, run func(string) string, release, ns, extra string) {
	t.Helper()
	for _, l := range docSection(t, "helm install evictd deploy/helm/evictd", "helm install evictd deploy/helm/evictd") {
		l = strings.TrimSuffix(strings.TrimSpace(l), `\`)
		run(strings.NewReplacer("helm install evictd", "helm install "+release, "evictd-system", ns, "registry.example.com/evictd", "evictd",
			"image.tag=0.2.0-dev", "image.tag=e2e").Replace(l) + " " + extra)
	}
}

// helmUninstall runs docs/install.md's helm uninstall of release in ns
// and returns when it ended.
func helmUninstall(t *testing.T, run func(string) string, release, ns string) time.Time {
	t.Helper()
	for _, l := range docSection(t, "helm uninstall evictd", "helm uninstall evictd") {
		run(strings.NewReplacer("helm uninstall evictd", "helm uninstall "+release, "evictd-system", ns).Replace(l))
	}
	return time.Now()
}

// checkFirstGone checks the first install's uninstall ran its cleanup
// Job once, successfully, and that nothing names the first install.
func checkFirstGone(t *testing.T, m *memoryNode, firstID string, runs []framework.PodRun) {
	t.Helper()
	if len(runs) != 1 || runs[0].ExitCode != 0 {
		t.Errorf("the first install's cleanup Job's pods ran %d times (%+v); want once, exit 0", len(runs), runs)
	}
	ctx := context.Background()
	n, err := m.c.Admin.CoreV1().Nodes().Get(ctx, m.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range n.Spec.Taints {
		if tn.Value == install.Mark(firstID) {
			t.Errorf("the first install's taint %s is left", tn.ToString())
		}
	}
}

// TestUninstallHelmBesideKustomize: a Helm release (evictd in
// evictd-helm) uninstalled with docs/install.md's helm uninstall, beside
// the kustomize install (deploy/, evictd-system/evictd, the test
// cluster's own) whose agent is in a pressure episode: the hook's
// cleanup succeeds, and the kustomize install's brake, lease and
// EvictionRequest are never touched; its agent still acts.
func TestUninstallHelmBesideKustomize(t *testing.T) {
	m := besideNode(t, "beside-kustomize")
	grantEvictionRequests(t, m.c)
	run := docRunner(t, m.c)
	const ns, first = "evictd-helm", "evictd-helm/evictd"
	for _, l := range docSection(t, "kubectl create namespace evictd-system", "kubectl label namespace evictd-system") {
		run(strings.ReplaceAll(l, "evictd-system", ns))
	}
	helmInstall(t, run, "evictd", ns, "")
	stop := m.c.StandInKubelet(t, ns, "app.kubernetes.io/name=evictd-cleanup", cleanupRunner, framework.RequireBinary(t, "evictd"))

	_, kubeconfig := m.c.EvictdNodeToken(t, m.node.Name)
	s := startSecond(t, m, kubeconfig, "evictd-system/evictd", "evictd-system", nil)
	w := watchSecond(t, m, s)
	ended := helmUninstall(t, run, "evictd", ns)
	checkFirstGone(t, m, first, stop())
	checkSecondKept(t, m, s, w, ended)
}

// TestUninstallHelmBesideHelm: two Helm releases in one namespace (first
// and second in evictd-helm, whose agents' leases share it); first is
// uninstalled with docs/install.md's helm uninstall while second's agent
// is in a pressure episode: the hook's cleanup succeeds, and second's
// brake, lease and EvictionRequest are never touched; its agent still
// acts.
func TestUninstallHelmBesideHelm(t *testing.T) {
	m := besideNode(t, "beside-helm")
	run := docRunner(t, m.c)
	const ns = "evictd-helm"
	for _, l := range docSection(t, "kubectl create namespace evictd-system", "kubectl label namespace evictd-system") {
		run(strings.ReplaceAll(l, "evictd-system", ns))
	}
	helmInstall(t, run, "first", ns, "")
	helmInstall(t, run, "second", ns, "--set evictionRequest.enabled=true")
	stop := m.c.StandInKubelet(t, ns, "app.kubernetes.io/name=evictd-cleanup,app.kubernetes.io/instance=first", cleanupRunner,
		framework.RequireBinary(t, "evictd"))

	kubeconfig, env := podToken(t, m.c, ns, "second-evictd", "second-evictd-"+m.node.Name, m.node.Name)
	s := startSecond(t, m, kubeconfig, ns+"/second-evictd", ns, env)
	w := watchSecond(t, m, s)
	ended := helmUninstall(t, run, "first", ns)
	checkFirstGone(t, m, ns+"/first-evictd", stop())
	checkSecondKept(t, m, s, w, ended)
}
