package pressure

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// Where this project's machines mount the cgroup v1 controllers the real test uses.
const (
	realMemoryMount = "/sys/fs/cgroup/memory"
	realPidsMount   = "/sys/fs/cgroup/pids"
)

// needRealCgroupV1 skips, or with CI=true fails, when the test cannot build
// cgroups on a real v1 memory controller.
func needRealCgroupV1(t *testing.T) {
	t.Helper()
	reason := ""
	switch {
	case os.Geteuid() != 0:
		reason = "needs root to create cgroups"
	case !existsC(newCPath(filepath.Join(realMemoryMount, "memory.stat"))):
		reason = "no cgroup v1 memory controller at " + realMemoryMount
	case unix.Access(realMemoryMount, unix.W_OK) != nil:
		reason = realMemoryMount + " is not writable"
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but the real cgroup test cannot run: %s", reason)
	}
	t.Skipf("skipping the real cgroup test: %s", reason)
}

// mkCgroup creates a cgroup directory and removes it when the test ends
// (cleanups run last-in first-out, so children go before parents).
func mkCgroup(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("creating cgroup: %v", err)
	}
	t.Cleanup(func() {
		// A cgroup whose last task just exited may be busy for a moment.
		var err error
		for i := 0; i < 50; i++ {
			if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("removing cgroup %s: %v", dir, err)
	})
}

func writeCgroupFile(t *testing.T, p, v string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(v), 0); err != nil {
		t.Fatalf("writing %q to %s: %v", v, p, err)
	}
}

// TestRealCgroupV1 builds a node cgroup with a memory limit on the real v1
// memory controller, kubepods/burstable/pod<uid> beneath it, runs a process
// in the pod that touches 64 MiB and then 64 MiB more, and checks the pod's
// working set and the node figures through CgroupRoot.
func TestRealCgroupV1(t *testing.T) {
	needRealCgroupV1(t)
	const (
		uid        = "e2e0c0de-1111-4222-8333-944455556666"
		nodeLimit  = 512 << 20
		touchMiB   = 64
		slackBytes = 48 << 20 // the helper's Go runtime, stacks and page tables
	)
	name := fmt.Sprintf("evictd-test-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)

	var cgroupProcs []string
	for _, mount := range []string{realMemoryMount, realPidsMount} {
		if mount == realPidsMount && !isDir(realPidsMount) {
			continue
		}
		dir := mount
		for _, part := range []string{name, "kubepods", "burstable", "pod" + uid} {
			dir = filepath.Join(dir, part)
			mkCgroup(t, dir)
		}
		cgroupProcs = append(cgroupProcs, filepath.Join(dir, "cgroup.procs"))
	}
	writeCgroupFile(t, filepath.Join(realMemoryMount, name, "memory.limit_in_bytes"), strconv.Itoa(nodeLimit))

	// The helper is this test binary; it waits for commands, so it is in the
	// pod's cgroups before it touches any memory.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=touch")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for _, p := range cgroupProcs {
		writeCgroupFile(t, p, strconv.Itoa(cmd.Process.Pid))
	}
	replies := bufio.NewScanner(stdout)
	touch := func(mib int) {
		t.Helper()
		if _, err := fmt.Fprintf(stdin, "touch %d\n", mib); err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() {
			if replies.Scan() {
				done <- replies.Text()
			} else {
				done <- fmt.Sprint("helper closed stdout: ", replies.Err())
			}
		}()
		select {
		case r := <-done:
			if r != "ok" {
				t.Fatalf("helper: %s", r)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("helper did not answer in 30s")
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
	if l.Driver != DriverCgroupfs || l.KubepodsMemoryDir != filepath.Join(realMemoryMount, name, "kubepods") {
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
		if isDir(realPidsMount) {
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
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	ws3, _, _, _, _ := observe(false)
	if ws3 >= ws1 {
		t.Errorf("pod working set %d MiB after the process exited; want below %d MiB", ws3>>20, ws1>>20)
	}
}
