// SPDX-License-Identifier: Apache-2.0

// Command demo narrates evictd at work for `make demo` (hack/demo.sh starts
// the test control plane first and passes its kubeconfigs):
//
//	demo --kubeconfig ADMIN --evictd-kubeconfig EVICTD --bin-dir DIR --work-dir DIR [--log-dir DIR] [--verify]
//
// It runs a simulated 1 GiB node itself (package nodesim, the code
// test/cmd/nodesim runs; only the node's owner can play a static pod),
// starts evictd as a real process with its ServiceAccount's identity as its
// DaemonSet pod on the node holds it (a token bound to a pod there, which
// the shipped admission policy asks of the node brake's writes) and the
// shipped defaults but for its thresholds, creates a handful of pods of different QoS classes and
// priorities (one protected by a PodDisruptionBudget, one static, one
// node-critical) and a pod whose memory keeps growing, and tells in plain
// words what happens: memory falling, evictd's ranking, each eviction with
// why its pod ranked where it did, the node brake, the final state, and the
// brake lifted when evictd stops. The node's cgroups are on cgroup v1 or
// v2, whichever the host runs (package nodesim picks). With --verify it
// exits 1 unless the story happened: evictd evicted the memory hog through
// the Eviction API and saw it gone, the pods it must never evict (the
// PodDisruptionBudget's, the Guaranteed one under its request, the critical
// and the static pod) still run, the kernel's OOM killer never struck, and
// the brake was on the Node during the episode and gone after evictd stopped
// (test/vmnode's TestNodeDemoV2 runs it so in a cgroup v2 guest). On SIGINT or SIGTERM, or at the end, it
// stops evictd and removes the node's processes, cgroups and directories;
// evictd's log, the node's and the ranking's inputs stay in --log-dir.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/test/e2e/agent/evictdproc"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

const (
	mib        = 1 << 20
	nodeName   = "demo-node"
	namespace  = "demo"
	nodeMemory = 1 << 30
	threshold  = 300 * mib
	minReclaim = 100 * mib
	// pressureTimeout bounds the pressure phase; the hog is evicted after
	// about 15 s.
	pressureTimeout = 90 * time.Second
	// liftTimeout bounds the wait for the Node to show the brake lifted
	// after evictd's clean exit (one API write, made before it exits).
	liftTimeout = 30 * time.Second
	// scrapeTail is how long the dashboard's scrapes go on after the final state.
	scrapeTail = 20 * time.Second
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig of the test cluster (required)")
	evictdKubeconfig := fs.String("evictd-kubeconfig", "", "kubeconfig with evictd's ServiceAccount token (required)")
	binDir := fs.String("bin-dir", "", "directory holding evictd and workload (required)")
	workDir := fs.String("work-dir", "", "directory for the demo's scratch files: evictd's kubeconfig (required)")
	logDir := fs.String("log-dir", "", "directory for evictd's and the node's logs and the ranking's inputs, kept after the demo (default: --work-dir)")
	scrapeDir := fs.String("scrape-dir", "", "keep a scrape of evictd's /metrics every second in this directory, for the dashboard's picture")
	verify := fs.Bool("verify", false, "exit 1 unless the hog was evicted, the protected pods still run and no OOM kill happened")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, f := range []struct{ name, v string }{{"--kubeconfig", *kubeconfig}, {"--evictd-kubeconfig", *evictdKubeconfig},
		{"--bin-dir", *binDir}, {"--work-dir", *workDir}} {
		if f.v == "" {
			fmt.Fprintf(stderr, "demo: %s is required\n", f.name)
			return 2
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "demo: --kubeconfig %q: %v\n", *kubeconfig, err)
		return 2
	}
	// The node stand-in writes pod status often; client-go's default of 5
	// requests per second would hold it back.
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	if *logDir == "" {
		*logDir = *workDir
	}
	if err := os.MkdirAll(*logDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "demo: --log-dir: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := &demo{out: stdout, client: client, evictdKubeconfig: *evictdKubeconfig, binDir: *binDir, workDir: *workDir,
		logDir: *logDir, scrapeDir: *scrapeDir, verify: *verify, evicted: map[string]string{}}
	err = d.run(ctx)
	d.cleanup()
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stdout, "\nInterrupted; everything the demo started has been stopped and removed.")
		return 130
	case err != nil:
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	return 0
}

type demo struct {
	out              io.Writer
	client           kubernetes.Interface
	evictdKubeconfig string
	binDir, workDir  string
	logDir           string
	scrapeDir        string
	scrapes          *scrapeRecorder
	verify           bool

	node    *nodesim.Node
	evictd  *evictdproc.Process
	logOff  int64
	mirror  string
	hogName string
	// why each evicted pod went, from evictd's log, by pod name.
	evicted map[string]string
	// hogGone: evictd logged the evicted hog gone.
	hogGone bool
	// standIn is evictd's DaemonSet pod's stand-in on the node, whose
	// bound token evictd runs with.
	standIn *corev1.Pod
	// brakeOn: the Node carried evictd's memory brake (its taint and its
	// condition True) during the episode; brakeLifted: neither is left
	// once evictd has stopped.
	brakeOn, brakeLifted bool
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func (d *demo) step(n int, format string, args ...any) {
	fmt.Fprintf(d.out, "\n%d. %s\n", n, fmt.Sprintf(format, args...))
}

// pod is one of the demo's workloads.
type pod struct {
	name, class, note string
	holdMiB           int64
	args              []string
	requests, limits  corev1.ResourceList
	labels            map[string]string
}

var pods = []pod{
	{name: "batch-report", holdMiB: 100, note: "a batch job with no requests"},
	{name: "web-frontend", class: "web", holdMiB: 150, requests: mem("64Mi"), labels: map[string]string{"app": "web"},
		note: "protected by a PodDisruptionBudget (minAvailable: 1)"},
	{name: "cache", class: "web", holdMiB: 120, requests: mem("64Mi")},
	{name: "database", class: "important", holdMiB: 120, requests: guaranteed("256Mi"), limits: guaranteed("256Mi"),
		note: "uses less than it requested"},
	{name: "node-agent", class: "system-node-critical", holdMiB: 20, note: "critical: never evicted"},
}

// The hog starts at 10 MiB and grows by 25 MiB/s up to 500 MiB.
var hog = pod{name: "memory-leak", class: "important", holdMiB: 10, requests: mem("100Mi"),
	args: []string{"--grow-mib-per-sec=25", "--grow-to-mib=500"}}

var staticPod = pod{name: "node-proxy", holdMiB: 20, note: "a static pod (its API object is a mirror pod): never evicted"}

func mem(q string) corev1.ResourceList { return podtest.List("memory", q) }

func guaranteed(q string) corev1.ResourceList { return podtest.List("memory", q, "cpu", "100m") }

func (p pod) object() *corev1.Pod {
	args := append([]string{fmt.Sprintf("--hold-mib=%d", p.holdMiB)}, p.args...)
	return podtest.New(namespace, p.name, podtest.OnNode(nodeName), podtest.Labels(p.labels), podtest.Priority(p.class),
		podtest.Grace(10), podtest.Run("demo.evictd.io/workload", nodesim.WorkloadCommand, args...),
		podtest.Resources(p.requests, p.limits))
}

func (d *demo) run(ctx context.Context) error {
	d.say("evictd demo: a node runs out of memory, and evictd picks who goes.")
	d.step(1, "A local Kubernetes control plane is up (etcd, kube-apiserver, kube-controller-manager with the disruption controller).")

	d.step(2, "Starting a simulated node %q with 1 GiB of memory (cgroup %s on this host).", nodeName, cgroupVersion())
	workload := filepath.Join(d.binDir, "workload")
	logCfg := zap.NewDevelopmentConfig()
	logCfg.OutputPaths = []string{filepath.Join(d.logDir, "node.log")}
	logCfg.ErrorOutputPaths = logCfg.OutputPaths
	nodeLog, err := logCfg.Build()
	if err != nil {
		return err
	}
	node, err := nodesim.Start(ctx, nodesim.Options{Client: d.client, Name: nodeName, MemoryBytes: nodeMemory, WorkloadBin: workload, Logger: nodeLog})
	if err != nil {
		return fmt.Errorf("start the simulated node: %w", err)
	}
	d.node = node
	d.say("   Its memory is a real cgroup (cgroup %s: %s) and its pods are real processes;", node.CgroupVersion(), node.MemoryCgroupDir())
	d.say("   a stand-in for the kubelet starts them, and stops them when they are deleted.")

	d.step(3, "Creating the workloads (namespace %q).", namespace)
	if err := d.createWorkloads(ctx); err != nil {
		return err
	}

	d.step(4, "Starting evictd for this node as its DaemonSet pod runs: its ServiceAccount's rights only, the shipped defaults.")
	kubeconfig, err := d.nodeKubeconfig(ctx)
	if err != nil {
		return err
	}
	d.say("   Its token is bound to its pod on the node (%s/%s), as a DaemonSet pod's is:", d.standIn.Namespace, d.standIn.Name)
	d.say("   the shipped admission policy lets evictd write its brake on this Node only.")
	// The shipped defaults (the node brake on, a pressure transition
	// period of 5 minutes) but for the thresholds, which fit a 1 GiB node.
	flags := []string{
		"--kubeconfig=" + kubeconfig, "--node-name=" + nodeName,
		"--host-root=" + node.HostRoot, "--cgroup-root=" + node.CgroupRoot, "--node-cgroup=" + node.CgroupRoot,
		"--eviction-hard=memory.available<300Mi,allocatableMemory.available<none,nodefs.available<none," +
			"nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none",
		"--eviction-minimum-reclaim=memory.available=100Mi",
	}
	d.evictd, err = evictdproc.Start(evictdproc.Options{Bin: filepath.Join(d.binDir, "evictd"), Args: flags, LogPath: filepath.Join(d.logDir, "evictd.log")})
	if err != nil {
		return err
	}
	if err := d.evictd.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	if d.scrapeDir != "" {
		if d.scrapes, err = startScrapes(d.evictd.Addr(), d.scrapeDir, time.Second); err != nil {
			return err
		}
	}
	d.say("   Rule: evict when memory.available < 300 MiB, and keep going until it is back above 400 MiB (100 MiB minimum reclaim).")
	d.say("   Metrics on http://%s/metrics, log in %s.", d.evictd.Addr(), d.evictd.LogPath())
	d.say("   The bars below show memory.available as evictd reports it; '|' marks the 300 MiB threshold.")
	d.skipLog()

	d.step(5, "If memory ran short now, evictd would evict in this order (`evictd observe` + `evictd rank`):")
	if err := d.showRanking(ctx); err != nil {
		return err
	}

	d.step(6, "Starting %q (priority %d, class %s): it grows by 25 MiB/s up to 500 MiB.", hog.name, priorities[hog.class], hog.class)
	d.say("   Left alone the pods would need more than the node's 1 GiB, and the kernel's OOM killer would strike.")
	d.say("   evictd evicts when memory.available is below 300 MiB, or when its fill rate says it will be within")
	d.say("   the time an eviction takes (--act-early), so the memory is back before the node runs out.")
	d.say("   The leak's priority is above batch-report's (0) and cache's (%d), which also use more than they", priorities["web"])
	d.say("   request: those rank before it, so evictd takes them first, then the leak while memory is still short.")
	if _, err := d.client.CoreV1().Pods(namespace).Create(ctx, hog.object(), metav1.CreateOptions{}); err != nil {
		return err
	}
	d.hogName = hog.name
	d.say("")
	if err := d.watchPressure(ctx); err != nil {
		return err
	}

	d.step(7, "Final state.")
	if err := d.showFinal(ctx); err != nil {
		return err
	}
	if err := d.endScrapes(ctx); err != nil {
		return err
	}
	d.step(8, "Stopping evictd (SIGTERM), as a rollout or an uninstall would.")
	if err := d.stopEvictd(ctx); err != nil {
		return err
	}
	if !d.verify {
		return nil
	}
	present, err := d.podsPresent(ctx)
	if err != nil {
		return err
	}
	if err := storyHeld(d.evicted, present, d.hogGone, d.mirror, d.node.OOMKills(), d.brakeOn, d.brakeLifted); err != nil {
		return err
	}
	d.say("   Verified: evictd evicted %s, the protected pods still run, no OOM kill, the brake on and then lifted.", hog.name)
	return nil
}

// nodeKubeconfig writes a kubeconfig for evictd with the identity its
// DaemonSet pod on the node holds: --evictd-kubeconfig's ServiceAccount (as
// the API server names it), with a token bound to a stand-in pod on the node,
// which the admin client creates. It returns the file's path.
func (d *demo) nodeKubeconfig(ctx context.Context) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", d.evictdKubeconfig)
	if err != nil {
		return "", fmt.Errorf("--evictd-kubeconfig %q: %w", d.evictdKubeconfig, err)
	}
	self, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := self.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("who is --evictd-kubeconfig's user: %w", err)
	}
	sa, err := serviceAccountOf(review.Status.UserInfo.Username)
	if err != nil {
		return "", fmt.Errorf("--evictd-kubeconfig: %w", err)
	}
	pod, token, err := framework.BindEvictdToNode(ctx, d.client, sa, nodeName)
	if err != nil {
		return "", err
	}
	d.standIn = pod
	raw, err := clientcmd.LoadFromFile(d.evictdKubeconfig)
	if err != nil {
		return "", err
	}
	for _, a := range raw.AuthInfos {
		a.Token, a.TokenFile = token, ""
	}
	path := filepath.Join(d.workDir, "evictd-"+nodeName+".kubeconfig")
	if err := clientcmd.WriteToFile(*raw, path); err != nil {
		return "", err
	}
	return path, nil
}

// serviceAccountOf reads the namespace and name out of a ServiceAccount's
// user name, system:serviceaccount:NAMESPACE:NAME.
func serviceAccountOf(user string) (types.NamespacedName, error) {
	const prefix = "system:serviceaccount:"
	rest, ok := strings.CutPrefix(user, prefix)
	ns, name, found := strings.Cut(rest, ":")
	if !ok || !found || ns == "" || name == "" || strings.Contains(name, ":") {
		return types.NamespacedName{}, fmt.Errorf("user %q is not a ServiceAccount (%sNAMESPACE:NAME)", user, prefix)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// endScrapes keeps scraping a little after the episode, so the dashboard
// shows the node at rest again, and then stops.
func (d *demo) endScrapes(ctx context.Context) error {
	if d.scrapes == nil {
		return nil
	}
	select {
	case <-ctx.Done():
	case <-time.After(scrapeTail):
	}
	n, err := d.scrapes.Stop()
	d.scrapes = nil
	if err != nil {
		return fmt.Errorf("scraping evictd for the dashboard: %w", err)
	}
	d.say("   Kept %d scrapes of evictd's /metrics in %s.", n, d.scrapeDir)
	return nil
}

// priorities are the demo's PriorityClasses and their values.
var priorities = map[string]int32{"web": 1000, "important": 10000}

func (d *demo) createWorkloads(ctx context.Context) error {
	for name, v := range priorities {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
		if _, err := d.client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if _, err := d.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Pods are admitted once the namespace's default ServiceAccount exists;
	// the controller manager creates it.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("namespace %s has no default ServiceAccount: %w", namespace, err)
	}
	d.say("   %-22s %-11s %-32s %-8s %s", "POD", "QOS", "PRIORITY", "MEMORY", "")
	for _, p := range pods {
		if _, err := d.client.CoreV1().Pods(namespace).Create(ctx, p.object(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", p.name, err)
		}
	}
	mirror, err := d.node.CreateStaticPod(ctx, staticPod.object())
	if err != nil {
		return err
	}
	d.mirror = mirror.Name
	for _, p := range append(append([]pod{}, pods...), staticPod) {
		name := p.name
		if p.name == staticPod.name {
			name = d.mirror
		}
		got, err := d.waitRunning(ctx, name)
		if err != nil {
			return err
		}
		class := p.class
		if class == "" {
			class = "0 (no class)"
		} else {
			class = fmt.Sprintf("%d (%s)", ptr.Deref(got.Spec.Priority, 0), class)
		}
		d.say("   %-22s %-11s %-32s %-8s %s", name, nodesim.QOSClass(got), class, fmt.Sprintf("%d MiB", p.holdMiB), p.note)
	}
	pdb := podtest.PDB(namespace, "web-frontend", 1, map[string]string{"app": "web"})
	if _, err := d.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The disruption controller must have counted the pod before the
	// budget protects it.
	_, err = podtest.WaitPDB(ctx, d.client, namespace, pdb.Name, time.Minute, func(got *policyv1.PodDisruptionBudget) bool {
		return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 1
	})
	return err
}

func (d *demo) waitRunning(ctx context.Context, name string) (*corev1.Pod, error) {
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := d.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s did not start: %w", name, err)
	}
	// Give the process a moment to touch its memory, so the ranking
	// below shows real usage.
	time.Sleep(300 * time.Millisecond)
	return got, nil
}

// showRanking captures the node's stats with `evictd observe` and its pods
// from the API server, as an operator would with kubectl, and prints
// `evictd rank`'s table.
func (d *demo) showRanking(ctx context.Context) error {
	evictd := filepath.Join(d.binDir, "evictd")
	summary := filepath.Join(d.logDir, "summary.json")
	podsFile := filepath.Join(d.logDir, "pods.json")
	obs, err := exec.CommandContext(ctx, evictd, "observe", "-o", "json", "--host-root", d.node.HostRoot, "--cgroup-root", d.node.CgroupRoot, "--node-cgroup", d.node.CgroupRoot).Output()
	if err != nil {
		return fmt.Errorf("evictd observe: %w", err)
	}
	if err := os.WriteFile(summary, obs, 0o644); err != nil {
		return err
	}
	list, err := d.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return err
	}
	list.APIVersion, list.Kind = "v1", "PodList"
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := os.WriteFile(podsFile, b, 0o644); err != nil {
		return err
	}
	table, err := exec.CommandContext(ctx, evictd, "rank", "--summary", summary, "--pods", podsFile, "--signal", "memory.available", "-o", "table").CombinedOutput()
	if err != nil {
		return fmt.Errorf("evictd rank: %v: %s", err, table)
	}
	for _, line := range strings.Split(strings.TrimRight(string(table), "\n"), "\n") {
		d.say("   %s", line)
	}
	d.say("   Order: pods using more than they requested first, then lower priority, then larger usage above request.")
	return nil
}

// watchPressure prints memory.available as evictd sees it every second and
// evictd's log lines as they come, until the hog has been evicted and
// gone and memory.available is back above the threshold, or
// pressureTimeout.
func (d *demo) watchPressure(ctx context.Context) error {
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var lastPrint time.Time
	hogGone, recovered := false, false
	var victims []string
	for !(hogGone && recovered) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Since(start) > pressureTimeout {
			d.say("   (still under pressure after %s; stopping here)", pressureTimeout)
			return nil
		}
		if d.evictd.Exited() {
			return fmt.Errorf("evictd exited:\n%s", d.evictd.Tail(20))
		}
		for _, l := range d.newLogLines() {
			if line := narrate(l); line != "" {
				d.say(" %s  %s", elapsed(l.TS.Sub(start)), line)
			}
			switch {
			case l.Msg == "evicted pod":
				name := strings.TrimPrefix(l.Pod, namespace+"/")
				if why := rankNote(name, l.Reason, victims); why != "" {
					d.say("             %s", why)
				}
				victims = append(victims, name)
				reason, _, _ := strings.Cut(l.Reason, ";")
				d.evicted[name] = fmt.Sprintf("evicted as rank %v: %s", l.Fields["rank"], reason)
			case l.Msg == "evicted pod gone" && l.Pod == namespace+"/"+d.hogName:
				hogGone, d.hogGone = true, true
			case l.Msg == msgBrakeOn && l.Str("resource") == string(nodebrake.Memory):
				d.brakeOn = true
			}
		}
		if time.Since(lastPrint) >= time.Second {
			lastPrint = time.Now()
			m, err := d.evictd.Scrape(ctx)
			if err != nil {
				continue
			}
			avail, err := m.Lookup("evictd_signal_available_bytes", map[string]string{"signal": "memory.available"})
			if err != nil {
				continue // not observed yet
			}
			d.say(" %s  memory.available %4.0f MiB %s", elapsed(time.Since(start)), avail/mib, bar(avail))
			recovered = avail >= threshold
		}
	}
	return nil
}

// msgBrakeOn is evictd's log line when it puts the node brake on.
const msgBrakeOn = "node brake on: new pods kept away until the episode ends"

// rankNote tells, for a pod evictd evicted (its log's reason), why it went
// before the memory leak or after the others (before, the pods evicted
// earlier in the episode), in the kubelet's order: pods using more than
// they request first, lower priority first among them. The priorities are
// the demo's own (its pods' classes). "" when that order does not explain it.
func rankNote(name, reason string, before []string) string {
	over := strings.Contains(reason, "exceeds request")
	hogPrio := priorities[hog.class]
	if name == hog.name {
		var lower []string
		for _, b := range before {
			if prio, ok := demoPriority(b); ok && prio < hogPrio {
				lower = append(lower, b)
			}
		}
		if len(lower) == 0 {
			return fmt.Sprintf("rank: it uses more than it requests, at priority %d", hogPrio)
		}
		return fmt.Sprintf("rank: it uses more than it requests, at priority %d; %s, of lower priority, went first and it grows on", hogPrio, strings.Join(lower, " and "))
	}
	if prio, ok := demoPriority(name); ok && over && prio < hogPrio {
		return fmt.Sprintf("rank: before %s, though that one grows: both use more than they request, and priority %d is below its %d", hog.name, prio, hogPrio)
	}
	return ""
}

// demoPriority is the priority of one of the demo's pods, by its class.
func demoPriority(name string) (int32, bool) {
	for _, p := range append(append([]pod{}, pods...), staticPod, hog) {
		if p.name == name {
			return priorities[p.class], true
		}
	}
	return 0, false
}

// bar draws memory.available against the node's memory, with the threshold
// marked.
func bar(avail float64) string {
	const width = 40
	n := int(avail / nodeMemory * width)
	n = min(max(n, 0), width)
	mark := threshold * width / nodeMemory
	var b strings.Builder
	b.WriteByte('[')
	for i := range width {
		switch {
		case i == mark:
			b.WriteByte('|')
		case i < n:
			b.WriteByte('#')
		default:
			b.WriteByte('.')
		}
	}
	b.WriteString("]")
	if avail < threshold {
		b.WriteString("  below the threshold!")
	}
	return b.String()
}

func elapsed(d time.Duration) string { return fmt.Sprintf("t+%5.1fs", d.Seconds()) }

// narrate turns one of evictd's log lines into a sentence, or "" for lines
// the demo does not tell about.
func narrate(l evictdproc.Entry) string {
	switch l.Msg {
	case "threshold met":
		avail, _ := l.Num("available")
		return fmt.Sprintf("evictd: threshold met: %s (available %.0f MiB)", l.Str("threshold"), avail/mib)
	case "acting early: threshold crossing predicted":
		rate, _ := l.Num("fillRateBytesPerSecond")
		return fmt.Sprintf("evictd: memory is falling at %.0f MiB/s and will cross the threshold in %s: acting now, before it does",
			rate/mib, roundDur(l.Str("timeLeft")))
	case "evicted pod":
		g, _ := l.Num("gracePeriodSeconds")
		return fmt.Sprintf("evictd: EVICTED %s (rank %v, %.0f s to shut down)\n             why: %s", l.Pod, l.Fields["rank"], g, l.Reason)
	case "eviction blocked by PodDisruptionBudget":
		return fmt.Sprintf("evictd: %s is protected by its PodDisruptionBudget (the API server answered 429): trying the next pod", l.Pod)
	case msgBrakeOn:
		return fmt.Sprintf("evictd: node brake on: taint %s and condition %s=True on the Node, so new pods go elsewhere until the episode ends",
			l.Str("taint"), l.Str("condition"))
	case "node brake lifted":
		return fmt.Sprintf("evictd: node brake lifted: taint %s and condition %s gone from the Node", l.Str("taint"), l.Str("condition"))
	case "evicted pod gone":
		return fmt.Sprintf("evictd: %s is gone (%s after the eviction); its memory is free again", l.Pod, roundDur(l.Str("took")))
	case "pressure episode started":
		return "evictd: pressure episode started"
	case "pressure episode ended":
		return fmt.Sprintf("evictd: pressure episode ended (it lasted %s)", roundDur(l.Str("lasted")))
	case "no pod to evict", "eviction failed", "pod in flight not gone in time; its reclaim no longer counts":
		return fmt.Sprintf("evictd: %s %s %s", l.Msg, l.Pod, l.Reason)
	}
	return ""
}

func roundDur(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return d.Round(10 * time.Millisecond).String()
}

// newLogLines returns the complete log lines evictd wrote since the last
// call.
func (d *demo) newLogLines() []evictdproc.Entry {
	f, err := os.Open(d.evictd.LogPath())
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(d.logOff, io.SeekStart); err != nil {
		return nil
	}
	var out []evictdproc.Entry
	n, _ := evictdproc.ReadEntries(f, func(l evictdproc.Entry) { out = append(out, l) })
	d.logOff += n
	return out
}

// skipLog moves past what evictd logged at start-up.
func (d *demo) skipLog() { d.newLogLines() }

// podsPresent lists the demo's pods: true for those not being deleted.
func (d *demo) podsPresent(ctx context.Context) (map[string]bool, error) {
	list, err := d.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for _, p := range list.Items {
		present[p.Name] = p.DeletionTimestamp == nil
	}
	return present, nil
}

func (d *demo) showFinal(ctx context.Context) error {
	time.Sleep(time.Second)
	present, err := d.podsPresent(ctx)
	if err != nil {
		return err
	}
	all := append(append([]pod{}, pods...), staticPod, hog)
	for _, p := range all {
		name := p.name
		if p.name == staticPod.name {
			name = d.mirror
		}
		state := "running    " + p.note
		switch {
		case d.evicted[name] != "":
			state = d.evicted[name]
		case !present[name]:
			state = "gone"
		}
		d.say("   %-22s %s", name, state)
	}
	m, err := d.evictd.Scrape(ctx)
	if err != nil {
		return err
	}
	avail := m.Sum("evictd_signal_available_bytes", map[string]string{"signal": "memory.available"})
	d.say("   memory.available is back at %.0f MiB; the kernel OOM killer struck %d times.", avail/mib, d.node.OOMKills())
	d.say("   evictd_evictions_total: %.0f evicted, %.0f refused by a PodDisruptionBudget.", m.Evictions("evicted"), m.Evictions("pdb_blocked"))
	if u, err := evictdproc.ReadUsage("/proc", d.evictd.Pid()); err == nil {
		d.say("   evictd itself: %.0f MiB resident, %.2f s of CPU so far.", u.RSS/mib, u.CPU.Seconds())
	}
	node, err := d.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if on := brakeOf(node); on != "" {
		d.say("   The node brake is still on (%s):", on)
		d.say("   the episode stays open until memory.available has stayed above the threshold for the pressure")
		d.say("   transition period (--eviction-pressure-transition-period, 5 minutes, the kubelet's default), so that")
		d.say("   the node is not refilled at once. The demo does not wait for it.")
	}
	return nil
}

// brakeOf describes evictd's memory brake on node (its taint, its condition
// True), or "" when neither is there.
func brakeOf(node *corev1.Node) string {
	var on []string
	for _, t := range node.Spec.Taints {
		if t.Key == nodebrake.TaintKey(nodebrake.Memory) {
			on = append(on, "taint "+t.Key+":"+string(t.Effect))
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == nodebrake.ConditionType(nodebrake.Memory) && c.Status == corev1.ConditionTrue {
			on = append(on, "condition "+string(c.Type)+"=True")
		}
	}
	return strings.Join(on, ", ")
}

// stopEvictd stops evictd as a DaemonSet's rollout would, tells what it
// logged on the way out, and waits for the Node to show its brake lifted:
// a clean exit leaves nothing of evictd's on the Node.
func (d *demo) stopEvictd(ctx context.Context) error {
	killed, code, err := d.evictd.Stop(15 * time.Second)
	if err != nil || killed || code != 0 {
		return fmt.Errorf("evictd did not stop cleanly (killed %v, exit code %d, %v):\n%s", killed, code, err, d.evictd.Tail(20))
	}
	for _, l := range d.newLogLines() {
		if line := narrate(l); line != "" {
			d.say("   %s", line)
		}
	}
	var left string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, liftTimeout, true, func(ctx context.Context) (bool, error) {
		node, err := d.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		left = brakeOf(node)
		return left == "", nil
	})
	if err != nil {
		return fmt.Errorf("evictd exited cleanly but the Node still carries its brake after %s (%s): lift it with evictd cleanup", liftTimeout, left)
	}
	d.brakeLifted = true
	d.say("   evictd exited cleanly, and the Node carries no taint or condition of evictd's: it lifts its brake on the way out.")
	d.say("   Its log is kept in %s.", d.evictd.LogPath())
	return nil
}

// protected are the pods evictd must never evict in the demo: the one
// its PodDisruptionBudget keeps, the Guaranteed one under its request, the
// critical one (and the static pod, by its mirror's name).
var protected = []string{"web-frontend", "database", "node-agent"}

// storyHeld checks the demo's outcome for --verify: evictd evicted the hog
// (its "evicted pod" line, which follows the Eviction API's answer) and saw
// it gone, every protected pod is still there undeleted, the OOM killer
// never struck, and evictd's brake went on during the episode and was gone
// from the Node once evictd had stopped. Pods ranked before the hog may have
// been evicted too.
func storyHeld(evicted map[string]string, present map[string]bool, hogGone bool, mirror string, oomKills int, brakeOn, brakeLifted bool) error {
	var errs []error
	if evicted[hog.name] == "" || !hogGone {
		errs = append(errs, fmt.Errorf("the hog %s was not evicted and gone (evicted: %v, gone: %v)", hog.name, evicted, hogGone))
	}
	for _, name := range append(append([]string{}, protected...), mirror) {
		if evicted[name] != "" || !present[name] {
			errs = append(errs, fmt.Errorf("protected pod %s: evicted %q, still running %v", name, evicted[name], present[name]))
		}
	}
	if oomKills != 0 {
		errs = append(errs, fmt.Errorf("the kernel OOM killer struck %d times", oomKills))
	}
	if !brakeOn {
		errs = append(errs, errors.New("evictd never logged its memory brake on"))
	}
	if !brakeLifted {
		errs = append(errs, errors.New("the Node still carried evictd's brake after evictd stopped"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("the demo's story did not hold: %w", errors.Join(errs...))
	}
	return nil
}

// cgroupVersion tells which cgroup version the host mounts at
// /sys/fs/cgroup, for the demo's words: only v2's root has
// cgroup.controllers.
func cgroupVersion() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "v2"
	}
	return "v1"
}

// cleanup stops evictd and the node; it is safe after a partial start.
func (d *demo) cleanup() {
	if d.scrapes != nil {
		_, _ = d.scrapes.Stop()
	}
	d.step(9, "Cleaning up: the node's processes, cgroups and directories.")
	if d.evictd != nil && !d.evictd.Exited() {
		if killed, code, err := d.evictd.Stop(15 * time.Second); killed || code != 0 || err != nil {
			d.say("   evictd did not stop cleanly (killed %v, exit code %d, %v)", killed, code, err)
		}
	}
	if d.node != nil {
		// Delete the workloads first so the stand-in has nothing left to
		// run; the node's Stop kills whatever remains.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.client.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
		if d.standIn != nil {
			_ = d.client.CoreV1().Pods(d.standIn.Namespace).Delete(ctx, d.standIn.Name, metav1.DeleteOptions{})
		}
		if err := d.node.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			d.say("   the node was not removed completely: %v", err)
		}
	}
}
