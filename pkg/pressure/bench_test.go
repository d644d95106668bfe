// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/benchcpu"
)

// benchTrees caches generated host trees across benchmark runs (-count N runs
// each benchmark function N times; a 1000-pod tree takes seconds to write).
// TestMain removes benchTreeDir.
var (
	benchTreeDir string
	benchTrees   = map[string]string{}
)

// benchTree returns a generated host root of the mode with the given pods;
// its node has swap, unless noSwap.
func benchTree(b *testing.B, mode Mode, pods int, noSwap ...bool) string {
	b.Helper()
	key := fmt.Sprintf("%s-%d", mode, pods)
	swapOff := len(noSwap) > 0 && noSwap[0]
	if swapOff {
		key += "-noswap"
	}
	if root, ok := benchTrees[key]; ok {
		return root
	}
	if benchTreeDir == "" {
		d, err := os.MkdirTemp("", "evictd-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchTreeDir = d
	}
	root := filepath.Join(benchTreeDir, key)
	driver := DriverCgroupfs
	if mode == ModeV2 {
		driver = DriverSystemd
	}
	writeTree(b, root, mode, driver, genPods(pods))
	if swapOff {
		treeWriter{b, root}.writeMeminfo(0, 0)
	}
	// The kubelet and runtime directories exist, so each statfs is one call.
	for _, d := range []string{"var/lib/kubelet", "var/lib/containerd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	benchTrees[key] = root
	return root
}

// BenchmarkObserve measures a full observation over generated trees beside
// two floors that read the same files without parsing:
//   - kind=floor does exactly the observer's I/O (the same directory
//     listings, pread on the same kept-open files, the same two statfs), so
//     observe/floor is the cost of parsing and building the Summary;
//   - kind=floor-open opens, reads and closes every file, as a reader
//     without kept-open files would.
func BenchmarkObserve(b *testing.B) {
	for _, mode := range []Mode{ModeV1, ModeV2} {
		for _, n := range []int{110, 250, 1000} {
			prefix := fmt.Sprintf("mode=%s/pods=%d", mode, n)
			b.Run(prefix+"/kind=observe", func(b *testing.B) {
				o := benchObserver(b, benchTree(b, mode, n))
				ctx := context.Background()
				b.ReportAllocs()
				cpu := benchcpu.Start(b)
				for i := 0; i < b.N; i++ {
					obs, err := o.Observe(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if len(obs.Summary.Pods) != n {
						b.Fatalf("%d pods; want %d", len(obs.Summary.Pods), n)
					}
				}
				cpu.Report(b)
			})
			b.Run(prefix+"/kind=floor", func(b *testing.B) {
				benchFloor(b, benchTree(b, mode, n), true)
			})
			b.Run(prefix+"/kind=floor-open", func(b *testing.B) {
				benchFloor(b, benchTree(b, mode, n), false)
			})
		}
	}
}

// BenchmarkObserveNoSwap is BenchmarkObserve's kind=observe on a node
// without swap (SwapTotal 0) whose cgroups still have their swap files:
// what swap costs a pass is BenchmarkObserve's figure minus this one.
func BenchmarkObserveNoSwap(b *testing.B) {
	for _, mode := range []Mode{ModeV1, ModeV2} {
		for _, n := range []int{250, 1000} {
			b.Run(fmt.Sprintf("mode=%s/pods=%d/kind=observe", mode, n), func(b *testing.B) {
				o := benchObserver(b, benchTree(b, mode, n, true))
				ctx := context.Background()
				b.ReportAllocs()
				cpu := benchcpu.Start(b)
				for i := 0; i < b.N; i++ {
					obs, err := o.Observe(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if len(obs.Summary.Pods) != n || obs.Summary.Node.Swap != nil {
						b.Fatalf("%d pods, node swap %v; want %d, none", len(obs.Summary.Pods), obs.Summary.Node.Swap, n)
					}
				}
				cpu.Report(b)
			})
		}
	}
}

// benchObserver returns a warmed observer on a frozen clock, so the
// ephemeral-storage walk (cached for EphemeralRefresh) stays out of the loop.
func benchObserver(b *testing.B, root string) *Observer {
	b.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	o, err := NewObserver(Options{HostRoot: root, Clock: clk}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { o.Close() })
	if _, err := o.Observe(context.Background()); err != nil {
		b.Fatal(err)
	}
	return o
}

func benchFloor(b *testing.B, root string, keepOpen bool) {
	o := benchObserver(b, root)
	var files, dirs []cpath
	o.trace = func(p cpath, dir bool) {
		if dir {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	if _, err := o.Observe(context.Background()); err != nil {
		b.Fatal(err)
	}
	o.trace = nil
	statfsPaths := []string{o.node.nodefs, o.node.imagefs}
	buf := make([]byte, len(o.buf))
	dbuf := make([]byte, len(o.dbuf))
	fds := make([]int, len(files))
	if keepOpen {
		for i, p := range files {
			fd, err := openC(p, 0)
			if err != nil {
				b.Fatal(err)
			}
			fds[i] = fd
		}
		b.Cleanup(func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		})
	}
	noop := func([]byte, uint8) {}
	var st unix.Statfs_t
	b.ReportAllocs()
	cpu := benchcpu.Start(b)
	for i := 0; i < b.N; i++ {
		for _, d := range dirs {
			if err := listDirC(d, dbuf, noop); err != nil {
				b.Fatal(err)
			}
		}
		for j, p := range files {
			var err error
			if keepOpen {
				_, err = preadAll(fds[j], buf)
			} else {
				_, err = readC(p, buf)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, p := range statfsPaths {
			if err := unix.Statfs(p, &st); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu.Report(b)
}

// Parser micro-benchmarks: each must report 0 allocs/op.
func BenchmarkParse(b *testing.B) {
	v1 := []byte(v1StatContent(4*mi, 60*mi, mi, 100, 1, false))
	v2 := []byte(v2StatContent(60*mi, 4*mi, mi, 100, 1))
	psi := []byte(psiContent(4.5, 1.5, 777))
	events := []byte(eventsContent)
	usage := []byte("268435456\n")
	meminfo, err := os.ReadFile("testdata/v1-cgroupfs/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"memory.stat/v1", func() error { _, err := parseMemoryStat(v1, false); return err }},
		{"memory.stat/v2", func() error { _, err := parseMemoryStat(v2, true); return err }},
		{"memory.events", func() error { _, err := parseMemoryEvents(events); return err }},
		{"pressure", func() error { _, err := parsePSI(psi); return err }},
		{"uint", func() error { _, err := parseUint(usage); return err }},
		{"meminfo", func() error { _, _, _, err := parseMeminfoSwap(meminfo); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := c.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
