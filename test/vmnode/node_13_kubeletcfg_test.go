// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/test/bench"
)

// kubeletDropIns is the --config-dir of TestNodeKubeletThresholds, in the
// node's OutDir (the kubelet-config volume mounts it for evictd).
const kubeletDropIns = "kubelet.conf.d"

// kubeletUnitDropIn is the kubelet.service drop-in that gives the kubelet
// a case's flags.
const kubeletUnitDropIn = "/etc/systemd/system/kubelet.service.d/50-evictd-test.conf"

// kubeletCase is one configuration of the kubelet: its config file's
// eviction settings, its drop-ins by file name, and its extra flags.
type kubeletCase struct {
	name    string
	file    map[string]any
	dropIns map[string]map[string]any
	flags   []string
}

// The configurations the kubelet restarts with. Every memory threshold
// stays low enough that neither the kubelet nor evictd (placed 200Mi above)
// evicts anything on the 2 GiB guest.
var kubeletCases = []kubeletCase{
	{
		name: "a config file, mergeDefaultEvictionSettings",
		file: map[string]any{"evictionHard": map[string]string{"memory.available": "400Mi"}, "mergeDefaultEvictionSettings": true},
	},
	{
		name: "a config file and two drop-ins",
		file: map[string]any{"evictionHard": map[string]string{"memory.available": "300Mi", "nodefs.available": "8%"}},
		dropIns: map[string]map[string]any{
			"10-eviction.conf": {"evictionHard": map[string]string{"memory.available": "400Mi", "imagefs.available": "12%"}},
			"20-eviction.conf": {"evictionHard": map[string]string{"memory.available": "350Mi"}, "imageGCHighThresholdPercent": 90},
		},
	},
	{
		// The flag replaces the whole map, after the file's
		// mergeDefaultEvictionSettings has filled it: the kubelet has
		// memory.available and nodefs.available only.
		name: "flags over the file and a drop-in",
		file: map[string]any{"evictionHard": map[string]string{"memory.available": "300Mi", "nodefs.available": "8%"}, "mergeDefaultEvictionSettings": true},
		dropIns: map[string]map[string]any{
			"10-eviction.conf": {"evictionHard": map[string]string{"memory.available": "400Mi"}},
		},
		flags: []string{"--eviction-hard=memory.available<250Mi,nodefs.available<9%"},
	},
}

// TestNodeKubeletThresholds holds evictd's reading of the kubelet's
// thresholds against the kubelet's own: evictd is deployed once, its
// kubelet-config volume mounting the node's config directory (outside
// evictd's default mounts, as on a distribution that keeps it in
// /etc/kubernetes); then the kubelet restarts with each kubeletCases
// configuration. Each time, the kubelet's effective configuration, as it
// logs it at start, has the eviction thresholds and image GC thresholds
// evictd read, and evictd read them again by itself, without a restart of
// its own: its log says so, its restart counter and its metrics follow,
// and its memory.available is placed 200Mi above the kubelet's. The
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
		t.Logf("TestNodeKubeletThresholds took %s, %d kubelet restarts included", time.Since(began).Round(time.Second), len(kubeletCases)+1)
	})
	path := filepath.Join(n.OutDir, "kubelet.yaml")
	dropDir := filepath.Join(n.OutDir, kubeletDropIns)
	orig, err := os.ReadFile(path)
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
		if err := os.RemoveAll(dropDir); err != nil {
			t.Errorf("removing the drop-ins: %v", err)
		}
		if err := setKubeletFlags(ctx, n, nil); err != nil {
			t.Errorf("putting the kubelet's flags back: %v", err)
		}
		if err := restartKubelet(t, n, "with its config as before"); err != nil {
			t.Errorf("putting the kubelet's config back: %v", err)
		}
	})
	if err := os.MkdirAll(dropDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// An argument the shipped pods lack, so that the wait below takes the
	// new pod only: the default, given explicitly.
	deployed := time.Now()
	ev := deployEvictdWith(t, ctx, n, func(obj *unstructured.Unstructured) { mountKubeletConfig(t, obj, n.OutDir) },
		"--kubelet-thresholds=place")
	t.Logf("evictd's pod %s Ready in %s", ev.Name, time.Since(deployed).Round(100*time.Millisecond))

	// The kubelet as the node runs it: no evictionHard, its defaults.
	checkKubeletRead(t, n, ev, "the node's own configuration", 0, 1, nil)

	var differed []string
	for i, c := range kubeletCases {
		if err := writeKubeletCase(orig, path, dropDir, c); err != nil {
			t.Fatal(err)
		}
		flags := c.flags
		if c.dropIns != nil {
			flags = append([]string{"--config-dir=" + dropDir}, flags...)
		}
		if err := setKubeletFlags(ctx, n, flags); err != nil {
			t.Fatal(err)
		}
		if err := restartKubelet(t, n, c.name); err != nil {
			t.Fatal(err)
		}
		if !checkKubeletRead(t, n, ev, c.name, i+1, i+2, &c) {
			differed = append(differed, c.name)
		}
	}
	if len(differed) > 0 {
		t.Errorf("evictd read other thresholds than the kubelet has with: %s", strings.Join(differed, "; "))
	}

	// Read again by itself: the same pod, never restarted.
	p, err := n.Cluster.Admin.CoreV1().Pods(ev.Namespace).Get(ctx, ev.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.UID != ev.UID || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("evictd's pod %s: uid %s (was %s), statuses %+v: want the same pod, its container never restarted", p.Name, p.UID, ev.UID, p.Status.ContainerStatuses)
	}
}

// checkKubeletRead waits until evictd has read the kubelet again after
// its restarts-th restart (0: evictd's start) and holds what it read last
// against the kubelet's last logged effective configuration (the
// configs-th). c, when set, is the case the
// kubelet restarted with: evictd's memory.available must then be placed
// 200Mi above the kubelet's. It reports whether evictd's reading equals
// the kubelet's.
func checkKubeletRead(t *testing.T, n *Node, pod *corev1.Pod, what string, restarts, configs int, c *kubeletCase) bool {
	t.Helper()
	ctx := context.Background()
	var kubelet KubeletEviction
	err := n.poll(ctx, 2*time.Minute, "the kubelet's effective configuration "+what, func(context.Context) error {
		log, err := os.ReadFile(filepath.Join(n.OutDir, "kubelet.log"))
		if err != nil {
			return err
		}
		all, err := EffectiveKubeletConfigs(log)
		if err != nil {
			return err
		}
		if len(all) < configs {
			return fmt.Errorf("%d effective configurations in the kubelet's log, want %d", len(all), configs)
		}
		kubelet = all[len(all)-1]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's own defaults stand where its evictionHard is empty.
	want := thresholds.JoinStatements(kubelet.EvictionHard)

	var placed bench.LogLine
	err = n.poll(ctx, 3*time.Minute, "evictd's reading of the kubelet "+what, func(context.Context) error {
		lines := CRILogLines(evictdLog(t, n, pod))
		var all, again []bench.LogLine
		for _, l := range lines {
			switch {
			case l.Msg == "evictd's hard thresholds placed above the kubelet's":
				all = append(all, l)
			case l.Msg == "evictd read the kubelet's thresholds again" && strings.Contains(l.Str("why"), "the kubelet restarted"):
				again = append(again, l)
			}
		}
		if len(again) < restarts || len(all) == 0 {
			return fmt.Errorf("evictd's log has %d lines on the kubelet's thresholds and read them again after %d kubelet restarts, want %d", len(all), len(again), restarts)
		}
		placed = all[len(all)-1]
		if restarts > 0 {
			last := again[len(again)-1]
			t.Logf("evictd: %s; changed %v", last.Str("why"), last.Fields["changed"])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: the kubelet's effective evictionHard %s, image GC %d/%d; evictd read %s from %q, placed %v", what, want,
		deref(kubelet.ImageGCHighThresholdPercent), deref(kubelet.ImageGCLowThresholdPercent),
		placed.Str("kubelet"), placed.Str("kubeletFrom"), placed.Fields["placed"])
	same := true
	if got := placed.Str("kubelet"); got != want {
		t.Errorf("%s: evictd read the kubelet's hard thresholds as %q; the kubelet has %q", what, got, want)
		same = false
	}
	for name, k := range map[string]*int32{"imageGCHighThresholdPercent": kubelet.ImageGCHighThresholdPercent, "imageGCLowThresholdPercent": kubelet.ImageGCLowThresholdPercent} {
		if got, ok := placed.Num(name); k == nil || !ok || int32(got) != *k {
			t.Errorf("%s: evictd read %s as %v; the kubelet has %d", what, name, placed.Fields[name], deref(k))
			same = false
		}
	}

	wantMetrics := map[string]float64{
		`evictd_kubelet_thresholds_known`: 1,
		`evictd_kubelet_restarts_total`:   float64(restarts),
	}
	if mem, ok := kubelet.EvictionHard["memory.available"]; ok && c != nil {
		v, err := thresholds.ParseValue(mem)
		if err != nil || v.Quantity == nil {
			t.Fatalf("the kubelet's memory.available %q: %v", mem, err)
		}
		k := float64(v.Quantity.Value())
		wantMetrics[`evictd_kubelet_threshold_available_bytes{signal="memory.available"}`] = k
		// evictd's default 300Mi, or the kubelet's + 200Mi if higher.
		wantMetrics[`evictd_threshold_available_bytes{kind="hard",signal="memory.available"}`] = max(300<<20, k+200<<20)
	}
	var got map[string]float64
	err = n.poll(ctx, 3*time.Minute, "evictd's metrics "+what, func(ctx context.Context) error {
		res, err := n.Exec(ctx, []string{"curl", "-s", "--max-time", "10", "http://" + pod.Status.PodIP + ":9731/metrics"}, WithTimeout(time.Minute))
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return err
		}
		got = seriesValues(res.Stdout, wantMetrics)
		for k, v := range wantMetrics {
			if g, ok := got[k]; !ok || g != v {
				return fmt.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
	return same
}

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// writeKubeletCase writes c's config file (the node's own with c's
// settings) and drop-ins.
func writeKubeletCase(orig []byte, path, dropDir string, c kubeletCase) error {
	var cfg map[string]any
	if err := json.Unmarshal(orig, &cfg); err != nil {
		return fmt.Errorf("the kubelet's config: %w", err)
	}
	maps.Copy(cfg, c.file)
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dropDir, "*.conf"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	for name, d := range c.dropIns {
		doc := map[string]any{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
		maps.Copy(doc, d)
		data, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dropDir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// setKubeletFlags gives the kubelet's unit the node's flags and flags
// (none: the unit as the node wrote it), for its next start.
func setKubeletFlags(ctx context.Context, n *Node, flags []string) error {
	script := "rm -f " + shellQuote(kubeletUnitDropIn)
	if len(flags) > 0 {
		unit := "[Service]\nExecStart=\nExecStart=" + kubeletExecStart(n.Kubelet, n.OutDir, n.Name, flags...) + "\n"
		script = "mkdir -p " + shellQuote(filepath.Dir(kubeletUnitDropIn)) + " && printf '%s' " + shellQuote(unit) + " >" + shellQuote(kubeletUnitDropIn)
	}
	if _, err := n.Sh(ctx, script+" && systemctl daemon-reload"); err != nil {
		return fmt.Errorf("the kubelet unit's flags %q: %w", flags, err)
	}
	return nil
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

// TestNodeKubeletImpostor: a pod's author runs, in an ordinary pod, a
// process that calls itself the kubelet (the workload image's --exec-as,
// bash's `exec -a kubelet`) with
// --eviction-hard=memory.available<1Ti,nodefs.available<99%,pid.available<99%.
// evictd, deployed with the shipped pod spec (and the kubelet-config mount
// of TestNodeKubeletThresholds), reads the real kubelet's thresholds (its
// defaults here: evictd's memory.available stays 300Mi) from the process in
// kubelet.service, warns once of the impostor naming its PID and its pod
// cgroup, and after a restart of the real kubelet reads the new kubelet
// process, never the impostor: its memory threshold does not move.
func TestNodeKubeletImpostor(t *testing.T) {
	n := sharedNode(t)
	if n.CgroupDriver != Systemd {
		t.Fatalf("the test restarts the kubelet, which needs the systemd node; this one runs %s", n.CgroupDriver)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		evictdOnce.Lock()
		evictdOnce.pod = nil // the next test deploys evictd as it wants it
		evictdOnce.Unlock()
	})
	ns := newNamespace(t, n, "impostor")
	createRunning(t, ctx, n, workloadPod(ns, "impostor", 0, 0, "--exec-as", "kubelet",
		"--eviction-hard=memory.available<1Ti,nodefs.available<99%,pid.available<99%"))
	res, err := n.Sh(ctx, `for p in /proc/[0-9]*; do if [ "$(tr '\0' ' ' < $p/cmdline 2>/dev/null | cut -d' ' -f1)" = kubelet ]; then echo "${p#/proc/} $(grep '^0::' $p/cgroup)"; fi; done`)
	if err != nil {
		t.Fatal(err)
	}
	var impostor string
	for _, line := range strings.Split(strings.TrimSpace(res), "\n") {
		if pid, cg, ok := strings.Cut(line, " "); ok && strings.Contains(cg, "kubepods") {
			impostor = pid
		}
	}
	if impostor == "" {
		t.Fatalf("no process named kubelet in a pod's cgroup on the node: %q", res)
	}
	t.Logf("the node's processes named kubelet: %q; the impostor is pid %s", res, impostor)

	ev := deployEvictdWith(t, ctx, n, func(obj *unstructured.Unstructured) { mountKubeletConfig(t, obj, n.OutDir) },
		"--kubelet-thresholds=place")
	hard := `evictd_threshold_available_bytes{kind="hard",signal="memory.available"}`
	check := func(what string, restarts int) {
		t.Helper()
		var placed, reread bench.LogLine
		err := n.poll(ctx, 3*time.Minute, "evictd's reading of the kubelet "+what, func(context.Context) error {
			var all, again []bench.LogLine
			for _, l := range CRILogLines(evictdLog(t, n, ev)) {
				switch {
				case l.Msg == "evictd's hard thresholds placed above the kubelet's":
					all = append(all, l)
				case l.Msg == "evictd read the kubelet's thresholds again" && strings.Contains(l.Str("why"), "the kubelet restarted"):
					again = append(again, l)
				}
			}
			if len(all) == 0 || len(again) < restarts {
				return fmt.Errorf("%d placements, %d re-reads after a kubelet restart, want %d", len(all), len(again), restarts)
			}
			placed = all[len(all)-1]
			if restarts > 0 {
				reread = again[len(again)-1]
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The re-read's own line says what the loop is handed, which the
		// metric below shows only from the loop's next pass on.
		if restarts > 0 {
			if changed, ths := fmt.Sprint(reread.Fields["changed"]), fmt.Sprint(reread.Fields["thresholds"]); changed != "[]" && changed != "<nil>" || !strings.Contains(ths, "memory.available<300Mi") {
				t.Errorf("%s: evictd's re-read changed %s, thresholds %s: want nothing changed, memory.available<300Mi", what, changed, ths)
			}
		}
		from := placed.Str("kubeletFrom")
		t.Logf("%s: evictd read %q from %q", what, placed.Str("kubelet"), from)
		if strings.Contains(from, "kubelet pid "+impostor+" ") || !strings.Contains(from, "kubelet.service") || strings.Contains(placed.Str("kubelet"), "1Ti") {
			t.Errorf("%s: evictd read %q from %q: want the kubelet in kubelet.service, not the impostor pid %s", what, placed.Str("kubelet"), from, impostor)
		}
		err = n.poll(ctx, 3*time.Minute, "evictd's memory threshold "+what, func(ctx context.Context) error {
			r, err := n.Exec(ctx, []string{"curl", "-s", "--max-time", "10", "http://" + ev.Status.PodIP + ":9731/metrics"}, WithTimeout(time.Minute))
			if err == nil {
				err = r.Err()
			}
			if err != nil {
				return err
			}
			if got := seriesValues(r.Stdout, map[string]float64{hard: 0})[hard]; got != 300<<20 {
				return fmt.Errorf("%s = %v, want 300Mi (the kubelet's defaults, 100Mi + 200Mi)", hard, got)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	check("at evictd's start", 0)
	if err := restartKubelet(t, n, "beside the impostor"); err != nil {
		t.Fatal(err)
	}
	check("after the kubelet's restart", 1)

	var warned []bench.LogLine
	for _, l := range CRILogLines(evictdLog(t, n, ev)) {
		if l.Msg == "a process named kubelet is not taken for the kubelet: its thresholds are not read" && fmt.Sprint(l.Fields["pid"]) == impostor {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0].Str("cgroup"), "kubepods") {
		t.Errorf("%d warnings of the impostor pid %s, want 1 naming its pod cgroup: %v", len(warned), impostor, warned)
	}
}
