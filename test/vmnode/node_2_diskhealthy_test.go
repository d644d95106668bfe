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

// TestNodeDiskHealthy: a healthy one-disk node at 82 % used, with an unused
// image on it (the ballast), is left alone with evictd's defaults placed
// against the node's real kubelet (its config directory mounted, as the
// manifest's commented kubelet-config volume shows): its disk thresholds
// sit where the kubelet's image collection starts (85 % used), so evictd
// opens no disk episode, puts no brake on the Node and evicts nothing. Read
// only once evictd has looked: its imagefs.available at the fill's level
// and three observations after. TestNodeDiskImageGC takes the same disk
// past 85 % at the end of the node's run. This test runs with the other disk
// tests (file order), before the scenarios deploy evictd as shipped: its
// own evictd, with the kubelet's config mounted, is one deployment the
// image test would otherwise wait seven minutes after.
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
