// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/internal/proc"
	"github.com/evictd/evictd/test/nodesim"
)

// The scale benchmark's knobs (hack/bench-scale.sh sets them from
// SCALE_AGENTS and SCALE_PHASES).
const (
	agentsEnv      = "EVICTD_BENCH_AGENTS"
	scalePhasesEnv = "EVICTD_BENCH_SCALE_PHASES"
)

// A scale node: 200 MiB, with memory.available<80Mi (scaleHard): an idle
// node (its agent's pod, a few MiB) rests about 190 MiB free, more than
// twice the threshold, so no pressure is near and the agent's node Lease is
// at its idle pace, as on a node with room to spare; a hog of 150 MiB puts
// it about 35 MiB below the threshold. Small, so that fifty episodes at
// once hold 7.5 GiB in all.
const (
	scaleNodeBytes = 200 << 20
	scaleHogMiB    = 150
)

// The kubelet's node heartbeat, as kubelet 1.37 configures its lease
// controller (pkg/kubelet/kubelet.go): the Lease named after the node in
// kube-node-lease, lasting nodeLeaseDurationSeconds (40 by default) and
// renewed every quarter of it; its heartbeat client has no rate limit and
// the status update frequency (10 s) as its timeout.
const (
	kubeletLeaseDurationSeconds = 40
	kubeletLeaseNamespace       = corev1.NamespaceNodeLease
	kubeletHeartbeatTimeout     = 10 * time.Second
)

// Scale phase names, in the order they run.
const (
	phaseBaseline = "baseline (heartbeats only)"
	phaseStartup  = "start-up"
	phaseIdle     = "idle"
	phaseEpisode  = "episode"
	phaseAfter    = "after the episode"
	phaseRestart  = "API server restart"
)

// TestScale measures what N evictd agents cost the control plane (issue 57):
// N simulated nodes, each with a kubelet heartbeat stand-in (the kubelet's
// own lease controller) and, from the start-up phase on, an evictd with a
// token bound to its pod on that node, under the shipped RBAC and admission
// policies. Phases: the heartbeats alone, the agents' start-up, idle, a
// memory episode on every node at once (a hog each agent evicts), the time
// until every agent lifts its brake, and an API server restart. The API
// server's audit log attributes each request to its sender; its /metrics,
// etcd's /metrics and /proc give the rest.
func TestScale(t *testing.T) {
	requireBench(t)
	n := envInt(t, agentsEnv, 50)
	phases, err := ParseScalePhases(os.Getenv(scalePhasesEnv), DefaultScalePhases)
	if err != nil {
		t.Fatalf("%s: %v", scalePhasesEnv, err)
	}
	loadBefore := loadavg()
	evictdBin := framework.RequireBinary(t, "evictd")
	h := startScaleCluster(t)
	h.startNodes(t, n)
	h.startHeartbeats(t)

	h.measure(t, phaseBaseline, func(*phaseRun) { time.Sleep(phases.Baseline) })
	h.measure(t, phaseStartup, func(p *phaseRun) { h.startAgents(t, evictdBin, p) })
	h.measure(t, phaseIdle, func(*phaseRun) {
		time.Sleep(phases.Idle)
		h.alive(t)
	})
	h.measure(t, phaseEpisode, func(p *phaseRun) { h.episode(t, phases.EpisodeMin, p) })
	h.measure(t, phaseAfter, func(p *phaseRun) { h.afterEpisode(t, p) })
	h.restart(t, phases)
	h.stopAgents()

	run := h.result(t)
	run.Title = fmt.Sprintf("%d evictd agents against the test control plane (%s), one run\n%s; evictd %s",
		n, h.apiserverVersion, machine(loadBefore), h.agentVersion)
	tabs, err := run.Tables()
	if err != nil {
		t.Fatal(err)
	}
	report(t, "scale", tabs...)
}

// scaleHarness is one scale run: the cluster, its nodes and their agents.
type scaleHarness struct {
	c                *framework.Cluster
	auditLog         string
	etcdURL          string
	apiserverVersion string
	agentVersion     string
	hogNS            string
	http             *http.Client

	nodes      []*nodesim.Node
	kubeconfig map[string]string // node -> evictd's kubeconfig, a token bound to its pod there
	stopBeats  context.CancelFunc
	agents     []*scaleAgent

	phases []ScalePhase
	cuts   []time.Time
	notes  []string
	herd   *Window
}

// phaseRun is a phase being measured; the phase's body may move its
// windows (the start-up ends when the last agent is ready) and add notes.
type phaseRun struct {
	ScalePhase
}

func startScaleCluster(t *testing.T) *scaleHarness {
	t.Helper()
	realBins, err := framework.KubeBinDir()
	framework.Require(t, err)
	binDir := t.TempDir()
	h := &scaleHarness{kubeconfig: map[string]string{}, http: &http.Client{Timeout: 10 * time.Second}}
	// The audit log is kept beside the table when there is an output
	// directory, for a second look at a run.
	h.auditLog = filepath.Join(t.TempDir(), "scale-audit.log")
	if dir := os.Getenv(outEnv); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		h.auditLog = filepath.Join(dir, "scale-audit.log")
		_ = os.Remove(h.auditLog)
	}
	if err := RequestAuditBinDir(binDir, realBins, h.auditLog); err != nil {
		t.Fatal(err)
	}
	h.c = framework.Start(t, func(cfg *framework.Config) { cfg.BinDir = binDir })
	ctx := context.Background()
	for _, p := range []string{framework.LeasePolicy, framework.EvictionPolicy} {
		if err := h.c.EnforcePolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	h.hogNS = h.c.Namespace(t, "scale")
	pid, err := h.c.PID("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	argv, err := procArgs(pid)
	if err != nil {
		t.Fatal(err)
	}
	h.etcdURL = FlagValue(argv, "--etcd-servers")
	if h.etcdURL == "" {
		t.Fatalf("kube-apiserver's command line names no --etcd-servers: %q", argv)
	}
	if i := strings.IndexByte(h.etcdURL, ','); i >= 0 {
		h.etcdURL = h.etcdURL[:i]
	}
	if v, err := h.c.Admin.Discovery().ServerVersion(); err == nil {
		h.apiserverVersion = "kube-apiserver " + v.GitVersion
	}
	return h
}

// startNodes starts n simulated nodes and, on each, the pod evictd's token
// is bound to (framework.EvictdNodeToken), and waits until those pods run.
func (h *scaleHarness) startNodes(t *testing.T, n int) {
	t.Helper()
	start := time.Now()
	for i := range n {
		node := h.c.StartNode(t, nodesim.Options{
			Name:        fmt.Sprintf("scale-%03d", i),
			MemoryBytes: scaleNodeBytes,
			// The simulator's own polling is not what is measured; on a
			// shared 2-core machine fifty nodes polling ten times a second
			// would only add noise.
			OOMPollInterval: time.Second,
		})
		h.nodes = append(h.nodes, node)
		_, h.kubeconfig[node.Name] = h.c.EvictdNodeToken(t, node.Name)
	}
	sa := h.c.EvictdServiceAccount
	waitFor(t, "evictd's pods running on every node", 5*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := h.c.Admin.CoreV1().Pods(sa.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running >= n, nil
	})
	h.waitPolicies(t)
	t.Logf("%d nodes and their evictd pods running after %s", n, time.Since(start).Round(time.Second))
}

// waitPolicies waits until the API server enforces the lease and eviction
// policies (it loads them through an informer): a token bound to no pod,
// c.EvictdClient's, may then neither write an agent's Lease nor evict.
func (h *scaleHarness) waitPolicies(t *testing.T) {
	t.Helper()
	dry := []string{metav1.DryRunAll}
	sa := h.c.EvictdServiceAccount
	victim := "evictd-" + h.nodes[0].Name
	checks := map[string]func(ctx context.Context) error{
		framework.LeasePolicy: func(ctx context.Context) error {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodelease.Name(h.nodes[0].Name), Namespace: nodelease.FallbackNamespace}}
			_, err := h.c.EvictdClient.CoordinationV1().Leases(l.Namespace).Create(ctx, l, metav1.CreateOptions{DryRun: dry})
			return err
		},
		framework.EvictionPolicy: func(ctx context.Context) error {
			return h.c.EvictdClient.PolicyV1().Evictions(sa.Namespace).Evict(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Name: victim, Namespace: sa.Namespace},
				DeleteOptions: &metav1.DeleteOptions{DryRun: dry},
			})
		},
	}
	for policy, write := range checks {
		var last error
		waitFor(t, policy+" in force", 60*time.Second, func(ctx context.Context) (bool, error) {
			last = write(ctx)
			return (apierrors.IsForbidden(last) || apierrors.IsInvalid(last)) &&
				strings.Contains(last.Error(), fmt.Sprintf("ValidatingAdmissionPolicy '%s'", policy)), nil
		})
	}
}

// startHeartbeats runs, for every node, the kubelet's node lease
// controller with that node's own identity (system:node:NAME, which the Node
// authorizer and NodeRestriction confine to its Lease), and waits until
// every Lease exists.
func (h *scaleHarness) startHeartbeats(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.stopBeats = cancel
	t.Cleanup(cancel)
	for _, node := range h.nodes {
		kc, err := h.c.NodeCredentials(node.Name, h.c.Server)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		if err != nil {
			t.Fatal(err)
		}
		// The kubelet's heartbeat client (cmd/kubelet/app/server.go).
		cfg.QPS = -1
		cfg.Timeout = kubeletHeartbeatTimeout
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		renew := time.Duration(float64(kubeletLeaseDurationSeconds*time.Second) * 0.25)
		ctrl := lease.NewController(clock.RealClock{}, client, node.Name, kubeletLeaseDurationSeconds, nil, renew,
			node.Name, kubeletLeaseNamespace, setNodeOwner(ctx, client, node.Name))
		go ctrl.Run(ctx)
	}
	waitFor(t, "every node's heartbeat Lease", 2*time.Minute, func(ctx context.Context) (bool, error) {
		leases, err := h.c.Admin.CoordinationV1().Leases(kubeletLeaseNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		have := map[string]bool{}
		for _, l := range leases.Items {
			have[l.Name] = len(l.OwnerReferences) > 0
		}
		for _, node := range h.nodes {
			if !have[node.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}

// setNodeOwner is the kubelet's SetNodeOwnerFunc (pkg/kubelet/util): the
// Lease is owned by its Node, whose UID a GET reads until it is set.
func setNodeOwner(ctx context.Context, client kubernetes.Interface, node string) lease.ProcessLeaseFunc {
	return func(l *coordinationv1.Lease) error {
		if len(l.OwnerReferences) > 0 {
			return nil
		}
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}}
		return nil
	}
}

// scaleAgent is one `evictd run` on its node.
type scaleAgent struct {
	node    string
	p       *proc.Proc
	logs    *LogSink
	metrics string // host:port of /metrics and /readyz
	ready   time.Time
}

// scaleHard is --eviction-hard for the scale run: memory.available<80Mi,
// with the disk and PID signals off as in the other benchmarks' memoryHard.
const scaleHard = "--eviction-hard=memory.available<80Mi,nodefs.available<none,nodefs.inodesFree<none," +
	"imagefs.available<none,imagefs.inodesFree<none,pid.available<none"

// startAgents starts every agent at once, as a DaemonSet's rollout on a
// running cluster does, and ends the start-up phase when the last is ready
// (/readyz: its informers synced and its node's Lease held).
func (h *scaleHarness) startAgents(t *testing.T, bin string, p *phaseRun) {
	t.Helper()
	ports, err := framework.FreePorts(len(h.nodes))
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range h.nodes {
		addr := "127.0.0.1:" + strconv.Itoa(ports[i])
		args := []string{"run",
			"--kubeconfig=" + h.kubeconfig[node.Name],
			"--node-name=" + node.Name,
			"--host-root=" + node.HostRoot,
			"--cgroup-root=" + node.CgroupRoot,
			"--node-cgroup=" + node.CgroupRoot,
			"--metrics-bind-address=" + addr,
			scaleHard,
		}
		args = append(args, overheadExtraArgs()...)
		var sink *LogSink
		if f := outFile(t, fmt.Sprintf("scale-%s-evictd.log", node.Name)); f != nil {
			sink = NewLogSink(f)
		} else {
			sink = NewLogSink(nil)
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = sink, sink
		pr, err := proc.Start(cmd, clock.RealClock{})
		if err != nil {
			t.Fatal(err)
		}
		a := &scaleAgent{node: node.Name, p: pr, logs: sink, metrics: addr}
		h.agents = append(h.agents, a)
		t.Cleanup(func() { a.p.Stop(10 * time.Second) })
	}
	t.Logf("evictd %s (each on its own node)", strings.Join(append([]string{"run", "--kubeconfig=...", "--node-name=...", scaleHard}, overheadExtraArgs()...), " "))
	pending := append([]*scaleAgent(nil), h.agents...)
	waitFor(t, "every agent ready", 5*time.Minute, func(ctx context.Context) (bool, error) {
		var still []*scaleAgent
		for _, a := range pending {
			if a.p.Exited() {
				return false, fmt.Errorf("evictd on %s exited:\n%s", a.node, a.logs.Tail(30))
			}
			if h.get(ctx, a.metrics, "/readyz") == http.StatusOK {
				a.ready = time.Now()
				continue
			}
			still = append(still, a)
		}
		pending = still
		return len(pending) == 0, nil
	})
	var readyAfter []time.Duration
	for _, a := range h.agents {
		readyAfter = append(readyAfter, a.ready.Sub(p.Requests.Start))
	}
	if l := h.agents[0].logs.Since(0, MsgIs("evictd starting")); len(l) > 0 {
		h.agentVersion = l[0].Str("version")
	}
	s := Summarize(readyAfter)
	p.Note = fmt.Sprintf("ready after %.1f s (median), %.1f s (last)", s.Median.Seconds(), s.Max.Seconds())
}

// get requests path at addr and returns the HTTP status, 0 when there is
// no answer.
func (h *scaleHarness) get(ctx context.Context, addr, path string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// alive fails the run when an agent has exited.
func (h *scaleHarness) alive(t *testing.T) {
	t.Helper()
	for _, a := range h.agents {
		if a.p.Exited() {
			st, _, err := a.p.Result()
			t.Fatalf("evictd on %s exited (%v, %v):\n%s", a.node, st, err, a.logs.Tail(40))
		}
	}
}

// episode creates a hog on every node at once and waits until every hog is
// gone (and at least min has passed). A hog its agent did not evict is a
// result, noted in the table; the kernel's OOM kills are counted.
func (h *scaleHarness) episode(t *testing.T, min time.Duration, p *phaseRun) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	oomBefore := 0
	for _, node := range h.nodes {
		oomBefore += node.OOMKills()
	}
	for _, node := range h.nodes {
		hog := podSpec{name: "hog-" + node.Name, grace: 1, holdMiB: scaleHogMiB,
			args: []string{fmt.Sprintf("--hold-mib=%d", scaleHogMiB)}}
		if _, err := h.c.Admin.CoreV1().Pods(h.hogNS).Create(ctx, hog.build(h.hogNS, node.Name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", hog.name, err)
		}
	}
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := h.c.Admin.CoreV1().Pods(h.hogNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, pod := range pods.Items {
			left = append(left, pod.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		// What the agents left behind: no eviction on those nodes. Deleted
		// here, so that the next phases start without pressure.
		p.Note = fmt.Sprintf("%d hogs not evicted within 3 minutes (%s); deleted by the harness", len(left), strings.Join(left, " "))
		for _, name := range left {
			_ = h.c.Admin.CoreV1().Pods(h.hogNS).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}
	gone := time.Since(start)
	if rest := min - gone; rest > 0 {
		time.Sleep(rest)
	}
	oom := -oomBefore
	for _, node := range h.nodes {
		oom += node.OOMKills()
	}
	note := fmt.Sprintf("hogs of %d MiB created on %d nodes at once; all gone after %.1f s; %d OOM kills", scaleHogMiB, len(h.nodes), gone.Seconds(), oom)
	p.Note = strings.TrimPrefix(p.Note+"; "+note, "; ")
	h.alive(t)
}

// afterEpisode waits until every agent has lifted its node brake
// (evictd's memory condition False again, after its pressure transition
// period) and ten seconds more.
func (h *scaleHarness) afterEpisode(t *testing.T, p *phaseRun) {
	t.Helper()
	cond := corev1.NodeConditionType(nodebrake.ConditionType(nodebrake.Memory))
	var on []string
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := h.c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		on = on[:0]
		for _, node := range nodes.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == cond && c.Status == corev1.ConditionTrue {
					on = append(on, node.Name)
				}
			}
		}
		return len(on) == 0, nil
	})
	if err != nil {
		p.Note = fmt.Sprintf("%d nodes still had %s after 10 minutes: %s", len(on), cond, strings.Join(on, " "))
	} else {
		p.Note = fmt.Sprintf("every brake lifted after %.0f s", time.Since(p.Requests.Start).Seconds())
	}
	time.Sleep(10 * time.Second)
	h.alive(t)
}

// restart stops the API server for the outage and starts it again, then
// measures the restart phase: requests from the new process's start, its
// CPU from its readiness on (its own start-up is not the agents' doing).
func (h *scaleHarness) restart(t *testing.T, phases ScalePhaseSpec) {
	t.Helper()
	stopAt := time.Now()
	argv, err := h.c.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	h.cuts = append(h.cuts, stopAt)
	time.Sleep(phases.Outage)
	etcdBefore := h.scrape(t, h.etcdURL+"/metrics")
	etcdUsageBefore := h.usage(t, "etcd")
	start := time.Now()
	if err := h.c.StartAPIServer(context.Background(), argv); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	apiUsageReady := h.usage(t, "kube-apiserver")
	agentsReady := h.agentCPU()
	time.Sleep(time.Until(start.Add(phases.Restart)))
	end := time.Now()
	h.alive(t)
	ph := ScalePhase{
		Name:       phaseRestart,
		Requests:   Window{Start: start, End: end},
		CPU:        Window{Start: ready, End: end},
		APIAfter:   h.scrape(t, "/metrics"),
		EtcdBefore: etcdBefore, EtcdAfter: h.scrape(t, h.etcdURL+"/metrics"),
		Note: fmt.Sprintf("API server down %.0f s; ready %.1f s after its start; its CPU from then on",
			start.Sub(stopAt).Seconds(), ready.Sub(start).Seconds()),
	}
	apiEnd, etcdEnd := h.usage(t, "kube-apiserver"), h.usage(t, "etcd")
	ph.APIServerCPU, ph.APIServerRSS = apiEnd.CPU-apiUsageReady.CPU, apiEnd.RSS
	ph.EtcdCPU, ph.EtcdRSS = etcdEnd.CPU-etcdUsageBefore.CPU, etcdEnd.RSS
	ph.AgentCPU = cpuDelta(agentsReady, h.agentCPU())
	h.phases = append(h.phases, ph)
	h.herd = &Window{Start: start, End: end}
	t.Logf("phase %s: %.0f s", phaseRestart, end.Sub(start).Seconds())
}

// stopAgents stops the agents and the heartbeats, so that the audit log
// is complete.
func (h *scaleHarness) stopAgents() {
	var wg sync.WaitGroup
	for _, a := range h.agents {
		wg.Go(func() { a.p.Stop(10 * time.Second) })
	}
	wg.Wait()
	h.stopBeats()
}

// measure runs body as the phase name: the API server's and etcd's
// counters and /proc readings before and after, and the window the
// requests are counted in (which body may change).
func (h *scaleHarness) measure(t *testing.T, name string, body func(*phaseRun)) {
	t.Helper()
	apiBefore, etcdBefore := h.scrape(t, "/metrics"), h.scrape(t, h.etcdURL+"/metrics")
	apiUsage, etcdUsage := h.usage(t, "kube-apiserver"), h.usage(t, "etcd")
	agents := h.agentCPU()
	start := time.Now()
	p := &phaseRun{ScalePhase{Name: name, Requests: Window{Start: start}}}
	body(p)
	end := time.Now()
	p.Requests.End = end
	p.CPU = p.Requests
	p.APIBefore, p.APIAfter = apiBefore, h.scrape(t, "/metrics")
	p.EtcdBefore, p.EtcdAfter = etcdBefore, h.scrape(t, h.etcdURL+"/metrics")
	apiEnd, etcdEnd := h.usage(t, "kube-apiserver"), h.usage(t, "etcd")
	p.APIServerCPU, p.APIServerRSS = apiEnd.CPU-apiUsage.CPU, apiEnd.RSS
	p.EtcdCPU, p.EtcdRSS = etcdEnd.CPU-etcdUsage.CPU, etcdEnd.RSS
	if len(h.agents) > 0 {
		p.AgentCPU = cpuDelta(agents, h.agentCPU())
	}
	h.phases = append(h.phases, p.ScalePhase)
	t.Logf("phase %s: %.0f s; %s", name, end.Sub(start).Seconds(), p.Note)
}

// scrape reads a /metrics: the API server's (a path) as the admin, or
// etcd's (a URL).
func (h *scaleHarness) scrape(t *testing.T, where string) Scrape {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var body []byte
	var err error
	if strings.HasPrefix(where, "/") {
		body, err = h.c.Admin.Discovery().RESTClient().Get().AbsPath(where).DoRaw(ctx)
	} else {
		var req *http.Request
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, where, nil); err == nil {
			var resp *http.Response
			if resp, err = h.http.Do(req); err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("HTTP %d", resp.StatusCode)
				}
			}
		}
	}
	if err != nil {
		t.Fatalf("scrape %s: %v", where, err)
	}
	s, err := ParseScrape(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scrape %s: %v", where, err)
	}
	return s
}

// usage reads the control-plane component's CPU time and memory.
func (h *scaleHarness) usage(t *testing.T, component string) ProcUsage {
	t.Helper()
	pid, err := h.c.PID(component)
	if err != nil {
		t.Fatal(err)
	}
	u, err := ReadProcUsage("/proc", pid)
	if err != nil {
		t.Fatalf("%s: %v", component, err)
	}
	return u
}

// agentCPU is each agent's CPU time so far (0 for one that exited); nil
// before the agents start.
func (h *scaleHarness) agentCPU() []time.Duration {
	if len(h.agents) == 0 {
		return nil
	}
	out := make([]time.Duration, len(h.agents))
	for i, a := range h.agents {
		if u, err := ReadProcUsage("/proc", a.p.Pid()); err == nil {
			out[i] = u.CPU
		}
	}
	return out
}

// cpuDelta is each agent's CPU time between two readings; an agent
// without a first reading started in between, from zero.
func cpuDelta(before, after []time.Duration) []time.Duration {
	out := make([]time.Duration, len(after))
	for i := range after {
		out[i] = after[i]
		if i < len(before) {
			out[i] -= before[i]
		}
	}
	return out
}

// result reads the audit log and puts the run together.
func (h *scaleHarness) result(t *testing.T) ScaleRun {
	t.Helper()
	f, err := os.Open(h.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := ParseAuditRequests(f)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	sa := h.c.EvictdServiceAccount
	nodes := make([]string, len(h.nodes))
	for i, n := range h.nodes {
		nodes[i] = n.Name
	}
	run := ScaleRun{
		Nodes:    nodes,
		Senders:  Senders{Evictd: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name},
		Requests: reqs,
		Phases:   h.phases,
		Cuts:     h.cuts,
		Herd:     h.herd,
		Baseline: phaseBaseline,
		Idle:     phaseIdle,
		Episode:  []string{phaseEpisode, phaseAfter},
	}
	run.Notes = append(h.notes,
		fmt.Sprintf("requests from the API server's audit log (%d requests, %.0f MiB), by user: evictd = %s with a token bound to its pod on each node, "+
			"kubelet = system:node:NAME (the kubelet's lease controller, k8s.io/component-helpers, as kubelet 1.37 runs it), other = the harness, "+
			"the simulated nodes, the controller manager and the API server itself", len(reqs), float64(st.Size())/mib, run.Senders.Evictd),
		fmt.Sprintf("each node: %d MiB (nodesim, cgroup v1), evictd run %s, the shipped RBAC and admission policies (evictd-leases, evictd-evictions and the others) in force",
			scaleNodeBytes>>20, strings.Join(append([]string{scaleHard}, overheadExtraArgs()...), " ")))
	return run
}

// waitFor polls cond every half second until it holds, failing the test
// when timeout passes first. An error from cond is fatal (an agent that
// exited) and fails at once; cond takes a failed API call as "not yet".
func waitFor(t *testing.T, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	var failed error
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			failed = err
			return false, err
		}
		return ok, nil
	})
	switch {
	case failed != nil:
		t.Fatalf("waiting for %s: %v", what, failed)
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("%s: not after %s", what, timeout)
	case err != nil:
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// procArgs is a process's command line.
func procArgs(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00"), nil
}
