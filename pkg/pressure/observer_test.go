// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/fixture"
)

// The pods of the checked-in fixtures (testdata/README.md).
const (
	uidG  = "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0" // Guaranteed, kube-system/coredns-7db6d8ff4d-x2v9k
	uidB  = "7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70" // Burstable, default/web-0, with an emptyDir
	uidBE = "a9b8c7d6-e5f4-4321-9876-fedcba987654" // BestEffort, no logs
)

type wantPod struct {
	qos             v1.PodQOSClass
	ws, usage, rss  uint64
	pgf, pgmaj      uint64
	pids            uint64 // 0: no process count expected
	namespace, name string
	psiSome10       float64 // -1: no PSI expected
	events          *MemoryEvents
	ephInodes       uint64 // 0: no ephemeral storage expected
	ephMinBytes     uint64
	// writableInodes is the inodes of the containers' writable layers
	// (proc/1/mountinfo and the snapshots under var/lib/containerd).
	writableInodes uint64
	swap           *wantSwap // nil: no swap figure expected
}

// wantSwap is a cgroup's expected SwapStats.
type wantSwap struct {
	usage uint64
	avail int64 // -1: no SwapAvailableBytes (no limit, or v1)
}

// swapKind is which swap files a fixture's cgroups have.
type swapKind int

const (
	noSwap swapKind = iota // none, or the node has no swap
	swapV1                 // memory.memsw.usage_in_bytes: usage only
	swapV2                 // memory.swap.current and memory.swap.max
)

// The swap figures of the fixtures (testdata/README.md): /proc/meminfo's
// SwapFree and SwapTotal − SwapFree, and kubepods' swap usage.
const (
	fixtureSwapFree     = 1835004 * 1024
	fixtureSwapUsed     = 256 * mi
	fixtureKubepodsSwap = 68 * mi
)

// fixturePods are the three pods every layout fixture holds, with the figures
// testdata/README.md lists.
func fixturePods(psiAll, psiBurstableOnly, events, names bool, swap swapKind) map[string]wantPod {
	psi := func(q v1.PodQOSClass) float64 {
		if psiAll || (psiBurstableOnly && q == v1.PodQOSBurstable) {
			return 4.5
		}
		return -1
	}
	var evB, evZero *MemoryEvents
	if events {
		evB = &MemoryEvents{High: 3, Max: 2, OOM: 1, OOMKill: 1}
		evZero = &MemoryEvents{}
	}
	pods := map[string]wantPod{
		uidG: {qos: v1.PodQOSGuaranteed, ws: 100 * mi, usage: 100 * mi, rss: 96 * mi, pgf: 25000, pgmaj: 3, pids: 12,
			psiSome10: psi(v1.PodQOSGuaranteed), events: evZero},
		// Writable layers: dev/, dev/termination-log, etc/ and three files under it for each of
		// two containers, tmp/ and tmp/scratch (4096 bytes) for one, etc/ and etc/resolv.conf for
		// the sandbox.
		uidB: {qos: v1.PodQOSBurstable, ws: 240 * mi, usage: 256 * mi, rss: 200 * mi, pgf: 70000, pgmaj: 41, pids: 27,
			psiSome10: psi(v1.PodQOSBurstable), events: evB, ephInodes: 16, ephMinBytes: 4096, writableInodes: 16},
		// inactive_file (70Mi) above usage (50Mi): the working set floors at 0.
		uidBE: {qos: v1.PodQOSBestEffort, ws: 0, usage: 50 * mi, rss: 10 * mi, pgf: 900, pgmaj: 0, pids: 3,
			psiSome10: psi(v1.PodQOSBestEffort), events: evZero},
	}
	if swap != noSwap {
		g, b, be := pods[uidG], pods[uidB], pods[uidBE]
		// memory.swap.max: max for the Guaranteed and BestEffort pods, 256Mi for the burstable one.
		g.swap, b.swap, be.swap = &wantSwap{0, -1}, &wantSwap{64 * mi, 192 << 20}, &wantSwap{4 * mi, -1}
		if swap == swapV1 {
			b.swap.avail = -1
		}
		pods[uidG], pods[uidB], pods[uidBE] = g, b, be
	}
	if names {
		g, b := pods[uidG], pods[uidB]
		// The logs count by file of each container's directory, not the directory itself (the
		// kubelet's getPodContainerLogStats): coredns/0.log.
		g.namespace, g.name, g.ephInodes, g.ephMinBytes = "kube-system", "coredns-7db6d8ff4d-x2v9k", 1, 4
		// cache/ and cache/data.bin (10000 bytes) in the emptyDir, app/0.log (600 bytes) in the logs.
		b.namespace, b.name, b.ephInodes, b.ephMinBytes = "default", "web-0", 3+16, 10600+4096
		pods[uidG], pods[uidB] = g, b
	}
	return pods
}

type wantNode struct {
	capacity, ws     uint64
	kubepodsAvail    uint64
	kubepodsPSI      bool
	nodePSI          bool
	maxPID, tasks    int64 // 0: no Rlimit expected
	mode             Mode
	driver           Driver
	kubepodsCgroup   string
	pressureDirsKept bool // Layout has the kubepods cgroup2 directory
	swap             bool // the node has swap, and kubepods a swap figure
}

var fixtureNodeV1 = wantNode{capacity: 8 * gi, ws: 2 * gi, kubepodsAvail: 7*gi - 700*mi, nodePSI: true, maxPID: 63432, tasks: 412, swap: true}

func TestObserveFixtures(t *testing.T) {
	tests := []struct {
		name       string
		fixture    string // name when empty
		cgroupRoot string
		nodeCgroup string
		node       wantNode
		pods       map[string]wantPod
	}{
		{
			name: "v1-cgroupfs",
			node: with(fixtureNodeV1, func(n *wantNode) { n.mode, n.driver, n.kubepodsCgroup = ModeV1, DriverCgroupfs, "/kubepods" }),
			pods: fixturePods(false, false, false, true, swapV1),
		},
		{
			name: "v1-systemd",
			node: with(fixtureNodeV1, func(n *wantNode) { n.mode, n.driver, n.kubepodsCgroup = ModeV1, DriverSystemd, "/kubepods.slice" }),
			pods: fixturePods(false, false, false, true, swapV1),
		},
		{
			name: "hybrid",
			node: with(fixtureNodeV1, func(n *wantNode) {
				n.mode, n.driver, n.kubepodsCgroup, n.kubepodsPSI, n.pressureDirsKept = ModeHybrid, DriverCgroupfs, "/kubepods", true, true
			}),
			pods: fixturePods(false, true, false, true, swapV1),
		},
		{
			// v2 root cgroup: usage is anon + file of the root memory.stat (3Gi), minus 1Gi inactive_file.
			name: "v2-systemd",
			node: wantNode{capacity: 8 * gi, ws: 2 * gi, kubepodsAvail: 7*gi - 700*mi, kubepodsPSI: true, nodePSI: true,
				maxPID: 63432, tasks: 412, mode: ModeV2, driver: DriverSystemd, kubepodsCgroup: "/kubepods.slice", pressureDirsKept: true, swap: true},
			pods: fixturePods(true, false, true, true, swapV2),
		},
		{
			// The node is the cgroup /node-a, limited to 4Gi: capacity is the limit, not MemTotal,
			// and kubepods' 7Gi limit is capped by it.
			name:       "v2-cgroupfs",
			cgroupRoot: "/node-a",
			nodeCgroup: "/node-a",
			node: wantNode{capacity: 4 * gi, ws: 3*gi - 512*mi, kubepodsAvail: 4*gi - 700*mi, kubepodsPSI: true, nodePSI: true,
				maxPID: 63432, tasks: 412, mode: ModeV2, driver: DriverCgroupfs, kubepodsCgroup: "/node-a/kubepods", pressureDirsKept: true, swap: true},
			pods: fixturePods(true, false, true, true, swapV2),
		},
		{
			// The kubelet's --cgroup-root is /node-a (kind's /kubelet), and
			// node memory is the root cgroup's, as the kubelet's: the v2
			// root's anon + file (3Gi) minus inactive_file (1Gi) against
			// MemTotal; /node-a's 4Gi limit and 2.5Gi working set are not
			// the node's. kubepods keeps its own 7Gi limit.
			name:       "v2-cgroupfs, node memory from the root cgroup",
			fixture:    "v2-cgroupfs",
			cgroupRoot: "/node-a",
			node: wantNode{capacity: 8 * gi, ws: 2 * gi, kubepodsAvail: 7*gi - 700*mi, kubepodsPSI: true, nodePSI: true,
				maxPID: 63432, tasks: 412, mode: ModeV2, driver: DriverCgroupfs, kubepodsCgroup: "/node-a/kubepods", pressureDirsKept: true, swap: true},
			pods: fixturePods(true, false, true, true, swapV2),
		},
		{
			// Also a node without swap, whose kernel has no swap files.
			name: "v2-nopsi",
			node: wantNode{capacity: 8 * gi, ws: 2 * gi, kubepodsAvail: 7*gi - 700*mi, maxPID: 63432, tasks: 412,
				mode: ModeV2, driver: DriverCgroupfs, kubepodsCgroup: "/kubepods"},
			pods: func() map[string]wantPod {
				p := fixturePods(false, false, true, false, noSwap)[uidB]
				return map[string]wantPod{uidB: p}
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			fixture := tc.fixture
			if fixture == "" {
				fixture = tc.name
			}
			root := filepath.Join("testdata", fixture)
			o, err := NewObserver(Options{HostRoot: root, CgroupRoot: tc.cgroupRoot, NodeCgroup: tc.nodeCgroup}, zap.New(core))
			if err != nil {
				t.Fatalf("NewObserver: %v", err)
			}
			t.Cleanup(func() { o.Close() })
			obs, err := o.Observe(context.Background())
			if err != nil {
				t.Fatalf("Observe: %v", err)
			}
			if obs.SkippedFiles != 0 || obs.SkippedPods != 0 || obs.VanishedPods != 0 {
				t.Errorf("skipped files %d, pods %d, vanished %d; want none", obs.SkippedFiles, obs.SkippedPods, obs.VanishedPods)
			}
			if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
				t.Errorf("%d warnings on a clean fixture: %v", n, logs.All())
			}
			checkNode(t, obs, tc.node)
			checkPods(t, obs, tc.pods)
		})
	}
}

func with(n wantNode, f func(*wantNode)) wantNode {
	f(&n)
	return n
}

func checkNode(t *testing.T, obs *Observation, want wantNode) {
	t.Helper()
	l := obs.Layout
	if l.Mode != want.mode || l.Driver != want.driver || l.KubepodsCgroup != want.kubepodsCgroup {
		t.Errorf("layout mode %q driver %q kubepods %q; want %q %q %q", l.Mode, l.Driver, l.KubepodsCgroup, want.mode, want.driver, want.kubepodsCgroup)
	}
	if !strings.HasSuffix(l.KubepodsMemoryDir, want.kubepodsCgroup) || !isDir(l.KubepodsMemoryDir) {
		t.Errorf("kubepods memory dir %q is not the %s directory", l.KubepodsMemoryDir, want.kubepodsCgroup)
	}
	if got := l.KubepodsPressureDir != ""; got != want.pressureDirsKept {
		t.Errorf("kubepods pressure dir %q; want one: %v", l.KubepodsPressureDir, want.pressureDirsKept)
	}
	n := obs.Summary.Node
	if n.NodeName != "node-a" {
		t.Errorf("node name %q; want node-a", n.NodeName)
	}
	m := n.Memory
	if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil {
		t.Fatalf("node memory %+v lacks available or working set", m)
	}
	if *m.WorkingSetBytes != want.ws {
		t.Errorf("node working set %d; want %d", *m.WorkingSetBytes, want.ws)
	}
	// The decide layer derives capacity as available + working set (kubelet convention).
	if got := *m.AvailableBytes + *m.WorkingSetBytes; got != want.capacity || obs.Node.MemoryCapacityBytes != want.capacity {
		t.Errorf("node capacity %d (extras %d); want %d", got, obs.Node.MemoryCapacityBytes, want.capacity)
	}
	if got := m.PSI != nil && n.CPU != nil && n.IO != nil; got != want.nodePSI {
		t.Errorf("node PSI present %v; want %v", got, want.nodePSI)
	} else if want.nodePSI && (m.PSI.Some.Avg10 != 1.25 || m.PSI.Full.Total != 654321 || n.CPU.PSI.Some.Avg10 != 12) {
		t.Errorf("node PSI memory %+v cpu %+v; want the /proc/pressure figures", m.PSI, n.CPU.PSI)
	}
	if len(n.SystemContainers) != 1 || n.SystemContainers[0].Name != "pods" {
		t.Fatalf("system containers %+v; want one named pods", n.SystemContainers)
	}
	pm := n.SystemContainers[0].Memory
	if pm == nil || pm.AvailableBytes == nil || *pm.AvailableBytes != want.kubepodsAvail || *pm.WorkingSetBytes != 700*mi {
		t.Errorf("pods container memory %+v; want available %d, working set %d", pm, want.kubepodsAvail, 700*mi)
	}
	if got := pm != nil && pm.PSI != nil; got != want.kubepodsPSI {
		t.Errorf("kubepods PSI present %v; want %v", got, want.kubepodsPSI)
	}
	if n.Fs == nil || n.Fs.CapacityBytes == nil || *n.Fs.CapacityBytes == 0 || n.Fs.InodesFree == nil {
		t.Errorf("nodefs %+v; want a statfs", n.Fs)
	}
	if n.Runtime == nil || n.Runtime.ImageFs == nil || n.Runtime.ImageFs.AvailableBytes == nil {
		t.Errorf("imagefs missing: %+v", n.Runtime)
	}
	switch sw := n.Swap; {
	case !want.swap && sw != nil:
		t.Errorf("node swap %s; want none", swapString(sw))
	case want.swap && (sw == nil || sw.Time.IsZero() || !swapIs(sw, fixtureSwapUsed, fixtureSwapFree)):
		t.Errorf("node swap %s; want %d available, %d used", swapString(sw), fixtureSwapFree, fixtureSwapUsed)
	}
	switch sw := n.SystemContainers[0].Swap; {
	case !want.swap && sw != nil:
		t.Errorf("pods container swap %s; want none", swapString(sw))
	case want.swap && (sw == nil || !swapIs(sw, fixtureKubepodsSwap, -1)):
		// kubepods' memory.swap.max is max; v1 has no swap limit figure.
		t.Errorf("pods container swap %s; want %d used, no limit", swapString(sw), fixtureKubepodsSwap)
	}
	if want.maxPID == 0 {
		if n.Rlimit != nil {
			t.Errorf("rlimit %+v; want none", n.Rlimit)
		}
	} else if n.Rlimit == nil || *n.Rlimit.MaxPID != want.maxPID || *n.Rlimit.NumOfRunningProcesses != want.tasks {
		t.Errorf("rlimit %+v; want max %d, running %d", n.Rlimit, want.maxPID, want.tasks)
	}
}

func checkPods(t *testing.T, obs *Observation, want map[string]wantPod) {
	t.Helper()
	if len(obs.Summary.Pods) != len(want) || len(obs.Pods) != len(obs.Summary.Pods) {
		t.Fatalf("%d pods (%d extras); want %d", len(obs.Summary.Pods), len(obs.Pods), len(want))
	}
	for i, p := range obs.Summary.Pods {
		if i > 0 && obs.Summary.Pods[i-1].PodRef.UID >= p.PodRef.UID {
			t.Errorf("pods not sorted by UID at %d", i)
		}
		w, ok := want[p.PodRef.UID]
		if !ok {
			t.Errorf("unexpected pod %q", p.PodRef.UID)
			continue
		}
		x := obs.Pods[i]
		if x.UID != p.PodRef.UID || x.QoS != w.qos {
			t.Errorf("pod %s: extras %+v; want QoS %s", p.PodRef.UID, x, w.qos)
		}
		if !strings.Contains(x.Cgroup, strings.ReplaceAll(p.PodRef.UID, "-", "_")) && !strings.Contains(x.Cgroup, p.PodRef.UID) {
			t.Errorf("pod %s: cgroup %q does not name it", p.PodRef.UID, x.Cgroup)
		}
		if p.PodRef.Namespace != w.namespace || p.PodRef.Name != w.name {
			t.Errorf("pod %s: ref %s/%s; want %s/%s", p.PodRef.UID, p.PodRef.Namespace, p.PodRef.Name, w.namespace, w.name)
		}
		m := p.Memory
		if m == nil {
			t.Errorf("pod %s: no memory stats", p.PodRef.UID)
			continue
		}
		for _, f := range []struct {
			name string
			got  *uint64
			want uint64
		}{{"working set", m.WorkingSetBytes, w.ws}, {"usage", m.UsageBytes, w.usage}, {"rss", m.RSSBytes, w.rss},
			{"page faults", m.PageFaults, w.pgf}, {"major page faults", m.MajorPageFaults, w.pgmaj}} {
			if f.got == nil || *f.got != f.want {
				t.Errorf("pod %s: %s %v; want %d", p.PodRef.UID, f.name, ptrString(f.got), f.want)
			}
		}
		switch {
		case w.swap == nil && p.Swap != nil:
			t.Errorf("pod %s: swap %s; want none", p.PodRef.UID, swapString(p.Swap))
		case w.swap != nil && (p.Swap == nil || !swapIs(p.Swap, w.swap.usage, w.swap.avail)):
			t.Errorf("pod %s: swap %s; want %+v", p.PodRef.UID, swapString(p.Swap), *w.swap)
		}
		if p.ProcessStats == nil || p.ProcessStats.ProcessCount == nil || *p.ProcessStats.ProcessCount != w.pids {
			t.Errorf("pod %s: process stats %+v; want %d", p.PodRef.UID, p.ProcessStats, w.pids)
		}
		switch {
		case w.psiSome10 < 0 && m.PSI != nil:
			t.Errorf("pod %s: PSI %+v; want none", p.PodRef.UID, m.PSI)
		case w.psiSome10 >= 0 && (m.PSI == nil || m.PSI.Some.Avg10 != w.psiSome10 || m.PSI.Full.Avg10 != 1.5 || m.PSI.Some.Total != 777):
			t.Errorf("pod %s: PSI %+v; want some avg10 %.2f", p.PodRef.UID, m.PSI, w.psiSome10)
		}
		switch {
		case w.events == nil && x.MemoryEvents != nil:
			t.Errorf("pod %s: memory events %+v; want none", p.PodRef.UID, x.MemoryEvents)
		case w.events != nil && (x.MemoryEvents == nil || *x.MemoryEvents != *w.events):
			t.Errorf("pod %s: memory events %+v; want %+v", p.PodRef.UID, x.MemoryEvents, w.events)
		}
		e := p.EphemeralStorage
		switch {
		case w.ephInodes == 0 && e != nil:
			t.Errorf("pod %s: ephemeral storage %+v; want none", p.PodRef.UID, e)
		case w.ephInodes > 0 && (e == nil || *e.InodesUsed != w.ephInodes || *e.UsedBytes < w.ephMinBytes):
			t.Errorf("pod %s: ephemeral storage %s; want %d inodes, at least %d bytes", p.PodRef.UID, fsString(e), w.ephInodes, w.ephMinBytes)
		}
		if e != nil {
			parts := x.EphemeralParts
			switch {
			case parts == nil:
				t.Errorf("pod %s: ephemeral storage without its parts", p.PodRef.UID)
			case parts.WritableLayer.Inodes != w.writableInodes || parts.WritableLayer.Inodes+parts.Logs.Inodes+parts.Volumes.Inodes != *e.InodesUsed ||
				parts.WritableLayer.Bytes+parts.Logs.Bytes+parts.Volumes.Bytes != *e.UsedBytes:
				t.Errorf("pod %s: parts %+v of %s; want %d inodes in writable layers, adding up to the whole", p.PodRef.UID, *parts, fsString(e), w.writableInodes)
			}
		}
	}
}

// swapIs reports whether sw has the usage and available figures (avail -1:
// no SwapAvailableBytes).
func swapIs(sw *statsv1alpha1.SwapStats, usage uint64, avail int64) bool {
	if sw == nil || sw.SwapUsageBytes == nil || *sw.SwapUsageBytes != usage {
		return false
	}
	if avail < 0 {
		return sw.SwapAvailableBytes == nil
	}
	return sw.SwapAvailableBytes != nil && *sw.SwapAvailableBytes == uint64(avail)
}

func swapString(sw *statsv1alpha1.SwapStats) string {
	if sw == nil {
		return "nil"
	}
	return "usage " + ptrString(sw.SwapUsageBytes) + " available " + ptrString(sw.SwapAvailableBytes)
}

func ptrString(p *uint64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatUint(*p, 10)
}

func fsString(f *statsv1alpha1.FsStats) string {
	if f == nil {
		return "nil"
	}
	return "used " + ptrString(f.UsedBytes) + " inodes " + ptrString(f.InodesUsed)
}

// TestObserveMalformed: broken pod files skip that pod with one warning that
// names the file and its content; the other pods and the node still read.
func TestObserveMalformed(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	o, err := NewObserver(Options{HostRoot: "testdata/malformed"}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkPods(t, obs, fixturePods(false, false, false, true, swapV1))
	if obs.SkippedPods != 4 || obs.SkippedFiles != 5 {
		t.Errorf("skipped pods %d, files %d; want 4 pods, 5 files (4 pod files and /proc/loadavg)", obs.SkippedPods, obs.SkippedFiles)
	}
	if obs.Summary.Node.Rlimit != nil {
		t.Errorf("rlimit %+v from a malformed /proc/loadavg", obs.Summary.Node.Rlimit)
	}
	if se := obs.SignalErrors; len(se) != 1 || se[0].Signal != "pid.available" || se[0].Path != "/proc/loadavg" || !errors.Is(se[0].Err, errSyntax) {
		t.Errorf("signal errors %v; want pid.available lost to /proc/loadavg's syntax", se)
	}
	if obs.Summary.Node.Memory == nil {
		t.Error("node memory missing although its files are fine")
	}
	warnings := logs.FilterLevelExact(zapcore.WarnLevel).All()
	for _, want := range []struct{ file, content string }{
		{"pod11111111-1111-4111-8111-111111111111/memory.stat", `total_rss 6291456O`},
		{"pod22222222-2222-4222-8222-222222222222/memory.usage_in_bytes", `"6710"`},
		{"pod33333333-3333-4333-8333-333333333333/memory.stat", `total_pgmajfault 0\n"`},
		{"pod44444444-4444-4444-8444-444444444444/pids.current", `""`},
		{"proc/loadavg", `3-412`},
	} {
		found := false
		for _, w := range warnings {
			f := w.ContextMap()
			if strings.HasSuffix(f["file"].(string), want.file) && strings.Contains(f["content"].(string), want.content) {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning naming %s with content %s; warnings: %v", want.file, want.content, warnings)
		}
	}
	// A second pass does not repeat the warnings.
	before := len(warnings)
	obs, err = o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if obs.SkippedPods != 4 {
		t.Errorf("second pass skipped %d pods; want 4", obs.SkippedPods)
	}
	if after := logs.FilterLevelExact(zapcore.WarnLevel).Len(); after != before {
		t.Errorf("second pass logged %d more warnings; want none", after-before)
	}
}

// copyTree copies a fixture into a temporary directory the test may change.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	fixture.CopyInto(t, dst, src)
	return dst
}

// TestObserveChanges follows a host between passes: values change under
// kept-open files, a pod vanishes mid-read (quietly), a pod is deleted and
// one appears.
func TestObserveChanges(t *testing.T) {
	root := copyTree(t, "testdata/v2-cgroupfs")
	core, logs := observer.New(zapcore.DebugLevel)
	o, err := NewObserver(Options{HostRoot: root, CgroupRoot: "/node-a", NodeCgroup: "/node-a"}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	ctx := context.Background()
	if _, err := o.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if o.openFiles == 0 {
		t.Fatal("no files kept open between passes")
	}
	podB := filepath.Join(root, "sys/fs/cgroup/node-a/kubepods/burstable/pod"+uidB)
	podG := filepath.Join(root, "sys/fs/cgroup/node-a/kubepods/pod"+uidG)
	podBE := filepath.Join(root, "sys/fs/cgroup/node-a/kubepods/besteffort/pod"+uidBE)

	// Rewrite in place, as the kernel's files change under an open descriptor.
	writeInPlace(t, filepath.Join(podB, "memory.current"), "300000000\n")
	// The Guaranteed pod's cgroup loses its files while listed: it vanished mid-read.
	if err := os.Remove(filepath.Join(podG, "memory.current")); err != nil {
		t.Fatal(err)
	}
	o.pods[qosGuaranteed]["pod"+uidG].close(&o.openFiles)
	// The BestEffort pod is deleted; a new one appears.
	if err := os.RemoveAll(podBE); err != nil {
		t.Fatal(err)
	}
	newUID := "c0ffee00-1234-4abc-8def-0123456789ab"
	w := treeWriter{t, root}
	d := "sys/fs/cgroup/node-a/kubepods/besteffort/pod" + newUID + "/"
	w.file(d+"memory.current", "1048576\n")
	w.file(d+"memory.stat", v2StatContent(1048576, 0, 0, 5, 0))
	w.file(d+"memory.events", eventsContent)

	obs, err := o.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if obs.VanishedPods != 1 || obs.SkippedPods != 0 || obs.SkippedFiles != 0 {
		t.Errorf("vanished %d, skipped pods %d, files %d; want 1, 0, 0", obs.VanishedPods, obs.SkippedPods, obs.SkippedFiles)
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Errorf("a vanishing pod logged %d warnings; want none", n)
	}
	got := map[string]statsv1alpha1.PodStats{}
	for _, p := range obs.Summary.Pods {
		got[p.PodRef.UID] = p
	}
	if len(got) != 2 {
		t.Fatalf("pods %v; want the burstable pod and the new one", keys(got))
	}
	if u := got[uidB].Memory.UsageBytes; u == nil || *u != 300000000 {
		t.Errorf("burstable pod usage %v after a rewrite; want 300000000", ptrString(u))
	}
	np, ok := got[newUID]
	if !ok || *np.Memory.WorkingSetBytes != 1048576 || np.ProcessStats != nil || np.Memory.PSI != nil {
		t.Errorf("new pod %+v; want 1Mi working set, no pids or PSI files", np)
	}
	if _, ok := o.pods[qosBestEffort]["pod"+uidBE]; ok {
		t.Error("the deleted pod is still cached")
	}
}

func writeInPlace(t *testing.T, p, content string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func keys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// TestKubepodsAppearsLater: a node without kubepods is an ErrNoKubepods
// error, not zero pods; once the kubelet creates its cgroups, the next pass
// finds them and Layout tells the wake-up sources where they are.
func TestKubepodsAppearsLater(t *testing.T) {
	root := t.TempDir()
	w := treeWriter{t, root}
	w.writeProc()
	w.file("sys/fs/cgroup/memory/memory.stat", v1StatContent(gi, gi, gi/2, 100, 1, true))
	w.file("sys/fs/cgroup/memory/memory.usage_in_bytes", "2147483648\n")
	w.file("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
	w.file("sys/fs/cgroup/memory/system.slice/memory.usage_in_bytes", "1\n")
	o, err := NewObserver(Options{HostRoot: root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	obs, err := o.Observe(context.Background())
	if !errors.Is(err, ErrNoKubepods) || obs != nil {
		t.Fatalf("without kubepods: %d pods, err %v; want ErrNoKubepods", podCount(obs), err)
	}
	if !strings.Contains(err.Error(), "/sys/fs/cgroup/memory for kubepods") {
		t.Errorf("error %q does not say where it looked", err)
	}
	if l := o.Layout(); l.Driver != DriverNone || l.KubepodsMemoryDir != "" {
		t.Fatalf("without kubepods: layout %+v", l)
	}
	writeTree(t, root, ModeV1, DriverSystemd, genPods(5))
	obs, err = o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Summary.Pods) != 5 {
		t.Errorf("%d pods after kubepods appeared; want 5", len(obs.Summary.Pods))
	}
	if l := o.Layout(); l.Driver != DriverSystemd || l.KubepodsMemoryDir != filepath.Join(root, "sys/fs/cgroup/memory/kubepods.slice") {
		t.Errorf("layout after kubepods appeared: %+v", l)
	}
}

func TestNewObserverErrors(t *testing.T) {
	onlyProc := t.TempDir()
	treeWriter{t, onlyProc}.writeProc()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v2NoMemory := t.TempDir()
	treeWriter{t, v2NoMemory}.writeProc()
	treeWriter{t, v2NoMemory}.file("sys/fs/cgroup/cgroup.controllers", "cpu io pids\n")
	tests := []struct {
		name    string
		opts    Options
		want    error
		mention string
	}{
		{"missing host root", Options{HostRoot: filepath.Join(onlyProc, "nope")}, ErrHostRoot, "nope"},
		{"host root is a file", Options{HostRoot: file}, ErrHostRoot, file},
		{"empty host root", Options{HostRoot: t.TempDir()}, ErrHostRoot, "meminfo"},
		{"no cgroup hierarchy", Options{HostRoot: onlyProc}, ErrHostRoot, "memory"},
		{"v2 without memory controller", Options{HostRoot: v2NoMemory}, ErrHostRoot, "memory"},
		{"missing cgroup root", Options{HostRoot: "testdata/v1-cgroupfs", CgroupRoot: "/no-such-node"}, ErrHostRoot, "/no-such-node"},
		{"relative cgroup root", Options{HostRoot: "testdata/v1-cgroupfs", CgroupRoot: "node"}, ErrInvalidOptions, `"node"`},
		{"dotdot cgroup root", Options{HostRoot: "testdata/v1-cgroupfs", CgroupRoot: "/a/../../etc"}, ErrInvalidOptions, ".."},
		{"relative image fs", Options{HostRoot: "testdata/v1-cgroupfs", ImageFsPath: "var/lib"}, ErrInvalidOptions, "var/lib"},
		{"negative budget", Options{HostRoot: "testdata/v1-cgroupfs", EphemeralBudget: -1}, ErrInvalidOptions, "-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := NewObserver(tc.opts, nil)
			if err == nil {
				o.Close()
				t.Fatal("NewObserver succeeded")
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q; want %v mentioning %q", err, tc.want, tc.mention)
			}
		})
	}
}

// TestSymlinkedHostRoot: parts of the host root may be symlinks (a test
// root can link sys to /sys).
func TestSymlinkedHostRoot(t *testing.T) {
	root := t.TempDir()
	abs, err := filepath.Abs("testdata/v2-systemd")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"proc", "sys", "var"} {
		if err := os.Symlink(filepath.Join(abs, d), filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	o, err := NewObserver(Options{HostRoot: root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkPods(t, obs, fixturePods(true, false, true, true, swapV2))
}

// TestNoKeptFiles: with no open-file budget every file is opened per pass,
// with the same results.
func TestNoKeptFiles(t *testing.T) {
	o, err := NewObserver(Options{HostRoot: "testdata/hybrid", MaxOpenFiles: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	for i := 0; i < 2; i++ {
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		checkPods(t, obs, fixturePods(false, true, false, true, swapV1))
		if o.openFiles != 0 {
			t.Fatalf("%d files kept open with MaxOpenFiles -1", o.openFiles)
		}
	}
}

func TestObserveCancelled(t *testing.T) {
	o, err := NewObserver(Options{HostRoot: "testdata/v1-cgroupfs"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.Observe(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Observe on a cancelled context: %v; want context.Canceled", err)
	}
}

// TestEphemeralBudget: the walk is bounded per pass, cached for the refresh
// period, and counts hard-linked files once.
func TestEphemeralBudget(t *testing.T) {
	root := copyTree(t, "testdata/v1-cgroupfs")
	vol := filepath.Join(root, "var/lib/kubelet/pods", uidBE, "volumes/kubernetes.io~empty-dir/scratch")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		if err := os.WriteFile(filepath.Join(vol, "f"+strconv.Itoa(i)), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(vol, "f0"), filepath.Join(vol, "hardlink")); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	// The budget covers the Guaranteed pod's 2 entries (its log directory and the log in it) and
	// the burstable pod's 20 first (stalest
	// first is by UID on the first pass); the BestEffort pod's 32 entries are cut at what is left.
	o, err := NewObserver(Options{HostRoot: root, EphemeralBudget: 36, EphemeralRefresh: time.Minute, Clock: clk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	eph := func() (map[string]*statsv1alpha1.FsStats, map[string]PodExtras) {
		t.Helper()
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fs, xs := map[string]*statsv1alpha1.FsStats{}, map[string]PodExtras{}
		for i, p := range obs.Summary.Pods {
			fs[p.PodRef.UID], xs[p.PodRef.UID] = p.EphemeralStorage, obs.Pods[i]
		}
		return fs, xs
	}
	fs, xs := eph()
	if fs[uidBE] == nil || !xs[uidBE].EphemeralPartial || *fs[uidBE].InodesUsed >= 31 {
		t.Fatalf("best-effort pod: %s partial %v; want a partial count", fsString(fs[uidBE]), xs[uidBE].EphemeralPartial)
	}
	if *fs[uidG].InodesUsed != 1 || *fs[uidB].InodesUsed != 19 || xs[uidB].EphemeralPartial {
		t.Errorf("guaranteed %s, burstable %s; want 1 and 19 inodes (the logs' files, not their directories), whole", fsString(fs[uidG]), fsString(fs[uidB]))
	}
	partial := *fs[uidBE].InodesUsed

	// Within the refresh period nothing is walked again, even when files change.
	if err := os.WriteFile(filepath.Join(vol, "late"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	fs, xs = eph()
	if *fs[uidBE].InodesUsed != partial || xs[uidBE].EphemeralAge != 30*time.Second {
		t.Errorf("within the refresh period: %s, age %v; want the cached %d inodes, 30s old", fsString(fs[uidBE]), xs[uidBE].EphemeralAge, partial)
	}

	// With a budget large enough, the walk is whole: the directory, f0..f29 and late; the hard link
	// to f0 is not counted again.
	o.opts.EphemeralBudget = 1000
	clk.SetTime(clk.Now().Add(time.Minute))
	fs, xs = eph()
	if got := *fs[uidBE].InodesUsed; got != 32 || xs[uidBE].EphemeralPartial {
		t.Errorf("whole walk: %d inodes (partial %v); want 32", got, xs[uidBE].EphemeralPartial)
	}

	// A pod named by RemeasureEphemeral (a disk victim in its grace period) is walked at
	// every pass, within the refresh period too, and first: with a budget that covers it
	// alone, it is whole and the others keep their cached figures.
	for i := 0; i < 5; i++ {
		if err := os.WriteFile(filepath.Join(vol, "grace"+strconv.Itoa(i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o.RemeasureEphemeral([]string{uidBE})
	o.opts.EphemeralBudget = 40
	clk.SetTime(clk.Now().Add(time.Second))
	fs, xs = eph()
	if got := *fs[uidBE].InodesUsed; got != 37 || xs[uidBE].EphemeralPartial || xs[uidBE].EphemeralAge != 0 {
		t.Errorf("remeasured within the refresh period: %d inodes (partial %v, age %v); want 37, whole, fresh", got, xs[uidBE].EphemeralPartial, xs[uidBE].EphemeralAge)
	}
	if xs[uidB].EphemeralAge != time.Second {
		t.Errorf("the burstable pod's figure is %v old; want its cached one, 1s old", xs[uidB].EphemeralAge)
	}
	// The next call replaces the set: the pod is cached again.
	o.RemeasureEphemeral(nil)
	if err := os.WriteFile(filepath.Join(vol, "after"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	fs, _ = eph()
	if got := *fs[uidBE].InodesUsed; got != 37 {
		t.Errorf("no longer named: %d inodes; want the cached 37", got)
	}
}

// TestGeneratedTrees checks every pod of large generated trees, both modes
// and drivers.
func TestGeneratedTrees(t *testing.T) {
	for _, tc := range []struct {
		mode   Mode
		driver Driver
	}{{ModeV1, DriverCgroupfs}, {ModeV1, DriverSystemd}, {ModeV2, DriverSystemd}, {ModeV2, DriverCgroupfs}} {
		t.Run(string(tc.mode)+"-"+string(tc.driver), func(t *testing.T) {
			root := t.TempDir()
			pods := genPods(60)
			writeTree(t, root, tc.mode, tc.driver, pods)
			o, err := NewObserver(Options{HostRoot: root}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { o.Close() })
			obs, err := o.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]genPod{}
			for _, p := range pods {
				want[p.uid] = p
			}
			if len(obs.Summary.Pods) != len(pods) {
				t.Fatalf("%d pods; want %d", len(obs.Summary.Pods), len(pods))
			}
			for i, p := range obs.Summary.Pods {
				g := want[p.PodRef.UID]
				if *p.Memory.WorkingSetBytes != g.usage-g.inactive || *p.Memory.UsageBytes != g.usage ||
					*p.Memory.RSSBytes != g.rss || *p.ProcessStats.ProcessCount != g.pids || obs.Pods[i].QoS != qosClass(g.qos) {
					t.Fatalf("pod %s: %+v (%s); want %+v", p.PodRef.UID, p.Memory, obs.Pods[i].QoS, g)
				}
				avail := int64(-1) // v1, or memory.swap.max "max"
				if tc.mode == ModeV2 && g.swapMax != 0 {
					avail = int64(g.swapMax - g.swap)
				}
				if !swapIs(p.Swap, g.swap, avail) {
					t.Fatalf("pod %s: swap %s; want usage %d, available %d", p.PodRef.UID, swapString(p.Swap), g.swap, avail)
				}
			}
		})
	}
}

// TestObserveAllocations: a pass allocates a fixed handful of slabs, not
// per pod (the Summary's pointers point into them).
func TestObserveAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("writes two generated trees")
	}
	allocs := map[int]float64{}
	for _, n := range []int{10, 100} {
		root := t.TempDir()
		writeTree(t, root, ModeV2, DriverSystemd, genPods(n))
		o, err := NewObserver(Options{HostRoot: root}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := o.Observe(ctx); err != nil { // warm the pod cache
			t.Fatal(err)
		}
		allocs[n] = testing.AllocsPerRun(20, func() {
			if _, err := o.Observe(ctx); err != nil {
				t.Fatal(err)
			}
		})
		o.Close()
	}
	t.Logf("allocations per pass: %v", allocs)
	if allocs[100] != allocs[10] || allocs[100] > 40 {
		t.Errorf("allocations per pass: %v at 10 pods, %v at 100; want the same small number", allocs[10], allocs[100])
	}
}

// TestOpenFileBudget: no more files stay open than MaxOpenFiles allows, and
// the files beyond it are still read.
func TestOpenFileBudget(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, ModeV2, DriverCgroupfs, genPods(30))
	o, err := NewObserver(Options{HostRoot: root, MaxOpenFiles: 7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	for i := 0; i < 2; i++ {
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(obs.Summary.Pods) != 30 || obs.SkippedPods != 0 {
			t.Fatalf("%d pods, %d skipped; want 30, 0", len(obs.Summary.Pods), obs.SkippedPods)
		}
		if o.openFiles != 7 {
			t.Errorf("%d files kept open; want the budget, 7", o.openFiles)
		}
	}
	o.Close()
	if o.openFiles != 0 {
		t.Errorf("%d files open after Close", o.openFiles)
	}
}

// TestOutOfDescriptors: when the process runs out of descriptors the
// observer stops keeping files open and still reads every pod.
func TestOutOfDescriptors(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, ModeV2, DriverSystemd, genPods(40))
	o, err := NewObserver(Options{HostRoot: root, MaxOpenFiles: 100000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open descriptors: %v", err)
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(fds) + 30)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restoring RLIMIT_NOFILE: %v", err)
		}
	})
	for i := 0; i < 2; i++ {
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(obs.Summary.Pods) != 40 || obs.SkippedPods != 0 || obs.SkippedFiles != 0 {
			t.Fatalf("pass %d: %d pods, %d skipped, %d bad files; want 40, 0, 0", i, len(obs.Summary.Pods), obs.SkippedPods, obs.SkippedFiles)
		}
	}
	// About 30 descriptors were left: the budget drops to half of what was held.
	if o.maxOpen > 20 || o.openFiles > o.maxOpen {
		t.Errorf("%d files kept open, budget %d; want a budget of about half the 30 descriptors left", o.openFiles, o.maxOpen)
	}
}

// TestV2RootWithoutMemoryStat: on kernels whose v2 root cgroup has no
// memory.stat, node usage comes from /proc/meminfo (MemTotal − MemFree) and
// the working set subtracts Inactive(file).
func TestV2RootWithoutMemoryStat(t *testing.T) {
	root := copyTree(t, "testdata/v2-systemd")
	if err := os.Remove(filepath.Join(root, "sys/fs/cgroup/memory.stat")); err != nil {
		t.Fatal(err)
	}
	o, err := NewObserver(Options{HostRoot: root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := obs.Summary.Node.Memory
	// The fixture's meminfo: MemTotal 8388608 kB, MemFree 4194304 kB, Inactive(file) 1352584 kB.
	const usage, inactiveFile = 4 * gi, 1352584 * 1024
	if m == nil || m.UsageBytes == nil || *m.UsageBytes != usage || *m.WorkingSetBytes != usage-inactiveFile {
		t.Fatalf("node memory %+v; want usage %d, working set %d", m, usage, usage-inactiveFile)
	}
	if obs.SkippedFiles != 0 || len(obs.Summary.Pods) != 3 {
		t.Errorf("skipped %d files, %d pods", obs.SkippedFiles, len(obs.Summary.Pods))
	}
}
