// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/test/e2e/framework"
)

// TestNodeSmoke is make test's look at the real node, on one boot of the
// cgroup v2 guest (make test-node runs every other node test, and not this
// one: its chart install would collide with their kustomize one on the
// shared node). evictd is installed from the Helm chart with its image by
// docs/install.md's commands, run with the real kubectl and helm against
// the test control plane; its figures agree with the kubelet's summary; and
// one pod that leaks memory is evicted through the Eviction API, with
// evictd's brake (condition and taint) put on the Node during the episode
// and lifted at its end.
//
// Every wait ends on an event (a pod Ready, a watch event on the Node or a
// pod, a line in evictd's log) and its deadline is minutes: the guest is
// emulated, and CI's machine may be busy.
func TestNodeSmoke(t *testing.T) {
	n := sharedNode(t)
	// A 10 s transition period instead of the kubelet's 5 min, so that the
	// episode ends, and the brake is lifted, soon after the eviction: each
	// second the emulated guest runs costs the host CPU, which the gate on a
	// busy machine is short of.
	ev := helmInstall(t, n, "--set", "thresholds.pressureTransitionPeriod=10s")
	t.Run("parity", func(t *testing.T) { checkParity(t, n, ev) })
	t.Run("eviction", func(t *testing.T) { smokeEviction(t, n, ev) })
}

// chartNamespace is the smoke's release namespace. Not docs/install.md's
// evictd-system: the test control plane made that one for the kustomize
// manifest's identity (the e2e suite's evictd runs as it), whose objects
// Helm would refuse to adopt. The chart puts its namespace in its
// cluster-scoped names, so its objects meet none of those.
const chartNamespace = "evictd-smoke"

// helmInstall runs docs/install.md's install as written but for the
// namespace, the image (the node's imported evictd:e2e-node, never pulled)
// and the extra arguments, from the repository's root with the admin's
// kubeconfig, and returns the Ready evictd pod on the node.
func helmInstall(t *testing.T, n *Node, extra ...string) *corev1.Pod {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(root, "_output", "tools", "helm")
	if !isFile(helm) {
		framework.Require(t, fmt.Errorf("no helm at %s (make _output/tools/helm builds it): %w", helm, framework.ErrMissingBinary))
	}
	kubectl := framework.RequireBinary(t, "kubectl")
	home := t.TempDir()
	env := append(os.Environ(), "KUBECONFIG="+n.Cluster.AdminKubeconfig,
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	run := func(argv ...string) {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		t.Logf("$ %s\n%s", strings.Join(append([]string{filepath.Base(argv[0])}, argv[1:]...), " "), out)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(argv[0]), err)
		}
	}
	run(kubectl, "create", "namespace", chartNamespace)
	run(kubectl, "label", "namespace", chartNamespace, "pod-security.kubernetes.io/enforce=privileged")
	image, tag, _ := strings.Cut(evictdImage, ":")
	run(append([]string{helm, "install", "evictd", "deploy/helm/evictd", "-n", chartNamespace,
		"--set", "image.repository=" + image, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never"}, extra...)...)

	var pod *corev1.Pod
	ctx := context.Background()
	if err := n.poll(ctx, 5*time.Minute, "the chart's evictd pod Ready", func(ctx context.Context) error {
		pods, err := n.Cluster.Admin.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=evictd"})
		if err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName == n.Name && p.DeletionTimestamp == nil && podReady(p) {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("pods: %s", describePods(pods.Items))
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	if got := pod.Spec.Containers[0].Image; got != evictdImage {
		t.Fatalf("the chart's pod runs image %s, want %s", got, evictdImage)
	}
	return pod
}

// smokeEviction parks the node's memory.available under evictd's
// threshold (300Mi: the kubelet's 100Mi plus the chart's margin) and over
// the kubelet's, with one pod that grows there; evictd evicts it, puts its
// brake on the Node and lifts it when the episode ends.
func smokeEviction(t *testing.T, n *Node, ev *corev1.Pod) {
	ctx := context.Background()
	waitNoMemoryPressure(t, n)
	ns := newNamespace(t, n, "smoke")
	brake := watchBrake(t, n)
	fates := watchPodFates(t, n, ns)
	room := fillTo(t, n, chartNamespace)
	hog := workloadPod(ns, "hog", 16<<20, 0, "--grow-mib-per-sec=50", "--grow-to-mib="+strconv.FormatInt(room, 10))
	// Without the brake's tolerations: the test shows the taint, and the
	// pod is placed before any.
	hog.Spec.Tolerations = nil
	if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	fate, err := fates.wait(ctx, "hog", 5*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	if fate != ByEvictd {
		t.Fatalf("the hog was ended by %s, want %s", fate, ByEvictd)
	}
	if got := evictedIn(t, n, ev, ns); !slices.Equal(got, []string{"hog"}) {
		t.Errorf("evictd's \"evicted pod\" lines in %s name %v, want [hog]", ns, got)
	}
	if events := podEvents(t, n, ns); !hasEvictdEvent(events, "hog") {
		t.Errorf("no Event from evictd on the evicted hog; events in %s:\n%s", ns, events)
	}
	// The brake went on with the episode, before the eviction it led to.
	on, err := brake.waitOn(3 * time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	t.Logf("brake on at %s: %s", on.Format(time.StampMilli), brake.describe())
	// With the hog gone the pressure is over; the episode ends after the
	// transition period (10 s) and evictd lifts what it put on.
	off, err := brake.waitLifted(5 * time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	t.Logf("brake lifted at %s, %s after it went on", off.Format(time.StampMilli), off.Sub(on).Round(time.Millisecond))
}

// brakeWatch follows evictd's memory brake on one Node through a watch: it
// records when the condition and the taint (the chart's default effect,
// PreferNoSchedule) were first both on,
// and when, after that, neither was left.
type brakeWatch struct {
	mu         sync.Mutex
	on, lifted time.Time
	onC, liftC chan struct{}
	last       string
	onceOn     sync.Once
	onceLifted sync.Once
}

func watchBrake(t *testing.T, n *Node) *brakeWatch {
	t.Helper()
	b := &brakeWatch{onC: make(chan struct{}), liftC: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(n.Cluster.Admin, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", n.Name).String()
	}))
	inf := f.Core().V1().Nodes().Informer()
	see := func(obj any) {
		if node, ok := obj.(*corev1.Node); ok {
			b.see(node)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	return b
}

func (b *brakeWatch) see(node *corev1.Node) {
	on := nodebrake.Applied(node, corev1.TaintEffectPreferNoSchedule)[nodebrake.Memory]
	var left []string
	for _, c := range node.Status.Conditions {
		if c.Type == nodebrake.ConditionType(nodebrake.Memory) && c.Status == corev1.ConditionTrue {
			left = append(left, string(c.Type)+"=True")
		}
	}
	for _, tn := range node.Spec.Taints {
		if strings.HasPrefix(tn.Key, nodebrake.TaintPrefix) {
			left = append(left, tn.ToString())
		}
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = strings.Join(left, ", ")
	if on {
		b.onceOn.Do(func() { b.on = now; close(b.onC) })
	}
	if !b.on.IsZero() && len(left) == 0 {
		b.onceLifted.Do(func() { b.lifted = now; close(b.liftC) })
	}
}

func (b *brakeWatch) describe() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == "" {
		return "none of evictd's conditions or taints on the Node"
	}
	return b.last
}

// waitOn returns when the brake was first seen on.
func (b *brakeWatch) waitOn(timeout time.Duration) (time.Time, error) {
	return b.wait(b.onC, &b.on, timeout, fmt.Sprintf("evictd's memory brake (condition %s=True and taint %s:PreferNoSchedule) never seen on the Node",
		nodebrake.ConditionType(nodebrake.Memory), nodebrake.TaintKey(nodebrake.Memory)))
}

// waitLifted returns when, after it was on, the brake was first seen gone.
func (b *brakeWatch) waitLifted(timeout time.Duration) (time.Time, error) {
	return b.wait(b.liftC, &b.lifted, timeout, fmt.Sprintf("evictd's brake not lifted %s after the eviction", timeout))
}

func (b *brakeWatch) wait(c <-chan struct{}, at *time.Time, timeout time.Duration, missed string) (time.Time, error) {
	select {
	case <-c:
		b.mu.Lock()
		defer b.mu.Unlock()
		return *at, nil
	case <-time.After(timeout):
		return time.Time{}, fmt.Errorf("%s; last seen on the Node: %s", missed, b.describe())
	}
}

// fateWatch records how each pod of a namespace ended (FateOf), through a
// watch, so that a pod deleted right after its eviction is not missed.
type fateWatch struct {
	mu    sync.Mutex
	fates map[string]string
	seen  chan struct{}
}

func watchPodFates(t *testing.T, n *Node, ns string) *fateWatch {
	t.Helper()
	w := &fateWatch{fates: map[string]string{}, seen: make(chan struct{}, 1)}
	f := informers.NewSharedInformerFactoryWithOptions(n.Cluster.Admin, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	see := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if fate := FateOf(p); fate != "" {
			w.mu.Lock()
			if w.fates[p.Name] == "" {
				w.fates[p.Name] = fate
			}
			w.mu.Unlock()
			select {
			case w.seen <- struct{}{}:
			default:
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }, DeleteFunc: see}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	return w
}

// all is every fate seen so far, by pod name.
func (w *fateWatch) all() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.fates)
}

// wait returns the named pod's fate once the watch has seen one.
func (w *fateWatch) wait(ctx context.Context, name string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		fate := w.fates[name]
		w.mu.Unlock()
		if fate != "" {
			return fate, nil
		}
		select {
		case <-w.seen:
		case <-deadline:
			return "", fmt.Errorf("pod %s not ended %s after it was created", name, timeout)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
