// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/pressure"
)

func td(name string) string { return filepath.Join("testdata", "rank", name) }

func runRank(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := rankCmd(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

type rankJSON struct {
	Signal     string `json:"signal"`
	Candidates []struct {
		Namespace         string `json:"namespace"`
		Name              string `json:"name"`
		UID               string `json:"uid"`
		Eligible          bool   `json:"eligible"`
		SkipReason        string `json:"skipReason"`
		NotTaken          string `json:"notTaken"`
		Priority          int32  `json:"priority"`
		EffectivePriority int32  `json:"effectivePriority"`
		ExceedsRequest    bool   `json:"exceedsRequest"`
		Usage             int64  `json:"usage"`
		Request           int64  `json:"request"`
	} `json:"candidates"`
}

func TestRankCommandJSON(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// pods is the PodList fixture, pods.json when empty.
		pods string
		// want is the order of namespace/name, eligible ones first.
		want       []string
		wantSignal string
		eligible   int
		// requests, when set, are candidates' requests by namespace/name.
		requests map[string]int64
	}{
		{
			// Over their requests by 772Mi, 344Mi, 100Mi and 44Mi at
			// priority 0 (payments-0's opt-out is not honoured: no
			// namespace may opt out by default); then db-0 under its
			// request; then cart-5 without stats. The ineligible ones
			// follow in the order they would have had.
			name:       "memory, default config",
			args:       []string{"-o", "json"},
			wantSignal: "memory.available",
			want: []string{
				"shop/payments-0", "shop/web-1", "batch/report-7f9", "shop/web-2", "shop/db-0", "shop/cart-5",
				"monitoring/node-exporter-xyz", "kube-system/etcd-node-1", "shop/migrate-1",
			},
			eligible: 6,
		},
		{
			// The batch group's offset puts the report first; DaemonSet
			// pods become eligible (50Mi over, so before web-2's 44Mi);
			// shop may opt out, so payments-0 is spared.
			name:       "memory, with a config",
			args:       []string{"-o", "json", "--config", td("config.yaml")},
			wantSignal: "memory.available",
			want: []string{
				"batch/report-7f9", "shop/web-1", "monitoring/node-exporter-xyz", "shop/web-2", "shop/db-0", "shop/cart-5",
				"shop/payments-0", "kube-system/etcd-node-1", "shop/migrate-1",
			},
			eligible: 6,
		},
		{
			// Priority, then more processes first.
			name:       "pids",
			args:       []string{"-o", "json", "--signal", "pid.available"},
			wantSignal: "pid.available",
			want: []string{
				"shop/payments-0", "shop/web-1", "shop/web-2", "batch/report-7f9", "shop/db-0", "shop/cart-5",
				"monitoring/node-exporter-xyz", "kube-system/etcd-node-1", "shop/migrate-1",
			},
			eligible: 6,
		},
		{
			// The report writes 3Gi with no ephemeral-storage request; the
			// web pods stay under theirs, web-1 closer to it.
			name:       "nodefs bytes",
			args:       []string{"-o", "json", "--signal", "nodefs.available"},
			wantSignal: "nodefs.available",
			want: []string{
				"batch/report-7f9", "shop/payments-0", "shop/web-1", "shop/web-2", "shop/db-0", "shop/cart-5",
				"monitoring/node-exporter-xyz", "kube-system/etcd-node-1", "shop/migrate-1",
			},
			eligible: 6,
		},
		{
			// web-1's spec was raised to 1Gi and the resize deferred: the
			// kubelet still counts the 256Mi its status shows allocated, so
			// web-1 is 344Mi over and first, as with pods.json. By its spec
			// it would be under its request, after web-2.
			name:       "memory, a deferred resize ranks by the allocated request",
			pods:       "pods-resize.json",
			args:       []string{"-o", "json"},
			wantSignal: "memory.available",
			want: []string{
				"shop/payments-0", "shop/web-1", "batch/report-7f9", "shop/web-2", "shop/db-0", "shop/cart-5",
				"monitoring/node-exporter-xyz", "kube-system/etcd-node-1", "shop/migrate-1",
			},
			eligible: 6,
			requests: map[string]int64{"shop/web-1": 256 << 20, "shop/web-2": 256 << 20},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := tc.pods
			if pods == "" {
				pods = "pods.json"
			}
			args := append([]string{"--summary", td("summary.json"), "--pods", td(pods)}, tc.args...)
			code, out, errOut := runRank(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			var res rankJSON
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if res.Signal != tc.wantSignal {
				t.Errorf("signal = %q, want %q", res.Signal, tc.wantSignal)
			}
			var got []string
			eligible := 0
			for _, c := range res.Candidates {
				got = append(got, c.Namespace+"/"+c.Name)
				if c.Eligible {
					eligible++
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("order = %v\nwant    %v", got, tc.want)
			}
			if eligible != tc.eligible {
				t.Errorf("%d eligible, want %d", eligible, tc.eligible)
			}
			for _, c := range res.Candidates {
				if want, ok := tc.requests[c.Namespace+"/"+c.Name]; ok && c.Request != want {
					t.Errorf("%s/%s request = %d, want %d", c.Namespace, c.Name, c.Request, want)
				}
			}
		})
	}
}

func TestRankCommandFields(t *testing.T) {
	code, out, errOut := runRank(t, "--summary", td("summary.json"), "--pods", td("pods.json"), "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res rankJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, c := range res.Candidates {
		byName[c.Name] = i
	}
	web := res.Candidates[byName["web-1"]]
	if web.UID != "uid-web-1" || web.Usage != 600<<20 || web.Request != 256<<20 || !web.ExceedsRequest || web.SkipReason != "" {
		t.Errorf("web-1 = %+v", web)
	}
	etcd := res.Candidates[byName["etcd-node-1"]]
	if etcd.Eligible || etcd.Priority != 2000001000 ||
		etcd.SkipReason != "mirror: mirror of a static pod, controlled by Node node-1; critical: priority 2000001000" {
		t.Errorf("etcd = %+v", etcd)
	}
	if c := res.Candidates[byName["payments-0"]]; !c.Eligible ||
		c.NotTaken != "annotation evictd.io/evict=false not honoured: namespace shop may not opt out (optOut in the configuration)" {
		t.Errorf("payments-0, whose namespace may not opt out = %+v", c)
	}
	if c := res.Candidates[byName["cart-5"]]; !c.Eligible || c.Usage != 0 || c.ExceedsRequest {
		t.Errorf("cart-5 (no stats) = %+v", c)
	}
}

func TestRankCommandTable(t *testing.T) {
	code, out, errOut := runRank(t, "--summary", td("summary.json"), "--pods", td("pods.json"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 10 {
		t.Fatalf("got %d lines, want a header and 9 pods:\n%s", len(lines), out)
	}
	for _, col := range []string{"RANK", "POD", "PRIORITY", "EFFECTIVE", "USAGE", "REQUEST", "EXCEEDS", "SKIP REASON"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q lacks %s", lines[0], col)
		}
	}
	wantRows := map[int][]string{
		1: {"1", "shop/payments-0", "0", "0", "900Mi", "128Mi", "yes"},
		6: {"6", "shop/cart-5", "0", "0", "-", "128Mi", "no"},
		8: {"-", "kube-system/etcd-node-1", "2000001000", "2000001000", "400Mi", "100Mi", "yes", "mirror:"},
	}
	for i, want := range wantRows {
		if got := strings.Fields(lines[i]); len(got) < len(want) || !reflect.DeepEqual(got[:len(want)], want) {
			t.Errorf("line %d = %q, want it to start with %v", i, lines[i], want)
		}
	}
}

func TestRankCommandNamespaceSelector(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	ns := filepath.Join(dir, "namespaces.json")
	writeFile(t, cfg, "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\npriorityGroups:\n- name: shop\n  namespaceSelector:\n    matchLabels: {team: shop}\n  offset: 5000\n  fence: true\n")
	writeFile(t, ns, `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","labels":{"team":"shop"}}}]}`)

	base := []string{"--summary", td("summary.json"), "--pods", td("pods.json"), "-o", "json", "--config", cfg}
	code, out, errOut := runRank(t, append(base, "--namespaces", ns)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res rankJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// The fenced shop group looks like priority 5000 from outside, so the
	// batch report goes first.
	if first := res.Candidates[0]; first.Name != "report-7f9" {
		t.Errorf("first = %s, want report-7f9", first.Name)
	}
	for _, c := range res.Candidates {
		if c.Namespace == "shop" && c.EffectivePriority != 5000 {
			t.Errorf("%s effective priority %d, want 5000", c.Name, c.EffectivePriority)
		}
	}

	// Without --namespaces the selector has nothing to match: a warning.
	code, _, errOut = runRank(t, base...)
	if code != exitOK || !strings.Contains(errOut, "warning: namespaceSelectors (priority groups, optOut) match nothing") {
		t.Errorf("exit %d, stderr %q; want 0 and a warning", code, errOut)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRankCommandErrors(t *testing.T) {
	dir := t.TempDir()
	single := filepath.Join(dir, "pod.json")
	writeFile(t, single, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}`)
	s, p := td("summary.json"), td("pods.json")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no summary", args: []string{"--pods", p}, wantErr: "--summary FILE is required"},
		{name: "no pods", args: []string{"--summary", s}, wantErr: "--pods FILE is required"},
		{name: "stray argument", args: []string{"--summary", s, "--pods", p, "extra"}, wantErr: `unexpected argument "extra"`},
		{name: "unknown flag", args: []string{"--sumary", s}, wantErr: `unknown flag: --sumary (see "evictd rank --help")`},
		{name: "single-dash long flag", args: []string{"-summary", s}, wantErr: "unknown shorthand flag: 's' in -summary"},
		{name: "bad output", args: []string{"--summary", s, "--pods", p, "-o", "yaml"}, wantErr: `invalid --output (-o) "yaml": want json or table`},
		{name: "bad signal", args: []string{"--summary", s, "--pods", p, "--signal", "memory"}, wantErr: `--signal: unknown eviction signal "memory"`},
		{name: "missing summary file", args: []string{"--summary", filepath.Join(dir, "nope.json"), "--pods", p}, wantErr: "nope.json: no such file"},
		{name: "truncated summary", args: []string{"--summary", td("truncated.json"), "--pods", p}, wantErr: "truncated.json: not valid JSON"},
		{name: "pods file as summary", args: []string{"--summary", p, "--pods", p}, wantErr: `no "node" object`},
		{name: "summary file as pods", args: []string{"--summary", s, "--pods", s}, wantErr: `no "items"; want a PodList`},
		{name: "a single pod", args: []string{"--summary", s, "--pods", single}, wantErr: `kind "Pod"; want a PodList`},
		{name: "bad config", args: []string{"--summary", s, "--pods", p, "--config", td("bad-config.yaml")}, wantErr: `namespace "batch" is already in group "batch"`},
		{name: "bad namespaces file", args: []string{"--summary", s, "--pods", p, "--namespaces", td("truncated.json")}, wantErr: "--namespaces"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runRank(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.wantErr)
			}
			if strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr is not one line: %q", errOut)
			}
		})
	}
}

func TestRankCommandHelp(t *testing.T) {
	code, out, errOut := runRank(t, "--help")
	if code != exitOK || errOut != "" || !strings.Contains(out, "kubectl get --raw /api/v1/nodes/NODE/proxy/stats/summary") {
		t.Errorf("exit %d, help %q, stderr %q; want 0 and the help on stdout", code, out, errOut)
	}
}

// diskObservation is evictd's observation of a node whose image store, with
// the writable layers, has a filesystem of its own, though one the size of
// nodefs: the Summary alone cannot tell the two apart. Pod a writes 3Gi to
// its writable layer, b 5Gi to its volumes; both log 10Mi.
func diskObservation() *pressure.Observation {
	const mi, gi = uint64(1 << 20), uint64(1 << 30)
	fs := &statsapi.FsStats{CapacityBytes: ptrTo(100 * gi), Inodes: ptrTo(uint64(1 << 20))}
	pod := func(name string, layer, volumes uint64) (statsapi.PodStats, pressure.PodExtras) {
		uid := "uid-" + name
		total := layer + 10*mi + volumes
		return statsapi.PodStats{
				PodRef:           statsapi.PodReference{Name: name, Namespace: "disk", UID: uid},
				Containers:       []statsapi.ContainerStats{},
				EphemeralStorage: &statsapi.FsStats{UsedBytes: ptrTo(total), InodesUsed: ptrTo(uint64(100))},
			}, pressure.PodExtras{UID: uid, QoS: v1.PodQOSBestEffort, Cgroup: "/kubepods/besteffort/pod" + uid,
				EphemeralParts: &pressure.EphemeralParts{
					WritableLayer: pressure.DiskUsage{Bytes: layer, Inodes: layer / mi},
					Logs:          pressure.DiskUsage{Bytes: 10 * mi, Inodes: 2},
					Volumes:       pressure.DiskUsage{Bytes: volumes, Inodes: volumes / mi},
				}}
	}
	a, aExtras := pod("a", 3*gi, 0)
	b, bExtras := pod("b", 0, 5*gi)
	return &pressure.Observation{
		Time: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		Summary: &statsapi.Summary{
			Node: statsapi.NodeStats{NodeName: "node-1", Fs: fs, Runtime: &statsapi.RuntimeStats{ImageFs: fs}},
			Pods: []statsapi.PodStats{a, b},
		},
		Pods: []pressure.PodExtras{aExtras, bExtras},
		Node: pressure.NodeExtras{NodeFsPath: "/var/lib/kubelet", ImageFsPath: "/var/lib/containerd",
			ContainerFsPath: "/var/lib/containerd", DiskLayout: fslayout.DedicatedImageFs},
	}
}

func ptrTo[T any](v T) *T { return &v }

// diskPods is the PodList for diskObservation: no requests, so any usage
// exceeds them and the order is by usage.
func diskPods() v1.PodList {
	pod := func(name string) v1.Pod {
		return v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "disk", UID: types.UID("uid-" + name)},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}}},
			Status:     v1.PodStatus{Phase: v1.PodRunning},
		}
	}
	return v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: []v1.Pod{pod("a"), pod("b")}}
}

func writeJSONFile(t *testing.T, path string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(data))
	return path
}

func TestRankCommandObservation(t *testing.T) {
	dir := t.TempDir()
	obs := diskObservation()
	obsFile := writeJSONFile(t, filepath.Join(dir, "obs.json"), obs)
	summaryFile := writeJSONFile(t, filepath.Join(dir, "summary.json"), obs.Summary)
	podsFile := writeJSONFile(t, filepath.Join(dir, "pods.json"), diskPods())

	const mi, gi = int64(1 << 20), int64(1 << 30)
	type pod struct {
		name     string
		eligible bool
		usage    int64
		skip     string // a prefix of the skip reason
	}
	tests := []struct {
		name    string
		summary string
		signal  string
		want    []pod
	}{
		{
			// imagefs holds the writable layers only: a's 3Gi; b has
			// nothing there, so evicting it would free nothing.
			name: "observation, imagefs", summary: obsFile, signal: "imagefs.available",
			want: []pod{{"a", true, 3 * gi, ""}, {"b", false, 0, "frees-nothing: nothing on imagefs"}},
		},
		{
			// nodefs holds the logs and volumes: b's 5Gi+10Mi, a's 10Mi.
			name: "observation, nodefs", summary: obsFile, signal: "nodefs.available",
			want: []pod{{"b", true, 5*gi + 10*mi, ""}, {"a", true, 10 * mi, ""}},
		},
		{
			// The same node as a Summary: no parts, and filesystems of one
			// size, so one filesystem is assumed and both signals count
			// each pod's whole ephemeral storage: b first even for imagefs,
			// where it has nothing.
			name: "summary, imagefs", summary: summaryFile, signal: "imagefs.available",
			want: []pod{{"b", true, 5*gi + 10*mi, ""}, {"a", true, 3*gi + 10*mi, ""}},
		},
		{
			name: "summary, nodefs", summary: summaryFile, signal: "nodefs.available",
			want: []pod{{"b", true, 5*gi + 10*mi, ""}, {"a", true, 3*gi + 10*mi, ""}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runRank(t, "--summary", tc.summary, "--pods", podsFile, "--signal", tc.signal, "-o", "json")
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errOut)
			}
			var res rankJSON
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if len(res.Candidates) != len(tc.want) {
				t.Fatalf("%d candidates, want %d:\n%s", len(res.Candidates), len(tc.want), out)
			}
			for i, w := range tc.want {
				c := res.Candidates[i]
				if c.Name != w.name || c.Eligible != w.eligible || c.Usage != w.usage || !strings.HasPrefix(c.SkipReason, w.skip) || (w.skip == "") != (c.SkipReason == "") {
					t.Errorf("candidate %d = %s eligible=%v usage=%d skip=%q; want %s eligible=%v usage=%d skip %q",
						i, c.Name, c.Eligible, c.Usage, c.SkipReason, w.name, w.eligible, w.usage, w.skip)
				}
			}
		})
	}
}

func TestRankCommandObservationSignalErrors(t *testing.T) {
	dir := t.TempDir()
	obs := diskObservation()
	obs.SignalErrors = []pressure.SignalError{
		{Signal: "memory.available", Path: "/proc/meminfo", Err: errors.New("no MemAvailable")},
		{Signal: "pid.available", Path: "/proc/loadavg", Err: errors.New("empty")},
		{Signal: "memory.available", Path: "/sys/fs/cgroup/memory.stat", Err: errors.New("no inactive_file")},
	}
	obsFile := writeJSONFile(t, filepath.Join(dir, "obs.json"), obs)
	podsFile := writeJSONFile(t, filepath.Join(dir, "pods.json"), diskPods())

	code, out, errOut := runRank(t, "--summary", obsFile, "--pods", podsFile, "--signal", "nodefs.available", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q; want 0", code, errOut)
	}
	want := `evictd rank: warning: --summary ` + obsFile + `: evictd could not measure "memory.available", "pid.available"; the observation lacks them` + "\n"
	if errOut != want {
		t.Errorf("stderr = %q\nwant     %q", errOut, want)
	}
	var res rankJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Candidates) != 2 || res.Candidates[0].Name != "b" {
		t.Errorf("ranking = %s (%v); want b, then a", out, err)
	}
}

func TestRankCommandSummaryKinds(t *testing.T) {
	dir := t.TempDir()
	p := td("pods.json")
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		writeFile(t, path, content)
		return path
	}
	nullSummary := file("null-summary.json", `{"summary": null, "pods": [], "node": {}}`)
	badLayout := file("bad-layout.json", `{"summary": {"node": {"nodeName": "n"}}, "node": {"diskLayout": "two-disks"}}`)
	numberSummary := file("number-summary.json", `{"summary": 1}`)
	badParts := file("bad-parts.json", `{"summary": {"node": {}}, "pods": [{"uid": "u", "ephemeralParts": "big"}]}`)
	tests := []struct {
		name, summary, wantErr string
	}{
		{"a PodList", p, "--summary " + p + `: no "node" object; want a kubelet stats Summary (/api/v1/nodes/NODE/proxy/stats/summary) or evictd observe -o observation`},
		{"an observation without its summary", nullSummary, "--summary " + nullSummary + `: "summary" is null; want a kubelet stats Summary`},
		{"an unknown disk layout", badLayout, "--summary " + badLayout + `: node.diskLayout "two-disks": want one-filesystem, dedicated-imagefs, split-imagefs or none`},
		{"a summary that is a number", numberSummary, "--summary " + numberSummary + ": not valid JSON"},
		{"parts that are a string", badParts, "--summary " + badParts + ": not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runRank(t, "--summary", tc.summary, "--pods", p)
			if code != exitUsage || out != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, exitUsage)
			}
			if !strings.HasPrefix(errOut, "evictd rank: "+tc.wantErr) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr = %q; want one line starting %q", errOut, "evictd rank: "+tc.wantErr)
			}
		})
	}
}
