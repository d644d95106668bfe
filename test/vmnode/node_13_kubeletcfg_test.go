// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kubeletHardMemory is the kubelet's memory.available threshold in
// TestNodeKubeletThresholds: above evictd's 300Mi default, as a
// distribution's 750Mi is, but low enough that neither the kubelet nor
// evictd (placed at 600Mi) evicts anything on the 2 GiB guest.
const kubeletHardMemory = 400 << 20

// TestNodeKubeletThresholds: the kubelet runs with memory.available<400Mi
// (mergeDefaultEvictionSettings keeping its other defaults) from the config
// file its --config names, outside evictd's default mounts, as on a
// distribution that keeps it in /etc/kubernetes. evictd's pod, with that
// directory mounted as the manifest's commented kubelet-config volume
// shows, finds the kubelet process under /host/proc, reads the file, and
// places its own default memory.available 200Mi above: 600Mi, which its
// start line, the thresholds it starts with and its metrics all say. The
// kubelet's config is put back (and the kubelet restarted) at the end, and
// the next test deploys evictd afresh.
func TestNodeKubeletThresholds(t *testing.T) {
	n := sharedNode(t)
	if n.CgroupDriver != Systemd {
		t.Fatalf("the test restarts the kubelet, which needs the systemd node; this one runs %s", n.CgroupDriver)
	}
	ctx := context.Background()
	began := time.Now()
	t.Cleanup(func() {
		t.Logf("TestNodeKubeletThresholds took %s, two kubelet restarts and one evictd rollout included", time.Since(began).Round(time.Second))
	})
	path := filepath.Join(n.OutDir, "kubelet.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := withEvictionHard(orig, map[string]string{"memory.available": "400Mi"})
	if err != nil {
		t.Fatal(err)
	}
	// The way back first, so that it runs however far the way there got.
	t.Cleanup(func() {
		evictdOnce.Lock()
		evictdOnce.pod = nil // the next test deploys evictd as it wants it
		evictdOnce.Unlock()
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Errorf("putting the kubelet's config back: %v", err)
			return
		}
		if err := restartKubelet(t, n, "with its config as before"); err != nil {
			t.Errorf("putting the kubelet's config back: %v", err)
		}
	})
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := restartKubelet(t, n, "with memory.available<400Mi"); err != nil {
		t.Fatal(err)
	}
	if avail, err := nodeAvailable(ctx, n); err == nil {
		t.Logf("memory.available before evictd's start: %d MiB", avail>>20)
	}

	// An argument the shipped pods lack, so that the wait below takes the
	// new pod only: the default, given explicitly.
	deployed := time.Now()
	ev := deployEvictdWith(t, ctx, n, func(obj *unstructured.Unstructured) { mountKubeletConfig(t, obj, n.OutDir) },
		"--kubelet-thresholds=place")
	t.Logf("evictd's pod %s Ready in %s", ev.Name, time.Since(deployed).Round(100*time.Millisecond))

	lines := CRILogLines(evictdLog(t, n, ev))
	placedLine, ok := FirstLogAfter(lines, time.Time{}, "evictd's hard thresholds placed above the kubelet's", nil)
	if !ok {
		t.Fatalf("no start line on the kubelet's thresholds in evictd's log:\n%s", evictdLog(t, n, ev))
	}
	t.Logf("evictd: kubelet from %q: %s; placed %v", placedLine.Str("kubeletFrom"), placedLine.Str("kubelet"), placedLine.Fields["placed"])
	if from := placedLine.Str("kubeletFrom"); !strings.Contains(from, "kubelet pid ") || !strings.Contains(from, "config "+path) {
		t.Errorf("kubeletFrom %q: want the kubelet process and its --config %s", from, path)
	}
	if k := placedLine.Str("kubelet"); !strings.Contains(k, "memory.available<400Mi") || !strings.Contains(k, "nodefs.available<10%") {
		t.Errorf("the kubelet's thresholds as read: %q; want memory.available<400Mi and, merged, the kubelet's default nodefs.available<10%%", k)
	}
	if p := fmt.Sprint(placedLine.Fields["placed"]); !strings.Contains(p, "memory.available<600Mi (placed: kubelet 400Mi + margin; default 300Mi)") {
		t.Errorf("placed %s: want memory.available<600Mi placed above the kubelet's 400Mi", p)
	}
	if starting, ok := FirstLogAfter(lines, time.Time{}, "evictd starting", nil); !ok || !strings.Contains(fmt.Sprint(starting.Fields["thresholds"]), "memory.available<600Mi") {
		t.Errorf("evictd starting with %v; want memory.available<600Mi", starting.Fields["thresholds"])
	}

	want := map[string]float64{
		`evictd_kubelet_thresholds_known`:                                                    1,
		`evictd_kubelet_threshold_available_bytes{signal="memory.available"}`:                kubeletHardMemory,
		`evictd_threshold_below_kubelet{signal="memory.available"}`:                          0,
		`evictd_threshold_available_bytes{kind="hard",signal="memory.available"}`:            kubeletHardMemory + 200<<20,
		`evictd_threshold_available_bytes{kind="hard",signal="allocatableMemory.available"}`: kubeletHardMemory + 200<<20,
	}
	var got map[string]float64
	// evictd's own threshold series appear with its first observation.
	err = n.poll(ctx, time.Minute, "evictd's threshold metrics", func(ctx context.Context) error {
		res, err := n.Exec(ctx, []string{"curl", "-s", "--max-time", "10", "http://" + ev.Status.PodIP + ":9731/metrics"}, WithTimeout(time.Minute))
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return err
		}
		got = seriesValues(res.Stdout, want)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return fmt.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("evictd's metrics: %v", got)
}

// withEvictionHard sets evictionHard in a kubelet config (JSON, as
// kubeletConfig writes it) and mergeDefaultEvictionSettings, so that the
// kubelet keeps its other default thresholds.
func withEvictionHard(data []byte, hard map[string]string) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("the kubelet's config: %w", err)
	}
	cfg["evictionHard"] = hard
	cfg["mergeDefaultEvictionSettings"] = true
	return json.MarshalIndent(cfg, "", "  ")
}

// mountKubeletConfig adds what the manifest carries commented out as the
// kubelet-config volume: the kubelet's config directory, read-only, at its
// host path under /host.
func mountKubeletConfig(t *testing.T, obj *unstructured.Unstructured, dir string) {
	mountHostDir(t, obj, "kubelet-config", dir, true)
}

// seriesValues picks the series named in want (name{labels} as the text
// exposition writes them, labels sorted) out of a /metrics page.
func seriesValues(page string, want map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(page, "\n") {
		key, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if _, w := want[key]; !w {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(val, &v); err == nil {
			out[key] = v
		}
	}
	return out
}
