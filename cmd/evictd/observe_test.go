// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/pressure"
)

// The observer's checked-in fixture host roots.
var fixtureRoot = filepath.Join("..", "..", "pkg", "pressure", "testdata")

const (
	uidG  = "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0" // Guaranteed, 100Mi working set
	uidB  = "7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70" // Burstable, 240Mi, default/web-0
	uidBE = "a9b8c7d6-e5f4-4321-9876-fedcba987654" // BestEffort, 0
)

func runObserve(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = dispatch(context.Background(), append([]string{"observe"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestObserveJSON(t *testing.T) {
	tests := []struct {
		layout, cgroupRoot string
		capacity           uint64
		psi                bool
		swapLimit          bool // v2: the burstable pod's memory.swap.max is 256Mi
	}{
		{"v1-cgroupfs", "", 8 << 30, false, false},
		{"v1-systemd", "", 8 << 30, false, false},
		{"hybrid", "", 8 << 30, true, false}, // the burstable pod has a cgroup2 directory with memory.pressure
		{"v2-systemd", "", 8 << 30, true, true},
		// kubepods is under /node-a (4Gi limit), but node memory is the
		// root cgroup's against MemTotal, as the kubelet's.
		{"v2-cgroupfs", "/node-a", 8 << 30, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.layout, func(t *testing.T) {
			args := []string{"--host-root", filepath.Join(fixtureRoot, tc.layout), "-o", "json"}
			if tc.cgroupRoot != "" {
				args = append(args, "--cgroup-root", tc.cgroupRoot)
			}
			code, out, errOut := runObserve(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			var s statsv1alpha1.Summary
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&s); err != nil {
				t.Fatalf("output is not a Summary: %v\n%s", err, out)
			}
			if !strings.Contains(out, "\n  \"node\": {") {
				t.Error("JSON is not indented")
			}
			m := s.Node.Memory
			if m == nil || m.AvailableBytes == nil || *m.AvailableBytes+*m.WorkingSetBytes != tc.capacity {
				t.Errorf("node memory %+v; want capacity %d", m, tc.capacity)
			}
			if len(s.Node.SystemContainers) != 1 || s.Node.SystemContainers[0].Name != "pods" {
				t.Errorf("system containers %+v; want pods", s.Node.SystemContainers)
			}
			if s.Node.Fs == nil || s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil || s.Node.Rlimit == nil {
				t.Errorf("node fs %+v runtime %+v rlimit %+v; want all", s.Node.Fs, s.Node.Runtime, s.Node.Rlimit)
			}
			byUID := map[string]statsv1alpha1.PodStats{}
			for _, p := range s.Pods {
				byUID[p.PodRef.UID] = p
			}
			b, ok := byUID[uidB]
			if len(s.Pods) != 3 || !ok {
				t.Fatalf("%d pods, burstable found %v; want 3", len(s.Pods), ok)
			}
			if b.PodRef.Namespace != "default" || b.PodRef.Name != "web-0" || *b.Memory.WorkingSetBytes != 240<<20 ||
				*b.ProcessStats.ProcessCount != 27 || b.EphemeralStorage == nil || *b.EphemeralStorage.InodesUsed != 3+16 { // emptyDir and the log file (not its directory), writable layers
				t.Errorf("burstable pod %+v", b)
			}
			if got := b.Memory.PSI != nil; got != tc.psi {
				t.Errorf("pod PSI present %v; want %v", got, tc.psi)
			}
			// Swap comes through the Summary: the fixtures' node has 256Mi of 2Gi in use.
			if sw := s.Node.Swap; sw == nil || sw.SwapAvailableBytes == nil || *sw.SwapAvailableBytes != 1835004<<10 || *sw.SwapUsageBytes != 256<<20 {
				t.Errorf("node swap %+v; want 1835004Ki available, 256Mi used", sw)
			}
			if sw := s.Node.SystemContainers[0].Swap; sw == nil || sw.SwapUsageBytes == nil || *sw.SwapUsageBytes != 68<<20 {
				t.Errorf("kubepods swap %+v; want 68Mi used", sw)
			}
			if sw := b.Swap; sw == nil || sw.SwapUsageBytes == nil || *sw.SwapUsageBytes != 64<<20 ||
				(sw.SwapAvailableBytes != nil) != tc.swapLimit || (tc.swapLimit && *sw.SwapAvailableBytes != 192<<20) {
				t.Errorf("burstable pod swap %+v; want 64Mi used, 192Mi available: %v", sw, tc.swapLimit)
			}
			if !strings.Contains(out, `"swap": {`) || !strings.Contains(out, `"swapUsageBytes": 67108864`) {
				t.Errorf("JSON without the swap figures:\n%s", out)
			}
		})
	}
}

// TestObserveObservationFeedsRank: -o observation prints the whole
// observation, and evictd rank --summary reads it with what a Summary lacks:
// the pods' ephemeral storage by part and the disk layout.
func TestObserveObservationFeedsRank(t *testing.T) {
	code, out, errOut := runObserve(t, "--host-root", filepath.Join(fixtureRoot, "v2-systemd"), "-o", "observation")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var obs pressure.Observation
	if err := json.Unmarshal([]byte(out), &obs); err != nil || obs.Summary == nil {
		t.Fatalf("output is not an observation (%v):\n%s", err, out)
	}
	if obs.Node.DiskLayout != fslayout.OneFs || len(obs.Pods) != len(obs.Summary.Pods) || len(obs.Pods) == 0 {
		t.Fatalf("observation: layout %q, %d pod extras for %d pods", obs.Node.DiskLayout, len(obs.Pods), len(obs.Summary.Pods))
	}
	path := filepath.Join(t.TempDir(), "obs.json")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := readSummary(path)
	if err != nil {
		t.Fatal(err)
	}
	withParts := 0
	for i := range obs.Pods {
		if obs.Pods[i].EphemeralParts != nil {
			withParts++
		}
	}
	if in.diskParts == nil || in.diskLayout != fslayout.OneFs || len(in.diskParts) != withParts || withParts == 0 {
		t.Errorf("rank read it as an observation %v, layout %q, parts for %d pods; want true, %q, %d",
			in.diskParts != nil, in.diskLayout, len(in.diskParts), fslayout.OneFs, withParts)
	}
}

func TestObserveTable(t *testing.T) {
	code, out, errOut := runObserve(t, "--host-root", filepath.Join(fixtureRoot, "v2-cgroupfs"), "--cgroup-root", "/node-a", "--node-cgroup", "/node-a", "-o", "table")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	row := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(l)
			}
		}
		t.Fatalf("no line starting with %q in\n%s", prefix, out)
		return nil
	}
	// Node signals come first: the node is the 4Gi cgroup /node-a with 2.5Gi working set.
	if f := row("memory.available"); f[1] != "1.5Gi" || f[2] != "4.0Gi" {
		t.Errorf("memory.available row %q; want 1.5Gi of 4.0Gi", f)
	}
	if f := row("allocatableMemory.available"); f[1] != "3.3Gi" || !strings.HasSuffix(strings.Join(f, " "), "swap 68.0Mi") {
		t.Errorf("allocatableMemory.available row %q; want 3.3Gi (4Gi capacity minus 700Mi), kubepods' swap", f)
	}
	// SwapFree 1835004 kB of SwapTotal 2097148 kB.
	if f := row("swap.available"); len(f) != 6 || f[1] != "1.7Gi" || f[2] != "2.0Gi" || f[5] != "256.0Mi" {
		t.Errorf("swap.available row %q; want 1.7Gi of 2.0Gi, 256.0Mi in use", f)
	}
	if f := row("pid.available"); f[1] != "63020" || f[2] != "63432" {
		t.Errorf("pid.available row %q; want 63020 of 63432", f)
	}
	if f := row("psi.memory"); f[1] != "some" || f[2] != "avg10=1.25" {
		t.Errorf("psi.memory row %q", f)
	}
	// Then the pods, largest working set first.
	header := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "UID") {
			header = i
		}
	}
	if header < 0 || header > len(lines)-4 || header < 5 {
		t.Fatalf("pod table missing or before the node signals:\n%s", out)
	}
	if h := strings.Fields(lines[header]); !slices.Equal(h, []string{"UID", "POD", "QOS", "WORKING", "SET", "USAGE", "SWAP", "PROCESSES", "EPHEMERAL", "MEMORY", "PSI"}) {
		t.Errorf("pod header %q", h)
	}
	wantRows := []struct{ uid, pod, qos, ws, swap, procs string }{
		{uidB, "default/web-0", "Burstable", "240.0Mi", "64.0Mi", "27"},
		{uidG, "kube-system/coredns-7db6d8ff4d-x2v9k", "Guaranteed", "100.0Mi", "0B", "12"},
		{uidBE, "-", "BestEffort", "0B", "4.0Mi", "3"},
	}
	for i, w := range wantRows {
		f := strings.Fields(lines[header+1+i])
		if len(f) < 9 || f[0] != w.uid || f[1] != w.pod || f[2] != w.qos || f[3] != w.ws || f[5] != w.swap || f[6] != w.procs {
			t.Errorf("pod row %d: %q; want %+v", i, f, w)
		}
	}
	if f := strings.Fields(lines[header+1]); len(f) < 8 || !strings.Contains(f[7], "(layer=") || strings.Contains(f[7], "layer=0B") || !strings.Contains(f[7], ",logs=") {
		t.Errorf("burstable pod's ephemeral storage %q; want its total and parts", f)
	}
	if !strings.Contains(lines[header+1], "some avg10=4.50") {
		t.Errorf("pod row without memory PSI: %q", lines[header+1])
	}
}

// TestObserveNoSwap: on a node without swap (SwapTotal 0, a kernel without
// swap files) the table says so and has no pod swap figures, and the JSON
// Summary has no swap at all.
func TestObserveNoSwap(t *testing.T) {
	root := filepath.Join(fixtureRoot, "v2-nopsi")
	code, out, errOut := runObserve(t, "--host-root", root, "-o", "table")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var swapRow, podRow []string
	for _, l := range strings.Split(out, "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "swap.available":
			swapRow = f
		case len(f) > 0 && f[0] == uidB:
			podRow = f
		}
	}
	if strings.Join(swapRow, " ") != "swap.available - - no swap" {
		t.Errorf("swap row %q; want no swap:\n%s", swapRow, out)
	}
	if len(podRow) < 9 || podRow[5] != "-" || podRow[6] != "27" {
		t.Errorf("pod row %q; want swap -, 27 processes", podRow)
	}
	code, out, errOut = runObserve(t, "--host-root", root, "-o", "json")
	if code != exitOK || strings.Contains(out, `"swap"`) {
		t.Errorf("exit %d, stderr %q; JSON with swap figures on a node without swap:\n%s", code, errOut, out)
	}
}

// TestObserveNodeMemoryFromTheRoot: with the kubelet's --cgroup-root
// (/node-a) and no --node-cgroup, node memory is the root cgroup's, as the
// kubelet's: 8Gi MemTotal minus the v2 root's 2Gi working set, not /node-a's
// 1.5Gi of 4Gi; kubepods is still found under /node-a.
func TestObserveNodeMemoryFromTheRoot(t *testing.T) {
	code, out, errOut := runObserve(t, "--host-root", filepath.Join(fixtureRoot, "v2-cgroupfs"), "--cgroup-root", "/node-a", "-o", "table")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "cgroup root /node-a, node cgroup /)") {
		t.Errorf("header does not name both cgroups:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "memory.available" {
			if f[1] != "6.0Gi" || f[2] != "8.0Gi" {
				t.Errorf("memory.available row %q; want 6.0Gi of 8.0Gi (the root cgroup against MemTotal)", f)
			}
			return
		}
	}
	t.Fatalf("no memory.available row in\n%s", out)
}

func TestObserveBadInput(t *testing.T) {
	v1 := filepath.Join(fixtureRoot, "v1-cgroupfs")
	tests := []struct {
		name    string
		args    []string
		mention string
	}{
		{"bad output", []string{"--host-root", v1, "-o", "yaml"}, `"yaml"`},
		{"unknown flag", []string{"--nope"}, "-nope"},
		{"missing flag value", []string{"--host-root"}, "host-root"},
		{"extra argument", []string{"--host-root", v1, "now"}, `"now"`},
		{"missing host root", []string{"--host-root", filepath.Join(t.TempDir(), "absent")}, "absent"},
		{"host root without cgroups", []string{"--host-root", t.TempDir()}, "meminfo"},
		{"relative cgroup root", []string{"--host-root", v1, "--cgroup-root", "node-a"}, `"node-a"`},
		{"missing cgroup root", []string{"--host-root", v1, "--cgroup-root", "/node-z"}, "/node-z"},
		{"relative node cgroup", []string{"--host-root", v1, "--node-cgroup", "kubelet"}, `node cgroup "kubelet" must be an absolute path`},
		{"dotdot node cgroup", []string{"--host-root", v1, "--node-cgroup", "/kubelet/../.."}, `node cgroup "/kubelet/../.."`},
		{"missing node cgroup", []string{"--host-root", v1, "--node-cgroup", "/node-z"}, `node cgroup "/node-z" not found`},
		{"unknown sandbox", []string{"--host-root", v1, "--sandbox", "landlock"}, `invalid --sandbox: sandbox "landlock": want seccomp or none`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runObserve(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d; want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout %q; want nothing", out)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.mention) {
				t.Errorf("stderr %q; want one line naming %s", errOut, tc.mention)
			}
		})
	}
}

func TestObserveHelp(t *testing.T) {
	code, out, _ := runObserve(t, "--help")
	if code != exitOK || !strings.Contains(out, "--host-root") || !strings.Contains(out, "--cgroup-root") || !strings.Contains(out, "--node-cgroup") {
		t.Errorf("help: exit %d, %q", code, out)
	}
}

func TestFormatBytes(t *testing.T) {
	for in, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0Ki", 240 << 20: "240.0Mi", 3 << 30: "3.0Gi", 1 << 62: "4096.0Pi"} {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%d) = %q; want %q", in, got, want)
		}
	}
}

// TestObserveThisHost runs observe on this host's sys and proc, with a real
// memory cgroup as the cgroup root: without kubepods under it observe fails
// naming where it looked; once kubepods exists it prints the node.
func TestObserveThisHost(t *testing.T) {
	const limit = 512 << 20
	node := cgrouptest.NewMemoryCgroup(t, "evictd-observe")
	node.SetMemoryLimit(t, limit)
	hostRoot := cgrouptest.HostRoot(t)
	runObserve := func(t *testing.T, args ...string) (int, string, string) {
		return runObserve(t, append([]string{"--host-root", hostRoot}, args...)...)
	}
	cgroupRoot := "/" + node.Name()

	code, out, errOut := runObserve(t, "--cgroup-root", cgroupRoot, "-o", "json")
	want := "looked in " + filepath.Join(cgrouptest.MemoryRoot, node.Name()) + " for kubepods"
	if code != exitFailure || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
		t.Errorf("without kubepods: exit %d, stdout %q, stderr %q; want %d, nothing, one line with %q", code, out, errOut, exitFailure, want)
	}

	node.Sub(t, "kubepods")
	code, out, errOut = runObserve(t, "--cgroup-root", cgroupRoot, "--node-cgroup", cgroupRoot, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var s statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("output is not a Summary: %v", err)
	}
	m := s.Node.Memory
	if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil || *m.AvailableBytes+*m.WorkingSetBytes != limit || s.Node.Rlimit == nil || s.Node.Fs == nil {
		t.Errorf("node stats of this host incomplete or not capped by the cgroup limit %d: %+v", limit, s.Node)
	}
	if s.Pods == nil || len(s.Pods) != 0 {
		t.Errorf("pods %v; want an empty list", s.Pods)
	}
	code, out, errOut = runObserve(t, "--cgroup-root", cgroupRoot, "--node-cgroup", cgroupRoot, "-o", "table")
	if code != exitOK || !strings.Contains(out, "memory.available") || !strings.Contains(out, "PODS (0)") {
		t.Errorf("table: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{"/var/lib/kubelet\n", "/var/lib/containerd (the same filesystem as nodefs)\n", "\nswap.available "} {
		if !strings.Contains(out, want) {
			t.Errorf("table does not name the directory measured, %q:\n%s", want, out)
		}
	}
}

// TestObserveNoKubepods: with no kubepods cgroup under the cgroup root
// (here a wrong --cgroup-root: the fixture's kubelet uses /node-a) observe
// prints nothing, says on one stderr line where it looked, and exits 1: a
// failure at run time, not bad usage (the kubelet may create it later).
func TestObserveNoKubepods(t *testing.T) {
	for _, format := range []string{"json", "table"} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := runObserve(t, "--host-root", filepath.Join(fixtureRoot, "v2-cgroupfs"), "--cgroup-root", "/", "-o", format)
			if code != exitFailure {
				t.Errorf("exit %d; want %d", code, exitFailure)
			}
			if out != "" {
				t.Errorf("stdout %q; want nothing", out)
			}
			want := []string{"evictd observe: no kubepods cgroup", `--cgroup-root "/"`, "looked in /sys/fs/cgroup for kubepods", "kubepods.slice", "will not evict"}
			if strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q; want one line", errOut)
			}
			for _, w := range want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not mention %q", errOut, w)
				}
			}
		})
	}
}

// TestObserveLostSignals: when node files a signal needs are broken, observe
// prints what it has, the signal left out, names each lost signal on its
// own stderr line with the file and the cause, and exits 1.
func TestObserveLostSignals(t *testing.T) {
	// A copy of a clean fixture whose kubelet directory is a symlink loop:
	// statfs fails, so both nodefs signals are lost.
	loop := t.TempDir()
	if err := os.CopyFS(loop, os.DirFS(filepath.Join(fixtureRoot, "v1-cgroupfs"))); err != nil {
		t.Fatal(err)
	}
	kubelet := filepath.Join(loop, "var/lib/kubelet")
	if err := os.RemoveAll(kubelet); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("kubelet", kubelet); err != nil {
		t.Fatal(err)
	}
	// A copy whose /proc/meminfo has no SwapFree line: gopsutil's MemTotal
	// read at start takes it, the per-pass swap reading does not.
	noSwapFree := t.TempDir()
	if err := os.CopyFS(noSwapFree, os.DirFS(filepath.Join(fixtureRoot, "v2-systemd"))); err != nil {
		t.Fatal(err)
	}
	meminfo := filepath.Join(noSwapFree, "proc/meminfo")
	b, err := os.ReadFile(meminfo)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(l, "SwapFree:") {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(meminfo, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		root     string
		lost     []string // "signal path"
		cause    string
		tableRow []string
		check    func(t *testing.T, s *statsv1alpha1.Summary)
	}{
		{
			// The malformed fixture's /proc/loadavg reads "3-412" for "3/412".
			name: "malformed loadavg", root: filepath.Join(fixtureRoot, "malformed"),
			lost: []string{"pid.available /proc/loadavg"}, cause: "unexpected syntax",
			tableRow: []string{"pid.available", "-", "-", "unreadable"},
			check: func(t *testing.T, s *statsv1alpha1.Summary) {
				if s.Node.Rlimit != nil || s.Node.Memory == nil || s.Node.Fs == nil {
					t.Errorf("rlimit %+v, memory %+v, fs %+v; want no rlimit, the rest", s.Node.Rlimit, s.Node.Memory, s.Node.Fs)
				}
			},
		},
		{
			name: "meminfo without SwapFree", root: noSwapFree,
			lost: []string{"swap.available /proc/meminfo"}, cause: "a required key is missing: SwapFree",
			tableRow: []string{"swap.available", "-", "-", "unreadable"},
			check: func(t *testing.T, s *statsv1alpha1.Summary) {
				// Whether the node has swap is unknown: the pods' swap is still read.
				if s.Node.Swap != nil || s.Node.Memory == nil || len(s.Pods) != 3 || s.Pods[0].Swap == nil {
					t.Errorf("node swap %+v, memory %+v, %d pods, first pod's swap %+v; want no node swap, the rest",
						s.Node.Swap, s.Node.Memory, len(s.Pods), s.Pods[0].Swap)
				}
			},
		},
		{
			name: "nodefs statfs fails", root: loop,
			lost:  []string{"nodefs.available /var/lib/kubelet", "nodefs.inodesFree /var/lib/kubelet"},
			cause: "too many levels of symbolic links", tableRow: []string{"nodefs.available", "-", "-", "unreadable"},
			check: func(t *testing.T, s *statsv1alpha1.Summary) {
				if s.Node.Fs != nil || s.Node.Rlimit == nil || s.Node.Runtime == nil || len(s.Pods) != 3 {
					t.Errorf("fs %+v, rlimit %+v, runtime %+v, %d pods; want no fs, the rest", s.Node.Fs, s.Node.Rlimit, s.Node.Runtime, len(s.Pods))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runObserve(t, "--host-root", tc.root, "-o", "json")
			if code != exitFailure {
				t.Errorf("exit %d; want %d", code, exitFailure)
			}
			var s statsv1alpha1.Summary
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatalf("stdout is not a Summary: %v\n%s", err, out)
			}
			tc.check(t, &s)
			var lines []string
			for _, l := range strings.Split(errOut, "\n") {
				if strings.HasPrefix(l, "evictd observe: ") {
					lines = append(lines, l)
				}
			}
			if len(lines) != len(tc.lost) {
				t.Fatalf("stderr has %d evictd observe lines; want one per lost signal %q:\n%s", len(lines), tc.lost, errOut)
			}
			for i, l := range lines {
				sig, path, _ := strings.Cut(tc.lost[i], " ")
				if !strings.Contains(l, sig) || !strings.Contains(l, path) || !strings.Contains(l, tc.cause) || strings.Contains(l, tc.root) {
					t.Errorf("line %q; want %s, %s (as seen from the host root) and %q", l, sig, path, tc.cause)
				}
			}

			code, out, _ = runObserve(t, "--host-root", tc.root, "-o", "table")
			if code != exitFailure {
				t.Errorf("table: exit %d; want %d", code, exitFailure)
			}
			found := false
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) >= len(tc.tableRow) && strings.Join(f[:len(tc.tableRow)], " ") == strings.Join(tc.tableRow, " ") {
					found = true
				}
			}
			if !found {
				t.Errorf("table has no row %q:\n%s", tc.tableRow, out)
			}
		})
	}
}

// TestObserveWarnsOfEmptyHostDirectory: an image store that is an empty
// directory (what the runtime mounts for an unchecked hostPath that does
// not exist on the node) reads without error, so evictd says so on stderr;
// the observation is still whole, so the exit status stays 0.
func TestObserveWarnsOfEmptyHostDirectory(t *testing.T) {
	fixture, err := filepath.Abs(filepath.Join(fixtureRoot, "v2-systemd"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, d := range []string{"proc", "sys", "var/lib/kubelet", "var/log"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, d)), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(fixture, d)); err != nil {
			continue
		}
		if err := os.Symlink(filepath.Join(fixture, d), filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "var/lib/containerd"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runObserve(t, "--host-root", root, "-o", "table")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(errOut, "warning: host directory /var/lib/containerd is empty") || !strings.Contains(errOut, "--image-fs") {
		t.Errorf("stderr %q; want a warning naming the empty image store and --image-fs", errOut)
	}
}

// On cgroup v2 the table lists the containers with memory.high set and
// what their cgroups counted; a malformed memory.events is one warning
// naming the file, and leaves that container out without failing the
// observation (memory.high is no node signal).
func TestObserveMemoryHigh(t *testing.T) {
	const scope = "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7d3f3c2a_9b1e_4c5d_8f6a_2b3c4d5e6f70.slice/cri-containerd-e1d2c3b4a5968778695a4b3c2d1e0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2.scope"
	code, out, errOut := runObserve(t, "--host-root", filepath.Join(fixtureRoot, "v2-systemd"), "-o", "table")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := []string{uidB, "e1d2c3b4a596", "256.0Mi", "3", "2", "4.50%"}
	_, section, ok := strings.Cut(out, "CONTAINERS WITH MEMORY.HIGH (1 of 3)\n")
	if !ok || len(strings.Split(strings.TrimSpace(section), "\n")) != 2 || !slices.Equal(strings.Fields(strings.Split(section, "\n")[1]), want) {
		t.Fatalf("memory.high section missing or not %v:\n%s", want, out)
	}

	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(fixtureRoot, "v2-systemd"))); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(root, scope, "memory.events")
	if err := os.WriteFile(bad, []byte("low 0\nhigh 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runObserve(t, "--host-root", root, "-o", "table")
	if code != exitOK || !strings.Contains(out, "CONTAINERS WITH MEMORY.HIGH (0 of 2)") {
		t.Errorf("exit %d, output:\n%s\nwant 0 and the container left out", code, out)
	}
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.Contains(lines[0], bad+": malformed") {
		t.Errorf("stderr %q, want one warning naming %s", errOut, bad)
	}
}
