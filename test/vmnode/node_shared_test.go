// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

	"github.com/evictd/evictd/test/e2e/framework"
)

// The images make e2e-node builds (hack/image) and the guest imports.
const (
	evictdImage   = "evictd:e2e-node"
	workloadImage = "evictd-workload:e2e-node"
	pauseImage    = "evictd-pause:e2e-node"
)

// extraImages are archives besides those every node test needs, each with
// the tests that use it. The shared node imports one only when go test's
// -run and -skip select one of them: the ballast alone takes about a minute
// of the boot under TCG, which a stage without its tests need not pay.
var extraImages = map[string][]string{}

// neededImages are the archives of extraImages whose tests this run selects.
func neededImages() []string {
	var out []string
	for archive, tests := range extraImages {
		if slices.ContainsFunc(tests, testSelected) {
			out = append(out, archive)
		}
	}
	slices.Sort(out)
	return out
}

// testSelected reports whether this run's -run and -skip select the
// top-level test name.
func testSelected(name string) bool {
	value := func(f string) string {
		if fl := flag.Lookup(f); fl != nil {
			return fl.Value.String()
		}
		return ""
	}
	return selects(value("test.run"), value("test.skip"), name)
}

// selects reports whether go test's run and skip patterns select the
// top-level test name: go test matches it against a pattern's part before
// its first '/' (the node stages' patterns have none). A pattern that does
// not compile selects it: an image imported for nothing costs time, one
// missing fails its test.
func selects(run, skip, name string) bool {
	matches := func(pattern string) (bool, bool) {
		if pattern == "" {
			return false, false
		}
		re, err := regexp.Compile(strings.SplitN(pattern, "/", 2)[0])
		if err != nil {
			return false, false
		}
		return re.MatchString(name), true
	}
	if m, set := matches(run); set && !m {
		return false
	}
	if m, set := matches(skip); set && m {
		return false
	}
	return true
}

// One control plane and one VM node serve every node test: booting the
// guest and getting the kubelet Ready takes minutes under TCG. The one-disk
// node runs the systemd cgroup driver, as kubeadm and the distributions
// do (systemd is its PID 1); the imagefs node keeps cgroupfs, so both
// layouts run under evictd.
var shared struct {
	once    sync.Once
	cluster *framework.Cluster
	node    *Node
	err     error
	dir     string
	// imageFs: node has a dedicated imagefs disk (imageFsNode).
	imageFs bool
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
	if err := startCluster(t); err != nil {
		return err
	}
	driver, err := nodeDriver()
	if err != nil {
		return err
	}
	shared.node, err = startNode(t, "evictd-vm", driver, 0, 0, neededImages())
	return err
}

// driverEnv picks the cgroup driver of every node the suite boots: systemd
// (the default, as kubeadm and the distributions run it: a guest whose PID 1
// is systemd) or cgroupfs (hack/test.sh's node-cgroupfs stage).
const driverEnv = "EVICTD_NODE_CGROUP_DRIVER"

func nodeDriver() (string, error) {
	switch d := os.Getenv(driverEnv); d {
	case "", Systemd:
		return Systemd, nil
	case CgroupFS:
		return CgroupFS, nil
	default:
		return "", fmt.Errorf("%s=%q: want %s or %s", driverEnv, d, Systemd, CgroupFS)
	}
}

// memoryEnv sets the memory of every node the suite boots, in MiB (2048
// when unset): make bench-peers' run at the kubelet's pod ceiling needs more
// room for 110 pods' shims and processes.
const memoryEnv = "EVICTD_NODE_MEMORY_MIB"

func nodeMemoryMiB() (int, error) {
	v := os.Getenv(memoryEnv)
	if v == "" {
		return 0, nil
	}
	mib, err := strconv.Atoi(v)
	if err != nil || mib < 1024 || mib > 16384 {
		return 0, fmt.Errorf("%s=%q: want a number of MiB from 1024 to 16384", memoryEnv, v)
	}
	return mib, nil
}

// startCluster starts the control plane the node tests share.
func startCluster(t *testing.T) error {
	var err error
	shared.dir, err = os.MkdirTemp("", "evictd-vmnode-")
	if err != nil {
		return err
	}
	t.Logf("node test files in %s (kept when a test fails)", shared.dir)
	logger, _ := zap.NewDevelopment()
	shared.cluster, err = framework.StartCluster(context.Background(), framework.Config{
		Dir:       filepath.Join(shared.dir, "cluster"),
		RealNodes: true,
		Logger:    logger,
	})
	return err
}

// startNode boots a node registered with the shared control plane, with
// the images every node test needs and the extra ones; its kubelet runs
// with the cgroup driver driver; imageFsMiB > 0 gives it a dedicated
// imagefs disk of that size, swapMiB > 0 a swap disk.
func startNode(t *testing.T, name, driver string, imageFsMiB, swapMiB int, extra []string) (*Node, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	images := filepath.Join(root, "_output", "image", "node")
	var archives []string
	for _, f := range append([]string{"pause.tar", "evictd.tar", "workload.tar"}, extra...) {
		p := filepath.Join(images, f)
		if !isFile(p) {
			return nil, fmt.Errorf("missing %s (make e2e-node builds it)", p)
		}
		archives = append(archives, p)
	}
	memMiB, err := nodeMemoryMiB()
	if err != nil {
		return nil, err
	}
	nodeDir := filepath.Join(shared.dir, name)
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		return nil, err
	}
	n, err := StartNode(context.Background(), NodeOptions{
		Cluster: shared.cluster,
		Name:    name,
		OutDir:  nodeDir,
		// The whole suite's life (it runs about 45 minutes under CI), not
		// the default 40 minutes: one run lost the node to it.
		Timeout:      100 * time.Minute,
		CgroupDriver: driver,
		MemoryMiB:    memMiB,
		ImageFsMiB:   imageFsMiB,
		SwapMiB:      swapMiB,
		Images:       archives,
		PauseImage:   pauseImage,
		Logf:         t.Logf,
	})
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, shared.cluster.LogTails(20))
	}
	return n, nil
}

// imageFsNode is the node of the dedicated-imagefs tests: a node whose
// /var/lib/containerd is a disk of its own (1 GiB), with 1 GiB of swap and
// the kubelet's LimitedSwap too, for the swap and stall tests (node_7 to
// node_9): one boot serves them all (the imagefs test's figures do not
// depend on swap). make test runs these tests in a go test process of their
// own, beside the one-disk node's (hack/test.sh lists them); run in the
// same process after the one-disk tests, it powers that node off and
// deletes its Node first.
func imageFsNode(t *testing.T) *Node {
	t.Helper()
	Need(t)
	shared.once.Do(func() { shared.err = startCluster(t) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	if shared.imageFs {
		return shared.node
	}
	if old := shared.node; old != nil {
		old.Stop()
		shared.node = nil
		if err := shared.cluster.Admin.CoreV1().Nodes().Delete(context.Background(), old.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete node %s: %v", old.Name, err)
		}
		evictdOnce.Lock()
		evictdOnce.pod, evictdOnce.args = nil, nil
		evictdOnce.Unlock()
	}
	// Without the extra images: an unused one (the ballast) would count
	// as the kubelet's reclaim on its small imagefs.
	driver, err := nodeDriver()
	if err != nil {
		t.Fatal(err)
	}
	n, err := startNode(t, "evictd-vm-imagefs", driver, 1024, 1024, nil)
	if err != nil {
		shared.err = err
		t.Fatal(err)
	}
	shared.node, shared.imageFs = n, true
	return n
}

// deployEvictd applies deploy/daemonset.yaml as shipped, changing only the
// image reference (and appending extraArgs to evictd's, for the scenarios
// that need another configuration), and waits until the node runs a Ready
// pod with exactly those arguments.
func deployEvictd(t *testing.T, ctx context.Context, n *Node, extraArgs ...string) *corev1.Pod {
	t.Helper()
	return deployEvictdWith(t, ctx, n, nil, extraArgs...)
}

// deployEvictdWith is deployEvictd with mutate applied to the DaemonSet
// after its image and arguments are set (a mount the manifest carries
// commented out).
func deployEvictdWith(t *testing.T, ctx context.Context, n *Node, mutate func(*unstructured.Unstructured), extraArgs ...string) *corev1.Pod {
	t.Helper()
	objs, err := framework.ReadManifest(mustManifest(t))
	if err != nil {
		t.Fatal(err)
	}
	var wantArgs []string
	for _, obj := range objs {
		if obj.GetKind() == "DaemonSet" {
			wantArgs = setImage(t, obj, evictdImage, extraArgs)
			if slices.Contains(extraArgs, "--actuator") {
				mountPodCgroups(t, obj, podCgroups(n))
			}
			if mutate != nil {
				mutate(obj)
			}
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
			if p.Spec.NodeName == n.Name && p.DeletionTimestamp == nil && podReady(p) &&
				slices.Equal(p.Spec.Containers[0].Args, wantArgs) {
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

// setImage sets the DaemonSet's image, appends extraArgs to evictd's
// arguments and returns them.
func setImage(t *testing.T, obj *unstructured.Unstructured, image string, extraArgs []string) []string {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ds); err != nil {
		t.Fatal(err)
	}
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Image = image
	c.Args = append(c.Args, extraArgs...)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ds)
	if err != nil {
		t.Fatal(err)
	}
	obj.Object = m
	return c.Args
}

// podCgroups is the host path of the node's pod cgroup tree.
func podCgroups(n *Node) string {
	if n.CgroupDriver == Systemd {
		return "/sys/fs/cgroup/kubepods.slice"
	}
	return "/sys/fs/cgroup/kubepods"
}

// mountPodCgroups adds what the manifest carries commented out for
// --actuator: the pod cgroups at dir, writable, nested in the read-only
// cgroup mount (docs/actuator.md).
func mountPodCgroups(t *testing.T, obj *unstructured.Unstructured, dir string) {
	mountHostDir(t, obj, "pod-cgroups", dir, false)
}

// mountHostDir adds the host directory dir to evictd's DaemonSet as the
// volume name, mounted at its host path under /host, as the manifest's
// commented-out optional mounts are.
func mountHostDir(t *testing.T, obj *unstructured.Unstructured, name, dir string, readOnly bool) {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ds); err != nil {
		t.Fatal(err)
	}
	spec := &ds.Spec.Template.Spec
	dirType := corev1.HostPathDirectory
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/host" + dir, ReadOnly: readOnly})
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

func TestSelects(t *testing.T) {
	for _, c := range []struct {
		run, skip, name string
		want            bool
	}{
		{"", "", "TestNodeDiskImageGC", true},
		{"^TestNodeDiskImageGC$", "", "TestNodeDiskImageGC", true},
		{"^(TestNodeCgroupLayout|TestNodeParity|TestNodeProtectedPods)$", "", "TestNodeDiskImageGC", false},
		{"", "^(TestNodeDedicatedImageFs|TestNodeSwapRanking)$", "TestNodeDiskImageGC", true},
		{"", "^(TestNodeDiskImageGC)$", "TestNodeDiskImageGC", false},
		{"^TestNodeLatency$/fast", "", "TestNodeLatency", true},
		{"(", "", "TestNodeLatency", true},
	} {
		if got := selects(c.run, c.skip, c.name); got != c.want {
			t.Errorf("selects(%q, %q, %q) = %v, want %v", c.run, c.skip, c.name, got, c.want)
		}
	}
}
