// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// memTotal is the host's MemTotal in bytes, from /proc/meminfo.
func memTotal(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/meminfo: %q: %v", sc.Text(), err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/meminfo has no MemTotal line (%v)", sc.Err())
	return 0
}

// hugepageHostRoot is a host root for node in which everything is the real
// host's (proc and sys, through links; var, the node's) but the kernel's
// hugepage pools, /sys/kernel/mm/hugepages: a pool of gigantic pages,
// which this host cannot be made to reserve for real (it would take the
// memory from every other test), laid out as the kernel lays it out.
func hugepageHostRoot(t *testing.T, node *nodesim.Node, gigantic uint64) string {
	t.Helper()
	root := t.TempDir()
	link := func(target, at string) {
		t.Helper()
		if err := os.Symlink(target, at); err != nil {
			t.Fatal(err)
		}
	}
	link("/proc", filepath.Join(root, "proc"))
	link(filepath.Join(node.HostRoot, "var"), filepath.Join(root, "var"))
	// sys, sys/kernel and sys/kernel/mm: their entries linked to the
	// real ones, but for the next level down.
	for _, d := range []struct{ dir, own string }{{"sys", "kernel"}, {"sys/kernel", "mm"}, {"sys/kernel/mm", "hugepages"}} {
		if err := os.MkdirAll(filepath.Join(root, d.dir), 0o755); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir("/" + d.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != d.own {
				link(filepath.Join("/", d.dir, e.Name()), filepath.Join(root, d.dir, e.Name()))
			}
		}
	}
	for size, nr := range map[string]uint64{"hugepages-2048kB": 0, "hugepages-1048576kB": gigantic} {
		dir := filepath.Join(root, "sys/kernel/mm/hugepages", size)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "nr_hugepages"), []byte(strconv.FormatUint(nr, 10)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestRunHugepageAware: the running agent (not `evictd observe`) takes the
// node's hugepage pool off memory.available, as a 1.37 kubelet does with
// its HugepageAwareEviction gate on (evictd's default), and its decision
// follows: the hard threshold is met. With --hugepage-aware-eviction=false
// it reads memory.available as a kubelet with the gate off, and the
// threshold is not met. The node is the host (--node-cgroup=/, the only
// node cgroup whose hugepages count), its pool twice the host's memory, so
// that the two answers part whatever the host's other tests use: 0
// available (floored) with the gate on, the host's free memory without.
func TestRunHugepageAware(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "hugepages", MemoryBytes: nodeMemory})
	total := memTotal(t)
	pool := 2*total/(1<<30) + 1 // gigantic pages of 1 GiB
	root := hugepageHostRoot(t, node, pool)
	t.Logf("host MemTotal %d bytes; hugepage pool %d × 1 GiB", total, pool)
	for _, tc := range []struct {
		name  string
		flags []string
		aware bool
	}{
		{"default", nil, true},
		{"hugepage-aware-eviction=false", []string{"--hugepage-aware-eviction=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each agent stops (SIGTERM, releasing the node lease) at the
			// end of its subtest, so the next one acts at once.
			e := startEvictdWith(t, c, node, evictdSetup{hostRoot: root, nodeCgroup: "/"}, append(slices.Clone(memoryFlags), tc.flags...)...)
			// Two observations: the figures below are a pass's, not the
			// series' initial zeros.
			deadline := time.Now().Add(60 * time.Second)
			for {
				n, err := e.scrape().Lookup("evictd_observation_duration_seconds", nil)
				if err == nil && n >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("evictd observed %v times in 60s (%v); log tail:\n%s", n, err, e.tail(20))
				}
				time.Sleep(100 * time.Millisecond)
			}
			m := e.scrape()
			avail := m.Value(t, "evictd_signal_available_bytes", map[string]string{"signal": "memory.available"})
			met := m.Value(t, "evictd_threshold_met", map[string]string{"signal": "memory.available", "kind": "hard"})
			t.Logf("memory.available %.0f bytes, hard threshold met %v", avail, met)
			switch {
			case tc.aware && (avail != 0 || met != 1):
				t.Errorf("with the gate on: memory.available = %.0f, threshold met = %v; want 0 (the %d GiB pool taken off %d bytes, floored) and met", avail, met, pool, total)
			case !tc.aware && (avail <= 0 || met != 0):
				t.Errorf("with --hugepage-aware-eviction=false: memory.available = %.0f, threshold met = %v; want the host's free memory, the pool not taken off, and not met", avail, met)
			}
		})
	}
}
