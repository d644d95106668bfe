// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The dedicated imagefs layout: a node whose /var/lib/containerd
// is a disk of its own, so the image store and the containers' writable
// layers are on imagefs, and the kubelet's root, the logs and the emptyDirs
// on nodefs. These tests run on a node of their own, booted after the
// one-disk node's tests (imageFsNode).

// TestNodeDedicatedImageFs: a pod that writes 250 MiB into its writable
// layer (imagefs) and one that writes 150 MiB into an emptyDir (nodefs).
// evictd sees the layout, agrees with the kubelet's figures for both
// filesystems, and ranks each signal by what is on its filesystem: short of
// nodefs it evicts the emptyDir's pod, though the other uses more disk in
// all; short of imagefs, the writable layer's pod. On one disk the first
// would have been the larger.
func TestNodeDedicatedImageFs(t *testing.T) {
	n := imageFsNode(t)
	ctx := context.Background()
	// 40 %: far above the kubelet's thresholds (imagefs 15 %, nodefs 10 %),
	// so each fill can need 75-100 MiB and stay clear of them.
	evictd := evictdPodWith(t, n, "--eviction-hard=nodefs.available<40%,imagefs.available<40%")
	ns := newNamespace(t, n, "imagefs")
	nodeFill, imageFill := "/var/lib/kubelet/evictd-test-fill", "/var/lib/containerd/evictd-test-fill"
	t.Cleanup(func() { _, _ = n.Sh(context.Background(), "rm -f "+nodeFill+" "+imageFill) })

	pods := createRunning(t, ctx, n,
		asRoot(workloadPod(ns, "layer", 0, 0, "--write-mib=250", "--write-dir=/")),
		withEmptyDir(workloadPod(ns, "scratch", 0, 0, "--write-mib=150", "--write-dir=/data"), "/data"),
	)
	wrote := map[string]uint64{string(pods[0].UID): 250 << 20, string(pods[1].UID): 150 << 20}
	var uids []string
	for uid := range wrote {
		uids = append(uids, uid)
	}
	if err := n.poll(ctx, 3*time.Minute, "the pods' writes in the kubelet's summary", func(ctx context.Context) error {
		s, _, err := n.Summary(ctx)
		if err != nil {
			return err
		}
		for uid, w := range wrote {
			p := podByUID(s, uid)
			if p == nil || p.EphemeralStorage == nil || p.EphemeralStorage.UsedBytes == nil || *p.EphemeralStorage.UsedBytes < w {
				return fmt.Errorf("pod %s: not yet the %d MiB it wrote", uid, w>>20)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// evictd's ephemeral figures are refreshed every 10 s.
	time.Sleep(12 * time.Second)

	// The layout, and the figures against the kubelet's.
	ev, raw, err := observeInPod(ctx, n, evictd)
	if err != nil {
		t.Fatalf("evictd observe: %v\n%s", err, raw)
	}
	ku, _, err := n.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows := CompareParity(ev, ku, uids, ParityTolerance{
		Memory: 64 << 20, PodMemory: 1 << 20, Bytes: 16 << 20, Inodes: 64, Processes: 32,
		PodDiskBytes: 256 << 10, PodDiskInodes: 16,
	})
	t.Logf("evictd (in its pod) against the kubelet's /stats/summary, dedicated imagefs:\n%s", ParityTable(rows))
	for _, r := range rows {
		if !r.Agrees() {
			t.Errorf("%s: evictd %d, kubelet %d (missing in: %q), tolerance %d", r.Signal, r.Evictd, r.Kubelet, r.Missing, r.Tolerance)
		}
	}
	if ev.Node.Fs == nil || ev.Node.Runtime == nil || ev.Node.Runtime.ImageFs == nil ||
		*ev.Node.Fs.CapacityBytes == *ev.Node.Runtime.ImageFs.CapacityBytes {
		t.Fatalf("evictd does not see two filesystems: nodefs %+v, imagefs %+v", ev.Node.Fs, ev.Node.Runtime)
	}
	table, err := execInContainer(ctx, n, evictd, "evictd", "/evictd", "observe", "--host-root=/host", "-o", "table")
	if err != nil || table.Err() != nil {
		t.Fatalf("evictd observe -o table: %v %v", err, table)
	}
	t.Logf("evictd observe -o table:\n%s", table.Stdout)
	if !strings.Contains(table.Stdout, "/var/lib/containerd (a filesystem of its own)") {
		t.Errorf("observe's table does not say the image store has a filesystem of its own")
	}
	if !strings.Contains(table.Stdout, "/var/lib/containerd (imagefs's filesystem: imagefs's thresholds apply)") {
		t.Errorf("observe's table does not show containerfs on imagefs's filesystem")
	}

	// nodefs short by 75 MiB: the emptyDir's pod, not the writable layer's.
	// fill takes dir need bytes below evictd's threshold, which it returns.
	fill := func(dir, file string, need int64) int64 {
		t.Helper()
		avail, capacity, err := fsAvailable(ctx, n, dir)
		if err != nil {
			t.Fatal(err)
		}
		threshold := capacity * 40 / 100
		target := threshold - need
		if avail <= target {
			t.Fatalf("%s has %d MiB available, already below the %d MiB the test aims at", dir, avail>>20, target>>20)
		}
		if _, err := n.Sh(ctx, fmt.Sprintf("fallocate -l %d %s && sync", avail-target, file)); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: capacity %d MiB, evictd's threshold %d MiB available, now %d MiB", dir, capacity>>20, threshold>>20, target>>20)
		return threshold
	}
	pf := newPodFates(n, ns)
	evictedFor := func(dir, fillFile string, need int64, want string) {
		t.Helper()
		start := time.Now()
		threshold := fill(dir, fillFile, need)
		if err := n.poll(ctx, 3*time.Minute, dir+" above evictd's threshold again", func(ctx context.Context) error {
			if err := pf.check(ctx); err != nil {
				return err
			}
			a, _, err := fsAvailable(ctx, n, dir)
			if err == nil && a < threshold {
				err = fmt.Errorf("%d MiB available, under %d MiB", a>>20, threshold>>20)
			}
			return err
		}); err != nil {
			t.Fatalf("%v\n%s", err, n.Diagnostics())
		}
		// Nothing more goes: read once evictd has seen both filesystems
		// above its thresholds and looked a few times more.
		waitEvictdLooked(t, ctx, n, evictd, 5, `evictd_threshold_met{kind="hard",signal="nodefs.available"}`,
			`evictd_threshold_met{kind="hard",signal="imagefs.available"}`)
		if err := pf.check(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("short of %s, %s later: fates %v", dir, time.Since(start).Round(time.Second), pf.fates)
		t.Logf("evictd's log since the fill of %s:\n%s", dir, evictdLogSince(t, n, evictd, start.Add(-5*time.Second)))
		if pf.fates[want] != ByEvictd {
			t.Errorf("short of %s: %s ended by %q; want evicted by evictd", dir, want, pf.fates[want])
		}
		for _, p := range pods {
			if p.Name != want && pf.fates[p.Name] != "" && !(want == "layer" && p.Name == "scratch") {
				t.Errorf("short of %s: %s ended by %q; want it left alone, it has nothing there", dir, p.Name, pf.fates[p.Name])
			}
		}
	}
	evictedFor("/var/lib/kubelet", nodeFill, 75<<20, "scratch")
	evictedFor("/var/lib/containerd", imageFill, 100<<20, "layer")
	t.Logf("events in %s:\n%s", ns, podEvents(t, n, ns))
}
