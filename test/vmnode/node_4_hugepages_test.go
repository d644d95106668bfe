// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The node's hugepage pool on memory.available (issue 32, B1): the kubelet
// 1.37 (HugepageAwareEviction, beta and on by default) takes the pool, the
// Node's hugepages-<size> capacities, off its Summary's node
// memory.availableBytes, and evictd does the same from the kernel's figures
// (pkg/pressure/hugepages.go). The shipped DaemonSet mounts /proc but not
// /sys/kernel/mm/hugepages under its host root, so evictd reads the pool
// from /proc/meminfo's Hugetlb line here. The test reserves a pool in the
// guest, restarts the kubelet (cAdvisor reads the pool into the Node's
// capacity at the kubelet's start) and compares, then puts both back. It
// runs on the one-disk node after TestNodeParity (file order), on the
// evictd pod running then, whatever its flags: evictd observe reads the
// node the same way under any of them. Its kubelet restarts make the
// kubelet detect every image again, whose collection then waits the
// 2-minute minimum age: the race after it gives TestNodeDiskImageGC that.

const (
	// hugepagePoolDir is the guest's pool of 2 MiB pages.
	hugepagePoolDir = "/sys/kernel/mm/hugepages/hugepages-2048kB"
	hugepageSize    = 2 << 20
	// hugepageResource is the Node capacity the kubelet reports it under.
	hugepageResource = corev1.ResourceName("hugepages-2Mi")
	// hugepagePages is the pool reserved: 192 MiB, three times the
	// parity's 64 MiB memory tolerance, so that a reading without the
	// subtraction cannot pass for one with it.
	hugepagePages = 96
)

// TestNodeHugepageParity: with 192 MiB of hugepages reserved, the
// kubelet's Summary takes the pool off memory.available (its available +
// working set drops by the pool exactly), evictd observe in its pod does
// too and agrees with the kubelet within TestNodeParity's tolerances, and
// evictd observe with --hugepage-aware-eviction=false (as with the gate
// off) is off the kubelet's figure by the pool, beyond the tolerance.
func TestNodeHugepageParity(t *testing.T) {
	n := sharedNode(t)
	if n.CgroupDriver != Systemd {
		t.Fatalf("the test restarts the kubelet, which needs the systemd node; this one runs %s", n.CgroupDriver)
	}
	ctx := context.Background()
	began := time.Now()
	t.Cleanup(func() {
		t.Logf("TestNodeHugepageParity took %s, two kubelet restarts included", time.Since(began).Round(time.Second))
	})
	ev := runningEvictdPod(t, n)
	waitQuietNode(t, n)
	tol := nodeParityTolerance

	if pages, err := nrHugepages(ctx, n); err != nil || pages != 0 {
		t.Fatalf("%s/nr_hugepages before the test: %d (%v), want 0", hugepagePoolDir, pages, err)
	}
	meminfo, err := n.Sh(ctx, "cat /proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	memTotal := uint64(meminfoBytes(t, meminfo, "MemTotal"))
	// The kubelet's capacity (available + working set) with no pool: the
	// root cgroup's limit, MemTotal.
	capBefore, _ := waitKubeletCapacity(t, n, "with no pool", func(c uint64) error { return nil })
	t.Logf("before: MemTotal %.1f MiB; the kubelet's memory.available + working set %.1f MiB", inMiB(memTotal), inMiB(capBefore))

	// The way back first, so that it runs however far the way there got.
	t.Cleanup(func() {
		if err := setHugepages(context.Background(), n, 0); err != nil {
			t.Errorf("releasing the hugepage pool: %v", err)
		}
		if err := restartKubelet(t, n, "with no hugepage pool"); err != nil {
			t.Errorf("restarting the kubelet: %v", err)
			return
		}
		if err := waitNodeHugepages(n, 0); err != nil {
			t.Errorf("the Node's %s after the release: %v", hugepageResource, err)
		}
	})
	if err := setHugepages(ctx, n, hugepagePages); err != nil {
		t.Fatal(err)
	}
	pages, err := nrHugepages(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	pool := uint64(pages) * hugepageSize
	if pool <= uint64(2*tol.Memory) {
		t.Fatalf("the kernel reserved %d of %d hugepages (%.0f MiB): not enough to tell the subtraction from the %.0f MiB tolerance",
			pages, hugepagePages, inMiB(pool), inMiB(uint64(tol.Memory)))
	}
	if err := restartKubelet(t, n, fmt.Sprintf("with %d hugepages (%.0f MiB) reserved", pages, inMiB(pool))); err != nil {
		t.Fatal(err)
	}
	if err := waitNodeHugepages(n, pool); err != nil {
		t.Fatal(err)
	}

	// The kubelet takes the pool off: its available + working set is the
	// capacity before less the pool, to the byte.
	kubelet := "?"
	if node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
		kubelet = node.Status.NodeInfo.KubeletVersion
	}
	capAfter, ku := waitKubeletCapacity(t, n, "with the pool", func(c uint64) error {
		if c != capBefore-pool {
			return fmt.Errorf("the kubelet's memory.available + working set is %d bytes (%.1f MiB), not %.1f MiB less the %.0f MiB pool: "+
				"kubelet %s does not take the Node's %s off memory.available", c, inMiB(c), inMiB(capBefore), inMiB(pool), kubelet, hugepageResource)
		}
		return nil
	})
	t.Logf("the kubelet's memory.available %.1f MiB + working set %.1f MiB = %.1f MiB: the capacity before less the %.0f MiB pool",
		inMiB(*ku.Node.Memory.AvailableBytes), inMiB(*ku.Node.Memory.WorkingSetBytes), inMiB(capAfter), inMiB(pool))

	// evictd in its pod, and the kubelet's summary read right after it.
	t0 := time.Now()
	obs, err := observeInPodRaw(ctx, n, ev, "-o", "observation")
	if err != nil {
		t.Fatal(err)
	}
	ku, _, err = n.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("evictd observe took %s in its pod; the kubelet's node memory figures are from %s",
		time.Since(t0).Round(time.Millisecond), ku.Node.Memory.Time.Format(time.RFC3339))
	var o struct {
		Summary *statsv1alpha1.Summary `json:"summary"`
		Node    struct {
			MemTotalBytes, MemoryCapacityBytes, HugepagePoolBytes uint64
		} `json:"node"`
	}
	if err := json.Unmarshal([]byte(obs), &o); err != nil || o.Summary == nil || o.Summary.Node.Memory == nil ||
		o.Summary.Node.Memory.AvailableBytes == nil || o.Summary.Node.Memory.WorkingSetBytes == nil {
		t.Fatalf("evictd observe -o observation: %v, no node memory figures in:\n%s", err, obs)
	}
	em := o.Summary.Node.Memory
	t.Logf("evictd: hugepage pool %.0f MiB, MemTotal %.1f MiB, capacity %.1f MiB, memory.available %.1f MiB + working set %.1f MiB",
		inMiB(o.Node.HugepagePoolBytes), inMiB(o.Node.MemTotalBytes), inMiB(o.Node.MemoryCapacityBytes), inMiB(*em.AvailableBytes), inMiB(*em.WorkingSetBytes))
	if o.Node.HugepagePoolBytes != pool || o.Node.MemoryCapacityBytes != memTotal-pool || *em.AvailableBytes+*em.WorkingSetBytes != memTotal-pool {
		t.Errorf("evictd reads a pool of %d bytes, capacity %d, available + working set %d; want the pool %d and MemTotal %d less it",
			o.Node.HugepagePoolBytes, o.Node.MemoryCapacityBytes, *em.AvailableBytes+*em.WorkingSetBytes, pool, memTotal)
	}
	rows := CompareParity(o.Summary, ku, nil, tol)
	t.Logf("evictd (in its pod) against the kubelet's /stats/summary, %.0f MiB of hugepages reserved:\n%s", inMiB(pool), ParityTable(rows))
	// The pool is this test's subject: its memory rows must agree. The
	// filesystem rows are TestNodeParity's: here they are read seconds
	// after a kubelet restart, whose own files come and go between the
	// kubelet's cached figures and evictd's read.
	memoryRows := map[string]bool{"memory.available": true, "node working set": true,
		"allocatableMemory.available": true, "kubepods working set": true}
	for _, r := range rows {
		if !r.Agrees() && memoryRows[r.Signal] {
			t.Errorf("%s: evictd %d, kubelet %d (missing in: %q), tolerance %d", r.Signal, r.Evictd, r.Kubelet, r.Missing, r.Tolerance)
		}
	}
	for name := range memoryRows {
		if !slices.ContainsFunc(rows, func(r ParityRow) bool { return r.Signal == name }) {
			t.Errorf("no %s row in the comparison", name)
		}
	}

	// Without the subtraction (the gate off), evictd would read the pool
	// as available: off the kubelet's figure by the pool, past the
	// tolerance.
	raw, err := observeInPodRaw(ctx, n, ev, "--hugepage-aware-eviction=false", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	ku, _, err = n.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var s statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(raw), &s); err != nil || s.Node.Memory == nil || s.Node.Memory.AvailableBytes == nil {
		t.Fatalf("evictd observe --hugepage-aware-eviction=false: %v, no memory.available in:\n%s", err, raw)
	}
	d := int64(*s.Node.Memory.AvailableBytes) - int64(*ku.Node.Memory.AvailableBytes)
	t.Logf("without the subtraction evictd reads memory.available %.1f MiB, %+.1f MiB off the kubelet's %.1f MiB (pool %.0f MiB, tolerance %.0f MiB)",
		inMiB(*s.Node.Memory.AvailableBytes), float64(d)/(1<<20), inMiB(*ku.Node.Memory.AvailableBytes), inMiB(pool), inMiB(uint64(tol.Memory)))
	if d <= tol.Memory || d-int64(pool) > tol.Memory || int64(pool)-d > tol.Memory {
		t.Errorf("without the subtraction evictd is %+d bytes off the kubelet, want the pool %d within %d (and so beyond the tolerance)", d, pool, tol.Memory)
	}
}

func inMiB(b uint64) float64 { return float64(b) / (1 << 20) }

// runningEvictdPod is the evictd pod the node runs now, whatever its flags,
// or the shipped one deployed when there is none.
func runningEvictdPod(t *testing.T, n *Node) *corev1.Pod {
	t.Helper()
	evictdOnce.Lock()
	p := evictdOnce.pod
	evictdOnce.Unlock()
	if p != nil {
		q, err := n.Cluster.Admin.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err == nil && q.DeletionTimestamp == nil && podReady(q) {
			return q
		}
	}
	return evictdPod(t, n)
}

// observeInPodRaw runs evictd observe in the evictd pod, through its host
// mounts, with args, and returns what it printed.
func observeInPodRaw(ctx context.Context, n *Node, ev *corev1.Pod, args ...string) (string, error) {
	r, err := execInContainer(ctx, n, ev, "evictd", append([]string{"/evictd", "observe", "--host-root=/host"}, args...)...)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return "", fmt.Errorf("evictd observe %v: %w", args, err)
	}
	return r.Stdout, nil
}

// nrHugepages is the guest's count of reserved 2 MiB pages.
func nrHugepages(ctx context.Context, n *Node) (int, error) {
	out, err := n.Sh(ctx, "cat "+hugepagePoolDir+"/nr_hugepages")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// setHugepages asks the guest's kernel for pages 2 MiB pages (it may
// reserve fewer: the pool needs free contiguous memory).
func setHugepages(ctx context.Context, n *Node, pages int) error {
	_, err := n.Sh(ctx, fmt.Sprintf("echo %d > %s/nr_hugepages", pages, hugepagePoolDir))
	return err
}

// restartKubelet restarts the kubelet and waits until the node is Ready.
func restartKubelet(t *testing.T, n *Node, what string) error {
	ctx := context.Background()
	from := time.Now()
	if err := n.RestartKubelet(ctx); err != nil {
		return fmt.Errorf("%w\n%s", err, n.Diagnostics())
	}
	if err := n.WaitReady(ctx, 3*time.Minute); err != nil {
		return fmt.Errorf("the kubelet %s: %w\n%s", what, err, n.Diagnostics())
	}
	t.Logf("the kubelet restarted %s, Ready in %s", what, time.Since(from).Round(100*time.Millisecond))
	return nil
}

// waitNodeHugepages waits until the Node's capacity shows the kubelet's
// pool of 2 MiB pages at want bytes.
func waitNodeHugepages(n *Node, want uint64) error {
	return n.poll(context.Background(), 2*time.Minute, fmt.Sprintf("the Node's %s at %d bytes", hugepageResource, want), func(ctx context.Context) error {
		node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		q, ok := node.Status.Capacity[hugepageResource]
		if got := q.Value(); got != int64(want) || !ok && want != 0 {
			return fmt.Errorf("capacity %s: %s (listed: %v)", hugepageResource, q.String(), ok)
		}
		return nil
	})
}

// waitKubeletCapacity waits until the kubelet's summary has node memory
// figures whose available + working set passes check, and returns that sum
// and the summary; it fails the test with check's last word.
func waitKubeletCapacity(t *testing.T, n *Node, what string, check func(uint64) error) (uint64, *statsv1alpha1.Summary) {
	t.Helper()
	var c uint64
	var s *statsv1alpha1.Summary
	err := n.poll(context.Background(), 2*time.Minute, "the kubelet's node memory "+what, func(ctx context.Context) error {
		var err error
		if s, _, err = n.Summary(ctx); err != nil {
			return err
		}
		m := s.Node.Memory
		if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil {
			return errors.New("no node memory figures in the summary yet")
		}
		c = *m.AvailableBytes + *m.WorkingSetBytes
		return check(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
