// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestKubeletThresholdBelowWarns: a real evictd finds a "kubelet" process
// in the host's /proc (a real process whose command line is a kubelet's:
// argv[0] kubelet, --config naming a file under the node's host root, which
// sets memory.available<750Mi and imagefs.available<30%), moves its default
// imagefs.available to the kubelet's 30%, not 5 points above it (its
// eviction manager deletes unused images there: evictd's disk episode waits
// for that turn of the collection), keeps the memory.available<500Mi given on its
// command line, and warns that it sits below the kubelet's: in its log, as a
// Warning Event on its Node in the real API server, in
// evictd_threshold_below_kubelet, and as a detail on /readyz?verbose, which
// stays 200.
func TestKubeletThresholdBelowWarns(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "kubeletcfg", MemoryBytes: kubeletNodeMemory})
	cfg := filepath.Join(node.HostRoot, "var", "lib", "kubelet", "config.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
mergeDefaultEvictionSettings: true
evictionHard:
  memory.available: 750Mi
  imagefs.available: "30%"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// sh, not sleep, runs under the kubelet's name: it takes and ignores
	// the arguments after its script. The script's ";:" keeps sh from
	// replacing itself with sleep, which would change the command line.
	kubelet := &exec.Cmd{Path: "/bin/sh", Args: []string{"kubelet", "-c", "sleep 600; :", "sh",
		"--config=/var/lib/kubelet/config.yaml", "--v=2"}}
	if err := kubelet.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kubelet.Process.Kill(); _ = kubelet.Wait() })
	// Its own kubelet only: another test's, with a lower PID, would be read.
	root, addPID := ownProcHostRoot(t, node)
	addPID(kubelet.Process.Pid)

	e := startEvictdWith(t, c, node, evictdSetup{hostRoot: root}, "--eviction-hard=memory.available<500Mi")

	line := e.waitLog(30*time.Second, "evictd's hard thresholds placed above the kubelet's", nil)
	placed := fmt.Sprint(line.Fields["placed"])
	for _, want := range []string{"imagefs.available<30% (bounded by the kubelet's image collection: from 85% used, and at its own threshold, kubelet 30%; default 15%)",
		"memory.available<500Mi (set by the operator, AT OR BELOW kubelet 750Mi)", "nodefs.available<15% (kubelet 10%)"} {
		if !strings.Contains(placed, want) {
			t.Errorf("placed %s: want %q", placed, want)
		}
	}
	if from := line.Str("kubeletFrom"); !strings.Contains(from, fmt.Sprintf("kubelet pid %d", kubelet.Process.Pid)) {
		t.Errorf("kubeletFrom %q: want the kubelet process, pid %d", from, kubelet.Process.Pid)
	}
	if w := e.warnings("at or below the kubelet", "memory.available"); len(w) != 1 {
		t.Errorf("%d warnings about memory.available at or below the kubelet's, want 1:\n%s", len(w), e.tail(20))
	}

	code, body := httpGetBody(t, "http://"+e.p.Addr()+"/readyz?verbose")
	if code != http.StatusOK || !strings.Contains(body, "kubelet-thresholds ok") || !strings.Contains(body, "memory.available<500Mi (kubelet 750Mi)") {
		t.Errorf("/readyz?verbose: %d\n%s\nwant 200 with the kubelet-thresholds detail", code, body)
	}

	m := e.scrape()
	for _, s := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"evictd_kubelet_thresholds_known", nil, 1},
		{"evictd_threshold_below_kubelet", map[string]string{"signal": "memory.available"}, 1},
		{"evictd_threshold_below_kubelet", map[string]string{"signal": "imagefs.available"}, 0},
		{"evictd_kubelet_threshold_available_bytes", map[string]string{"signal": "memory.available"}, 750 << 20},
	} {
		if got := m.Value(t, s.name, s.labels); got != s.want {
			t.Errorf("%s%v = %v, want %v", s.name, s.labels, got, s.want)
		}
	}

	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := c.Admin.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Reason == "EvictdThresholdBelowKubelet" && ev.Regarding.Kind == "Node" && ev.Regarding.Name == node.Name &&
				ev.Type == "Warning" && strings.Contains(ev.Note, "memory.available<500Mi (kubelet 750Mi)") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no EvictdThresholdBelowKubelet Event on Node %s: %v", node.Name, err)
	}
}
