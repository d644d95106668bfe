// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/test/internal/prereq"
	"github.com/evictd/evictd/test/internal/stale"
)

// TestFaultRoot: a fault root shows the real node cgroup until a file is
// broken; then a reader holding the file open and one opening it afresh
// both see garbage, while the real file is untouched; Restore brings the
// content back, and Close leaves no mount and no directory. On the host's
// cgroup version: the root's memory files are v1's under
// sys/fs/cgroup/memory, or v2's under sys/fs/cgroup.
func TestFaultRoot(t *testing.T) {
	prereq.Require(t, Supported(""))
	cg, err := newCgroups(defaultCgroupFS)
	if err != nil {
		t.Fatal(err)
	}
	limitFile, memRoot, pidsProcs := "memory.limit_in_bytes", "sys/fs/cgroup/memory", "sys/fs/cgroup/pids/cgroup.procs"
	if cg.version() == "v2" {
		limitFile, memRoot, pidsProcs = "memory.max", "sys/fs/cgroup", "sys/fs/cgroup/cgroup.procs"
	}
	parent := stale.Name(cgroupPrefix)
	n := &Node{Name: "fault", CgroupRoot: "/" + path.Join(parent, "fault"), cg: cg, opts: Options{TempDir: t.TempDir()}}
	t.Cleanup(func() {
		if err := n.closeFaultRoots(); err != nil {
			t.Error(err)
		}
		if err := n.removeCgroups(); err != nil {
			t.Error(err)
		}
		for _, r := range cg.roots() {
			d := filepath.Join(r, parent)
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("%s left after removeCgroups: %v", d, err)
			}
		}
	})
	for _, rel := range []string{"/" + parent, n.CgroupRoot} {
		if _, err := n.createCgroup(rel); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.cgroups[1].setLimits(256<<20, 0); err != nil {
		t.Fatal(err)
	}
	n.HostRoot = filepath.Join(n.opts.TempDir, "host")
	if err := os.MkdirAll(filepath.Join(n.HostRoot, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := n.CreateCgroup("empty")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cg.memoryDir(rel), "memory.stat")); err != nil {
		t.Errorf("CreateCgroup made no memory cgroup: %v", err)
	}

	f, err := n.NewFaultRoot(limitFile, "memory.stat")
	if err != nil {
		t.Fatal(err)
	}
	realLimit := filepath.Join(cg.memoryDir(n.CgroupRoot), limitFile)
	seenLimit := filepath.Join(f.Root, memRoot, n.CgroupRoot, limitFile)
	if f.NodeMemoryFile(limitFile) != seenLimit {
		t.Errorf("NodeMemoryFile = %s, want %s", f.NodeMemoryFile(limitFile), seenLimit)
	}
	want, _ := os.ReadFile(realLimit)
	if got, err := os.ReadFile(seenLimit); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("through the fault root the limit reads %q (err %v), want %q", got, err, want)
	}
	// A file not shadowed is the real one, through the bind mount.
	if _, err := os.Stat(filepath.Join(f.Root, memRoot, rel, "memory.stat")); err != nil {
		t.Errorf("the memory hierarchy is not visible through the fault root: %v", err)
	}
	for _, p := range []string{"proc/meminfo", pidsProcs, "var"} {
		if _, err := os.Stat(filepath.Join(f.Root, p)); err != nil {
			t.Errorf("%s missing from the fault root: %v", p, err)
		}
	}
	held, err := unix.Open(seenLimit, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(held)
	pread := func() []byte {
		buf := make([]byte, 1<<20)
		k, err := unix.Pread(held, buf, 0)
		if err != nil {
			t.Fatal(err)
		}
		return buf[:k]
	}

	if err := f.Break(limitFile); err != nil {
		t.Fatal(err)
	}
	if got := pread(); !bytes.Equal(got, garbage) {
		t.Errorf("a reader holding the file open reads %d bytes %.40q..., want the garbage", len(got), got)
	}
	if got, _ := os.ReadFile(seenLimit); !bytes.Equal(got, garbage) {
		t.Errorf("a fresh open reads %.40q..., want the garbage", got)
	}
	if got, _ := os.ReadFile(realLimit); !bytes.Equal(got, want) {
		t.Errorf("the real file reads %q after Break, want it untouched (%q)", got, want)
	}
	if err := f.Restore(limitFile); err != nil {
		t.Fatal(err)
	}
	if got := pread(); !bytes.Equal(got, want) {
		t.Errorf("after Restore the held file reads %q, want %q", got, want)
	}
	if err := f.Break("memory.swappiness"); err == nil {
		t.Error("Break of a file not shadowed: want an error")
	}

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if m, err := mountsUnder(f.Root); err != nil || len(m) != 0 {
		t.Errorf("mounts left under the fault root after Close: %v (%v)", m, err)
	}
	if _, err := os.Stat(f.Root); !os.IsNotExist(err) {
		t.Errorf("the fault root is still there after Close (stat: %v)", err)
	}
	if err := f.Break("memory.stat"); err == nil {
		t.Error("Break after Close: want an error")
	}
}
