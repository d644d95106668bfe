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
// kubelet lists a new image only minutes after it appears (4 in a trial),
// and its image manager detects one only every 5 minutes, time the tests
// before this one cover. The disk tests before it set --expect-image-gc=false
// where the ballast would change what they measure.
func init() { extraImages["ballast.tar"] = "TestNodeDiskImageGC" }

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

// TestNodeDiskImageGC: an image no pod uses (256 MiB, the ballast) and a
// file outside any pod take the one disk to 13 % available:
// under evictd's imagefs.available<20 % and nodefs.available<15 %, and under
// the kubelet's imagefs.available<15 %, where its eviction manager deletes
// unused images before it evicts anyone. The image covers what both of
// evictd's thresholds need, so evictd evicts nothing and says why; the
// kubelet deletes the image, and nobody evicts a pod.
func TestNodeDiskImageGC(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	evictd := evictdPod(t, n)
	ns := newNamespace(t, n, "imagegc")
	fill := "/var/lib/kubelet/evictd-test-fill"
	t.Cleanup(func() { _, _ = n.Sh(context.Background(), "rm -f "+fill) })
	// Pods that could be evicted for the disk, if evictd wanted to.
	pods := createRunning(t, ctx, n,
		asRoot(workloadPod(ns, "writer", 0, 0, "--write-mib=40", "--write-dir=/")),
		workloadPod(ns, "quiet", 0, 0, "--hold-mib=8"),
	)

	img, err := nodeImage(ctx, n, ballastImage)
	if err != nil {
		t.Fatal(err)
	}
	if img == nil {
		t.Fatalf("the Node does not list %s, imported at boot", ballastImage)
	}
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

	avail, capacity, err := nodeFsAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	target := capacity * 13 / 100
	if avail <= target {
		t.Fatalf("nodefs has %d MiB available, already below the %d MiB the test aims at", avail>>20, target>>20)
	}
	start := time.Now()
	if _, err := n.Sh(ctx, fmt.Sprintf("fallocate -l %d %s && sync", avail-target, fill)); err != nil {
		t.Fatal(err)
	}
	t.Logf("nodefs: capacity %d MiB, now %d MiB available (13 %%); evictd's imagefs threshold needs %d MiB, the image is %d MiB",
		capacity>>20, target>>20, (capacity*20/100-target)>>20, img.SizeBytes>>20)

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
	// made before, and shows in the API and its log within seconds.
	time.Sleep(5 * time.Second)
	for _, p := range pods {
		got, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		if f := FateOf(got); f != "" || got.DeletionTimestamp != nil {
			t.Errorf("%s ended by %q (deleting %v); want it running: the image's collection covered the pressure", p.Name, f, got.DeletionTimestamp != nil)
		}
	}
	log := evictdLogSince(t, n, evictd, start.Add(-5*time.Second))
	t.Logf("evictd's log since the fill:\n%s", log)
	if !strings.Contains(log, "the kubelet's image garbage collection frees enough") {
		t.Errorf("evictd did not say why it evicted nothing")
	}
	if strings.Contains(log, `"evicted pod"`) {
		t.Errorf("evictd evicted a pod")
	}
}
