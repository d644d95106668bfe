// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Disk pressure on the real node: one ext4 disk holds the
// kubelet's root, the image store and the logs, so nodefs and imagefs are
// the same filesystem, as on most nodes.

// diskArgs is evictd's configuration for both disk tests, one deployment
// for the two (a redeploy takes about a minute under TCG).
//   - nodefs.available<40 %: far above the kubelet's imagefs.available<15 %
//     (the same disk), so TestNodeDiskOrder can take the node 400 MiB below
//     it and stay clear of the kubelet's.
//   - nodefs.inodesFree<90 %: TestNodeDiskInodes's threshold (the kubelet's
//     is 5 %). Neither test comes near the other's threshold: the space test
//     writes a few large files, the inodes test empty ones.
//   - Without the image rule: the node's unused image (the ballast of
//     TestNodeDiskImageGC, which runs after these) would cover part of the
//     need.
var diskArgs = []string{"--eviction-hard=nodefs.available<40%,nodefs.inodesFree<90%", "--expect-image-gc=false"}

// nodeFsAvailable is the node's nodefs as statfs gives it: available (to
// unprivileged users, as the kubelet counts it) and capacity, in bytes.
func nodeFsAvailable(ctx context.Context, n *Node) (avail, capacity int64, err error) {
	return fsAvailable(ctx, n, "/var/lib/kubelet")
}

// fsAvailable is statfs of dir in the guest: available bytes and capacity.
func fsAvailable(ctx context.Context, n *Node, dir string) (avail, capacity int64, err error) {
	out, err := n.Sh(ctx, "stat -f -c '%a %b %S' "+dir)
	if err != nil {
		return 0, 0, err
	}
	var a, b, s int64
	if _, err := fmt.Sscan(out, &a, &b, &s); err != nil {
		return 0, 0, fmt.Errorf("stat -f %s: %q: %w", dir, out, err)
	}
	return a * s, b * s, nil
}

// TestNodeDiskOrder: three pods use the disk three ways, a writable layer
// (120 MiB), an emptyDir (80 MiB) and their log (50 MiB printed, of which
// the kubelet's log rotation keeps a part, 32 MiB seen: 10 MiB files, the
// older ones compressed); then a file outside any pod takes nodefs below evictd's
// threshold by what the first two hold and half the third. evictd evicts in
// the kubelet's order, largest use first, all three and no more, and the
// evictions give back what evictd counted for the pods. The kubelet, whose
// own thresholds are far lower, evicts nothing.
func TestNodeDiskOrder(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	evictd := evictdPodWith(t, n, diskArgs...)
	ns := newNamespace(t, n, "disk")
	fill := "/var/lib/kubelet/evictd-test-fill"
	t.Cleanup(func() { _, _ = n.Sh(context.Background(), "rm -f "+fill) })

	scratch := withEmptyDir(workloadPod(ns, "scratch", 0, 0, "--write-mib=80", "--write-dir=/data"), "/data")
	pods := createRunning(t, ctx, n,
		asRoot(workloadPod(ns, "layer", 0, 0, "--write-mib=120", "--write-dir=/")),
		scratch,
		workloadPod(ns, "logger", 0, 0, "--log-mib=50"),
	)
	written := time.Now()
	var doneAfter []string
	for _, p := range pods {
		want := "workload: wrote"
		if p.Name == "logger" {
			want = "workload: logged"
		}
		// Up to 4 minutes: 50 MiB took 24-40 s (ended by the line, not by
		// the time). The line is looked for in the rotated log too, not
		// only the current one: the kubelet rotates a log past 10 MiB
		// (checked every 10 s), so the logger's last line can end in
		// 0.log.<time> with nothing written after it, and a poll that
		// looked in 0.log alone waited for ever. The kubelet compresses
		// only a rotated file that a newer one follows, which nothing
		// written after the last line can make, so the .gz files are left
		// out (the guest's busybox has no zgrep).
		var in string
		if err := n.poll(ctx, 4*time.Minute, p.Name+" done writing", func(ctx context.Context) error {
			out, err := n.Sh(ctx, fmt.Sprintf(`cd /var/log/pods/%s_%s_%s/work && { for f in *; do case $f in *.gz|*.tmp) ;; *) grep -l '%s' "$f" ;; esac; done; true; }`,
				ns, p.Name, p.UID, want))
			in = strings.Join(strings.Fields(out), " ")
			if err != nil || in == "" {
				return fmt.Errorf("no %q in its log yet (%v)", want, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		doneAfter = append(doneAfter, fmt.Sprintf("%s %s (in %s)", p.Name, time.Since(written).Round(time.Second), in))
	}
	t.Logf("the three pods done writing after they ran (seen in turn): %s", strings.Join(doneAfter, ", "))
	// What evictd counts for each pod, once its ephemeral figures (refreshed
	// every 10 s, later on a loaded guest) hold what the pods wrote: polled,
	// not a sleep past one refresh.
	atLeast := map[string]int64{"layer": 120 << 20, "scratch": 80 << 20, "logger": 10 << 20}
	counted := map[string]int64{}
	if err := n.poll(ctx, 3*time.Minute, "evictd's ephemeral figures to hold what the pods wrote", func(ctx context.Context) error {
		obs, raw, err := observeInPod(ctx, n, evictd)
		if err != nil {
			return fmt.Errorf("evictd observe: %w\n%s", err, raw)
		}
		for _, p := range pods {
			ps := podByUID(obs, string(p.UID))
			if ps == nil || ps.EphemeralStorage == nil || ps.EphemeralStorage.UsedBytes == nil {
				return fmt.Errorf("evictd observe has no ephemeral storage for %s", p.Name)
			}
			counted[p.Name] = int64(*ps.EphemeralStorage.UsedBytes)
		}
		for name, least := range atLeast {
			if counted[name] < least {
				return fmt.Errorf("%s: evictd counts %d MiB, less than the %d MiB it wrote and the kubelet keeps", name, counted[name]>>20, least>>20)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("ephemeral storage as evictd counts it: layer %d MiB, scratch %d MiB, logger %d MiB",
		counted["layer"]>>20, counted["scratch"]>>20, counted["logger"]>>20)
	if counted["logger"] > 100<<20+4<<20 || counted["logger"] >= counted["scratch"] {
		t.Fatalf("logger: evictd counts %d MiB; want at most what it printed, less than scratch", counted["logger"]>>20)
	}
	need := counted["layer"] + counted["scratch"] + counted["logger"]/2

	avail, capacity, err := nodeFsAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	threshold := capacity * 40 / 100
	target := threshold - need
	if avail-target < 0 {
		t.Fatalf("nodefs has %d MiB available, already below the %d MiB the test aims at", avail>>20, target>>20)
	}
	start := time.Now()
	if _, err := n.Sh(ctx, fmt.Sprintf("fallocate -l %d %s && sync", avail-target, fill)); err != nil {
		t.Fatal(err)
	}
	t.Logf("nodefs: capacity %d MiB, evictd's threshold %d MiB available, now %d MiB: %d MiB short",
		capacity>>20, threshold>>20, target>>20, (threshold-target)>>20)

	// Evictions until the need is covered, then nothing more for a while.
	pf := newPodFates(n, ns)
	if err := n.poll(ctx, 3*time.Minute, "evictions covering the need", func(ctx context.Context) error {
		if err := pf.check(ctx); err != nil {
			return err
		}
		a, _, err := nodeFsAvailable(ctx, n)
		if err != nil {
			return err
		}
		if a < threshold {
			return fmt.Errorf("nodefs %d MiB available, under %d MiB; evicted so far %v", a>>20, threshold>>20, pf.order)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	took := time.Since(start)
	// Nothing more goes: read once evictd has seen nodefs above its
	// threshold and looked a few times more.
	waitEvictdLooked(t, ctx, n, evictd, 5, `evictd_threshold_met{kind="hard",signal="nodefs.available"}`)
	if err := pf.check(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("fates after %s: %v, in order %v", took.Round(time.Second), pf.fates, pf.order)
	t.Logf("evictd's log since the fill:\n%s", evictdLogSince(t, n, evictd, start.Add(-5*time.Second)))
	t.Logf("events in %s:\n%s", ns, podEvents(t, n, ns))
	// The order is evictd's log's: the fates are polled, and two evictions
	// within one poll show in the listing's (alphabetical) order (seen:
	// scratch and logger a second apart, listed as logger, scratch).
	want := []string{"layer", "scratch", "logger"}
	if got := evictedIn(t, n, evictd, ns); !slices.Equal(got, want) {
		t.Errorf("evicted %v (evictd's log); want %v, the largest use first, as many as the need", got, want)
	}
	for name, f := range pf.fates {
		if f != ByEvictd {
			t.Errorf("%s ended by %s; want evictd", name, f)
		}
	}
	after, _, err := nodeFsAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	freed := after - target
	var sum int64
	for _, name := range pf.order {
		sum += counted[name]
	}
	t.Logf("nodefs gained %d MiB back; evictd counted %d MiB for the pods it evicted", freed>>20, sum>>20)
	// What the evictions freed is what evictd counted, give or take the
	// node's own writes in the meantime (logs, the kubelet's files).
	if d := freed - sum; d < -32<<20 || d > 32<<20 {
		t.Errorf("the evictions freed %d MiB; evictd counted %d MiB for them", freed>>20, sum>>20)
	}
}

// nodeFsInodes is the node's nodefs free and total inodes.
func nodeFsInodes(ctx context.Context, n *Node) (free, total int64, err error) {
	out, err := n.Sh(ctx, "stat -f -c '%d %c' /var/lib/kubelet")
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(out, &free, &total); err != nil {
		return 0, 0, fmt.Errorf("stat -f: %q: %w", out, err)
	}
	return free, total, nil
}

// TestNodeDiskInodes: a pod makes 30000 empty files in an emptyDir and
// takes nodefs.inodesFree under evictd's threshold (set at 90 % for the
// test; the kubelet's is 5 %); evictd evicts it, not the pod with 500
// files, and its eviction gives back the inodes evictd counted for it.
func TestNodeDiskInodes(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	free, total, err := nodeFsInodes(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	threshold := total * 90 / 100
	if free-threshold < 5000 || free-threshold > 25000 {
		t.Fatalf("nodefs has %d of %d inodes free: %d above the 90 %% threshold, not the 5000-25000 the test is sized for", free, total, free-threshold)
	}
	evictd := evictdPodWith(t, n, diskArgs...)
	ns := newNamespace(t, n, "inodes")
	start := time.Now()
	createRunning(t, ctx, n,
		withEmptyDir(workloadPod(ns, "few", 0, 0, "--files=500", "--write-dir=/data"), "/data"),
		withEmptyDir(workloadPod(ns, "many", 0, 0, "--files=30000", "--write-dir=/data"), "/data"),
	)
	var before int64
	if err := n.poll(ctx, 3*time.Minute, "evictd to evict the pod with many files", func(ctx context.Context) error {
		p, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "many", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if f := FateOf(p); f != "" {
			return nil
		}
		before, _, _ = nodeFsInodes(ctx, n)
		return fmt.Errorf("still running; %d inodes free, threshold %d", before, threshold)
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	// Its inodes back, and nothing more evicted meanwhile.
	if err := n.poll(ctx, 2*time.Minute, "the inodes back", func(ctx context.Context) error {
		f, _, err := nodeFsInodes(ctx, n)
		if err == nil && f < threshold {
			err = fmt.Errorf("%d free, under %d", f, threshold)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitEvictdLooked(t, ctx, n, evictd, 5, `evictd_threshold_met{kind="hard",signal="nodefs.inodesFree"}`)
	log := evictdLogSince(t, n, evictd, start)
	t.Logf("evictd's log:\n%s", log)
	t.Logf("events in %s:\n%s", ns, podEvents(t, n, ns))
	for _, name := range []string{"few", "many"} {
		p, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if name == "many" {
				continue // evicted and gone
			}
			t.Fatal(err)
		}
		f := FateOf(p)
		switch {
		case name == "many" && f != ByEvictd:
			t.Errorf("many ended by %q; want evictd", f)
		case name == "few" && f != "":
			t.Errorf("few ended by %q; want it running: one eviction covered the need", f)
		}
	}
	if !strings.Contains(log, `"signal":"nodefs.inodesFree"`) {
		t.Errorf("evictd's log does not name nodefs.inodesFree")
	}
}
