// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/internal/proc"
	"github.com/evictd/evictd/test/nodesim"
)

const mib = 1 << 20

// The benchmark switch and knobs (see the package documentation).
const (
	benchEnv      = "EVICTD_BENCH"
	outEnv        = "EVICTD_BENCH_OUT"
	trialsEnv     = "EVICTD_BENCH_TRIALS"
	configsEnv    = "EVICTD_BENCH_CONFIGS"
	ratesEnv      = "EVICTD_BENCH_RATES"
	phaseEnv      = "EVICTD_BENCH_PHASE"
	restEnv       = "EVICTD_BENCH_REST"
	benchDisabled = "benchmark: takes minutes; run it with EVICTD_BENCH=1 (make bench-latency, make bench-oom, make bench-overhead, make bench-scale)"
)

// requireBench skips unless the benchmarks were asked for. It is a choice,
// not a missing prerequisite, so it skips in CI too.
func requireBench(t *testing.T) {
	t.Helper()
	if os.Getenv(benchEnv) != "1" {
		t.Skip(benchDisabled)
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration, zeroOK bool) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || (d == 0 && !zeroOK) {
		t.Fatalf("%s=%q: want a duration such as 60s", name, s)
	}
	return d
}

// envSelect keeps the names listed in env (comma-separated), in the order
// of all; unset keeps all. A name that is not in all is an error.
func envSelect(t *testing.T, name string, all []string) []string {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return all
	}
	want := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, a := range all {
			found = found || a == n
		}
		if !found {
			t.Fatalf("%s=%q: unknown %q (known: %s)", name, s, n, strings.Join(all, ","))
		}
		want[n] = true
	}
	var out []string
	for _, a := range all {
		if want[a] {
			out = append(out, a)
		}
	}
	return out
}

// outFile creates name under EVICTD_BENCH_OUT, or returns nil when unset.
func outFile(t *testing.T, name string) *os.File {
	t.Helper()
	dir := os.Getenv(outEnv)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// report logs the tables and writes them to EVICTD_BENCH_OUT/<name>.txt.
func report(t *testing.T, name string, tabs ...*Table) {
	t.Helper()
	var b strings.Builder
	for i, tab := range tabs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(tab.String())
	}
	t.Log("\n" + b.String())
	if f := outFile(t, name+".txt"); f != nil {
		if _, err := f.WriteString(b.String()); err != nil {
			t.Fatal(err)
		}
	}
}

// machine describes the host for the report header: kernel, CPUs and the
// load average (1, 5, 15 min) before and now. The machine is shared, so the
// load says how much the figures were disturbed.
func machine(loadBefore string) string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("kernel %s, %d CPUs; load average %s before, %s after",
		strings.TrimSpace(string(kernel)), runtime.NumCPU(), loadBefore, loadavg())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// env is one cluster and one simulated node.
type env struct {
	c    *framework.Cluster
	node *nodesim.Node
	ns   string
	// capacity is the node's memory (its cgroup limit).
	capacity int64
}

// startEnv starts a cluster (with binDir as its binary directory when not
// empty) and a node.
func startEnv(t *testing.T, binDir string, opts nodesim.Options) *env {
	t.Helper()
	var fopts []framework.Option
	if binDir != "" {
		fopts = append(fopts, func(c *framework.Config) { c.BinDir = binDir })
	}
	c := framework.Start(t, fopts...)
	node := c.StartNode(t, opts)
	ns := c.Namespace(t, "bench")
	return &env{c: c, node: node, ns: ns, capacity: opts.MemoryBytes}
}

// createPriorityClass creates a PriorityClass for the test and deletes it
// afterwards.
func (e *env) createPriorityClass(t *testing.T, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := e.c.Admin.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.c.Admin.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// podSpec is a one-container pod running the workload binary.
type podSpec struct {
	name string
	// request and limit of memory in MiB; 0 leaves them unset. A limit
	// equal to the request with cpu set makes the pod Guaranteed.
	requestMiB, limitMiB int64
	priorityClass        string
	grace                int64
	// command replaces the workload binary when set.
	command []string
	args    []string
	// holdMiB is what the pod holds once started; waitHolding waits for it.
	holdMiB int64
}

func (s podSpec) build(ns, node string) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "evictd.test/workload:bench", Command: s.command, Args: s.args}
	if s.requestMiB > 0 || s.limitMiB > 0 {
		c.Resources.Requests = corev1.ResourceList{}
		c.Resources.Limits = corev1.ResourceList{}
	}
	if s.requestMiB > 0 {
		c.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(s.requestMiB*mib, resource.BinarySI)
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
	}
	if s.limitMiB > 0 {
		c.Resources.Limits[corev1.ResourceMemory] = *resource.NewQuantity(s.limitMiB*mib, resource.BinarySI)
		c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("10m")
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: ns, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			PriorityClassName:             s.priorityClass,
			TerminationGracePeriodSeconds: ptr.To(s.grace),
			RestartPolicy:                 corev1.RestartPolicyNever,
			Containers:                    []corev1.Container{c},
		},
	}
}

// createPod creates the pod; the node runs it.
func (e *env) createPod(t *testing.T, s podSpec) *corev1.Pod {
	t.Helper()
	p, err := e.c.Admin.CoreV1().Pods(e.ns).Create(context.Background(), s.build(e.ns, e.node.Name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", s.name, err)
	}
	return p
}

// waitHolding waits until the pod runs and its cgroup holds holdMiB. It
// returns false when the pod is deleted first (evicted while it started).
func (e *env) waitHolding(t *testing.T, pod *corev1.Pod, holdMiB int64, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	usage := filepath.Join(e.node.PodMemoryCgroupDir(pod), "memory.usage_in_bytes")
	for {
		tl, ok := e.node.Record(pod.UID)
		if ok && tl.StartError != "" {
			t.Fatalf("pod %s could not start: %s", pod.Name, tl.StartError)
		}
		if ok && !tl.DeletionSeen.IsZero() {
			return false
		}
		if v, err := readInt(usage); err == nil && v >= holdMiB*mib {
			return true
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s does not hold %d MiB after %s", pod.Name, holdMiB, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ensure makes sure a pod named like s runs and holds its memory: it is
// recreated when gone (evicted or OOM-killed in an earlier trial), up to a
// few times if it is evicted again while it fills up. It returns the running
// pod and how many times it was created.
func (e *env) ensure(t *testing.T, s podSpec) (*corev1.Pod, int) {
	t.Helper()
	ctx := context.Background()
	p, err := e.c.Admin.CoreV1().Pods(e.ns).Get(ctx, s.name, metav1.GetOptions{})
	switch {
	case err == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning:
		return p, 0
	case err == nil:
		e.deletePod(t, s.name, 0)
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}
	const attempts = 5
	for i := 1; i <= attempts; i++ {
		p = e.createPod(t, s)
		if e.waitHolding(t, p, s.holdMiB, 60*time.Second) {
			return p, i
		}
		t.Logf("pod %s was deleted (evicted?) before it held %d MiB; creating it again", s.name, s.holdMiB)
		if !e.waitGone(s.name, 60*time.Second) {
			t.Fatalf("pod %s still there a minute after its deletion", s.name)
		}
	}
	t.Fatalf("pod %s was deleted %d times before it held %d MiB", s.name, attempts, s.holdMiB)
	return nil, attempts
}

// deletePod deletes the pod (if present) with the grace period and waits
// until it is gone.
func (e *env) deletePod(t *testing.T, name string, grace int64) {
	t.Helper()
	err := e.c.Admin.CoreV1().Pods(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if !e.waitGone(name, 60*time.Second) {
		t.Fatalf("pod %s still there a minute after deletion", name)
	}
}

// waitGone waits until the pod is no longer in the API.
func (e *env) waitGone(name string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		_, err := e.c.Admin.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memFile is a file of the node's memory cgroup.
func (e *env) memFile(name string) string { return filepath.Join(e.node.MemoryCgroupDir(), name) }

// crossingLevel is the node's memory.usage_in_bytes above which
// memory.available < threshold, with the current inactive_file.
func (e *env) crossingLevel(t *testing.T, threshold int64) int64 {
	t.Helper()
	inactive, err := ReadStatValue(e.memFile("memory.stat"), "total_inactive_file")
	if err != nil {
		t.Fatal(err)
	}
	level, err := CrossingLevel(e.capacity, threshold, inactive)
	if err != nil {
		t.Fatal(err)
	}
	return level
}

// available is the node's memory.available now, by the kubelet's formula.
func (e *env) available(t *testing.T) int64 {
	t.Helper()
	usage, err := readInt(e.memFile("memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	inactive, err := ReadStatValue(e.memFile("memory.stat"), "total_inactive_file")
	if err != nil {
		t.Fatal(err)
	}
	return e.capacity - max(usage-inactive, 0)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// jitter is a uniformly random duration in [0, d), so that trials start at
// random phases of the agent's timer.
func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }

// agent is evictd running as a process with its own ServiceAccount.
type agent struct {
	p    *proc.Proc
	logs *LogSink
	// version, sources and metricsAddr are from its start-up log lines.
	version, sources, metricsAddr string
}

// memoryHard is the benchmarks' --eviction-hard: memory.available<300Mi,
// and the disk and PID signals off. The simulated node's disks are the
// host's, and a benchmark must not evict for a host disk that happens to be
// full.
const memoryHard = "--eviction-hard=memory.available<300Mi,nodefs.available<none,nodefs.inodesFree<none," +
	"imagefs.available<none,imagefs.inodesFree<none,pid.available<none"

// startAgent runs `evictd run` against the node with the extra flags and
// waits until its informers have synced and its wake-up sources are set.
// Its log goes to EVICTD_BENCH_OUT/<logName>-evictd.log as well.
func startAgent(t *testing.T, e *env, logName string, extra ...string) *agent {
	t.Helper()
	return startAgentBin(t, e, framework.RequireBinary(t, "evictd"), logName, extra...)
}

// startAgentBin is startAgent with the evictd binary bin.
func startAgentBin(t *testing.T, e *env, bin, logName string, extra ...string) *agent {
	t.Helper()
	args := append([]string{"run",
		"--kubeconfig=" + e.c.EvictdKubeconfig,
		"--node-name=" + e.node.Name,
		"--host-root=" + e.node.HostRoot,
		"--cgroup-root=" + e.node.CgroupRoot,
		"--node-cgroup=" + e.node.CgroupRoot,
		"--metrics-bind-address=127.0.0.1:0",
		"--node-brake=false", // the unbound test token may not write the Node
	}, extra...)
	var copyTo *os.File
	if f := outFile(t, logName+"-evictd.log"); f != nil {
		copyTo = f
	}
	sink := NewLogSink(nil)
	if copyTo != nil {
		sink = NewLogSink(copyTo)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = sink, sink
	p, err := proc.Start(cmd, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{p: p, logs: sink}
	t.Cleanup(func() { a.stop() })
	t.Logf("evictd %s", strings.Join(args, " "))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	started, err := sink.Wait(ctx, 0, MsgIs("evictd starting"))
	if err == nil {
		_, err = sink.Wait(ctx, 0, MsgIs("informers synced"))
	}
	if err != nil {
		t.Fatalf("evictd did not start (exited: %v): %v\n%s", p.Exited(), err, sink.Tail(40))
	}
	a.version = started.Str("version")
	a.metricsAddr = started.Str("metricsAddress")
	a.sources = started.Str("wakeupSources")
	// The active sources are logged once they are armed; with
	// --wakeup-sources=none there is no such line.
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	defer scancel()
	if l, err := sink.Wait(sctx, 0, MsgIs("wake-up sources")); err == nil {
		a.sources = fmt.Sprint(l.Fields["active"])
	}
	t.Logf("evictd %s running; wake-up sources %s", a.version, a.sources)
	return a
}

func (a *agent) stop() {
	a.p.Stop(10 * time.Second)
}

// alive fails the test when evictd has exited.
func (a *agent) alive(t *testing.T) {
	t.Helper()
	if a.p.Exited() {
		st, _, err := a.p.Result()
		t.Fatalf("evictd exited (%v, %v):\n%s", st, err, a.logs.Tail(60))
	}
}

// evictedLines are the "evicted pod" log lines since mark for pod ns/name
// (any pod when name is empty).
func (a *agent) evictedLines(mark int, ns, name string) []LogLine {
	return a.logs.Since(mark, func(l LogLine) bool {
		return l.Msg == "evicted pod" && (name == "" || l.Str("pod") == ns+"/"+name)
	})
}

// buildFiller builds test/bench/filler, the process of the step and grower
// pods.
func buildFiller(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	framework.Require(t, err)
	out := filepath.Join(t.TempDir(), "filler")
	cmd := exec.Command(goBin, "build", "-o", out, "./filler")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the filler: %v\n%s", err, b)
	}
	return out
}

// goMetrics scrapes the Go runtime figures from evictd's /metrics; an
// unreachable endpoint gives an empty map (the table shows "-").
func (a *agent) goMetrics(names ...string) map[string]float64 {
	if a.metricsAddr == "" {
		return nil
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + a.metricsAddr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	m, err := ParseMetrics(b, names...)
	if err != nil {
		return nil
	}
	return m
}
