// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet's image garbage collection on the real node. Last
// of the one-disk node's tests: the DiskPressure condition the kubelet sets
// stays for its default 5-minute transition period, and its NoSchedule taint
// with it (a run with this test early left the next test's pods pending).

const ballastImage = "evictd-ballast:e2e-node"

// The ballast, an image no pod runs, is imported when the node boots: the
// kubelet lists a new image only minutes after it appears (4 in a trial;
// ballastListed waits for it), and its image manager detects one only every
// 5 minutes, time the tests before this one cover. The disk tests before it
// set --expect-image-gc=false where the ballast would change what they
// measure. TestNodeDiskHealthy (node_2_diskhealthy_test.go) leaves it in
// place (the kubelet collects nothing under 85 % used).
func init() { extraImages["ballast.tar"] = []string{"TestNodeDiskHealthy", "TestNodeDiskImageGC"} }

// firstPassAt is when the running evictd container synced its informers,
// from its log as the kubelet keeps it: its first pass, where it starts
// noting the node's images, follows at once. Not the pod's Ready time:
// evictd turns unready while a victim does not go (TestNodeStuckTerminating
// before this test), and Ready again later, with the same process and the
// same memory of the images.
func firstPassAt(t *testing.T, n *Node, p *corev1.Pod) (time.Time, error) {
	var at time.Time
	for _, line := range strings.Split(evictdLog(t, n, p), "\n") {
		ts, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(rest, `"informers synced"`) {
			continue
		}
		// The last one: a restarted container has the earlier's log too.
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			at = t
		}
	}
	if at.IsZero() {
		return at, fmt.Errorf("evictd pod %s/%s: no \"informers synced\" line in its log", p.Namespace, p.Name)
	}
	return at, nil
}

// nodeImage finds an image in the Node's status.images by name.
func nodeImage(ctx context.Context, n *Node, name string) (*corev1.ContainerImage, error) {
	node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for i := range node.Status.Images {
		for _, nm := range node.Status.Images[i].Names {
			if strings.HasSuffix(nm, "/"+name) || nm == name {
				return &node.Status.Images[i], nil
			}
		}
	}
	return nil, nil
}

// evictdMetrics is evictd's /metrics page, read from the guest.
func evictdMetrics(ctx context.Context, n *Node, ev *corev1.Pod) (string, error) {
	res, err := n.Exec(ctx, []string{"curl", "-s", "--max-time", "10", "http://" + ev.Status.PodIP + ":9731/metrics"}, WithTimeout(time.Minute))
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return "", err
	}
	return res.Stdout, nil
}

// TestNodeDiskImageGC: an image no pod uses (256 MiB, the ballast) and a
// file outside any pod take the one disk to 13 % available, past where the
// kubelet's image collection starts (85 % used): under evictd's
// imagefs.available<15 % and nodefs.available<15 %, and under the
// kubelet's imagefs.available<15 %, where its eviction manager deletes
// unused images before it evicts anyone. The image covers what both of
// evictd's thresholds need, so evictd evicts nothing and says why; the
// kubelet deletes the image, and nobody evicts a pod.
func TestNodeDiskImageGC(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	evictd := evictdPod(t, n)
	// Pods that could be evicted for the disk, if evictd wanted to.
	ns, fill, pods := diskWorkloads(t, ctx, n, "imagegc", 40)
	img := ballastListed(t, ctx, n)
	// evictd counts an unused image once it has seen it listed for 7
	// minutes: by then the kubelet's image manager has detected it (it
	// looks every 5 minutes) and its 2-minute minimum age has passed. This
	// evictd has seen it since its first pass, before it was Ready; before
	// the 7 minutes it evicts for the pressure instead (seen here when the
	// wait counted from the container's start, 20 s too early on a slow
	// start; the unit test TestLoopDiskLeavesUnusedImagesToTheKubelet
	// covers that side). Counted from the log line of the informers' sync,
	// which the first pass follows at once, 10 s more is margin enough.
	first, err := firstPassAt(t, n, evictd)
	if err != nil {
		t.Fatal(err)
	}
	if wait := time.Until(first.Add(7*time.Minute + 10*time.Second)); wait > 0 {
		t.Logf("waiting %s, until evictd has seen %s (%d MiB) listed for 7 minutes", wait.Round(time.Second), ballastImage, img.SizeBytes>>20)
		time.Sleep(wait)
	}

	capacity, target, start := fillNodefs(t, ctx, n, fill, 13)
	t.Logf("nodefs: capacity %d MiB, now %d MiB available (13 %%); evictd's disk thresholds need %d MiB, the image is %d MiB",
		capacity>>20, target>>20, (capacity*15/100-target)>>20, img.SizeBytes>>20)

	if err := n.poll(ctx, 3*time.Minute, "the kubelet to delete the unused image", func(ctx context.Context) error {
		img, err := nodeImage(ctx, n, ballastImage)
		if err == nil && img != nil {
			a, _, _ := nodeFsAvailable(ctx, n)
			err = fmt.Errorf("still listed; nodefs %d MiB available", a>>20)
		}
		return err
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	a, _, err := nodeFsAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the kubelet deleted the image %s after the fill; nodefs %d MiB available", time.Since(start).Round(time.Second), a>>20)
	// The pressure ended with the image: an eviction evictd made for it was
	// made before. Read once evictd has seen its disk thresholds no longer
	// met and looked a few times more.
	waitEvictdLooked(t, ctx, n, evictd, 3, `evictd_threshold_met{kind="hard",signal="imagefs.available"}`,
		`evictd_threshold_met{kind="hard",signal="nodefs.available"}`)
	checkRunning(t, ctx, n, ns, pods, "after the image's collection covered the pressure")
	log := evictdLogSince(t, n, evictd, start.Add(-5*time.Second))
	t.Logf("evictd's log since the fill:\n%s", log)
	if !strings.Contains(log, "the kubelet's image garbage collection frees enough") {
		t.Errorf("evictd did not say why it evicted nothing")
	}
	if strings.Contains(log, `"evicted pod"`) {
		t.Errorf("evictd evicted a pod")
	}
}

// diskWorkloads makes the namespace name and the pods the disk tests could
// evict: a writer of writeMiB MiB on its root filesystem, first, and a
// quiet pod. fill is where the test fills the disk; it is removed at the
// test's end.
func diskWorkloads(t *testing.T, ctx context.Context, n *Node, name string, writeMiB int) (ns, fill string, pods []*corev1.Pod) {
	t.Helper()
	ns = newNamespace(t, n, name)
	fill = "/var/lib/kubelet/evictd-test-fill"
	t.Cleanup(func() { _, _ = n.Sh(context.Background(), "rm -f "+fill) })
	pods = createRunning(t, ctx, n,
		asRoot(workloadPod(ns, "writer", 0, 0, fmt.Sprintf("--write-mib=%d", writeMiB), "--write-dir=/")),
		workloadPod(ns, "quiet", 0, 0, "--hold-mib=8"),
	)
	return ns, fill, pods
}

// ballastListed is the unused ballast image as the Node lists it.
func ballastListed(t *testing.T, ctx context.Context, n *Node) *corev1.ContainerImage {
	t.Helper()
	var img *corev1.ContainerImage
	// Minutes after the boot's import, when a test runs alone.
	if err := n.poll(ctx, 10*time.Minute, "the kubelet to list "+ballastImage, func(ctx context.Context) error {
		var err error
		if img, err = nodeImage(ctx, n, ballastImage); err == nil && img == nil {
			err = fmt.Errorf("the Node does not list %s, imported at boot", ballastImage)
		}
		return err
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	return img
}

// fillNodefs writes the file fill until nodefs has percent % of its
// capacity available (target bytes), and says when it was done.
func fillNodefs(t *testing.T, ctx context.Context, n *Node, fill string, percent int64) (capacity, target int64, start time.Time) {
	t.Helper()
	avail, capacity, err := nodeFsAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	target = capacity * percent / 100
	if avail <= target {
		t.Fatalf("nodefs has %d MiB available, already below the %d MiB (%d %%) the test aims at", avail>>20, target>>20, percent)
	}
	start = time.Now()
	if _, err := n.Sh(ctx, fmt.Sprintf("fallocate -l %d %s && sync", avail-target, fill)); err != nil {
		t.Fatal(err)
	}
	return capacity, target, start
}

// checkRunning fails the test for each of pods that is not running
// unharmed: ended, or being deleted. when says at what point.
func checkRunning(t *testing.T, ctx context.Context, n *Node, ns string, pods []*corev1.Pod, when string) {
	t.Helper()
	for _, p := range pods {
		got, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		if f := FateOf(got); f != "" || got.DeletionTimestamp != nil {
			t.Errorf("%s ended by %q (deleting %v) %s; want it running", p.Name, f, got.DeletionTimestamp != nil, when)
		}
	}
}
