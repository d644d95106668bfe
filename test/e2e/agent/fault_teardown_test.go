// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// msgProlonged is what evictd logs, once, when a victim outlives its grace
// period and GoneTimeout while its teardown still moves.
const msgProlonged = "victim still being torn down past its wait; its reclaim still counts while it moves"

// TestFaultSlowVolumeTeardown: the victim's files go slowly, as on the VM
// node where TestNodeDiskInodes's victim (18,615 files) was still
// terminating 37 s after its eviction and evictd evicted a second pod. The
// node's /var is a tmpfs of 20,000 inodes; "many" made 11,000 files in its
// emptyDir and "few" 1,500, and nodefs.inodesFree is under its threshold,
// with a minimum reclaim that only many's files cover. many's process exits
// at SIGTERM, the stand-in reports it Failed and removes its files at 100
// a second, its empty cgroup still there (the kubelet's order), so it goes
// about two minutes after its eviction. Its figure falls at every pass:
// evictd keeps counting it past grace + 30 s, says so once, and evicts no
// one else; nothing is called stuck.
func TestFaultSlowVolumeTeardown(t *testing.T) {
	const (
		inodes     = 20000
		manyFiles  = 11000
		fewFiles   = 1500
		removeRate = 100 // files a second
		minReclaim = 4000
	)
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "teardown", MemoryBytes: nodeMemory, DiskBytes: 64 * mib, DiskInodes: inodes})
	ns := c.Namespace(t, "teardown")
	varDir := filepath.Join(node.HostRoot, "var")

	many := podSpec{name: "many", files: manyFiles}.pod(ns, node.Name)
	many.Annotations = map[string]string{nodesim.VolumeRemovalRateAnnotation: strconv.Itoa(removeRate)}
	pods := createRunning(t, c.Admin, many, podSpec{name: "few", files: fewFiles}.pod(ns, node.Name))
	for _, name := range []string{"many", "few"} {
		waitMadeFiles(t, node, pods[name])
	}
	free, err := fsInodesFree(varDir)
	if err != nil {
		t.Fatal(err)
	}
	// Met by 1,000 inodes now; the need, with the minimum reclaim, is
	// 5,000: many's 11,000 cover it, few's 1,500 do not.
	threshold := free + 1000
	t.Logf("nodefs: %d of %d inodes free; threshold %d, minimum reclaim %d", free, inodes, threshold, minReclaim)
	e := startEvictd(t, c, node,
		"--eviction-hard=nodefs.inodesFree<"+strconv.FormatInt(threshold, 10)+",memory.available<50Mi,allocatableMemory.available<none,"+
			"nodefs.available<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none",
		"--eviction-minimum-reclaim=nodefs.inodesFree="+strconv.Itoa(minReclaim),
	)

	evs := waitEvictions(t, e, 1, evictionTimeout)
	if evs[0].Pod != podKey(pods["many"]) || evs[0].Signal != "nodefs.inodesFree" {
		t.Fatalf("evictd's first eviction: %s for %q, want %s for nodefs.inodesFree", evs[0].Pod, evs[0].Signal, podKey(pods["many"]))
	}
	// many goes once its files have: about two minutes. Whatever evictd
	// does meanwhile is read after.
	waitGone(t, c.Admin, pods["many"], 4*time.Minute)
	tl, _ := node.Record(pods["many"].UID)
	if tl.VolumesRemoved.IsZero() || tl.SIGTERM.IsZero() || tl.VolumesRemoved.Sub(tl.SIGTERM) < time.Minute {
		t.Fatalf("many's files went %s after its SIGTERM (timeline %+v): the slow teardown did not happen", tl.VolumesRemoved.Sub(tl.SIGTERM), tl)
	}
	t.Logf("many: SIGTERM %s, exited %s later, its files gone %s later, deleted %s later", stamp(tl.SIGTERM),
		tl.Exited.Sub(tl.SIGTERM).Round(time.Millisecond), tl.VolumesRemoved.Sub(tl.SIGTERM).Round(time.Millisecond), tl.APIDeleted.Sub(tl.SIGTERM).Round(time.Millisecond))
	ended := e.waitLog(60*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[0].TS) })
	// Anything that would wrongly come next gets its chances: passes, not
	// seconds.
	e.waitObservedPasses(e.observedPasses(), 5, 60*time.Second)

	if got, want := podsOf(evicted(e)), []string{podKey(pods["many"])}; !slices.Equal(got, want) {
		t.Errorf("evictd evicted %v, want only %v: many's files were on their way back (stuck lines: %s)", got, want, rawLines(e.find(msgVictimStuck)))
	}
	if lines := e.find(msgVictimStuck); len(lines) != 0 {
		t.Errorf("evictd called a victim stuck while its files went:%s", rawLines(lines))
	}
	// It counted many past grace + GoneTimeout (on evictd's own clock: the
	// line is due no earlier than the deletionTimestamp plus 30 s) and
	// said so once.
	if lines := e.find(msgProlonged); len(lines) != 1 {
		t.Errorf("evictd logged %q %d times, want once:%s", msgProlonged, len(lines), rawLines(lines))
	} else if l := lines[0]; l.Pod != podKey(pods["many"]) || l.TS.Before(evs[0].TS.Add(30*time.Second)) || l.TS.After(ended.TS) {
		t.Errorf("%q: pod %q at %s, want %s, at least 30 s after its eviction (%s) and before the episode's end (%s)",
			msgProlonged, l.Pod, stamp(l.TS), podKey(pods["many"]), stamp(evs[0].TS), stamp(ended.TS))
	}
	for _, ev := range evictdEvents(t, c, ns) {
		if strings.HasPrefix(ev, reasonVictimStuck+" ") {
			t.Errorf("an Event called a victim stuck: %s", ev)
		}
	}
	untouched(t, c.Admin, node, pods["few"])
	if free, err := fsInodesFree(varDir); err != nil || free < threshold+minReclaim {
		t.Errorf("nodefs has %d inodes free at the end (err %v), want at least threshold + minimum reclaim = %d", free, err, threshold+minReclaim)
	}
	if p, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), "few", metav1.GetOptions{}); err == nil && p.DeletionTimestamp != nil {
		t.Errorf("few is terminating")
	}
}

// waitMadeFiles waits until the pod's workload says it made its files.
func waitMadeFiles(t *testing.T, node *nodesim.Node, p *corev1.Pod) {
	t.Helper()
	path := filepath.Join(node.PodLogDir(p), p.Spec.Containers[0].Name, "0.log")
	var b []byte
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		b, _ = os.ReadFile(path)
		return strings.Contains(string(b), "workload: made"), nil
	})
	if err != nil {
		t.Fatalf("pod %s never said it made its files; %s has %q", podKey(p), path, b)
	}
}

// fsInodesFree is the free inodes of the filesystem holding path.
func fsInodesFree(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Ffree), nil
}
