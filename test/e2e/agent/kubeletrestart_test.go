// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestKubeletRestartReadAgain: a running evictd reads the kubelet's
// thresholds again when the kubelet process changes, without a restart of
// its own. The "kubelet" is a real process whose command line is a
// kubelet's (as in TestKubeletThresholdBelowWarns), its config under the
// node's host root, whose /proc shows it alone of the host's processes. Started with memory.available<750Mi, evictd places its
// default at 950Mi; the kubelet replaced by one that reads 400Mi, evictd
// logs the re-read and what moved, counts the restart, and its loop's hard
// threshold is 600Mi; replaced by one whose config is gone, evictd keeps
// 600Mi and says on /readyz?verbose (still 200: the reason missing, no
// mount advised, for the directory is there) and in
// evictd_kubelet_thresholds_known that the kubelet's are unknown; the
// config back, without a kubelet restart, the read tried again after its
// back-off finds 500Mi, places 700Mi, and the warning goes.
func TestKubeletRestartReadAgain(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "kubeletrestart", MemoryBytes: kubeletNodeMemory})
	cfg := filepath.Join(node.HostRoot, "var", "lib", "kubelet", "config.yaml")
	writeConfig := func(memory string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: "+memory+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var kubelet *exec.Cmd
	startKubelet := func() {
		t.Helper()
		if kubelet != nil {
			_ = kubelet.Process.Kill()
			_ = kubelet.Wait()
		}
		// sh runs under the kubelet's name; ";:" keeps it from exec'ing
		// sleep, which would change the command line.
		kubelet = &exec.Cmd{Path: "/bin/sh", Args: []string{"kubelet", "-c", "sleep 600; :", "sh", "--config=/var/lib/kubelet/config.yaml"}}
		if err := kubelet.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if kubelet != nil {
			_ = kubelet.Process.Kill()
			_ = kubelet.Wait()
		}
	})
	root, addPID := ownProcHostRoot(t, node)
	writeConfig("750Mi")
	startKubelet()
	first := kubelet.Process.Pid
	addPID(first)

	e := startEvictdWith(t, c, node, evictdSetup{hostRoot: root}, "--housekeeping-interval=1s")
	e.waitLog(30*time.Second, "evictd's hard thresholds placed above the kubelet's", func(l logEntry) bool {
		return strings.Contains(fmt.Sprint(l.Fields["placed"]), "memory.available<950Mi")
	})
	hard := map[string]string{"kind": "hard", "signal": "memory.available"}
	mustMetric(t, e, "evictd_threshold_available_bytes", hard, 950<<20)

	writeConfig("400Mi")
	startKubelet()
	addPID(kubelet.Process.Pid)
	again := e.waitLog(30*time.Second, "evictd read the kubelet's thresholds again", func(l logEntry) bool {
		return strings.Contains(l.Str("why"), fmt.Sprintf("kubelet pid %d", kubelet.Process.Pid))
	})
	if why, changed := again.Str("why"), fmt.Sprint(again.Fields["changed"]); !strings.Contains(why, fmt.Sprintf("was kubelet pid %d", first)) ||
		!strings.Contains(changed, "memory.available<950Mi -> memory.available<600Mi") {
		t.Errorf("the re-read's line: why %q, changed %s", why, changed)
	}
	mustMetric(t, e, "evictd_threshold_available_bytes", hard, 600<<20)
	mustMetric(t, e, "evictd_kubelet_threshold_available_bytes", map[string]string{"signal": "memory.available"}, 400<<20)
	mustMetric(t, e, "evictd_kubelet_restarts_total", nil, 1)

	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	startKubelet()
	addPID(kubelet.Process.Pid)
	mustMetric(t, e, "evictd_kubelet_restarts_total", nil, 2)
	mustMetric(t, e, "evictd_kubelet_thresholds_known", nil, 0)
	code, body := httpGetBody(t, "http://"+e.p.Addr()+"/readyz?verbose")
	if code != http.StatusOK || !strings.Contains(body, "kubelet-thresholds ok: the kubelet's thresholds are unknown since its restart, evictd keeps those placed above its last reading (missing)") {
		t.Errorf("/readyz?verbose: %d\n%s\nwant 200 with the kubelet-thresholds warning, reason missing", code, body)
	}
	// The kubelet's directory is in the host root: the config is gone
	// from it, and no mount is the fix.
	if strings.Contains(body, "mount /") || !strings.Contains(body, "nothing to mount") {
		t.Errorf("/readyz?verbose advises a mount of a directory that is there:\n%s", body)
	}
	mustMetric(t, e, "evictd_kubelet_thresholds_unknown", map[string]string{"reason": "missing"}, 1)
	if got := e.scrape().Value(t, "evictd_threshold_available_bytes", hard); got != 600<<20 {
		t.Errorf("memory.available after a failed read: %v, want 600Mi kept", got)
	}

	// The config back, the kubelet not restarted: evictd tries the read
	// again after its back-off (15 to 30 s the first time), and the
	// kubelet's thresholds are known again, the warning gone.
	writeConfig("500Mi")
	retried := e.waitLog(2*time.Minute, "evictd read the kubelet's thresholds again", func(l logEntry) bool {
		return strings.HasPrefix(l.Str("why"), "try ") && l.Fields["known"] == true
	})
	if changed := fmt.Sprint(retried.Fields["changed"]); !strings.Contains(changed, "memory.available<600Mi -> memory.available<700Mi") {
		t.Errorf("the try's line: why %q, changed %s", retried.Str("why"), changed)
	}
	mustMetric(t, e, "evictd_kubelet_thresholds_known", nil, 1)
	mustMetric(t, e, "evictd_threshold_available_bytes", hard, 700<<20)
	mustMetric(t, e, "evictd_kubelet_restarts_total", nil, 2)
	if got, err := e.scrape().Lookup("evictd_kubelet_thresholds_unknown", nil); err == nil {
		t.Errorf("evictd_kubelet_thresholds_unknown = %v once known, want no series", got)
	}
	code, body = httpGetBody(t, "http://"+e.p.Addr()+"/readyz?verbose")
	if code != http.StatusOK || strings.Contains(body, "thresholds are unknown") {
		t.Errorf("/readyz?verbose once known: %d\n%s\nwant no kubelet-thresholds warning", code, body)
	}
}

// mustMetric waits up to 30 s for evictd's metric name{labels} to be want.
func mustMetric(t *testing.T, e *evictd, name string, labels map[string]string, want float64) {
	t.Helper()
	if err := waitMetric(e, 30*time.Second, name, labels, want); err != nil {
		t.Fatalf("%v; log tail:\n%s", err, e.tail(30))
	}
}

// ownProcHostRoot gives node's host root a /proc of its own, in place of
// its link to the host's: the real /proc's files, and of its processes
// only those addPID adds. The host's /proc is every test's: a kubelet
// another test starts meanwhile, with a lower PID, would otherwise be the
// one this evictd reads and watches. The rest of the host root stays as it
// is (evictd resolves the kubelet's config path inside it, as on a host).
func ownProcHostRoot(t *testing.T, node *nodesim.Node) (root string, addPID func(pid int)) {
	t.Helper()
	root = node.HostRoot
	proc := filepath.Join(root, "proc")
	if err := os.Remove(proc); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("/proc", e.Name()), filepath.Join(proc, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return root, func(pid int) {
		t.Helper()
		if err := os.Symlink(filepath.Join("/proc", strconv.Itoa(pid)), filepath.Join(proc, strconv.Itoa(pid))); err != nil {
			t.Fatal(err)
		}
	}
}
