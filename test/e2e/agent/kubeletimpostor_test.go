// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// kubeletNodeMemory is the memory of the simulated nodes whose kubelet reads
// memory.available<750Mi: placement adopts no kubelet threshold over half
// the node's memory (kubeletcfg.MaxKubeletShare), which nodeMemory's 1Gi
// would make it.
const kubeletNodeMemory = 2 << 30

// TestKubeletImpostorInAPod: a pod's author starts, inside the pod's real
// cgroup on the node, processes that call themselves the kubelet (`exec -a
// kubelet`): the first, with the lowest PID, with
// --eviction-hard=memory.available<1Ti,nodefs.available<99%,pid.available<99%;
// the second with a --config that is a FIFO under the host root (a read of
// it would block evictd's start). The node's real kubelet (a process outside
// the pods' tree, as in TestKubeletRestartReadAgain) reads
// memory.available<750Mi. evictd places its default memory threshold at
// 950Mi above the real kubelet's, warns of each impostor once (naming its
// PID and its pod cgroup), and, when the real kubelet restarts with 400Mi,
// follows the new kubelet to 600Mi, never the impostors.
func TestKubeletImpostorInAPod(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "kubeletimpostor", MemoryBytes: kubeletNodeMemory})
	ns := c.Namespace(t, "impostor")
	pod := createRunning(t, c.Admin, podSpec{name: "tenant", holdMiB: 16}.pod(ns, node.Name))["tenant"]
	podCgroup := node.PodMemoryCgroupDir(pod)

	kubeletDir := filepath.Join(node.HostRoot, "var", "lib", "kubelet")
	cfg := filepath.Join(kubeletDir, "config.yaml")
	writeConfig := func(memory string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: "+memory+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(kubeletDir, "fake.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	// sh runs under the kubelet's name; ";:" keeps it from exec'ing sleep,
	// which would change the command line.
	start := func(args ...string) *exec.Cmd {
		t.Helper()
		p := &exec.Cmd{Path: "/bin/sh", Args: append([]string{"kubelet", "-c", "sleep 600; :", "sh"}, args...)}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
		return p
	}
	inPod := func(p *exec.Cmd) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(podCgroup, "cgroup.procs"), []byte(strconv.Itoa(p.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Process.Pid))
		if err != nil || !strings.Contains(string(data), "/kubepods/") {
			t.Fatalf("impostor pid %d is not in the pod's cgroup: %q, %v", p.Process.Pid, data, err)
		}
	}
	huge := start("--eviction-hard=memory.available<1Ti,nodefs.available<99%,pid.available<99%")
	inPod(huge)
	fifo := start("--config=/var/lib/kubelet/fake.yaml")
	inPod(fifo)
	writeConfig("750Mi")
	kubelet := start("--config=/var/lib/kubelet/config.yaml")
	root, addPID := ownProcHostRoot(t, node)
	for _, p := range procs {
		addPID(p.Process.Pid)
	}

	e := startEvictdWith(t, c, node, evictdSetup{hostRoot: root}, "--housekeeping-interval=1s")
	line := e.waitLog(30*time.Second, "evictd's hard thresholds placed above the kubelet's", nil)
	if from := line.Str("kubeletFrom"); !strings.Contains(from, fmt.Sprintf("kubelet pid %d", kubelet.Process.Pid)) {
		t.Errorf("kubeletFrom %q: want the real kubelet, pid %d (impostors %d, %d)", from, kubelet.Process.Pid, huge.Process.Pid, fifo.Process.Pid)
	}
	hard := map[string]string{"kind": "hard", "signal": "memory.available"}
	mustMetric(t, e, "evictd_threshold_available_bytes", hard, 950<<20)
	mustMetric(t, e, "evictd_kubelet_threshold_available_bytes", map[string]string{"signal": "memory.available"}, 750<<20)

	// The real kubelet restarts: evictd follows it, not an impostor.
	_ = kubelet.Process.Kill()
	_ = kubelet.Wait()
	writeConfig("400Mi")
	kubelet = start("--config=/var/lib/kubelet/config.yaml")
	addPID(kubelet.Process.Pid)
	again := e.waitLog(60*time.Second, "evictd read the kubelet's thresholds again", func(l logEntry) bool {
		return strings.Contains(l.Str("why"), fmt.Sprintf("kubelet pid %d", kubelet.Process.Pid))
	})
	if changed := fmt.Sprint(again.Fields["changed"]); !strings.Contains(changed, "memory.available<950Mi -> memory.available<600Mi") {
		t.Errorf("the re-read's line: changed %s", changed)
	}
	mustMetric(t, e, "evictd_threshold_available_bytes", hard, 600<<20)

	for _, p := range []*exec.Cmd{huge, fifo} {
		w := e.warnings("a process named kubelet is not taken for the kubelet", fmt.Sprintf(`"pid":%d`, p.Process.Pid))
		if len(w) != 1 {
			t.Errorf("%d warnings of impostor pid %d, want 1 (once, over the start and the restart):\n%s", len(w), p.Process.Pid, e.tail(30))
			continue
		}
		if cg := w[0].Str("cgroup"); !strings.Contains(cg, nodesim.PodCgroup(pod)) {
			t.Errorf("the warning of pid %d names cgroup %q, want the pod's %s", p.Process.Pid, cg, nodesim.PodCgroup(pod))
		}
	}
}
