// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// TestRealCgroup builds a node cgroup with a memory limit on the host's real
// memory controller (v1, or v2 on a v2-only host), kubepods/burstable/pod<uid>
// beneath it, runs a process in the pod that touches 64 MiB and then 64 MiB
// more, and checks the pod's working set and the node figures through
// CgroupRoot and NodeCgroup.
func TestRealCgroup(t *testing.T) {
	const (
		uid        = "e2e0c0de-1111-4222-8333-944455556666"
		nodeLimit  = 512 << 20
		touchMiB   = 64
		slackBytes = 48 << 20 // the helper's Go runtime, stacks and page tables
		// The helper's file pages (its binary) count in the working set
		// while active; the kernel may move them to the inactive list
		// between two reads, so a growth may read short of what was
		// touched by that much (seen: 63.75 MiB for 64, on a busy host).
		fileSlack = 4 << 20
	)
	// The node cgroup, with the same name in the pids hierarchy when there is
	// one: the observer finds both at the same relative path.
	node := cgrouptest.NewMemoryCgroup(t, "evictd-test")
	name := node.Name()
	node.SetMemoryLimit(t, nodeLimit)
	hasPids := cgrouptest.HasPids()
	roots := []*cgrouptest.Cgroup{node}
	if hasPids {
		roots = append(roots, cgrouptest.New(t, cgrouptest.PidsRoot, name))
	}
	var pods []*cgrouptest.Cgroup
	for _, cg := range roots {
		for _, part := range []string{"kubepods", "burstable", "pod" + uid} {
			cg = cg.Sub(t, part)
		}
		pods = append(pods, cg)
	}
	// The helper is this test binary; it waits for commands, so it is in the
	// pod's cgroups before it touches any memory.
	helper := cgrouptest.StartChild(t, pods...)
	touch := func(mib int) {
		t.Helper()
		if _, err := helper.Touch(mib); err != nil {
			t.Fatal(err)
		}
	}

	o, err := NewObserver(Options{HostRoot: "/", CgroupRoot: "/" + name, NodeCgroup: "/" + name}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	l := o.Layout()
	if cgrouptest.V2() && l.Mode != ModeV2 || !cgrouptest.V2() && l.Mode != ModeV1 && l.Mode != ModeHybrid {
		t.Fatalf("mode %q on a %s memory controller", l.Mode, cgrouptest.Version())
	}
	if l.Driver != DriverCgroupfs || l.KubepodsMemoryDir != filepath.Join(node.Dir(), "kubepods") {
		t.Fatalf("layout %+v; want cgroupfs kubepods under the test cgroup", l)
	}

	observe := func(alive bool) (ws, usage, nodeWS, podsWS uint64, obs *Observation) {
		t.Helper()
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(obs.Summary.Pods) != 1 || obs.Summary.Pods[0].PodRef.UID != uid || obs.Pods[0].QoS != v1.PodQOSBurstable {
			t.Fatalf("pods %+v; want the one burstable test pod", obs.Summary.Pods)
		}
		m := obs.Summary.Pods[0].Memory
		node := obs.Summary.Node.Memory
		if node == nil || node.AvailableBytes == nil {
			t.Fatalf("no node memory: %+v", obs.Summary.Node)
		}
		// The node is the test cgroup: its capacity is its limit, far below MemTotal.
		if got := *node.AvailableBytes + *node.WorkingSetBytes; got != nodeLimit {
			t.Errorf("node capacity %d; want the cgroup limit %d", got, nodeLimit)
		}
		pods := obs.Summary.Node.SystemContainers
		if len(pods) != 1 || pods[0].Memory == nil {
			t.Fatalf("system containers %+v; want pods", pods)
		}
		// kubepods has no limit of its own: its capacity is the node's.
		if got := *pods[0].Memory.AvailableBytes + *pods[0].Memory.WorkingSetBytes; got != nodeLimit {
			t.Errorf("kubepods capacity %d; want %d", got, nodeLimit)
		}
		ps := obs.Summary.Pods[0].ProcessStats
		if hasPids {
			if ps == nil || ps.ProcessCount == nil {
				t.Fatalf("no process count for the pod")
			}
			if alive != (*ps.ProcessCount > 0) {
				t.Errorf("process count %d with the helper alive: %v", *ps.ProcessCount, alive)
			}
		}
		return *m.WorkingSetBytes, *m.UsageBytes, *node.WorkingSetBytes, *pods[0].Memory.WorkingSetBytes, obs
	}

	ws0, _, _, _, _ := observe(true)
	touch(touchMiB)
	ws1, usage1, nodeWS1, podsWS1, _ := observe(true)
	if ws1 < touchMiB<<20 || ws1 > touchMiB<<20+slackBytes || usage1 < ws1 {
		t.Errorf("pod working set %d MiB, usage %d MiB after touching %d MiB", ws1>>20, usage1>>20, touchMiB)
	}
	if nodeWS1 < ws1 || podsWS1 < ws1 {
		t.Errorf("node working set %d, kubepods %d below the pod's %d", nodeWS1, podsWS1, ws1)
	}
	touch(touchMiB)
	ws2, _, _, _, _ := observe(true)
	if grew := ws2 - ws1; ws2 < ws1 || grew < touchMiB<<20-fileSlack || grew > touchMiB<<20+slackBytes/2 {
		t.Errorf("pod working set grew by %d bytes after touching %d MiB more", int64(ws2)-int64(ws1), touchMiB)
	}
	t.Logf("pod working set: %d MiB before, %d MiB after 64 MiB, %d MiB after 128 MiB", ws0>>20, ws1>>20, ws2>>20)

	// Once the helper exits, its anonymous memory is freed.
	if err := helper.Stop(); err != nil {
		t.Fatal(err)
	}
	ws3, _, _, _, _ := observe(false)
	if ws3 >= ws1 {
		t.Errorf("pod working set %d MiB after the process exited; want below %d MiB", ws3>>20, ws1>>20)
	}
}

// TestRealCgroupNoKubepods points the observer at a real memory cgroup
// that has no kubepods child: Observe fails with ErrNoKubepods naming the
// cgroup directory as seen from the host root, and succeeds once the
// kubepods cgroup is created, without a new observer.
func TestRealCgroupNoKubepods(t *testing.T) {
	node := cgrouptest.NewMemoryCgroup(t, "evictd-test")
	name := node.Name()
	o, err := NewObserver(Options{HostRoot: cgrouptest.HostRoot(t), CgroupRoot: "/" + name}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	obs, err := o.Observe(context.Background())
	if !errors.Is(err, ErrNoKubepods) || obs != nil {
		t.Fatalf("Observe without kubepods: %d pods, err %v; want ErrNoKubepods", podCount(obs), err)
	}
	for _, want := range []string{`--cgroup-root "/` + name + `"`, "looked in " + filepath.Join(cgrouptest.MemoryRoot, name) + " for kubepods"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	node.Sub(t, "kubepods")
	obs, err = o.Observe(context.Background())
	if err != nil {
		t.Fatalf("Observe once kubepods exists: %v", err)
	}
	if len(obs.Summary.Pods) != 0 || len(obs.SignalErrors) != 0 || len(obs.Summary.Node.SystemContainers) != 1 {
		t.Errorf("pods %d, signal errors %v, system containers %+v; want no pods, no errors, the pods container",
			len(obs.Summary.Pods), obs.SignalErrors, obs.Summary.Node.SystemContainers)
	}
}

// TestRealCgroupSwap: with swap accounting on the host's real memory
// controller, the swap of a pod and of kubepods is the kernel's own figure,
// and the cgroups' swap files are read only while /proc/meminfo says the
// node has swap. Each version has its own files, so the figures differ:
//
//   - v1: what memory.memsw.usage_in_bytes says beyond
//     memory.usage_in_bytes, with no limit figure;
//   - v2: memory.swap.current, and what is left of memory.swap.max when it
//     is not "max" (the pod's is set to 256 MiB here, kubepods' left).
//
// This project's machines have swap accounting but no swap, so the second
// observation reads a copy of this host's /proc/meminfo that claims some:
// the kernel's files are real, and their swap figure is then 0.
func TestRealCgroupSwap(t *testing.T) {
	const uid = "e2e0c0de-2222-4333-8444-955566667777"
	node := cgrouptest.NewMemoryCgroup(t, "evictd-test")
	kubepods := node.Sub(t, "kubepods")
	pod := kubepods.Sub(t, "burstable").Sub(t, "pod"+uid)
	usageFile := "memory.memsw.usage_in_bytes"
	if cgrouptest.V2() {
		usageFile = "memory.swap.current"
	}
	_, err := os.Stat(pod.Path(usageFile))
	cgrouptest.Need(t, err == nil, "swap accounting on the cgroup "+cgrouptest.Version()+" memory controller ("+usageFile+"; swapaccount=1)")
	const podSwapMax = 256 << 20
	if cgrouptest.V2() {
		if err := pod.Write("memory.swap.max", fmt.Sprint(podSwapMax)); err != nil {
			t.Fatal(err)
		}
	}
	helper := cgrouptest.StartChild(t, pod)
	if _, err := helper.Touch(32); err != nil {
		t.Fatal(err)
	}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	hostSwap, _, _, err := parseMeminfoSwap(meminfo)
	if err != nil {
		t.Fatalf("this host's /proc/meminfo: %v", err)
	}
	observe := func(hostRoot string) *Observation {
		t.Helper()
		o := newTestObserver(t, Options{HostRoot: hostRoot, CgroupRoot: "/" + node.Name(), NodeCgroup: "/" + node.Name()}, zaptest.NewLogger(t))
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(obs.Summary.Pods) != 1 || obs.Summary.Pods[0].PodRef.UID != uid || len(obs.Summary.Node.SystemContainers) != 1 {
			t.Fatalf("pods %+v, system containers %+v; want the test pod and kubepods", obs.Summary.Pods, obs.Summary.Node.SystemContainers)
		}
		if obs.SkippedFiles != 0 || len(obs.SignalErrors) != 0 {
			t.Errorf("skipped %d files, signal errors %v; want none", obs.SkippedFiles, obs.SignalErrors)
		}
		return obs
	}

	// This host as it is: swap figures exactly when it has swap.
	obs := observe(cgrouptest.HostRoot(t))
	if got := obs.Summary.Node.Swap != nil && obs.Summary.Pods[0].Swap != nil && obs.Summary.Node.SystemContainers[0].Swap != nil; got != (hostSwap > 0) ||
		(hostSwap == 0 && (obs.Summary.Node.Swap != nil || obs.Summary.Pods[0].Swap != nil)) {
		t.Errorf("node swap %s, pod swap %s with SwapTotal %d on this host; want figures exactly when it has swap",
			swapString(obs.Summary.Node.Swap), swapString(obs.Summary.Pods[0].Swap), hostSwap)
	}

	// A /proc/meminfo that says the node has swap.
	obs = observe(hostRootWithSwap(t, meminfo))
	if sw := obs.Summary.Node.Swap; !swapIs(sw, 256*mi, 768<<20) {
		t.Errorf("node swap %s; want the meminfo copy's 256Mi used, 768Mi free", swapString(sw))
	}
	for _, c := range []struct {
		name string
		cg   *cgrouptest.Cgroup
		sw   *statsv1alpha1.SwapStats
	}{{"pod", pod, obs.Summary.Pods[0].Swap}, {"kubepods", kubepods, obs.Summary.Node.SystemContainers[0].Swap}} {
		if cgrouptest.V2() {
			checkSwapV2(t, c.name, c.cg, c.sw, c.cg == pod, podSwapMax)
			continue
		}
		memsw, err := cgrouptest.ReadInt(c.cg.Path("memory.memsw.usage_in_bytes"))
		if err != nil {
			t.Fatal(err)
		}
		usage, err := c.cg.MemoryUsage()
		if err != nil {
			t.Fatal(err)
		}
		want := sub0(uint64(memsw), uint64(usage))
		if c.sw == nil || c.sw.SwapUsageBytes == nil || c.sw.SwapAvailableBytes != nil || !near(*c.sw.SwapUsageBytes, want) {
			t.Errorf("%s swap %s; want about %d (memsw %d − usage %d), no available figure", c.name, swapString(c.sw), want, memsw, usage)
			continue
		}
		t.Logf("%s: swap %d bytes (memsw %d, usage %d)", c.name, *c.sw.SwapUsageBytes, memsw, usage)
	}
}

// checkSwapV2 checks a cgroup's swap figures against its v2 files: the usage
// is memory.swap.current, and what is left of its memory.swap.max is
// available when the cgroup has one (limited: max bytes).
func checkSwapV2(t *testing.T, name string, cg *cgrouptest.Cgroup, sw *statsv1alpha1.SwapStats, limited bool, max uint64) {
	t.Helper()
	cur, err := cgrouptest.ReadInt(cg.Path("memory.swap.current"))
	if err != nil {
		t.Fatal(err)
	}
	if sw == nil || sw.SwapUsageBytes == nil || *sw.SwapUsageBytes != uint64(cur) {
		t.Errorf("%s swap %s; want memory.swap.current's %d", name, swapString(sw), cur)
		return
	}
	if !limited {
		if sw.SwapAvailableBytes != nil {
			t.Errorf("%s swap %s; want no available figure with memory.swap.max at max", name, swapString(sw))
		}
		return
	}
	if sw.SwapAvailableBytes == nil || *sw.SwapAvailableBytes != max-uint64(cur) {
		t.Errorf("%s swap %s; want %d available (memory.swap.max %d − current %d)", name, swapString(sw), max-uint64(cur), max, cur)
		return
	}
	t.Logf("%s: swap %d bytes, %d available", name, cur, *sw.SwapAvailableBytes)
}

// hostRootWithSwap is a host root whose sys is this machine's and whose
// proc has this machine's files but for meminfo, a copy of meminfo whose
// swap lines read 1 GiB, 768 MiB of it free.
func hostRootWithSwap(t *testing.T, meminfo []byte) string {
	t.Helper()
	root := cgrouptest.HostRoot(t)
	proc := filepath.Join(root, "proc")
	if err := os.Remove(proc); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"loadavg", "sys", "pressure", "1"} {
		if err := os.Symlink(filepath.Join("/proc", name), filepath.Join(proc, name)); err != nil {
			t.Fatal(err)
		}
	}
	m := string(meminfo)
	for key, kb := range map[string]int{"SwapTotal": 1 << 20, "SwapFree": 768 << 10} {
		re := regexp.MustCompile(`(?m)^` + key + `:.*$`)
		if !re.MatchString(m) {
			t.Fatalf("no %s line in /proc/meminfo", key)
		}
		m = re.ReplaceAllString(m, fmt.Sprintf("%-16s%8d kB", key+":", kb))
	}
	if err := os.WriteFile(filepath.Join(proc, "meminfo"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}
