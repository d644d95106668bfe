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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/evictd/evictd/pkg/nodebrake"
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
// where the ballast would change what they measure. TestNodeDiskHealthy
// leaves it in place (the kubelet collects nothing under 85 % used).
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

// TestNodeDiskHealthy: a healthy one-disk node at 82 % used, with an unused
// image on it (the ballast), is left alone with evictd's defaults placed
// against the node's real kubelet (its config directory mounted, as the
// manifest's commented kubelet-config volume shows): its disk thresholds
// sit where the kubelet's image collection starts (85 % used), so evictd
// opens no disk episode, puts no brake on the Node and evicts nothing. Read
// only once evictd has looked: its imagefs.available at the fill's level
// and three observations after. TestNodeDiskImageGC, next, takes the same
// disk past 85 %, with evictd deployed afresh as shipped.
func TestNodeDiskHealthy(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	t.Cleanup(func() {
		evictdOnce.Lock()
		evictdOnce.pod = nil // the next test deploys evictd as it wants it
		evictdOnce.Unlock()
	})
	// An argument the shipped pods lack, so that the wait takes the new
	// pod only: the default, given explicitly.
	evictd := deployEvictdWith(t, ctx, n, func(obj *unstructured.Unstructured) { mountKubeletConfig(t, obj, n.OutDir) },
		"--kubelet-thresholds=place")
	placedLine, ok := FirstLogAfter(CRILogLines(evictdLog(t, n, evictd)), time.Time{}, "evictd's hard thresholds placed above the kubelet's", nil)
	if !ok {
		t.Fatalf("no start line on the kubelet's thresholds in evictd's log:\n%s", evictdLog(t, n, evictd))
	}
	placed := fmt.Sprint(placedLine.Fields["placed"])
	t.Logf("evictd: kubelet from %q: %s, image collection %v%%..%v%%; placed %s", placedLine.Str("kubeletFrom"), placedLine.Str("kubelet"),
		placedLine.Fields["imageGCLowThresholdPercent"], placedLine.Fields["imageGCHighThresholdPercent"], placed)
	for _, want := range []string{"imagefs.available<15% (bounded by the kubelet's image collection: from 85% used", "nodefs.available<15%"} {
		if !strings.Contains(placed, want) {
			t.Errorf("placed %s: want %q", placed, want)
		}
	}
	// Pods evictd would evict for the disk, the writer first.
	ns, fill, pods := diskWorkloads(t, ctx, n, "healthy", 16)
	img := ballastListed(t, ctx, n)

	capacity, target, start := fillNodefs(t, ctx, n, fill, 18)
	t.Logf("nodefs: capacity %d MiB, now %d MiB available (82 %% used); unused image %s %d MiB",
		capacity>>20, target>>20, ballastImage, img.SizeBytes>>20)

	// evictd has looked: it reports the filled disk, then three more
	// observations (10 s apart at most).
	const (
		availSeries = `evictd_signal_available_bytes{signal="imagefs.available"}`
		countSeries = `evictd_observation_duration_seconds_count`
	)
	want := map[string]float64{availSeries: 0, countSeries: 0}
	var seen float64
	if err := n.poll(ctx, 2*time.Minute, "evictd to observe the filled disk", func(ctx context.Context) error {
		page, err := evictdMetrics(ctx, n, evictd)
		if err != nil {
			return err
		}
		got := seriesValues(page, want)
		if a := got[availSeries]; a == 0 || a > float64(target+32<<20) {
			return fmt.Errorf("%s = %.0f MiB; want the fill's %d MiB", availSeries, a/(1<<20), target>>20)
		}
		seen = got[countSeries]
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	var page string
	if err := n.poll(ctx, 3*time.Minute, "three observations more", func(ctx context.Context) error {
		p, err := evictdMetrics(ctx, n, evictd)
		if err != nil {
			return err
		}
		c := seriesValues(p, want)[countSeries]
		if c < seen+3 {
			return fmt.Errorf("%s = %.0f; want %.0f", countSeries, c, seen+3)
		}
		t.Logf("evictd saw the fill at observation %.0f and observed %.0f times more", seen, c-seen)
		page = p
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}

	// Nothing: no disk threshold met, no episode, no brake, no eviction.
	quiet := map[string]float64{
		`evictd_threshold_met{kind="hard",signal="imagefs.available"}`: 0,
		`evictd_threshold_met{kind="hard",signal="nodefs.available"}`:  0,
		`evictd_pressure_episode{resource="imagefs"}`:                  0,
		`evictd_pressure_episode{resource="nodefs"}`:                   0,
		`evictd_node_brake_on{resource="disk"}`:                        0,
	}
	got := seriesValues(page, quiet)
	t.Logf("evictd's metrics at 82 %% used: %v", got)
	for k := range quiet {
		if v, ok := got[k]; ok && v != 0 {
			t.Errorf("%s = %v; want 0 at 82 %% used", k, v)
		}
	}
	node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range node.Spec.Taints {
		if strings.HasPrefix(tn.Key, nodebrake.TaintPrefix) {
			t.Errorf("the Node has evictd's taint %s at 82 %% used", tn.ToString())
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == nodebrake.ConditionType(nodebrake.Disk) && c.Status == corev1.ConditionTrue {
			t.Errorf("the Node has %s=True at 82 %% used", c.Type)
		}
	}
	checkRunning(t, ctx, n, ns, pods, "at 82 % used")
	log := evictdLogSince(t, n, evictd, start.Add(-5*time.Second))
	t.Logf("evictd's log since the fill:\n%s", log)
	for _, bad := range []string{`"pressure episode started"`, `"threshold met"`, `"evicted pod"`} {
		if strings.Contains(log, bad) {
			t.Errorf("evictd's log has %s at 82 %% used", bad)
		}
	}
	if img, err := nodeImage(ctx, n, ballastImage); err != nil || img == nil {
		t.Errorf("%s no longer listed (%v): the kubelet collects nothing under 85 %% used", ballastImage, err)
	}
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
	img, err := nodeImage(ctx, n, ballastImage)
	if err != nil {
		t.Fatal(err)
	}
	if img == nil {
		t.Fatalf("the Node does not list %s, imported at boot", ballastImage)
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
