// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/thresholds"
)

// TestObserveNoKubepods: without a kubepods cgroup under the cgroup root
// (a wrong --cgroup-root, a layout evictd does not know, a kubelet not
// started yet) Observe gives no observation, only an error wrapping
// ErrNoKubepods that says where it looked, as seen from the host root.
func TestObserveNoKubepods(t *testing.T) {
	tests := []struct {
		name       string
		root       string
		cgroupRoot string
		mention    []string
	}{
		{
			// The kubelet's --cgroup-root is /node-a; evictd was given /.
			name: "v2 wrong cgroup root", root: "testdata/v2-cgroupfs", cgroupRoot: "/",
			mention: []string{`--cgroup-root "/"`, "v2 memory hierarchy", "looked in /sys/fs/cgroup for", "kubepods (cgroupfs driver)", "kubepods.slice"},
		},
		{
			name: "v1 cgroup root without kubepods", root: "testdata/v1-cgroupfs", cgroupRoot: "/system.slice",
			mention: []string{`--cgroup-root "/system.slice"`, "v1 memory hierarchy", "looked in /sys/fs/cgroup/memory/system.slice for", "kubepods.slice"},
		},
		{
			name: "hybrid cgroup root without kubepods", root: "testdata/hybrid", cgroupRoot: "/user.slice",
			mention: []string{`--cgroup-root "/user.slice"`, "hybrid", "/sys/fs/cgroup/memory/user.slice"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !isDir(filepath.Join(tc.root, "sys/fs/cgroup/memory", tc.cgroupRoot)) && !isDir(filepath.Join(tc.root, "sys/fs/cgroup", tc.cgroupRoot)) {
				t.Fatalf("fixture %s has no cgroup %s", tc.root, tc.cgroupRoot)
			}
			o, err := NewObserver(Options{HostRoot: tc.root, CgroupRoot: tc.cgroupRoot}, nil)
			if err != nil {
				t.Fatalf("NewObserver: %v", err)
			}
			t.Cleanup(func() { o.Close() })
			for pass := 0; pass < 2; pass++ { // it keeps looking, and keeps failing
				obs, err := o.Observe(context.Background())
				if !errors.Is(err, ErrNoKubepods) {
					t.Fatalf("pass %d: Observe = %v pods, err %v; want ErrNoKubepods", pass, podCount(obs), err)
				}
				if obs != nil {
					t.Errorf("pass %d: an observation with %d pods beside the error; want none", pass, podCount(obs))
				}
				msg := err.Error()
				for _, m := range append(tc.mention, "will not evict") {
					if !strings.Contains(msg, m) {
						t.Errorf("error %q does not mention %q", msg, m)
					}
				}
				if strings.Contains(msg, tc.root) {
					t.Errorf("error %q names the on-disk path; want paths as seen from the host root", msg)
				}
			}
		})
	}
}

func podCount(obs *Observation) int {
	if obs == nil || obs.Summary == nil {
		return -1
	}
	return len(obs.Summary.Pods)
}

// TestKubepodsVanishes: when the kubepods cgroup goes away between passes
// (the kubelet reset its cgroups), the pass that finds it gone and the ones
// after fail with ErrNoKubepods, not zero pods.
func TestKubepodsVanishes(t *testing.T) {
	root := copyTree(t, "testdata/v1-cgroupfs")
	o, err := NewObserver(Options{HostRoot: root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	obs, err := o.Observe(context.Background())
	if err != nil || len(obs.Summary.Pods) != 3 {
		t.Fatalf("before: %d pods, err %v; want 3", podCount(obs), err)
	}
	if err := os.RemoveAll(filepath.Join(root, "sys/fs/cgroup/memory/kubepods")); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ {
		obs, err = o.Observe(context.Background())
		if !errors.Is(err, ErrNoKubepods) || obs != nil {
			t.Fatalf("pass %d after kubepods went away: %d pods, err %v; want ErrNoKubepods", pass, podCount(obs), err)
		}
	}
	if l := o.Layout(); l.KubepodsMemoryDir != "" || l.Driver != DriverNone {
		t.Errorf("layout still has kubepods: %+v", l)
	}
}

// allSignals are the signals a clean fixture yields: all but the stall
// signals, which take two readings a window apart (pkg/stall), and
// memory.highStuck, which the memory.high family counts (pkg/memhigh). The
// fixtures' nodes have swap (v2-nopsi's aside, which this test does not use).
var allSignals = slices.DeleteFunc(thresholds.Signals(), func(s thresholds.Signal) bool {
	return s.Stall() || s.MemoryHigh()
})

// TestNodeSignalErrors breaks one node-level file between two passes. The
// signals that need it are reported in SignalErrors, with the file as seen
// from the host root and the cause, and are absent from the Summary; every
// other signal is still there.
func TestNodeSignalErrors(t *testing.T) {
	const (
		eisdir = "is a directory"
		eloop  = "too many levels of symbolic links"
	)
	tests := []struct {
		name       string
		fixture    string
		cgroupRoot string
		noKeep     bool // MaxOpenFiles -1: a replaced file is opened again
		file       string
		brk        func(t *testing.T, p string)
		lost       []thresholds.Signal
		cause      string
	}{
		{
			name: "v1 node memory.stat truncated", fixture: "v1-cgroupfs",
			file: "sys/fs/cgroup/memory/memory.stat", brk: truncate,
			lost: []thresholds.Signal{thresholds.MemoryAvailable}, cause: errNoNewline.Error(),
		},
		{
			// Capacity is min(MemTotal, this limit): both memory signals need it.
			name: "v1 node memory.limit_in_bytes unreadable", fixture: "v1-cgroupfs", noKeep: true,
			file: "sys/fs/cgroup/memory/memory.limit_in_bytes", brk: replaceByDir,
			lost: []thresholds.Signal{thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable}, cause: eisdir,
		},
		{
			name: "v1 kubepods memory.usage_in_bytes empty", fixture: "v1-cgroupfs",
			file: "sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes", brk: empty,
			lost: []thresholds.Signal{thresholds.AllocatableMemoryAvailable}, cause: errEmpty.Error(),
		},
		{
			name: "v1-systemd kubepods memory.stat unreadable", fixture: "v1-systemd", noKeep: true,
			file: "sys/fs/cgroup/memory/kubepods.slice/memory.stat", brk: replaceByDir,
			lost: []thresholds.Signal{thresholds.AllocatableMemoryAvailable}, cause: eisdir,
		},
		{
			name: "v2 node memory.current unreadable", fixture: "v2-cgroupfs", cgroupRoot: "/node-a", noKeep: true,
			file: "sys/fs/cgroup/node-a/memory.current", brk: replaceByDir,
			lost: []thresholds.Signal{thresholds.MemoryAvailable}, cause: eisdir,
		},
		{
			name: "v2 kubepods memory.max truncated", fixture: "v2-cgroupfs", cgroupRoot: "/node-a",
			file: "sys/fs/cgroup/node-a/kubepods/memory.max", brk: truncate,
			lost: []thresholds.Signal{thresholds.AllocatableMemoryAvailable}, cause: errNoNewline.Error(),
		},
		{
			name: "v2 root memory.stat without a required key", fixture: "v2-systemd",
			file: "sys/fs/cgroup/memory.stat", brk: dropLine("inactive_file "),
			lost: []thresholds.Signal{thresholds.MemoryAvailable}, cause: errMissingKey.Error(),
		},
		{
			name: "nodefs statfs fails", fixture: "hybrid",
			file: "var/lib/kubelet", brk: symlinkLoop,
			lost: []thresholds.Signal{thresholds.NodeFsAvailable, thresholds.NodeFsInodesFree}, cause: eloop,
		},
		{
			name: "imagefs statfs fails", fixture: "v1-cgroupfs",
			file: "var/lib/containerd", brk: symlinkLoop,
			lost: []thresholds.Signal{thresholds.ImageFsAvailable, thresholds.ImageFsInodesFree}, cause: eloop,
		},
		{
			// Not measured on whatever holds its parent: that would be
			// the container's own root in a DaemonSet without the mount.
			name: "imagefs directory missing", fixture: "v2-cgroupfs", cgroupRoot: "/node-a",
			file: "var/lib/containerd", brk: removeAll,
			lost: []thresholds.Signal{thresholds.ImageFsAvailable, thresholds.ImageFsInodesFree}, cause: "not in evictd's host root",
		},
		{
			name: "nodefs directory missing", fixture: "v1-systemd",
			file: "var/lib/kubelet", brk: removeAll,
			lost: []thresholds.Signal{thresholds.NodeFsAvailable, thresholds.NodeFsInodesFree}, cause: "no such file or directory",
		},
		{
			name: "loadavg malformed", fixture: "v2-systemd",
			file: "proc/loadavg", brk: func(t *testing.T, p string) { writeInPlace(t, p, "0.52 0.58 0.59 3-412 12345\n") },
			lost: []thresholds.Signal{thresholds.PIDAvailable}, cause: errSyntax.Error(),
		},
		{
			name: "pid_max unreadable", fixture: "v1-cgroupfs", noKeep: true,
			file: "proc/sys/kernel/pid_max", brk: replaceByDir,
			lost: []thresholds.Signal{thresholds.PIDAvailable}, cause: eisdir,
		},
		{
			name: "threads-max empty", fixture: "v1-cgroupfs",
			file: "proc/sys/kernel/threads-max", brk: empty,
			lost: []thresholds.Signal{thresholds.PIDAvailable}, cause: errEmpty.Error(),
		},
		{
			name: "meminfo SwapFree malformed", fixture: "v2-systemd",
			file: "proc/meminfo", brk: replaceLine("SwapFree:", "SwapFree:        18350O4 kB\n"),
			lost: []thresholds.Signal{thresholds.SwapAvailable}, cause: errNotNumber.Error(),
		},
		{
			name: "meminfo without SwapTotal", fixture: "hybrid",
			file: "proc/meminfo", brk: dropLine("SwapTotal:"),
			lost: []thresholds.Signal{thresholds.SwapAvailable}, cause: "SwapTotal",
		},
		{
			// The fixtures have no /sys/kernel/mm/hugepages: the hugepage
			// pool taken off memory.available is /proc/meminfo's Hugetlb
			// line, which a truncated read loses too (hugepages.go).
			name: "meminfo truncated", fixture: "v1-systemd",
			file: "proc/meminfo", brk: truncate,
			lost: []thresholds.Signal{thresholds.SwapAvailable, thresholds.MemoryAvailable}, cause: errNoNewline.Error(),
		},
		{
			// The pods' swap is still read when meminfo cannot tell whether
			// the node has swap (TestObserveSwap checks the figures).
			name: "meminfo unreadable", fixture: "v2-cgroupfs", cgroupRoot: "/node-a", noKeep: true,
			file: "proc/meminfo", brk: replaceByDir,
			lost: []thresholds.Signal{thresholds.SwapAvailable}, cause: eisdir,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, filepath.Join("testdata", tc.fixture))
			core, logs := observer.New(zapcore.DebugLevel)
			// A cgroup root other than "/" stands for a node here, as in
			// the test harnesses: its memory is the node's.
			opts := Options{HostRoot: root, CgroupRoot: tc.cgroupRoot, NodeCgroup: tc.cgroupRoot}
			if tc.noKeep {
				opts.MaxOpenFiles = -1
			}
			o, err := NewObserver(opts, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { o.Close() })
			obs, err := o.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(obs.SignalErrors) != 0 {
				t.Fatalf("signal errors on a clean fixture: %v", obs.SignalErrors)
			}
			if got := presentSignals(obs); !slices.Equal(got, allSignals) {
				t.Fatalf("clean fixture: signals %v; want %v", got, allSignals)
			}

			tc.brk(t, filepath.Join(root, tc.file))
			obs, err = o.Observe(context.Background())
			if err != nil {
				t.Fatalf("Observe with a broken node file: %v; want an observation", err)
			}
			wantPath := "/" + tc.file
			var lost []thresholds.Signal
			for _, se := range obs.SignalErrors {
				lost = append(lost, thresholds.Signal(se.Signal))
				if se.Path != wantPath || se.Err == nil || !strings.Contains(se.Err.Error(), tc.cause) {
					t.Errorf("signal error %+v; want path %s, cause %q", se, wantPath, tc.cause)
				}
				if msg := se.Error(); !strings.Contains(msg, se.Signal) || !strings.Contains(msg, wantPath) || !strings.Contains(msg, tc.cause) {
					t.Errorf("Error() = %q; want the signal, %s and %q", msg, wantPath, tc.cause)
				}
			}
			if !slices.Equal(lost, tc.lost) {
				t.Errorf("signal errors name %v; want %v", lost, tc.lost)
			}
			var want []thresholds.Signal
			for _, s := range allSignals {
				if !slices.Contains(tc.lost, s) {
					want = append(want, s)
				}
			}
			if got := presentSignals(obs); !slices.Equal(got, want) {
				t.Errorf("signals in the Summary %v; want %v (the lost ones absent, never zero or guessed)", got, want)
			}
			for _, se := range obs.SignalErrors {
				if !errors.Is(se, se.Err) {
					t.Errorf("%v does not unwrap to its cause", se)
				}
				if b, err := json.Marshal(se); err != nil || !strings.Contains(string(b), `"signal":"`+se.Signal+`","path":"`+wantPath+`"`) || !strings.Contains(string(b), tc.cause) {
					t.Errorf("JSON %s (%v); want the signal, path and cause", b, err)
				}
			}
			if obs.SkippedFiles != 1 {
				t.Errorf("%d skipped files; want the broken file counted once", obs.SkippedFiles)
			}
			if len(obs.Summary.Pods) != 3 {
				t.Errorf("%d pods; a node file must not cost the pods", len(obs.Summary.Pods))
			}
			for _, s := range tc.lost {
				if n := signalWarnings(logs, string(s)); n != 1 {
					t.Errorf("%d warnings for %s; want 1", n, s)
				}
			}
		})
	}
}

// presentSignals lists, in action order, the signals the decide layer can
// derive from an observation's Summary.
func presentSignals(obs *Observation) []thresholds.Signal {
	sig := thresholds.Observe(obs.Summary)
	var got []thresholds.Signal
	for _, s := range thresholds.Signals() {
		if _, ok := sig[s]; ok {
			got = append(got, s)
		}
	}
	return got
}

func signalWarnings(logs *observer.ObservedLogs, signal string) int {
	n := 0
	for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
		if e.ContextMap()["signal"] == signal {
			n++
		}
	}
	return n
}

// truncate cuts a file in the middle of a line, as a short read would, in
// place (the kernel's files change under a kept-open descriptor).
func truncate(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	writeInPlace(t, p, string(b[:len(b)/2+1]))
}

func empty(t *testing.T, p string) { writeInPlace(t, p, "") }

// dropLine removes the line that starts with prefix.
func dropLine(prefix string) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var keep []string
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if !strings.HasPrefix(l, prefix) {
				keep = append(keep, l)
			}
		}
		if len(keep) == len(strings.SplitAfter(string(b), "\n")) {
			t.Fatalf("%s has no line starting with %q", p, prefix)
		}
		writeInPlace(t, p, strings.Join(keep, ""))
	}
}

// replaceLine replaces the line that starts with prefix by line.
func replaceLine(prefix, line string) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		if i < 0 {
			t.Fatalf("%s has no line starting with %q", p, prefix)
		}
		lines[i] = line
		writeInPlace(t, p, strings.Join(lines, ""))
	}
}

func replaceByDir(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func removeAll(t *testing.T, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
}

// symlinkLoop replaces p by a symlink to itself: statfs fails with ELOOP.
func symlinkLoop(t *testing.T, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(p), p); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); !errors.Is(err, unix.ELOOP) {
		t.Fatalf("statfs of a symlink loop: %v; want ELOOP", err)
	}
}

// TestSignalWarnRateLimit: a lost signal is logged at most once a minute
// for the same file and cause (by the injected clock), again after a minute,
// at once for a new cause, and once more at Info when it reads again.
func TestSignalWarnRateLimit(t *testing.T) {
	root := copyTree(t, "testdata/v1-cgroupfs")
	loadavg := filepath.Join(root, "proc/loadavg")
	clk := clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	core, logs := observer.New(zapcore.DebugLevel)
	o, err := NewObserver(Options{HostRoot: root, Clock: clk}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	const pid = string(thresholds.PIDAvailable)
	pass := func(after time.Duration, wantWarnings int, wantLost bool) {
		t.Helper()
		clk.SetTime(clk.Now().Add(after))
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if lost := len(obs.SignalErrors) == 1 && obs.SignalErrors[0].Signal == pid; lost != wantLost {
			t.Errorf("after %v: signal errors %v; want pid.available lost: %v", after, obs.SignalErrors, wantLost)
		}
		if got := signalWarnings(logs, pid); got != wantWarnings {
			t.Errorf("after %v: %d warnings for %s in all; want %d", after, got, pid, wantWarnings)
		}
	}
	pass(0, 0, false)
	writeInPlace(t, loadavg, "0.52 0.58 0.59 3-412 12345\n")
	pass(time.Second, 1, true)
	w := logs.FilterLevelExact(zapcore.WarnLevel).All()[0].ContextMap()
	if w["file"] != "/proc/loadavg" || !strings.Contains(w["err"].(string), errSyntax.Error()) || !strings.Contains(w["content"].(string), "3-412") {
		t.Errorf("warning fields %v; want the file, the cause and the content", w)
	}
	pass(30*time.Second, 1, true)
	pass(29*time.Second, 1, true)
	pass(31*time.Second, 2, true) // a minute and a half after the first warning
	// A new cause is news: it is logged at once.
	writeInPlace(t, loadavg, "")
	pass(time.Second, 3, true)
	pass(time.Second, 3, true)
	// Readable again: an Info says so, once.
	writeInPlace(t, loadavg, "0.52 0.58 0.59 3/412 12345\n")
	pass(time.Second, 3, false)
	pass(time.Second, 3, false)
	if n := logs.FilterMessage("node signal readable again").FilterField(zap.String("signal", pid)).Len(); n != 1 {
		t.Errorf("%d recovery messages for %s; want 1", n, pid)
	}
	// Broken again at once with the first cause: within a minute of its last
	// warning, but after a recovery, so it is logged.
	writeInPlace(t, loadavg, "0.52 0.58 0.59 3-412 12345\n")
	pass(time.Second, 4, true)
}

// TestFilesystemLayout: the observation names the directories measured and
// tells the kubelet's disk layouts apart by device, as the kubelet does: one
// filesystem, a dedicated imagefs (containerd's root on its own disk), the
// split image store (CRI-O's writable layers on nodefs), and says once that
// writable layers on a third filesystem are no layout it knows.
func TestFilesystemLayout(t *testing.T) {
	// /dev/shm is a tmpfs of its own on Linux and /sys/kernel a sysfs
	// directory: other filesystems than the fixture's.
	shm, err := os.MkdirTemp("/dev/shm", "evictd-imagefs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	const crio = "/var/lib/containers/storage"
	for _, tc := range []struct {
		name string
		// imageOwnFs moves the image store to /dev/shm; containerFs, when
		// set, is ContainerFsPath, a directory in the fixture or, with
		// containerOnSys, /sys/kernel.
		imageOwnFs     bool
		containerFs    string
		containerOnSys bool
		want           fslayout.Layout
		// containerLikeImage: containerFs's figures are imagefs's, else nodefs's.
		containerLikeImage bool
	}{
		{name: "one filesystem", want: fslayout.OneFs, containerLikeImage: true},
		{name: "image store on its own filesystem", imageOwnFs: true, want: fslayout.DedicatedImageFs, containerLikeImage: true},
		{name: "split image store", imageOwnFs: true, containerFs: crio, want: fslayout.SplitImageFs},
		{name: "writable layers on a third filesystem", imageOwnFs: true, containerFs: crio, containerOnSys: true, want: fslayout.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "testdata/v1-cgroupfs")
			if tc.imageOwnFs {
				removeAll(t, filepath.Join(root, "var/lib/containerd"))
				if err := os.Symlink(shm, filepath.Join(root, "var/lib/containerd")); err != nil {
					t.Fatal(err)
				}
			}
			wantContainerFs := "/var/lib/containerd"
			if tc.containerFs != "" {
				wantContainerFs = tc.containerFs
				dir := filepath.Join(root, tc.containerFs)
				if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
					t.Fatal(err)
				}
				if tc.containerOnSys {
					err = os.Symlink("/sys/kernel", dir)
				} else {
					err = os.Mkdir(dir, 0o755)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			core, logs := observer.New(zap.WarnLevel)
			o := newTestObserver(t, Options{HostRoot: root, ContainerFsPath: tc.containerFs}, zap.New(core))
			var obs *Observation
			for range 2 {
				if obs, err = o.Observe(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			n := obs.Node
			if n.NodeFsPath != "/var/lib/kubelet" || n.ImageFsPath != "/var/lib/containerd" || n.ContainerFsPath != wantContainerFs {
				t.Errorf("measured %q, %q and %q; want /var/lib/kubelet, /var/lib/containerd and %s", n.NodeFsPath, n.ImageFsPath, n.ContainerFsPath, wantContainerFs)
			}
			if n.DiskLayout != tc.want {
				t.Errorf("DiskLayout = %q; want %q", n.DiskLayout, tc.want)
			}
			fs, img, ctr := obs.Summary.Node.Fs, obs.Summary.Node.Runtime.ImageFs, obs.Summary.Node.Runtime.ContainerFs
			if same := *fs.CapacityBytes == *img.CapacityBytes && *fs.Inodes == *img.Inodes; same == tc.imageOwnFs {
				t.Errorf("nodefs capacity %d, inodes %d; imagefs %d, %d: want them %s", *fs.CapacityBytes, *fs.Inodes,
					*img.CapacityBytes, *img.Inodes, map[bool]string{true: "different", false: "the same"}[tc.imageOwnFs])
			}
			like := fs
			if tc.containerLikeImage {
				like = img
			}
			if ctr == nil || (*ctr.CapacityBytes == *like.CapacityBytes) == tc.containerOnSys {
				t.Errorf("containerFs %+v; want it the writable layers' filesystem", ctr)
			}
			warned := logs.FilterMessageSnippet("a layout the kubelet does not support").Len()
			if want := map[bool]int{true: 1, false: 0}[tc.want == fslayout.Unknown]; warned != want {
				t.Errorf("%d warnings of an unsupported layout over two passes; want %d", warned, want)
			}

			removeAll(t, filepath.Join(root, "var/lib/containerd"))
			if obs, err = o.Observe(context.Background()); err != nil {
				t.Fatal(err)
			}
			if obs.Node.DiskLayout != fslayout.Unknown {
				t.Errorf("DiskLayout = %q with the image store unreadable; want unknown", obs.Node.DiskLayout)
			}
		})
	}
}

// newTestObserver is NewObserver for a test, closed at its end.
func newTestObserver(t *testing.T, opts Options, log *zap.Logger) *Observer {
	t.Helper()
	o, err := NewObserver(opts, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}
