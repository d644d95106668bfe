package pressure

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// TestRealCgroupV1 builds a node cgroup with a memory limit on the real v1
// memory controller, kubepods/burstable/pod<uid> beneath it, runs a process
// in the pod that touches 64 MiB and then 64 MiB more, and checks the pod's
// working set and the node figures through CgroupRoot.
func TestRealCgroupV1(t *testing.T) {
	const (
		uid        = "e2e0c0de-1111-4222-8333-944455556666"
		nodeLimit  = 512 << 20
		touchMiB   = 64
		slackBytes = 48 << 20 // the helper's Go runtime, stacks and page tables
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

	o, err := NewObserver(Options{HostRoot: "/", CgroupRoot: "/" + name}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	l := o.Layout()
	if l.Mode != ModeV1 && l.Mode != ModeHybrid {
		t.Fatalf("mode %q on a v1 memory controller", l.Mode)
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
	if grew := ws2 - ws1; ws2 < ws1 || grew < touchMiB<<20 || grew > touchMiB<<20+slackBytes/2 {
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

// TestRealCgroupV1NoKubepods points the observer at a real memory cgroup
// that has no kubepods child: Observe fails with ErrNoKubepods naming the
// cgroup directory as seen from the host root, and succeeds once the
// kubepods cgroup is created, without a new observer.
func TestRealCgroupV1NoKubepods(t *testing.T) {
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
