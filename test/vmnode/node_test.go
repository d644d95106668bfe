//go:build vmnode

package vmnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The images make e2e-node builds (hack/image) and the guest imports.
const (
	evictdImage   = "evictd:e2e-node"
	workloadImage = "evictd-workload:e2e-node"
	pauseImage    = "evictd-pause:e2e-node"
)

// One control plane and one VM node serve every node test: booting the
// guest and getting the kubelet Ready takes minutes under TCG.
var shared struct {
	once    sync.Once
	cluster *framework.Cluster
	node    *Node
	err     error
	dir     string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.node != nil {
		shared.node.Stop()
	}
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.dir != "" && code == 0 {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedNode starts the control plane and the node on first use; a test
// that needs them fails (never skips under CI=true) when they cannot start.
func sharedNode(t *testing.T) *Node {
	t.Helper()
	Need(t)
	shared.once.Do(func() {
		shared.err = startShared(t)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.node
}

func startShared(t *testing.T) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	images := filepath.Join(root, "_output", "image", "node")
	var archives []string
	for _, f := range []string{"pause.tar", "evictd.tar", "workload.tar"} {
		p := filepath.Join(images, f)
		if !isFile(p) {
			return fmt.Errorf("missing %s (make e2e-node builds it)", p)
		}
		archives = append(archives, p)
	}
	shared.dir, err = os.MkdirTemp("", "evictd-vmnode-")
	if err != nil {
		return err
	}
	t.Logf("node test files in %s (kept when a test fails)", shared.dir)
	ctx := context.Background()
	logger, _ := zap.NewDevelopment()
	shared.cluster, err = framework.StartCluster(ctx, framework.Config{
		Dir:       filepath.Join(shared.dir, "cluster"),
		RealNodes: true,
		Logger:    logger,
	})
	if err != nil {
		return err
	}
	nodeDir := filepath.Join(shared.dir, "node")
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		return err
	}
	shared.node, err = StartNode(ctx, NodeOptions{
		Cluster:    shared.cluster,
		OutDir:     nodeDir,
		Images:     archives,
		PauseImage: pauseImage,
		Logf:       t.Logf,
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, shared.cluster.LogTails(20))
	}
	return nil
}

// deployEvictd applies deploy/daemonset.yaml as shipped, changing only the
// image reference, and waits for its pod on the node to be Ready.
func deployEvictd(t *testing.T, ctx context.Context, n *Node) *corev1.Pod {
	t.Helper()
	objs, err := framework.ReadManifest(mustManifest(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetKind() == "DaemonSet" {
			setImage(t, obj, evictdImage)
		}
		ri, err := n.Cluster.ResourceFor(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "evictd-vmnode", Force: true}); err != nil {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	var pod *corev1.Pod
	err = n.poll(ctx, 5*time.Minute, "the evictd DaemonSet pod Ready", func(ctx context.Context) error {
		pods, err := n.Cluster.Admin.CoreV1().Pods("evictd-system").List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=evictd",
		})
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
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	return pod
}

func mustManifest(t *testing.T) string {
	t.Helper()
	p, err := framework.ManifestPath()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func setImage(t *testing.T, obj *unstructured.Unstructured, image string) {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ds); err != nil {
		t.Fatal(err)
	}
	for i := range ds.Spec.Template.Spec.Containers {
		ds.Spec.Template.Spec.Containers[i].Image = image
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ds)
	if err != nil {
		t.Fatal(err)
	}
	obj.Object = m
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range pods {
		s := fmt.Sprintf("%s on %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				s += fmt.Sprintf(" (%s waiting: %s %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				s += fmt.Sprintf(" (%s terminated: %s exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			case cs.State.Running != nil:
				s += fmt.Sprintf(" (%s running, ready %v, restarts %d)", cs.Name, cs.Ready, cs.RestartCount)
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// TestNodeDaemonSet: evictd starts from the shipped manifest on a real node
// and becomes Ready.
func TestNodeDaemonSet(t *testing.T) {
	n := sharedNode(t)
	for _, s := range n.StartupTimes {
		t.Logf("startup: %-32s %s", s.Name, s.Took.Round(time.Millisecond))
	}
	start := time.Now()
	pod := evictdPod(t, n)
	t.Logf("evictd pod %s Ready %s after the DaemonSet was applied", pod.Name, time.Since(start).Round(time.Millisecond))

	// Its footprint on this node, idle, from the kubelet's own figures: RSS
	// and working set of the container, CPU over a minute.
	ctx := context.Background()
	first, err := evictdContainerStats(ctx, n, pod)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Second)
	last, err := evictdContainerStats(ctx, n, pod)
	if err != nil {
		t.Fatal(err)
	}
	cpu := float64(*last.CPU.UsageCoreNanoSeconds-*first.CPU.UsageCoreNanoSeconds) /
		float64(last.CPU.Time.Sub(first.CPU.Time.Time).Nanoseconds())
	t.Logf("evictd's container, idle on the node: RSS %.1f MiB, working set %.1f MiB, CPU %.2f%% of a core over %s (emulated guest: CPU is inflated)",
		float64(*last.Memory.RSSBytes)/(1<<20), float64(*last.Memory.WorkingSetBytes)/(1<<20), 100*cpu,
		last.CPU.Time.Sub(first.CPU.Time.Time).Round(time.Second))
	if limit := int64(64 << 20); int64(*last.Memory.WorkingSetBytes) > limit*9/10 {
		t.Errorf("evictd's working set %d MiB is within 10%% of its 64 MiB limit", *last.Memory.WorkingSetBytes>>20)
	}
}

// evictdContainerStats is the evictd container's entry in the summary, once
// it has CPU and memory figures.
func evictdContainerStats(ctx context.Context, n *Node, pod *corev1.Pod) (*statsv1alpha1.ContainerStats, error) {
	var c *statsv1alpha1.ContainerStats
	err := n.poll(ctx, time.Minute, "evictd's container stats", func(ctx context.Context) error {
		s, _, err := n.Summary(ctx)
		if err != nil {
			return err
		}
		p := podByUID(s, string(pod.UID))
		if p == nil {
			return errors.New("the evictd pod is not in the summary")
		}
		for i := range p.Containers {
			x := &p.Containers[i]
			if x.Name == "evictd" && x.CPU != nil && x.CPU.UsageCoreNanoSeconds != nil && x.Memory != nil &&
				x.Memory.RSSBytes != nil && x.Memory.WorkingSetBytes != nil {
				c = x
				return nil
			}
		}
		return errors.New("no evictd container with CPU and memory figures")
	})
	return c, err
}

// TestNodeParity: evictd observe, run inside the evictd pod through its
// read-only host mounts, and the kubelet's /stats/summary agree on the same
// node at the same moment.
func TestNodeParity(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	evictd := evictdPod(t, n)
	ns := newNamespace(t, n, "parity")
	pods := createRunning(t, ctx, n,
		workloadPod(ns, "hold64", 32<<20, 0, "--hold-mib=64"),
		workloadPod(ns, "hold16", 16<<20, 64<<20, "--hold-mib=16"),
	)
	var uids []string
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	// The kubelet's pod figures appear with cAdvisor's next housekeeping.
	if err := n.poll(ctx, time.Minute, "the pods in the kubelet's summary", func(ctx context.Context) error {
		s, _, err := n.Summary(ctx)
		if err != nil {
			return err
		}
		for _, uid := range uids {
			if p := podByUID(s, uid); p == nil || p.Memory == nil || p.Memory.WorkingSetBytes == nil {
				return fmt.Errorf("pod %s not in the summary yet", uid)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	ev, raw, err := observeInPod(ctx, n, evictd)
	if err != nil {
		t.Fatalf("evictd observe in the pod: %v\n%s", err, raw)
	}
	t1 := time.Now()
	ku, _, err := n.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("evictd observe took %s in the guest; the summary came %s after it", t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	if ku.Node.Memory != nil && ku.Node.Memory.Time.Time.Before(t0) {
		t.Logf("the kubelet's node memory figures are from %s, %s before evictd's read began (cAdvisor's housekeeping)",
			ku.Node.Memory.Time.Format(time.RFC3339), t0.Sub(ku.Node.Memory.Time.Time).Round(time.Millisecond))
	}
	tol := ParityTolerance{
		Memory:    64 << 20,
		PodMemory: 1 << 20,
		Bytes:     16 << 20,
		Inodes:    64,
		Processes: 32,
	}
	rows := CompareParity(ev, ku, uids, tol)
	t.Logf("evictd (in its pod) against the kubelet's /stats/summary:\n%s", ParityTable(rows))
	for _, r := range rows {
		if !r.Agrees() {
			t.Errorf("%s: evictd %d, kubelet %d (missing in: %q), tolerance %d", r.Signal, r.Evictd, r.Kubelet, r.Missing, r.Tolerance)
		}
	}
}
