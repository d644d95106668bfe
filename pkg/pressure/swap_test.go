// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestObserveSwap: the node's swap from /proc/meminfo, the pods' and
// kubepods' from their cgroups (v2 memory.swap.current and memory.swap.max,
// v1 memsw minus usage), read only while the node has swap; missing files
// mean no figure, quietly; malformed ones follow the convention of their
// level (a pod file skips the pod, a kubepods file drops its figure, a
// broken /proc/meminfo loses swap.available), each with one warning that
// names the file and quotes the value.
func TestObserveSwap(t *testing.T) {
	type warning struct{ file, content string }
	v2Pods := map[string]*wantSwap{uidG: {0, -1}, uidB: {64 * mi, 192 << 20}, uidBE: {4 * mi, -1}}
	v1Pods := map[string]*wantSwap{uidG: {0, -1}, uidB: {64 * mi, -1}, uidBE: {4 * mi, -1}}
	noPodSwap := map[string]*wantSwap{uidG: nil, uidB: nil, uidBE: nil}
	kubepods := &wantSwap{fixtureKubepodsSwap, -1}
	with := func(m map[string]*wantSwap, uid string, w *wantSwap) map[string]*wantSwap {
		c := map[string]*wantSwap{}
		for k, v := range m {
			c[k] = v
		}
		if w == nil {
			delete(c, uid) // skipped
		} else {
			c[uid] = w
		}
		return c
	}
	tests := []struct {
		name       string
		fixture    string
		cgroupRoot string
		change     func(t *testing.T, root string) // on a copy, before the observer starts
		afterStart bool                            // change once the observer is running
		nodeSwap   bool                            // Node.Swap: the fixtures' 1835004 KiB free, 256 MiB used
		kubepods   *wantSwap
		pods       map[string]*wantSwap // the pods in the Summary, and their swap (nil: none)
		skipped    int
		warnings   []warning
		lostSwap   bool // swap.available in SignalErrors
		swapReads  bool // some cgroup swap file is read
	}{
		{
			name: "v2 usage, a limit and max", fixture: "v2-cgroupfs", cgroupRoot: "/node-a",
			nodeSwap: true, kubepods: kubepods, pods: v2Pods, swapReads: true,
		},
		{
			name: "v2 usage above a lowered limit", fixture: "v2-cgroupfs", cgroupRoot: "/node-a",
			change:   writeCgroupFile(uidB, "memory.swap.max", "33554432\n"),
			nodeSwap: true, kubepods: kubepods, pods: with(v2Pods, uidB, &wantSwap{64 * mi, 0}), swapReads: true,
		},
		{
			name: "v2 kubepods with a swap limit", fixture: "v2-systemd",
			change:   writeCgroupFile("kubepods", "memory.swap.max", "1073741824\n"),
			nodeSwap: true, kubepods: &wantSwap{fixtureKubepodsSwap, 1<<30 - 68<<20}, pods: v2Pods, swapReads: true,
		},
		{
			name: "v1 memsw minus usage", fixture: "v1-cgroupfs",
			nodeSwap: true, kubepods: kubepods, pods: v1Pods, swapReads: true,
		},
		{
			// The two are read a moment apart: memsw may read below usage.
			name: "v1 memsw below usage", fixture: "v1-systemd",
			change:   writeCgroupFile(uidB, "memory.memsw.usage_in_bytes", "268431360\n"),
			nodeSwap: true, kubepods: kubepods, pods: with(v1Pods, uidB, &wantSwap{0, -1}), swapReads: true,
		},
		{
			name: "hybrid reads v1 memsw", fixture: "hybrid",
			nodeSwap: true, kubepods: kubepods, pods: v1Pods, swapReads: true,
		},
		{
			// SwapTotal 0 and no memory.swap.* files.
			name: "node and kernel without swap", fixture: "v2-nopsi",
			pods: map[string]*wantSwap{uidB: nil},
		},
		{
			// swapoff: the cgroups still have their swap files, which are not read.
			name: "v2 node without swap", fixture: "v2-systemd", change: meminfoWithoutSwap,
			pods: noPodSwap,
		},
		{
			name: "v1 node without swap", fixture: "v1-cgroupfs", change: meminfoWithoutSwap,
			pods: noPodSwap,
		},
		{
			// Swap accounting off (cgroup.memory=noswap): the node has swap, the cgroups no files.
			name: "v2 without swap accounting", fixture: "v2-cgroupfs", cgroupRoot: "/node-a", change: removeFiles("memory.swap.current", "memory.swap.max"),
			nodeSwap: true, pods: noPodSwap,
		},
		{
			name: "v1 without swap accounting", fixture: "v1-systemd", change: removeFiles("memory.memsw.usage_in_bytes"),
			nodeSwap: true, pods: noPodSwap,
		},
		{
			name: "v2 malformed memory.swap.current", fixture: "v2-cgroupfs", cgroupRoot: "/node-a",
			change:   writeCgroupFile(uidB, "memory.swap.current", "6710886x\n"),
			nodeSwap: true, kubepods: kubepods, pods: with(v2Pods, uidB, nil), skipped: 1, swapReads: true,
			warnings: []warning{{"burstable/pod" + uidB + "/memory.swap.current", `"6710886x\n"`}},
		},
		{
			name: "v2 truncated memory.swap.max", fixture: "v2-systemd",
			change:   writeCgroupFile(uidBE, "memory.swap.max", "max"),
			nodeSwap: true, kubepods: kubepods, pods: with(v2Pods, uidBE, nil), skipped: 1, swapReads: true,
			warnings: []warning{{"kubepods-besteffort-poda9b8c7d6_e5f4_4321_9876_fedcba987654.slice/memory.swap.max", `"max"`}},
		},
		{
			name: "v1 malformed memsw", fixture: "v1-cgroupfs",
			change:   writeCgroupFile(uidG, "memory.memsw.usage_in_bytes", "-104857600\n"),
			nodeSwap: true, kubepods: kubepods, pods: with(v1Pods, uidG, nil), skipped: 1, swapReads: true,
			warnings: []warning{{"kubepods/pod" + uidG + "/memory.memsw.usage_in_bytes", `"-104857600\n"`}},
		},
		{
			// No signal needs it: the figure is dropped, the pods are read.
			name: "kubepods memory.swap.current empty", fixture: "v2-cgroupfs", cgroupRoot: "/node-a",
			change:   writeCgroupFile("kubepods", "memory.swap.current", ""),
			nodeSwap: true, pods: v2Pods, swapReads: true,
			warnings: []warning{{"node-a/kubepods/memory.swap.current", `""`}},
		},
		{
			// Whether the node has swap is unknown: the cgroups' swap is
			// read. (At start, gopsutil's MemTotal read refuses the file.)
			name: "meminfo malformed", fixture: "v2-cgroupfs", cgroupRoot: "/node-a", afterStart: true,
			change:   replaceFileLine("proc/meminfo", "SwapTotal:", "SwapTotal:       2097148 KB\n"),
			kubepods: kubepods, pods: v2Pods, lostSwap: true, swapReads: true,
			warnings: []warning{{"/proc/meminfo", `"SwapTotal:       2097148 KB"`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, filepath.Join("testdata", tc.fixture))
			if tc.change != nil && !tc.afterStart {
				tc.change(t, root)
			}
			core, logs := observer.New(zapcore.DebugLevel)
			o := newTestObserver(t, Options{HostRoot: root, CgroupRoot: tc.cgroupRoot, NodeCgroup: tc.cgroupRoot}, zap.New(core))
			if tc.afterStart {
				tc.change(t, root)
			}
			for pass := range 2 {
				swapReads := false
				o.trace = func(p cpath, dir bool) {
					if s := p.String(); strings.Contains(s, "/memory.swap.") || strings.Contains(s, "/memory.memsw.") {
						swapReads = true
					}
				}
				obs, err := o.Observe(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				checkSwap(t, obs, tc.nodeSwap, tc.kubepods, tc.pods)
				if swapReads != tc.swapReads {
					t.Errorf("pass %d: cgroup swap files read: %v; want %v", pass, swapReads, tc.swapReads)
				}
				if obs.SkippedPods != tc.skipped || obs.SkippedFiles != len(tc.warnings) {
					t.Errorf("pass %d: skipped %d pods, %d files; want %d, %d", pass, obs.SkippedPods, obs.SkippedFiles, tc.skipped, len(tc.warnings))
				}
				lost := len(obs.SignalErrors) == 1 && obs.SignalErrors[0].Signal == sigSwap && obs.SignalErrors[0].Path == "/proc/meminfo"
				if lost != tc.lostSwap || (!tc.lostSwap && len(obs.SignalErrors) != 0) {
					t.Errorf("pass %d: signal errors %v; want swap.available lost to /proc/meminfo: %v", pass, obs.SignalErrors, tc.lostSwap)
				}
				// One warning per broken file, not repeated on the second pass.
				warnings := logs.FilterLevelExact(zapcore.WarnLevel).All()
				if len(warnings) != len(tc.warnings) {
					t.Errorf("pass %d: %d warnings; want %d: %v", pass, len(warnings), len(tc.warnings), warnings)
				}
				for _, w := range tc.warnings {
					found := false
					for _, e := range warnings {
						f := e.ContextMap()
						file, _ := f["file"].(string)
						content, _ := f["content"].(string)
						if strings.HasSuffix(file, w.file) && strings.Contains(content, w.content) {
							found = true
						}
					}
					if !found {
						t.Errorf("pass %d: no warning naming %s with content %s: %v", pass, w.file, w.content, warnings)
					}
				}
			}
		})
	}
}

// TestSwapTurnedOn: whether the cgroups' swap is read is decided on every
// pass, so swapon and swapoff on a running node show at the next one.
func TestSwapTurnedOn(t *testing.T) {
	root := copyTree(t, "testdata/v2-systemd")
	meminfoWithoutSwap(t, root)
	o := newTestObserver(t, Options{HostRoot: root}, nil)
	none := map[string]*wantSwap{uidG: nil, uidB: nil, uidBE: nil}
	observe := func() *Observation {
		t.Helper()
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	checkSwap(t, observe(), false, nil, none)
	// In place: the observer keeps /proc/meminfo open.
	copyInPlace(t, "testdata/v2-systemd/proc/meminfo", filepath.Join(root, "proc/meminfo"))
	checkSwap(t, observe(), true, &wantSwap{fixtureKubepodsSwap, -1},
		map[string]*wantSwap{uidG: {0, -1}, uidB: {64 * mi, 192 << 20}, uidBE: {4 * mi, -1}})
	meminfoWithoutSwap(t, root)
	checkSwap(t, observe(), false, nil, none)
}

// checkSwap checks the swap figures of an observation: the node's (the
// fixtures' when nodeSwap), kubepods' and the pods', which must be exactly
// those of pods.
func checkSwap(t *testing.T, obs *Observation, nodeSwap bool, kubepods *wantSwap, pods map[string]*wantSwap) {
	t.Helper()
	n := &obs.Summary.Node
	switch sw := n.Swap; {
	case !nodeSwap && sw != nil:
		t.Errorf("node swap %s; want none", swapString(sw))
	case nodeSwap && (sw == nil || !swapIs(sw, fixtureSwapUsed, fixtureSwapFree) || !sw.Time.Time.Equal(obs.Time)):
		t.Errorf("node swap %s; want %d used, %d available, at the observation's time", swapString(sw), fixtureSwapUsed, fixtureSwapFree)
	}
	if len(n.SystemContainers) != 1 {
		t.Fatalf("system containers %+v; want pods", n.SystemContainers)
	}
	switch sw := n.SystemContainers[0].Swap; {
	case kubepods == nil && sw != nil:
		t.Errorf("pods container swap %s; want none", swapString(sw))
	case kubepods != nil && (sw == nil || !swapIs(sw, kubepods.usage, kubepods.avail)):
		t.Errorf("pods container swap %s; want %+v", swapString(sw), *kubepods)
	}
	if len(obs.Summary.Pods) != len(pods) {
		t.Errorf("%d pods; want %d", len(obs.Summary.Pods), len(pods))
	}
	for _, p := range obs.Summary.Pods {
		w, ok := pods[p.PodRef.UID]
		switch {
		case !ok:
			t.Errorf("pod %s in the Summary; want it skipped", p.PodRef.UID)
		case w == nil && p.Swap != nil:
			t.Errorf("pod %s: swap %s; want none", p.PodRef.UID, swapString(p.Swap))
		case w != nil && (p.Swap == nil || !swapIs(p.Swap, w.usage, w.avail) || !p.Swap.Time.Time.Equal(obs.Time)):
			t.Errorf("pod %s: swap %s; want %+v at the observation's time", p.PodRef.UID, swapString(p.Swap), *w)
		}
	}
}

// cgroupDir finds the memory cgroup directory (the one with memory.stat)
// whose name holds key: a pod UID, with dashes or the systemd driver's
// underscores, or "kubepods" for the kubepods cgroup.
func cgroupDir(t *testing.T, root, key string) string {
	t.Helper()
	var found string
	err := filepath.WalkDir(filepath.Join(root, "sys/fs/cgroup"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		match := strings.Contains(name, "pod"+key) || strings.Contains(name, "pod"+strings.ReplaceAll(key, "-", "_"))
		if key == "kubepods" {
			match = name == "kubepods" || name == "kubepods.slice"
		}
		if _, err := os.Stat(filepath.Join(p, "memory.stat")); match && err == nil {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil || found == "" {
		t.Fatalf("no memory cgroup for %s under %s (%v)", key, root, err)
	}
	return found
}

// writeCgroupFile sets a file of the memory cgroup cgroupDir finds for key.
func writeCgroupFile(key, name, content string) func(t *testing.T, root string) {
	return func(t *testing.T, root string) {
		t.Helper()
		p := filepath.Join(cgroupDir(t, root, key), name)
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		writeInPlace(t, p, content)
	}
}

// removeFiles removes every file with one of the names from the tree.
func removeFiles(names ...string) func(t *testing.T, root string) {
	return func(t *testing.T, root string) {
		t.Helper()
		n := 0
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			for _, name := range names {
				if d.Name() == name {
					n++
					return os.Remove(p)
				}
			}
			return nil
		})
		if err != nil || n == 0 {
			t.Fatalf("removing %v: %d removed, %v", names, n, err)
		}
	}
}

// replaceFileLine replaces, in the file rel of the tree, the line starting
// with prefix.
func replaceFileLine(rel, prefix, line string) func(t *testing.T, root string) {
	return func(t *testing.T, root string) {
		t.Helper()
		replaceLine(prefix, line)(t, filepath.Join(root, rel))
	}
}

// meminfoWithoutSwap gives the tree v2-nopsi's /proc/meminfo, that of a
// node without swap (SwapTotal 0).
func meminfoWithoutSwap(t *testing.T, root string) {
	t.Helper()
	copyInPlace(t, "testdata/v2-nopsi/proc/meminfo", filepath.Join(root, "proc/meminfo"))
}

func copyInPlace(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeInPlace(t, dst, string(b))
}
