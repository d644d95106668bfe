// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"path/filepath"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// BenchmarkPodMemoryRead is why the per-pod readers stay hand-written rather
// than containerd/cgroups' Stat: it reads one pod's memory figures the way
// the observer does (kept-open files re-read with pread, allocation-free
// parsing) and the way the library does, on the same cgroup, and checks both
// find the same working set.
//
//   - v1: a real memory cgroup on this machine's v1 controller, charged by a
//     child that touched 16 MiB. The library is given a memory-only
//     hierarchy (its default would also stat every other controller).
//   - v2: the burstable pod of the v2-cgroupfs fixture (this project's
//     machines have no v2 memory controller), read by the library with
//     StatFiltered(StatMemory|StatMemoryEvents), the figures the observer
//     reads for a v2 pod.
//
// Compare ns/op and allocs/op of reader=evictd with reader=library.
// reader=evictd reads the pod's swap too (v1 memsw, v2 memory.swap.current
// and memory.swap.max), as the observer does on a node with swap;
// reader=evictd-noswap is a node without swap, whose cgroups' swap files
// the observer leaves alone.
func BenchmarkPodMemoryRead(b *testing.B) {
	b.Run("cgroup=v1-real/reader=evictd", func(b *testing.B) {
		dir := chargedMemcg(b)
		benchOurReader(b, dir, false, true)
	})
	b.Run("cgroup=v1-real/reader=evictd-noswap", func(b *testing.B) {
		dir := chargedMemcg(b)
		benchOurReader(b, dir, false, false)
	})
	b.Run("cgroup=v1-real/reader=library", func(b *testing.B) {
		dir := chargedMemcg(b)
		cg, err := cgroup1.Load(cgroup1.StaticPath("/"+filepath.Base(dir)), cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) {
			return []cgroup1.Subsystem{cgroup1.NewMemory(filepath.Dir(cgrouptest.MemoryRoot))}, nil
		}))
		if err != nil {
			b.Fatal(err)
		}
		want := ourWorkingSet(b, dir, false)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m, err := cg.Stat(cgroup1.IgnoreNotExist)
			if err != nil {
				b.Fatal(err)
			}
			if ws := workingSet(m.Memory.Usage.Usage, m.Memory.TotalInactiveFile); i == 0 && !near(ws, want) {
				b.Fatalf("library working set %d, ours %d", ws, want)
			}
		}
	})
	v2Pod := filepath.Join("testdata", "v2-cgroupfs", "sys/fs/cgroup/node-a/kubepods/burstable/pod7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70")
	b.Run("cgroup=v2-fixture/reader=evictd", func(b *testing.B) {
		benchOurReader(b, v2Pod, true, true)
	})
	b.Run("cgroup=v2-fixture/reader=evictd-noswap", func(b *testing.B) {
		benchOurReader(b, v2Pod, true, false)
	})
	b.Run("cgroup=v2-fixture/reader=library", func(b *testing.B) {
		m, err := cgroup2.Load("/"+filepath.Base(v2Pod), cgroup2.WithMountpoint(filepath.Dir(v2Pod)))
		if err != nil {
			b.Fatal(err)
		}
		want := ourWorkingSet(b, v2Pod, true)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s, err := m.StatFiltered(cgroup2.StatMemory | cgroup2.StatMemoryEvents)
			if err != nil {
				b.Fatal(err)
			}
			if ws := workingSet(s.Memory.Usage, s.Memory.InactiveFile); i == 0 && ws != want {
				b.Fatalf("library working set %d, ours %d", ws, want)
			}
		}
	})
}

// chargedMemcg makes a v1 memory cgroup with a child in it that touched
// 16 MiB, so memory.stat has real figures.
func chargedMemcg(b *testing.B) string {
	b.Helper()
	cg := cgrouptest.NewMemoryCgroup(b, "evictd-bench-stat")
	child := cgrouptest.StartChild(b, cg)
	if _, err := child.Touch(16); err != nil {
		b.Fatal(err)
	}
	return cg.Dir()
}

// podFiles are the files the observer keeps open for a pod's memory.
type podFiles struct {
	usage, stat, events file
	swap, swapMax       file
	open                int
}

// newPodFiles opens a pod's memory files; swap: its swap files too, those
// the kernel has (a node with swap).
func newPodFiles(dir string, v2, swap bool) *podFiles {
	f := &podFiles{usage: newFile(filepath.Join(dir, "memory.usage_in_bytes")), stat: newFile(filepath.Join(dir, "memory.stat")),
		events: file{fd: -1}, swap: file{fd: -1}, swapMax: file{fd: -1}}
	if v2 {
		f.usage = newFile(filepath.Join(dir, "memory.current"))
		f.events = newFile(filepath.Join(dir, "memory.events"))
	}
	if swap {
		f.swap, f.swapMax = swapFiles(v2, dir)
	}
	return f
}

func (f *podFiles) close() {
	f.usage.close(&f.open)
	f.stat.close(&f.open)
	f.events.close(&f.open)
	f.swap.close(&f.open)
	f.swapMax.close(&f.open)
}

// read is readPod's memory part: usage, the swap files, memory.stat and, on
// v2, memory.events, each parsed as the observer parses them.
func (f *podFiles) read(buf []byte, v2 bool) (uint64, error) {
	b, err := f.usage.read(buf, true, &f.open)
	if err != nil {
		return 0, err
	}
	usage, err := parseUint(b)
	if err != nil {
		return 0, err
	}
	if f.swap.path != nil {
		if b, err = f.swap.read(buf, true, &f.open); err != nil {
			return 0, err
		}
		if _, err = parseUint(b); err != nil {
			return 0, err
		}
		if f.swapMax.path != nil {
			if b, err = f.swapMax.read(buf, true, &f.open); err != nil {
				return 0, err
			}
			if _, err = parseLimit(b); err != nil {
				return 0, err
			}
		}
	}
	if b, err = f.stat.read(buf, true, &f.open); err != nil {
		return 0, err
	}
	st, err := parseMemoryStat(b, v2)
	if err != nil {
		return 0, err
	}
	if f.events.path != nil {
		if b, err = f.events.read(buf, true, &f.open); err != nil {
			return 0, err
		}
		if _, err = parseMemoryEvents(b); err != nil {
			return 0, err
		}
	}
	return workingSet(usage, st.InactiveFile), nil
}

func benchOurReader(b *testing.B, dir string, v2, swap bool) {
	f := newPodFiles(dir, v2, swap)
	if swap && f.swap.path == nil {
		b.Fatalf("%s has no swap files", dir)
	}
	defer f.close()
	buf := make([]byte, 16<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.read(buf, v2); err != nil {
			b.Fatal(err)
		}
	}
}

func ourWorkingSet(b *testing.B, dir string, v2 bool) uint64 {
	b.Helper()
	f := newPodFiles(dir, v2, false)
	defer f.close()
	ws, err := f.read(make([]byte, 16<<10), v2)
	if err != nil {
		b.Fatal(err)
	}
	return ws
}

// near allows for the child's runtime moving a few pages between two reads
// of a live cgroup.
func near(a, b uint64) bool {
	d := int64(a) - int64(b)
	return d < 1<<20 && d > -(1<<20)
}
