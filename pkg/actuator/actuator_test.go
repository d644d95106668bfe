// SPDX-License-Identifier: Apache-2.0

package actuator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/pkg/pressure"
)

func TestMain(m *testing.M) {
	cgrouptest.RunChildIfRequested()
	os.Exit(m.Run())
}

// v2Node writes a cgroup v2 pod cgroup with one container, in the kernel's
// formats, under a temporary hierarchy root.
func v2Node(t *testing.T) (root, pod, ctr string) {
	t.Helper()
	root = t.TempDir()
	pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b.slice"
	ctr = pod + "/cri-containerd-4f3e.scope"
	for path, body := range map[string]string{
		"/kubepods.slice/memory.high": "max\n",
		pod + "/memory.current":       "314572800\n",
		pod + "/memory.high":          "max\n",
		pod + "/memory.max":           "536870912\n",
		ctr + "/memory.current":       "310378496\n",
		ctr + "/memory.high":          "483183820\n",
		ctr + "/memory.max":           "536870912\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, pod, ctr
}

func v2Layout(root string) pressure.Layout {
	return pressure.Layout{Mode: pressure.ModeV2, MemoryMount: root, KubepodsMemoryDir: filepath.Join(root, "kubepods.slice")}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestContainV2SetsMemoryHighAboveUsage(t *testing.T) {
	root, pod, _ := v2Node(t)
	a := New(v2Layout(root))
	c, err := a.Contain(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := CapAbove(314572800)
	if c.Usage != 314572800 || c.Limit != want || c.File != filepath.Join(root, pod, "memory.high") {
		t.Errorf("Contain = %+v; want usage 314572800, limit %d in the pod's memory.high", c, want)
	}
	if got := readFile(t, c.File); got != fmt.Sprint(want) {
		t.Errorf("memory.high holds %q, want %d", got, want)
	}
	if got := readFile(t, filepath.Join(root, pod, "memory.max")); got != "536870912\n" {
		t.Errorf("memory.max changed to %q: Contain must only throttle", got)
	}
}

func TestRelaxV2RaisesMemoryHighToMax(t *testing.T) {
	root, _, ctr := v2Node(t)
	a := New(v2Layout(root))
	r, err := a.Relax(ctr)
	if err != nil {
		t.Fatal(err)
	}
	if r.From != "483183820" || r.To != "536870912" {
		t.Errorf("Relax = %+v; want from 483183820 to 536870912", r)
	}
	if got := readFile(t, filepath.Join(root, ctr, "memory.high")); got != "536870912" {
		t.Errorf("memory.high holds %q after Relax", got)
	}
	// No memory.max: "max", as the kernel writes an unlimited one.
	if err := os.WriteFile(filepath.Join(root, ctr, "memory.max"), []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Relax(ctr); err != nil || r.To != "max" {
		t.Errorf("Relax with memory.max unlimited = %+v, %v; want to \"max\"", r, err)
	}
}

func TestActuatorRefusesBadInput(t *testing.T) {
	root, pod, ctr := v2Node(t)
	a := New(v2Layout(root))
	for _, cg := range []string{"", "/", "/kubepods.slice/../../etc", "../x"} {
		if _, err := a.Contain(cg); err == nil || !strings.Contains(err.Error(), "not a pod's") {
			t.Errorf("Contain(%q) = %v; want a refusal naming it", cg, err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, pod, "memory.current"), []byte("lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Contain(pod); err == nil || !strings.Contains(err.Error(), `"lots"`) || !strings.Contains(err.Error(), "memory.current") {
		t.Errorf("Contain with a malformed memory.current = %v; want an error naming the file and the value", err)
	}
	if got := readFile(t, filepath.Join(root, pod, "memory.high")); got != "max\n" {
		t.Errorf("memory.high written (%q) after a malformed read", got)
	}
	if err := os.WriteFile(filepath.Join(root, ctr, "memory.max"), []byte("half\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Relax(ctr); err == nil || !strings.Contains(err.Error(), `"half"`) {
		t.Errorf("Relax with a malformed memory.max = %v; want an error naming the value", err)
	}
	if _, err := New(pressure.Layout{Mode: pressure.ModeV1, MemoryMount: root}).Relax(ctr); err == nil || !strings.Contains(err.Error(), "cgroup v2") {
		t.Errorf("Relax on v1 = %v; want a refusal naming cgroup v2", err)
	}
	if err := New(pressure.Layout{Mode: pressure.ModeV2, MemoryMount: root}).Check(); !errors.Is(err, ErrNoKubepods) {
		t.Errorf("Check without kubepods = %v, want ErrNoKubepods", err)
	}
}

// TestCheckNamesAReadOnlyMount mounts the pod cgroups read-only, as the
// DaemonSet does without actuator.enabled, and wants Check to say so.
func TestCheckNamesAReadOnlyMount(t *testing.T) {
	cgrouptest.Need(t, os.Geteuid() == 0, "root, to mount a read-only tmpfs")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	kp := filepath.Join(dir, "kubepods.slice")
	if err := os.MkdirAll(kp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kp, "memory.high"), []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := New(v2Layout(dir))
	if err := a.Check(); err != nil {
		t.Fatalf("Check on a writable mount: %v", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remounting read-only: %v", err)
	}
	err := a.Check()
	if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "actuator.enabled") {
		t.Errorf("Check on a read-only mount = %v; want EROFS and the chart value that fixes it", err)
	}
	if got := readFile(t, filepath.Join(kp, "memory.high")); got != "max\n" {
		t.Errorf("Check wrote %q", got)
	}
}

// TestContainStopsARealGrower puts a process with 64 MiB in a real memory
// cgroup, contains it, and asks it for 128 MiB more, on the host's cgroup
// version: v1 stops it at the new limit (containV1), v2 throttles it there
// (containV2).
func TestContainStopsARealGrower(t *testing.T) {
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-actuator")
	child := cgrouptest.StartChild(t, cg)
	if _, err := child.Touch(64); err != nil {
		t.Fatal(err)
	}
	// The test's cgroup stands for a pod's: kubepods is its parent.
	mode := pressure.ModeV1
	if cgrouptest.V2() {
		mode = pressure.ModeV2
	}
	a := New(pressure.Layout{Mode: mode, MemoryMount: cgrouptest.MemoryRoot, KubepodsMemoryDir: filepath.Dir(cg.Dir())})
	rel := strings.TrimPrefix(cg.Dir(), cgrouptest.MemoryRoot)
	c, err := a.Contain(rel)
	if err != nil {
		t.Fatal(err)
	}
	file := "memory.limit_in_bytes"
	if cgrouptest.V2() {
		file = "memory.high"
	}
	if c.Usage < 64<<20 || c.Limit != CapAbove(c.Usage) || c.File != cg.Path(file) {
		t.Fatalf("Contain = %+v; want the usage (at least 64 MiB) and the limit above it in %s", c, file)
	}
	if limit, err := cgrouptest.ReadInt(c.File); err != nil || uint64(limit) != c.Limit {
		t.Fatalf("%s = %d, %v; want %d", file, limit, err, c.Limit)
	}
	if err := child.BeginTouch(128, nil); err != nil {
		t.Fatal(err)
	}
	if cgrouptest.V2() {
		containV2(t, cg, child)
	} else {
		containV1(t, cg, child, c)
	}
}

// forcedCharges is how far past a v1 limit a waiting cgroup's usage may be.
const forcedCharges = 1 << 20

// containV1: the child must stop at the new limit, neither growing past it
// nor being OOM-killed (Contain turned the OOM killer off).
func containV1(t *testing.T, cg *cgrouptest.Cgroup, child *cgrouptest.Child, c Contained) {
	t.Helper()
	if tc, err := child.EndTouch(2 * time.Second); err == nil {
		t.Fatalf("the contained child touched 128 MiB more (%v)", tc)
	}
	usage, err := cg.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	// The kernel forces a few charges past a limit (page tables, kernel
	// allocations that may not fail): seen one page over.
	if uint64(usage) > c.Limit+forcedCharges {
		t.Errorf("usage %d is past the limit %d by more than the kernel's forced charges", usage, c.Limit)
	}
	oom := readFile(t, cg.Path("memory.oom_control"))
	if !strings.Contains(oom, "oom_kill_disable 1") || !strings.Contains(oom, "under_oom 1") {
		t.Errorf("memory.oom_control = %q; want the OOM killer off and the child waiting under OOM", oom)
	}
	if strings.Contains(oom, "oom_kill ") && !strings.Contains(oom, "oom_kill 0") {
		t.Errorf("memory.oom_control = %q; the contained child was OOM-killed", oom)
	}
	if err := syscall.Kill(child.Pid(), 0); err != nil {
		t.Errorf("the contained child is gone (%v); it should wait at its limit", err)
	}
}

// containV2: memory.high is no wall. The kernel makes the child reclaim and
// then sleep on its way back to user space each time it charges past it,
// which memory.events counts as high; memory.max stays, and nothing is
// OOM-killed for the containment.
func containV2(t *testing.T, cg *cgrouptest.Cgroup, child *cgrouptest.Child) {
	t.Helper()
	var events pressure.MemoryEvents
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(cg.Path("memory.events"))
		if err == nil {
			events, err = pressure.ParseMemoryEvents(b)
		}
		return err == nil && events.High > 0, err
	})
	if err != nil {
		t.Fatalf("memory.events %+v: the contained child was never throttled at memory.high (%v)", events, err)
	}
	if got := readFile(t, cg.Path("memory.max")); got != "max\n" {
		t.Errorf("memory.max = %q; Contain must only throttle", got)
	}
	if events.OOMKill != 0 {
		t.Errorf("memory.events %+v: the contained child was OOM-killed", events)
	}
	if err := syscall.Kill(child.Pid(), 0); err != nil {
		t.Errorf("the contained child is gone (%v); it should be throttled, alive", err)
	}
	t.Logf("throttled at memory.high: memory.events %+v", events)
}

// A v1 containment whose limit cannot be written turns the OOM killer back
// on: left off, the victim would hang at its old limit instead of being
// killed there.
func TestContainV1RestoresTheOOMKiller(t *testing.T) {
	root := t.TempDir()
	pod := "kubepods/burstable/pod-a"
	dir := filepath.Join(root, pod)
	if err := os.MkdirAll(filepath.Join(dir, "memory.limit_in_bytes"), 0o755); err != nil { // a write to it fails
		t.Fatal(err)
	}
	for f, v := range map[string]string{"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", "memory.usage_in_bytes": "104857600\n"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := New(pressure.Layout{Mode: pressure.ModeV1, MemoryMount: root, KubepodsMemoryDir: filepath.Join(root, "kubepods")}).Contain(pod)
	if err == nil || !strings.Contains(err.Error(), "memory.limit_in_bytes") {
		t.Fatalf("Contain = %v; want the limit write's error", err)
	}
	if got := readFile(t, filepath.Join(dir, "memory.oom_control")); got != "0" {
		t.Errorf("memory.oom_control holds %q after the failed containment; want 0 written back (the OOM killer on)", got)
	}
	if VictimSpecific(err) {
		t.Errorf("VictimSpecific(%v) = true; a limit file that cannot be written is the actuator's failure", err)
	}
	if !VictimSpecific(fmt.Errorf("x: %w", syscall.EBUSY)) || !VictimSpecific(fmt.Errorf("x: %w", fs.ErrNotExist)) {
		t.Error("VictimSpecific is false for EBUSY or a cgroup gone")
	}
}
