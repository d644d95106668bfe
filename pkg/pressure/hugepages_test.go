// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/evictd/evictd/internal/fixture"
	"github.com/evictd/evictd/pkg/thresholds"
)

// The hugepage pool of testdata/hugepages: 512 pages of 2 MiB and 2 of
// 1 GiB, 3 GiB in all (its /proc/meminfo's Hugetlb line says the same).
// On the fixtures' node (8 GiB, a 2 GiB working set) the kubelet with
// HugepageAwareEviction sees 6 − 3 = 3 GiB available of 8 − 3 = 5 GiB.
const (
	fixtureHugepagePool = 3 * gi
	hugepages2M         = "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	hugepages1G         = "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
)

// hugepageHostRoot copies the fixture base and lays testdata/hugepages over
// it: the kernel's /sys/kernel/mm/hugepages with both pools, and a
// /proc/meminfo whose hugetlb lines match them. meminfoOnly removes the
// sysfs pools, as in a DaemonSet that mounts only /sys/fs/cgroup.
func hugepageHostRoot(t *testing.T, base string, meminfoOnly bool) string {
	t.Helper()
	root := copyTree(t, filepath.Join("testdata", base))
	fixture.CopyInto(t, root, filepath.Join("testdata", "hugepages"))
	if meminfoOnly {
		if err := os.RemoveAll(filepath.Join(root, "sys/kernel")); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// checkNodeMemory checks memory.available as the Summary gives it and as
// the decide layer derives it (available, and available + working set as
// the capacity percentages are taken of), and that allocatableMemory.available
// is the kubepods cgroup's own, untouched by the pool.
func checkNodeMemory(t *testing.T, obs *Observation, avail, ws uint64) {
	t.Helper()
	m := obs.Summary.Node.Memory
	if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil {
		t.Fatalf("node memory %+v lacks available or working set", m)
	}
	if *m.AvailableBytes != avail || *m.WorkingSetBytes != ws {
		t.Errorf("node memory available %d, working set %d; want %d, %d", *m.AvailableBytes, *m.WorkingSetBytes, avail, ws)
	}
	sig := thresholds.Observe(obs.Summary)
	if got, want := sig[thresholds.MemoryAvailable], (thresholds.Observation{Available: int64(avail), Capacity: int64(avail + ws)}); got.Available != want.Available || got.Capacity != want.Capacity {
		t.Errorf("memory.available %d of %d; want %d of %d", got.Available, got.Capacity, want.Available, want.Capacity)
	}
	// The kubelet leaves the "pods" system container as it is.
	if got := sig[thresholds.AllocatableMemoryAvailable]; got.Available != int64(7*gi-700*mi) || got.Capacity != int64(7*gi) {
		t.Errorf("allocatableMemory.available %d of %d; want %d of %d", got.Available, got.Capacity, 7*gi-700*mi, 7*gi)
	}
}

// TestObserveHugepagePool: the node's hugepage pool comes off
// memory.available and its capacity, as the kubelet's adjustForHugePages
// does with HugepageAwareEviction (on by default from 1.37), floored at 0;
// the working set and allocatableMemory.available stay as they are.
func TestObserveHugepagePool(t *testing.T) {
	tests := []struct {
		name        string
		base        string
		meminfoOnly bool
		change      func(t *testing.T, root string)
		avail       uint64
	}{
		{name: "v2, pools of 2048kB and 1048576kB", base: "v2-systemd", avail: 6*gi - fixtureHugepagePool},
		{name: "v1, pools of 2048kB and 1048576kB", base: "v1-cgroupfs", avail: 6*gi - fixtureHugepagePool},
		{
			// A DaemonSet that mounts only /sys/fs/cgroup: the same sum,
			// from /proc/meminfo's Hugetlb line.
			name: "pool from /proc/meminfo, sysfs not under the host root", base: "v2-systemd", meminfoOnly: true,
			avail: 6*gi - fixtureHugepagePool,
		},
		{
			// hostPath mounts an empty directory where the host has none.
			name: "empty hugepages directory: pool from /proc/meminfo", base: "v1-systemd", meminfoOnly: true,
			change: func(t *testing.T, root string) {
				if err := os.MkdirAll(filepath.Join(root, "sys/kernel/mm/hugepages"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			avail: 6*gi - fixtureHugepagePool,
		},
		{
			name: "pools with no pages", base: "v2-systemd",
			change: func(t *testing.T, root string) {
				writeInPlace(t, filepath.Join(root, hugepages2M), "0\n")
				writeInPlace(t, filepath.Join(root, hugepages1G), "0\n")
			},
			avail: 6 * gi,
		},
		{
			// 512 × 2 MiB + 6 × 1 GiB = 7 GiB, above the 6 GiB available.
			name: "pool above available: floored at 0", base: "v2-systemd",
			change: func(t *testing.T, root string) { writeInPlace(t, filepath.Join(root, hugepages1G), "6\n") },
			avail:  0,
		},
		{
			name: "pool from /proc/meminfo above available: floored at 0", base: "hybrid", meminfoOnly: true,
			change: func(t *testing.T, root string) {
				replaceLine("Hugetlb:", "Hugetlb:         7340032 kB\n")(t, filepath.Join(root, "proc/meminfo"))
			},
			avail: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := hugepageHostRoot(t, tc.base, tc.meminfoOnly)
			if tc.change != nil {
				tc.change(t, root)
			}
			core, logs := observer.New(zapcore.DebugLevel)
			o := newTestObserver(t, Options{HostRoot: root}, zap.New(core))
			for pass := range 2 {
				obs, err := o.Observe(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(obs.SignalErrors) != 0 || obs.SkippedFiles != 0 {
					t.Fatalf("pass %d: signal errors %v, %d skipped files; want none", pass, obs.SignalErrors, obs.SkippedFiles)
				}
				checkNodeMemory(t, obs, tc.avail, 2*gi)
				if got := presentSignals(obs); !slices.Equal(got, allSignals) {
					t.Errorf("pass %d: signals %v; want %v", pass, got, allSignals)
				}
			}
			if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
				t.Errorf("%d warnings: %v", n, logs.All())
			}
		})
	}
}

// TestObserveHugepagePoolChanges: the pool is read on every pass, so a
// pool grown at run time (echo N > nr_hugepages) shows at once. (The
// kubelet takes it from its machine info at start: docs/decide.md.)
func TestObserveHugepagePoolChanges(t *testing.T) {
	for _, meminfoOnly := range []bool{false, true} {
		name := "sysfs"
		if meminfoOnly {
			name = "meminfo"
		}
		t.Run(name, func(t *testing.T) {
			root := hugepageHostRoot(t, "v2-systemd", meminfoOnly)
			o := newTestObserver(t, Options{HostRoot: root}, nil)
			obs, err := o.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkNodeMemory(t, obs, 3*gi, 2*gi)
			// 1024 × 2 MiB + 2 × 1 GiB = 4 GiB.
			if meminfoOnly {
				replaceLine("Hugetlb:", "Hugetlb:         4194304 kB\n")(t, filepath.Join(root, "proc/meminfo"))
			} else {
				writeInPlace(t, filepath.Join(root, hugepages2M), "1024\n")
			}
			obs, err = o.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkNodeMemory(t, obs, 2*gi, 2*gi)
		})
	}
}

// TestHugepagePoolErrors: a pool that cannot be read loses
// memory.available, never guessed (0 would hide the pool again): a
// SignalError names the file and the value, the warning comes once, the
// working set and every other signal stay, and the signal comes back when
// the file reads again.
func TestHugepagePoolErrors(t *testing.T) {
	tests := []struct {
		name        string
		meminfoOnly bool
		noKeep      bool
		beforeStart bool // broken before NewObserver lists the pools
		file        string
		brk         func(t *testing.T, p string)
		fix         func(t *testing.T, p string)
		mention     []string
	}{
		{
			name: "nr_hugepages malformed", file: hugepages2M,
			brk:     func(t *testing.T, p string) { writeInPlace(t, p, "51x\n") },
			mention: []string{`"51x\n"`, errNotNumber.Error()},
		},
		{
			name: "nr_hugepages negative", file: hugepages1G,
			brk:     func(t *testing.T, p string) { writeInPlace(t, p, "-2\n") },
			mention: []string{`"-2\n"`, errNotNumber.Error()},
		},
		{
			name: "nr_hugepages empty", file: hugepages2M, brk: empty,
			mention: []string{`""`, errEmpty.Error()},
		},
		{
			name: "nr_hugepages truncated", file: hugepages2M,
			brk:     func(t *testing.T, p string) { writeInPlace(t, p, "51") },
			mention: []string{`"51"`, errNoNewline.Error()},
		},
		{
			// 2^64 − 1 pages of 1 GiB.
			name: "nr_hugepages overflows", file: hugepages1G,
			brk:     func(t *testing.T, p string) { writeInPlace(t, p, "18446744073709551615\n") },
			mention: []string{`"18446744073709551615\n"`, errOverflow.Error()},
		},
		{
			name: "nr_hugepages unreadable", file: hugepages2M, noKeep: true, brk: replaceByDir,
			fix: func(t *testing.T, p string) {
				removeAll(t, p)
				if err := os.WriteFile(p, []byte("512\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			mention: []string{"is a directory"},
		},
		{
			name: "pool directory with a malformed name", beforeStart: true,
			file: "sys/kernel/mm/hugepages/hugepages-2MB",
			brk: func(t *testing.T, p string) {
				if err := os.Rename(filepath.Join(filepath.Dir(p), "hugepages-2048kB"), p); err != nil {
					t.Fatal(err)
				}
			},
			mention: []string{"hugepages-<size>kB"},
		},
		{
			name: "hugepages directory not a directory", beforeStart: true,
			file: "sys/kernel/mm/hugepages",
			brk: func(t *testing.T, p string) {
				removeAll(t, p)
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			mention: []string{"not a directory"},
		},
		{
			name: "meminfo Hugetlb malformed", meminfoOnly: true, file: "proc/meminfo",
			brk:     replaceLine("Hugetlb:", "Hugetlb:         3145728 KB\n"),
			mention: []string{`"Hugetlb:         3145728 KB"`, errSyntax.Error()},
		},
	}
	want := slices.DeleteFunc(slices.Clone(allSignals), func(s thresholds.Signal) bool { return s == thresholds.MemoryAvailable })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := hugepageHostRoot(t, "v2-systemd", tc.meminfoOnly)
			p := filepath.Join(root, tc.file)
			orig, _ := os.ReadFile(p)
			if tc.beforeStart {
				tc.brk(t, p)
			}
			core, logs := observer.New(zapcore.DebugLevel)
			opts := Options{HostRoot: root}
			if tc.noKeep {
				opts.MaxOpenFiles = -1
			}
			o := newTestObserver(t, opts, zap.New(core))
			if !tc.beforeStart {
				obs, err := o.Observe(context.Background())
				if err != nil || len(obs.SignalErrors) != 0 {
					t.Fatalf("clean pass: err %v, signal errors %v", err, obs.SignalErrors)
				}
				tc.brk(t, p)
			}
			for pass := range 2 {
				obs, err := o.Observe(context.Background())
				if err != nil {
					t.Fatalf("pass %d: Observe with a broken hugepage pool: %v; want an observation", pass, err)
				}
				if len(obs.SignalErrors) != 1 {
					t.Fatalf("pass %d: signal errors %v; want memory.available's alone", pass, obs.SignalErrors)
				}
				se := obs.SignalErrors[0]
				msg := se.Error()
				if se.Signal != string(thresholds.MemoryAvailable) || se.Path != "/"+tc.file || !strings.Contains(msg, "/"+tc.file) {
					t.Errorf("pass %d: %v; want memory.available lost to /%s", pass, msg, tc.file)
				}
				for _, m := range tc.mention {
					if !strings.Contains(msg, m) {
						t.Errorf("pass %d: %q does not say %q", pass, msg, m)
					}
				}
				if got := presentSignals(obs); !slices.Equal(got, want) {
					t.Errorf("pass %d: signals %v; want %v (memory.available absent, never guessed)", pass, got, want)
				}
				if m := obs.Summary.Node.Memory; m == nil || m.AvailableBytes != nil || m.WorkingSetBytes == nil || *m.WorkingSetBytes != 2*gi {
					t.Errorf("pass %d: node memory %+v; want the working set and no available figure", pass, m)
				}
				if obs.SkippedFiles != 1 || len(obs.Summary.Pods) != 3 {
					t.Errorf("pass %d: %d skipped files, %d pods; want 1 and 3", pass, obs.SkippedFiles, len(obs.Summary.Pods))
				}
				if n := signalWarnings(logs, string(thresholds.MemoryAvailable)); n != 1 {
					t.Errorf("pass %d: %d warnings; want 1", pass, n)
				}
			}
			if tc.beforeStart {
				return // the pools are listed once: their page sizes are the kernel's
			}
			switch {
			case tc.fix != nil:
				tc.fix(t, p)
			default:
				writeInPlace(t, p, string(orig))
			}
			obs, err := o.Observe(context.Background())
			if err != nil || len(obs.SignalErrors) != 0 {
				t.Fatalf("after the fix: err %v, signal errors %v", err, obs.SignalErrors)
			}
			checkNodeMemory(t, obs, 3*gi, 2*gi)
		})
	}
}
