// SPDX-License-Identifier: Apache-2.0

// Package smoke tests the ground every other end-to-end test stands on: the
// real control plane, the kubelet stand-in on real cgroups, the Eviction API
// with PodDisruptionBudgets, and evictd's RBAC identity from
// deploy/daemonset.yaml.
package smoke

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

const nodeMemory = 1 << 30

// TestSmoke shares one cluster and one simulated node between its subtests:
// starting a control plane is the expensive part.
func TestSmoke(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "smoke-node", MemoryBytes: nodeMemory, ReservedMemoryBytes: 64 * mib})
	ns := c.Namespace(t, "smoke")

	t.Run("node matches its cgroup", func(t *testing.T) { testNode(t, c, node) })
	t.Run("pods run in their cgroups", func(t *testing.T) { testPodsRun(t, c, node, ns) })
	t.Run("eviction and PDB", func(t *testing.T) { testEviction(t, c, node, ns) })
	t.Run("grace period ends in SIGKILL", func(t *testing.T) { testSIGKILL(t, c, node, ns) })
	t.Run("OOM kill fails the pod", func(t *testing.T) { testOOM(t, c, node, ns) })
	t.Run("mirror pod", func(t *testing.T) { testMirrorPod(t, c, node, ns) })
	t.Run("disk on the node's own filesystem", func(t *testing.T) { testDisk(t, c, ns) })
	t.Run("evictd RBAC", func(t *testing.T) { testRBAC(t, c, node, ns) })
	t.Run("manifest server-side dry run", func(t *testing.T) { testManifestDryRun(t, c) })
}

func testNode(t *testing.T, c *framework.Cluster, node *nodesim.Node) {
	n, err := c.Admin.CoreV1().Nodes().Get(context.Background(), node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	limit := readInt(t, filepath.Join(node.MemoryCgroupDir(), cgrouptest.LimitFile))
	kubepods := readInt(t, filepath.Join(node.MemoryCgroupDir(), "kubepods", cgrouptest.LimitFile))
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"capacity memory = node cgroup limit", n.Status.Capacity.Memory().Value(), limit},
		{"node cgroup limit = configured memory", limit, nodeMemory},
		{"allocatable memory = kubepods limit", n.Status.Allocatable.Memory().Value(), kubepods},
		{"kubepods limit = memory - reserved", kubepods, nodeMemory - 64*mib},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	// The memory controller as the host mounts it: v1's hierarchy, or v2's
	// one, whose root alone has cgroup.controllers.
	memory := "sys/fs/cgroup/memory"
	if cgrouptest.V2() {
		memory = "sys/fs/cgroup/cgroup.controllers"
	}
	for _, p := range []string{memory, "proc/pressure", "var/lib/kubelet/pods", "var/log/pods", "var/lib/containerd"} {
		if _, err := os.Stat(filepath.Join(node.HostRoot, p)); err != nil {
			t.Errorf("host root lacks %s: %v", p, err)
		}
	}
}

func testPodsRun(t *testing.T, c *framework.Cluster, node *nodesim.Node, ns string) {
	tests := []struct {
		spec      podSpec
		qos       corev1.PodQOSClass
		holdMiB   int64
		procs     int64
		writeMiB  int64
		podLimit  int64 // the pod cgroup's memory limit (cgrouptest.LimitFile); 0: unlimited
		qosParent string
	}{
		{spec: podSpec{name: "guaranteed", args: []string{"--hold-mib=64"}, limits: resources("100m", "128Mi")},
			qos: corev1.PodQOSGuaranteed, holdMiB: 64, podLimit: 128 * mib, qosParent: "kubepods"},
		{spec: podSpec{name: "burstable", args: []string{"--hold-mib=48", "--write-mib=8"}, requests: resources("", "32Mi")},
			qos: corev1.PodQOSBurstable, holdMiB: 48, writeMiB: 8, qosParent: "kubepods/burstable"},
		{spec: podSpec{name: "besteffort", args: []string{"--hold-mib=16", "--procs=3"}},
			qos: corev1.PodQOSBestEffort, holdMiB: 16, procs: 3, qosParent: "kubepods/besteffort"},
	}
	for _, tt := range tests {
		t.Run(tt.spec.name, func(t *testing.T) {
			pod := createRunning(t, c.Admin, tt.spec.build(ns, node.Name))
			t.Cleanup(func() {
				_ = c.Admin.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			})
			if pod.Status.QOSClass != tt.qos || nodesim.QOSClass(pod) != tt.qos {
				t.Errorf("QoS: API %s, stand-in %s, want %s", pod.Status.QOSClass, nodesim.QOSClass(pod), tt.qos)
			}
			cg := node.PodMemoryCgroupDir(pod)
			if want := path.Join(node.CgroupRoot, tt.qosParent, "pod"+string(pod.UID)); !strings.HasSuffix(cg, want) {
				t.Errorf("pod cgroup %s, want it at %s", cg, want)
			}

			// Every container process sits in a container cgroup of this pod,
			// in both hierarchies.
			pids := node.ContainerPIDs(pod.UID)
			if len(pids) != 1 {
				t.Fatalf("container pids %v, want one", pids)
			}
			wantPrefix := path.Join(node.CgroupRoot, nodesim.PodCgroup(pod)) + "/"
			for _, ctrl := range []string{"memory", "pids"} {
				if got := cgroupOf(t, pids["main"], ctrl); !strings.HasPrefix(got, wantPrefix) {
					t.Errorf("%s cgroup of pid %d is %s, want under %s", ctrl, pids["main"], got, wantPrefix)
				}
			}

			// The memory asked for is charged to the pod cgroup. The upper
			// bound allows for the Go runtime, the page cache of written files
			// and the stacks of the child processes.
			low, high := tt.holdMiB*mib, (tt.holdMiB+tt.writeMiB+40)*mib
			var usage int64
			_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				usage = readInt(t, filepath.Join(cg, cgrouptest.UsageFile))
				return usage >= low, nil
			})
			if usage < low || usage > high {
				t.Errorf("pod cgroup %s = %d MiB, want %d..%d MiB", cgrouptest.UsageFile, usage/mib, low/mib, high/mib)
			}
			if tt.podLimit > 0 {
				if got := readInt(t, filepath.Join(cg, cgrouptest.LimitFile)); got != tt.podLimit {
					t.Errorf("pod memory limit %d, want %d", got, tt.podLimit)
				}
			}

			// One process per container plus the ones it spawned. (pids.current
			// counts threads, so the processes are counted from cgroup.procs.)
			var procs int
			_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				procs = countProcs(t, node.PodPidsCgroupDir(pod))
				return procs == int(1+tt.procs), nil
			})
			if procs != int(1+tt.procs) {
				t.Errorf("%d processes in the pod's pids cgroups, want %d", procs, 1+tt.procs)
			}
			if threads := readInt(t, filepath.Join(node.PodPidsCgroupDir(pod), "pids.current")); threads < int64(procs) {
				t.Errorf("pids.current = %d, below the %d processes", threads, procs)
			}

			if tt.writeMiB > 0 {
				f := filepath.Join(node.EmptyDirPath(pod.UID, "scratch"), fmt.Sprintf("workload-%d.dat", pids["main"]))
				var size int64
				_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					st, err := os.Stat(f)
					if err == nil {
						size = st.Size()
					}
					return size == tt.writeMiB*mib, nil
				})
				if size != tt.writeMiB*mib {
					t.Errorf("emptyDir file %s has %d bytes, want %d MiB", f, size, tt.writeMiB)
				}
			}
			if _, err := os.Stat(filepath.Join(node.PodLogDir(pod), "main", "0.log")); err != nil {
				t.Errorf("container log: %v", err)
			}
		})
	}
}

// testEviction: with a PDB that allows no disruption the API server refuses
// the eviction with 429, dry run or not; without it the eviction is accepted
// and the stand-in stops the pod inside the grace period the eviction gave.
func testEviction(t *testing.T, c *framework.Cluster, node *nodesim.Node, ns string) {
	const evictionGrace = 3
	tests := []struct {
		name      string
		withPDB   bool
		wantCode  int32 // 0: accepted
		wantStays bool
	}{
		{name: "PDB blocks", withPDB: true, wantCode: 429, wantStays: true},
		{name: "no PDB", withPDB: false, wantStays: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			name := "evict-" + strings.ReplaceAll(strings.ToLower(tt.name), " ", "-")
			labels := map[string]string{"app": name}
			pod := createRunning(t, c.Admin, podSpec{name: name, args: []string{"--hold-mib=8"}, labels: labels, grace: 30}.build(ns, node.Name))
			t.Cleanup(func() {
				_ = c.Admin.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			})
			if tt.withPDB {
				pdb := &policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: policyv1.PodDisruptionBudgetSpec{
						MinAvailable: ptr.To(intstr.FromInt32(1)),
						Selector:     &metav1.LabelSelector{MatchLabels: labels},
					},
				}
				if _, err := c.Admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_ = c.Admin.PolicyV1().PodDisruptionBudgets(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
				})
				// The disruption controller must have counted the pod healthy.
				err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
					got, err := c.Admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 1 && got.Status.DisruptionsAllowed == 0, nil
				})
				if err != nil {
					t.Fatalf("PDB never processed: %v", err)
				}
			}

			evict := func(dryRun bool) error {
				opts := &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](evictionGrace)}
				if dryRun {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				return c.Admin.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
					ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: ns},
					DeleteOptions: opts,
				})
			}
			for _, dry := range []bool{true, false} {
				err := evict(dry)
				var code int32
				if status, ok := err.(apierrors.APIStatus); ok {
					code = status.Status().Code
				} else if err != nil {
					t.Fatalf("eviction (dry run %v): %v", dry, err)
				}
				if code != tt.wantCode {
					t.Fatalf("eviction (dry run %v): code %d (%v), want %d", dry, code, err, tt.wantCode)
				}
				if dry {
					// A dry run changes nothing.
					p, err := c.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil || p.DeletionTimestamp != nil {
						t.Fatalf("after a dry-run eviction: pod %v, err %v", p.DeletionTimestamp, err)
					}
				}
			}

			if tt.wantStays {
				// The API server is the only way a deletion reaches the
				// node, and it answers an eviction only after deciding it:
				// a pod the API still holds, not terminating, after the
				// refusal was not deleted, now or later. No wait for the
				// node is needed to know it; the node's record must agree.
				p, err := c.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || p.UID != pod.UID || p.DeletionTimestamp != nil {
					t.Fatalf("after a refused eviction: pod %v (deletionTimestamp %v), err %v; want it there, not terminating", p.UID, p.DeletionTimestamp, err)
				}
				if tl, _ := node.Record(pod.UID); !tl.DeletionSeen.IsZero() {
					t.Fatalf("refused eviction still reached the node: %+v", tl)
				}
				if pids := node.ContainerPIDs(pod.UID); len(pids) != 1 {
					t.Fatalf("pod processes after a refused eviction: %v", pids)
				}
				return
			}
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			tl, err := node.WaitRecord(wctx, pod.UID, func(tl nodesim.Timeline) bool { return !tl.APIDeleted.IsZero() })
			if err != nil {
				t.Fatal(err)
			}
			if tl.GracePeriod != evictionGrace*time.Second {
				t.Errorf("grace period seen %s, want the eviction's %ds", tl.GracePeriod, evictionGrace)
			}
			if !tl.SIGKILL.IsZero() {
				t.Errorf("SIGKILL sent at %s; the workload exits on SIGTERM", tl.SIGKILL)
			}
			// No SIGKILL (above) is the stand-in's own word that the
			// processes went on SIGTERM; the exit time is bounded loosely,
			// for a machine slow to reap them.
			if !tl.StoppedWithin(10 * time.Second) {
				t.Errorf("processes exited %s after SIGTERM, grace was %s", tl.Exited.Sub(tl.SIGTERM), tl.GracePeriod)
			}
			if order := []time.Time{tl.DeletionSeen, tl.SIGTERM, tl.Exited, tl.CgroupRemoved, tl.APIDeleted}; !sorted(order) {
				t.Errorf("timeline out of order: %+v", tl)
			}
			if _, err := c.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod still in the API after the stand-in deleted it: %v", err)
			}
			if _, err := os.Stat(node.PodMemoryCgroupDir(pod)); !os.IsNotExist(err) {
				t.Errorf("pod cgroup still there: %v", err)
			}
		})
	}
}

func sorted(ts []time.Time) bool {
	for i := 1; i < len(ts); i++ {
		if ts[i].IsZero() || ts[i].Before(ts[i-1]) {
			return false
		}
	}
	return true
}

// testSIGKILL: a workload that ignores SIGTERM longer than the grace period
// is killed when the period ends, not before.
func testSIGKILL(t *testing.T, c *framework.Cluster, node *nodesim.Node, ns string) {
	const grace = 2 * time.Second
	pod := createRunning(t, c.Admin, podSpec{name: "stubborn", args: []string{"--term-delay=1h", "--procs=2"}}.build(ns, node.Name))
	// A SIGTERM that came before the workload had even started would end it
	// at once; wait until it says it runs.
	waitLog(t, node, pod, "main", "workload: holding")
	err := c.Admin.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(grace.Seconds()))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tl, err := node.WaitRecord(ctx, pod.UID, func(tl nodesim.Timeline) bool { return !tl.APIDeleted.IsZero() })
	if err != nil {
		t.Fatal(err)
	}
	if tl.SIGKILL.IsZero() {
		t.Fatalf("no SIGKILL recorded: %+v", tl)
	}
	// "Not before" is the point and is exact; "when the period ends" is
	// bounded loosely, for a loaded machine.
	const slack = 10 * time.Second
	if d := tl.SIGKILL.Sub(tl.SIGTERM); d < grace || d > grace+slack {
		t.Errorf("SIGKILL %s after SIGTERM, want the %s grace period", d, grace)
	}
	if !tl.StoppedWithin(slack) {
		t.Errorf("processes exited %s after SIGTERM", tl.Exited.Sub(tl.SIGTERM))
	}
	if tl.Exited.Before(tl.SIGKILL) {
		t.Errorf("processes exited %s after SIGTERM, before the SIGKILL at %s: the workload ignores SIGTERM", tl.Exited.Sub(tl.SIGTERM), tl.SIGKILL.Sub(tl.SIGTERM))
	}
}

// testOOM: a pod that outgrows its own memory limit is OOM-killed by the
// kernel; the stand-in reports it Failed/OOMKilled and counts it.
func testOOM(t *testing.T, c *framework.Cluster, node *nodesim.Node, ns string) {
	before := node.OOMKills()
	spec := podSpec{name: "oom", args: []string{"--hold-mib=16", "--grow-mib-per-sec=200", "--grow-to-mib=256"}, limits: resources("100m", "64Mi")}
	pod, err := c.Admin.CoreV1().Pods(ns).Create(context.Background(), spec.build(ns, node.Name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, c.Admin, ns, pod.Name, 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != "OOMKilled" {
		t.Errorf("pod reason %q, want OOMKilled", got.Status.Reason)
	}
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.Reason != "OOMKilled" || cs[0].State.Terminated.ExitCode != 137 {
		t.Errorf("container status %+v, want terminated OOMKilled with 137", cs)
	}
	if n := node.OOMKills() - before; n < 1 {
		t.Errorf("node counted %d OOM kills, want at least 1", n)
	}
	if tl, _ := node.Record(pod.UID); tl.OOMKills < 1 || tl.OOMKilled.IsZero() {
		t.Errorf("timeline %+v has no OOM kill", tl)
	}
	if _, err := os.Stat(node.PodMemoryCgroupDir(pod)); !os.IsNotExist(err) {
		t.Errorf("cgroup of the failed pod still there: %v", err)
	}
	// The API server removes a terminal pod at once, whatever grace is
	// asked for; the stand-in then removes its directories.
	if err := c.Admin.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := node.WaitRecord(ctx, pod.UID, func(tl nodesim.Timeline) bool { return !tl.CgroupRemoved.IsZero() }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(node.EmptyDirPath(pod.UID, "scratch")); !os.IsNotExist(err) {
		t.Errorf("emptyDir of the deleted pod still there: %v", err)
	}
}

func testMirrorPod(t *testing.T, c *framework.Cluster, node *nodesim.Node, ns string) {
	static := podSpec{name: "static", args: []string{"--hold-mib=4"}}.build(ns, "")
	mirror, err := node.CreateStaticPod(context.Background(), static)
	if err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, c.Admin, ns, mirror.Name, 30*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if got.Name != "static-"+node.Name || got.Annotations[nodesim.ConfigMirrorAnnotation] == "" || got.Annotations[nodesim.ConfigSourceAnnotation] != "file" {
		t.Errorf("mirror pod %s annotations %v", got.Name, got.Annotations)
	}
	if refs := got.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != node.Name {
		t.Errorf("mirror pod owners %+v, want the Node", refs)
	}
	if _, err := os.Stat(filepath.Join(node.HostRoot, "etc", "kubernetes", "manifests", ns+"_static.yaml")); err != nil {
		t.Errorf("static manifest: %v", err)
	}
	_ = c.Admin.CoreV1().Pods(ns).Delete(context.Background(), got.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
}

// testDisk: a node with DiskBytes gets its own small tmpfs; what a pod
// writes into its emptyDir really fills it, and its deletion frees it.
func testDisk(t *testing.T, c *framework.Cluster, ns string) {
	const disk, write = 64 * mib, 40
	node := c.StartNode(t, nodesim.Options{Name: "smoke-disk", MemoryBytes: 512 * mib, DiskBytes: disk})
	n, err := c.Admin.CoreV1().Nodes().Get(context.Background(), node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.Capacity.StorageEphemeral().Value(); got != disk {
		t.Errorf("ephemeral-storage capacity %d, want %d", got, disk)
	}
	used := func() int64 {
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Join(node.HostRoot, "var", "lib", "kubelet"), &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Blocks-st.Bfree) * st.Bsize
	}
	before := used()
	pod := createRunning(t, c.Admin, podSpec{name: "filler", args: []string{fmt.Sprintf("--write-mib=%d", write)}}.build(ns, node.Name))
	var now int64
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		now = used()
		return now-before >= write*mib, nil
	})
	if now-before < write*mib {
		t.Errorf("filesystem use grew by %d MiB, want %d MiB", (now-before)/mib, write)
	}
	// tmpfs pages are charged to the writer's memory cgroup (see
	// nodesim.Options.DiskBytes); tests sizing memory must allow for it.
	if usage := readInt(t, filepath.Join(node.PodMemoryCgroupDir(pod), cgrouptest.UsageFile)); usage < write*mib {
		t.Errorf("pod memory usage %d MiB, want the %d MiB of tmpfs pages included", usage/mib, write)
	}
	if err := c.Admin.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := node.WaitRecord(ctx, pod.UID, func(tl nodesim.Timeline) bool { return !tl.APIDeleted.IsZero() }); err != nil {
		t.Fatal(err)
	}
	if after := used(); after-before > mib {
		t.Errorf("%d MiB still used after the pod was deleted", (after-before)/mib)
	}
}
