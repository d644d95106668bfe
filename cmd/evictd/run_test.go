// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

func TestRunRejectsBadFlags(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t)
	t.Setenv("NODE_NAME", "")
	tests := []struct {
		name string
		args []string
		want string // the bad value, named in the message
	}{
		{"no node name", nil, "--node-name is required"},
		{"bad node name", []string{"--node-name=Node_1"}, `"Node_1"`},
		{"zero housekeeping", []string{"--node-name=n1", "--housekeeping-interval=0s"}, "--housekeeping-interval 0s"},
		{"unknown wake-up source", []string{"--node-name=n1", "--wakeup-sources=memcg,epoll"}, `"epoll"`},
		{"none with others", []string{"--node-name=n1", "--wakeup-sources=none,psi"}, `"none,psi"`},
		{"bad threshold", []string{"--node-name=n1", "--eviction-hard=memory.available<lots"}, `"lots"`},
		{"soft without grace", []string{"--node-name=n1", "--eviction-soft=memory.available<1Gi"}, "grace period"},
		{"bad PDB policy", []string{"--node-name=n1", "--pdb-policy=lax"}, `"lax"`},
		{"zero rate", []string{"--node-name=n1", "--eviction-rate=0"}, "--eviction-rate 0"},
		{"zero hard grace", []string{"--node-name=n1", "--eviction-hard-grace-period=0"}, "--eviction-hard-grace-period 0"},
		{"negative soft grace cap", []string{"--node-name=n1", "--eviction-max-pod-grace-period=-1"}, "-1"},
		{"bad metrics address", []string{"--node-name=n1", "--metrics-bind-address=9731"}, `"9731"`},
		{"bad metrics port", []string{"--node-name=n1", "--metrics-bind-address=:99999"}, `":99999"`},
		{"missing kubeconfig", []string{"--node-name=n1", "--kubeconfig=/nonexistent/kc"}, `"/nonexistent/kc"`},
		{"unreadable config file", []string{"--node-name=n1", "--config=/nonexistent/cfg.yaml"}, "/nonexistent/cfg.yaml"},
		{"poll faster than zero", []string{"--node-name=n1", "--poll-min-interval=0s"}, "--poll-min-interval 0s"},
		{"no informer sync time", []string{"--node-name=n1", "--informer-sync-timeout=0s"}, "--informer-sync-timeout 0s"},
		{"node lease too short", []string{"--node-name=n1", "--node-lease-duration=2s"}, "--node-lease-duration 2s"},
		{"bad node lease namespace", []string{"--node-name=n1", "--node-lease-namespace=Kube_Leases"}, `"Kube_Leases"`},
		{"bad node brake taint effect", []string{"--node-name=n1", "--node-brake-taint-effect=NoExecute"}, `node brake taint effect "NoExecute": want NoSchedule, PreferNoSchedule or None`},
		{"unknown sandbox", []string{"--node-name=n1", "--sandbox=landlock"}, `invalid --sandbox "landlock": want seccomp or none`},
		{"bad log level", []string{"--node-name=n1", "--log-level=loud"}, `"loud"`},
		{"bad log format", []string{"--node-name=n1", "--log-format=xml"}, `"xml"`},
		{"bad boolean", []string{"--node-name=n1", "--include-daemonset-pods=perhaps"}, `"perhaps"`},
		{"unknown flag", []string{"--node-name=n1", "--evict-everything"}, `unknown flag: --evict-everything (see "evictd run --help")`},
		{"single-dash long flag", []string{"-node-name=n1"}, "unknown shorthand flag: 'n' in -node-name=n1"},
		{"bad number", []string{"--node-name=n1", "--eviction-burst=many"}, `invalid argument "many" for "--eviction-burst" flag: not a whole number`},
		{"soft grace cap beyond int32", []string{"--node-name=n1", "--eviction-max-pod-grace-period=99999999999"}, `"99999999999"`},
		{"stray argument", []string{"--node-name=n1", "now"}, `"now"`},
		{"relative node cgroup", []string{"--node-name=n1", "--node-cgroup=kubelet"}, `invalid --node-cgroup "kubelet": must be an absolute path`},
		{"dotdot cgroup root", []string{"--node-name=n1", "--cgroup-root=/kubelet/../.."}, `invalid --cgroup-root "/kubelet/../.."`},
		{"host root without /proc", []string{"--node-name=n1", "--kubeconfig=" + kubeconfig, "--host-root=" + t.TempDir()}, "host root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runCmd(context.Background(), tc.args, &out, &errb)
			msg := errb.String()
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, msg)
			}
			if strings.Count(strings.TrimSpace(msg), "\n") != 0 || !strings.HasPrefix(msg, "evictd run: ") {
				t.Errorf("stderr %q: want one line starting with \"evictd run: \"", msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("stderr %q does not name %q", msg, tc.want)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runCmd(context.Background(), []string{"--help"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, flag := range []string{"--node-name", "--eviction-hard", "--dry-run", "--pdb-policy", "--wakeup-sources", "--metrics-bind-address", "--include-daemonset-pods"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("--help does not list %s", flag)
		}
	}
}

// syncBuffer collects the agent's log lines while the test reads them.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (b *syncBuffer) find(msg string) map[string]any {
	for _, l := range b.lines() {
		if l["msg"] == msg {
			return l
		}
	}
	return nil
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// observations scrapes evictd_observation_duration_seconds_count, one a
// pass of the loop, from evictd's /metrics.
func observations(base string) (float64, error) {
	code, body, err := httpGet(base + "/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d", code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "evictd_observation_duration_seconds_count "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("/metrics has no evictd_observation_duration_seconds_count")
}

// waitObservations waits until n+1 more of evictd's observations have
// ended: a pass in progress at the call may be the first of them, so at
// least n-1 whole passes ran after the call and one more has observed.
func waitObservations(t *testing.T, base string, n int) {
	t.Helper()
	start, err := observations(base)
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, err = observations(base)
		return err == nil && got >= start+float64(n+1), nil
	})
	if err != nil {
		t.Fatalf("evictd did not run %d more passes (observations %v, from %v): %v", n, got, start, err)
	}
}

// TestRunEvictsOnASimulatedNode runs the whole agent in-process with only
// its ServiceAccount's token, on a simulated node whose pods are real
// processes in real cgroups: a pod that grows past the 300Mi threshold of a
// 1Gi node is evicted, the idle one is not, the HTTP endpoints answer, and
// cancelling the context (SIGTERM) stops it with exit 0.
func TestRunEvictsOnASimulatedNode(t *testing.T) {
	framework.RequireRoot(t)
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "run-" + rand.String(5), MemoryBytes: 1 << 30})
	ns := c.Namespace(t, "run")

	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	go func() {
		exit <- runCmd(ctx, []string{
			"--node-name=" + node.Name, "--kubeconfig=" + c.EvictdKubeconfig,
			"--host-root=" + node.HostRoot, "--cgroup-root=" + node.CgroupRoot, "--node-cgroup=" + node.CgroupRoot,
			"--metrics-bind-address=127.0.0.1:0", "--housekeeping-interval=500ms",
			"--node-brake=false", // the unbound test token may not write the Node
			// The simulated node's disks are the host's: a host disk under
			// 20% free met the default imagefs threshold and evicted the
			// idle pod. This test is about memory.
			"--eviction-hard=memory.available<300Mi,nodefs.available<none,nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none",
		}, io.Discard, logs)
	}()
	var base string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if l := logs.find("evictd starting"); l != nil {
			base = "http://" + l["metricsAddress"].(string)
			return true, nil
		}
		select {
		case code := <-exit:
			return false, fmt.Errorf("evictd exited %d early", code)
		default:
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%v; logs: %v", err, logs.lines())
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _, err := httpGet(base + "/readyz")
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("/readyz never answered 200: %v", err)
	}
	if code, _, err := httpGet(base + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz: %d, %v", code, err)
	}

	mkPod := func(name, request string, args ...string) *v1.Pod {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1.PodSpec{NodeName: node.Name, Containers: []v1.Container{{
				Name: "main", Image: "workload", Args: args,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse(request)}},
			}}},
		}
		created, err := c.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	idle := mkPod("idle", "100Mi", "--hold-mib=50")
	hog := mkPod("hog", "64Mi", "--hold-mib=100", "--grow-mib-per-sec=150", "--grow-to-mib=850")

	tl, err := node.WaitRecord(ctx, hog.UID, func(tl nodesim.Timeline) bool { return !tl.APIDeleted.IsZero() || tl.OOMKills > 0 })
	if err != nil {
		t.Fatalf("the hog was never deleted: %v", err)
	}
	if tl.OOMKills > 0 || node.OOMKills() > 0 {
		t.Fatalf("the OOM killer won: %d kills", node.OOMKills())
	}
	if tl.GracePeriod <= 0 || tl.GracePeriod > 5*time.Second {
		t.Errorf("grace period %v, want within the 5s hard cap", tl.GracePeriod)
	}
	if l := logs.find("evicted pod"); l == nil || l["pod"] != ns+"/hog" || l["signal"] != "memory.available" && l["signal"] != "allocatableMemory.available" {
		t.Errorf("log line for the eviction: %v", l)
	}
	// Several more passes after the eviction, then the idle pod is still
	// there.
	waitObservations(t, base, 3)
	if p, err := c.Admin.CoreV1().Pods(ns).Get(ctx, idle.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the idle pod was evicted too (%v)", err)
	}
	code, body, err := httpGet(base + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d, %v", code, err)
	}
	// The node's memory controller wakes evictd by its version's own means:
	// v1 a memcg threshold's eventfd, v2 memory.events. The other version's
	// source is not exported at all, where an inactive series would trip
	// EvictdWakeupSourceInactive for ever.
	wakes, cannot := "memcg_threshold", "memory_events"
	if cgrouptest.V2() {
		wakes, cannot = cannot, wakes
	}
	for _, want := range []string{`evictd_evictions_total{result="evicted",signal=`, `evictd_signal_available_bytes{signal="memory.available"}`, `evictd_wakeup_source_active{source="` + wakes + `"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `evictd_wakeup_source_active{source="`+cannot+`"}`) {
		t.Errorf("/metrics exports the %s source on a cgroup %s node", cannot, cgrouptest.Version())
	}
	for _, l := range logs.lines() {
		if os.Getenv("EVICTD_TEST_ALL_LOGS") != "" {
			t.Logf("%v", l)
			continue
		}
		switch l["msg"] {
		case "wake-up sources", "threshold met", "pressure episode started", "acting early: threshold crossing predicted",
			"grace shortened", "evicted pod", "evicted pod gone", "pressure episode ended":
			t.Logf("%s %s %v", l["ts"], l["msg"], l)
		}
	}

	cancel()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("exit %d after cancel, want 0", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("evictd did not stop within 20s of its context ending")
	}
	if logs.find("stopped") == nil {
		t.Error("no \"stopped\" log line")
	}
}

// TestRunKeepsKlogRoutedAfterItReturns: client-go's goroutines outlive the
// agent (an informer's list in flight when it stops fails a moment later
// with the cancelled context, and client-go logs it through klog). That
// line must go through evictd's logger, which drops it, not to klog's raw
// stderr, where it read as a second error line after "evictd failed" (seen
// in TestFaultRBACNamespaceSelector).
func TestRunKeepsKlogRoutedAfterItReturns(t *testing.T) {
	var raw bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&raw)
	t.Cleanup(func() {
		klog.ClearLogger()
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	var out, errb bytes.Buffer
	// Past the flags and into the agent, which stops at once: no /proc.
	if code := runCmd(context.Background(), []string{"--node-name=n1", "--host-root=" + t.TempDir()}, &out, &errb); code == exitOK {
		t.Fatalf("exit %d, want a failure", code)
	}
	klog.ErrorS(fmt.Errorf("read body: %w", context.Canceled), "Unexpected error when reading response body")
	klog.Flush()
	if raw.Len() > 0 {
		t.Errorf("klog wrote raw lines after the run returned:\n%s", raw.String())
	}
	if strings.Contains(errb.String(), "Unexpected error") {
		t.Errorf("the cancelled request was logged as an error: %s", errb.String())
	}
}

// unreachableKubeconfig writes a kubeconfig whose API server (port 1 of
// loopback) never answers: enough for evictd to start and wait.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
