// SPDX-License-Identifier: Apache-2.0

//go:build vmnode && vmnodebench

package vmnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// peerConfig is what runs beside the kubelet in a run of make bench-peers.
type peerConfig struct {
	name   string
	peer   *Peer    // a daemon of Peers; nil: none
	evictd []string // evictd's extra flags when it runs (its DaemonSet's defaults: empty, not nil)
}

var peerConfigs = []peerConfig{
	{name: "kubelet"},
	{name: "earlyoom", peer: &PeerEarlyoom},
	{name: "earlyoom (tuned)", peer: &PeerEarlyoomTuned},
	{name: "systemd-oomd", peer: &PeerOomd},
	{name: "evictd", evictd: []string{}},
	{name: "evictd + actuator", evictd: []string{"--actuator"}},
}

// peerScenario sets up its pods in ns and returns the pods that start the
// pressure (the leaker, or a rollout's pods), created at once when the run
// starts, and the run's expectations (Want, Critical, Guarded). num is its
// number in issue 35.
type peerScenario struct {
	num  int
	name string
	// pods is how many pods setup and the pressure put on the node.
	pods  int
	setup func(t *testing.T, ctx context.Context, n *Node, ns string, avail int64) ([]*corev1.Pod, PeerRun)
}

// peersRate is the leak's rate, MiB/s: slow enough that the kubelet alone
// acts before the guest livelocks (TestNodeHeadToHead), so every
// configuration has a result to show.
const peersRate = 20

func leakerPod(ns string, from int64, priorityClass string) *corev1.Pod {
	p := workloadPod(ns, "leaker", 64<<20, 0, "--hold-mib="+strconv.FormatInt(from, 10),
		"--grow-mib-per-sec="+strconv.Itoa(peersRate), "--grow-to-mib="+strconv.FormatInt(from+3000, 10))
	p.Spec.PriorityClassName = priorityClass
	return p
}

// bystanders are the pods of scenarios 1 and 2 besides the leaker: a
// Burstable pod well within its request, a small BestEffort pod and a
// critical one.
func bystanders(t *testing.T, ctx context.Context, n *Node, ns string) {
	createRunning(t, ctx, n,
		workloadPod(ns, "quiet", 128<<20, 0, "--hold-mib=32"),
		workloadPod(ns, "besteffort", 0, 0, "--hold-mib=16"),
		criticalPod(ns))
}

func criticalPod(ns string) *corev1.Pod {
	p := workloadPod(ns, "critical", 64<<20, 0, "--hold-mib=48")
	p.Spec.PriorityClassName = "system-node-critical"
	return p
}

var peerScenarios = []peerScenario{
	{
		// 1. A Burstable pod leaking past its request beside a small
		// BestEffort pod: an oom_score killer may take the BestEffort
		// first (its oom_score_adj is 1000), which frees little.
		num:  1,
		pods: 4,
		name: "leak beside BestEffort",
		setup: func(t *testing.T, ctx context.Context, n *Node, ns string, avail int64) ([]*corev1.Pod, PeerRun) {
			bystanders(t, ctx, n, ns)
			return []*corev1.Pod{leakerPod(ns, max(avail>>20-650, 64), "")}, PeerRun{Want: "leaker", Critical: []string{"critical"}}
		},
	},
	{
		// 2. A garbage-collected heap growing with churn (a JVM or Go
		// service under a leak): the leak grows under a churn that maps,
		// touches and frees 64 MiB over and over, as a collector's cycles
		// do, so memory.available swings while it falls. Its limit is
		// above what the node has: the node runs short first.
		num:  2,
		pods: 4,
		name: "GC'd heap growing with churn",
		setup: func(t *testing.T, ctx context.Context, n *Node, ns string, avail int64) ([]*corev1.Pod, PeerRun) {
			bystanders(t, ctx, n, ns)
			heap := leakerPod(ns, max(avail>>20-650, 64), "")
			c := &heap.Spec.Containers[0]
			c.Args = append(c.Args, "--churn-mib=64", "--churn-pause=100ms")
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(avail+512<<20, resource.BinarySI)}
			return []*corev1.Pod{heap}, PeerRun{Want: "leaker", Critical: []string{"critical"}}
		},
	},
	{
		// 3. A page-cache-heavy database beside a leaker: the db re-reads
		// a 384 MiB file, its active file set (charged to its cgroup and
		// counted in its working set, within its request); the leaker
		// grows. A killer that takes the cache for the db's memory, or the
		// reclaim of it for the db's fault, takes the db.
		num:  3,
		pods: 4,
		name: "page-cache database beside a leaker",
		setup: func(t *testing.T, ctx context.Context, n *Node, ns string, avail int64) ([]*corev1.Pod, PeerRun) {
			db := withEmptyDir(workloadPod(ns, "db", 512<<20, 0, "--hold-mib=16", "--reread-mib=384", "--reread-readers=2", "--reread-dir=/data"), "/data")
			pods := createRunning(t, ctx, n, db, workloadPod(ns, "besteffort", 0, 0, "--hold-mib=16"), criticalPod(ns))
			podLogLine(t, ctx, n, pods[0], "rereading it from now on", 3*time.Minute)
			// The leak starts from what is left after the cache.
			left, err := evictdAvailable(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			return []*corev1.Pod{leakerPod(ns, max(left>>20-650, 64), "")}, PeerRun{Want: "leaker", Critical: []string{"critical"}}
		},
	},
	{
		// 4. A rollout: twelve pods start at once, each within its
		// request, beside a pod that has held far more than its request
		// for a while (the kubelet's first candidate). Together they ask
		// for more than the node has left.
		num:  4,
		pods: 14,
		name: "rollout burst beside an over-request pod",
		setup: func(t *testing.T, ctx context.Context, n *Node, ns string, avail int64) ([]*corev1.Pod, PeerRun) {
			createRunning(t, ctx, n,
				workloadPod(ns, "hog", 64<<20, 0, "--hold-mib="+strconv.FormatInt(max(avail>>20-600, 64), 10)),
				criticalPod(ns))
			var burst []*corev1.Pod
			for i := range 12 {
				burst = append(burst, workloadPod(ns, fmt.Sprintf("rollout-%02d", i), 64<<20, 0, "--hold-mib=48"))
			}
			return burst, PeerRun{Want: "hog", Critical: []string{"critical"}}
		},
	},
	{
		// 5. A PodDisruptionBudget-guarded pair of replicas, each larger
		// than the leaker will get and within its request: the kubelet's
		// order takes the leaker (the only pod over its request); a killer
		// by size takes a replica, which the budget allows no disruption
		// of.
		num:  5,
		pods: 4,
		name: "PDB-guarded replicas, the largest pods",
		setup: func(t *testing.T, ctx context.Context, n *Node, ns string, avail int64) ([]*corev1.Pod, PeerRun) {
			replicaMiB := (avail >> 20) * 3 / 10
			labels := map[string]string{"app": "replicas"}
			pdb := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "replicas", Namespace: ns},
				Spec: policyv1.PodDisruptionBudgetSpec{
					MinAvailable: ptr.To(intstr.FromInt32(2)),
					Selector:     &metav1.LabelSelector{MatchLabels: labels},
				},
			}
			if _, err := n.Cluster.Admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var replicas []*corev1.Pod
			for _, name := range []string{"replica-a", "replica-b"} {
				p := workloadPod(ns, name, (replicaMiB+64)<<20, 0, "--hold-mib="+strconv.FormatInt(replicaMiB, 10))
				p.Labels = labels
				replicas = append(replicas, p)
			}
			createRunning(t, ctx, n, append(replicas, criticalPod(ns))...)
			waitPDBSettled(t, ctx, n, ns, "replicas")
			return []*corev1.Pod{leakerPod(ns, 64, "")}, PeerRun{Want: "leaker", Critical: []string{"critical"}, Guarded: []string{"replica-a", "replica-b"}}
		},
	},
	{
		// 6. A high-priority pod with the largest RSS beside a
		// low-priority leaker: the kubelet's order takes the leaker (the
		// lower priority, both over their requests); a killer by RSS or
		// oom_score takes the big one.
		num:  6,
		pods: 3,
		name: "high-priority big pod, low-priority leaker",
		setup: func(t *testing.T, ctx context.Context, n *Node, ns string, avail int64) ([]*corev1.Pod, PeerRun) {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "peers-high"}, Value: 1000}
			if _, err := n.Cluster.Admin.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			// big holds more than the leaker will reach before the node
			// runs out: (avail - 300 MiB) / 2 at evictd's threshold.
			bigMiB := (avail>>20)/2 + 100
			big := workloadPod(ns, "big", 64<<20, 0, "--hold-mib="+strconv.FormatInt(bigMiB, 10))
			big.Spec.PriorityClassName = pc.Name
			createRunning(t, ctx, n, big, criticalPod(ns))
			return []*corev1.Pod{leakerPod(ns, 64, "")}, PeerRun{Want: "leaker", Critical: []string{"critical"}}
		},
	},
}

// waitPDBSettled waits until the disruption controller has counted the
// budget's pods: a budget it has not yet looked at refuses nothing.
func waitPDBSettled(t *testing.T, ctx context.Context, n *Node, ns, name string) {
	t.Helper()
	if err := n.poll(ctx, time.Minute, "the disruption controller to count "+name, func(ctx context.Context) error {
		pdb, err := n.Cluster.Admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.ExpectedPods == 0 {
			return fmt.Errorf("status %+v", pdb.Status)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestNodePeers: every scenario under every configuration of issue 35, one
// run each, on the systemd node: the table of docs/performance.md (make
// bench-peers; _output/bench/peers-node.txt). A benchmark, not a test of
// make test: the kubelet alone and the peers can leave the guest in a
// reclaim livelock for minutes. It asserts only that each run has a result (readings of memory.available).
func TestNodePeers(t *testing.T) {
	var n *Node
	switch node := os.Getenv("EVICTD_PEERS_NODE"); node {
	case "", "one-disk":
		n = sharedNode(t)
	case "swap":
		// The node with swap (and a dedicated imagefs), where systemd-oomd's
		// ManagedOOMSwap on the root slice has something to watch.
		n = imageFsNode(t)
	default:
		t.Fatalf("EVICTD_PEERS_NODE=%q: want one-disk (the default) or swap", node)
	}
	if n.CgroupDriver != Systemd {
		t.Fatalf("the node runs the %s cgroup driver; systemd-oomd needs the systemd driver's kubepods.slice", n.CgroupDriver)
	}
	// Configurations' names, comma-separated, to run those alone, in that
	// order: a configuration that may livelock the guest goes last.
	configs := peerConfigs
	if v := os.Getenv("EVICTD_PEERS_ONLY"); v != "" {
		configs = nil
		for _, name := range strings.Split(v, ",") {
			i := slices.IndexFunc(peerConfigs, func(c peerConfig) bool { return c.name == name })
			if i < 0 {
				t.Fatalf("EVICTD_PEERS_ONLY=%q: %q is no configuration's name", v, name)
			}
			configs = append(configs, peerConfigs[i])
		}
	}
	scenarios := peerScenariosOf(t, os.Getenv("EVICTD_PEERS_SCENARIOS"))
	ceiling := podCeilingOf(t, n, os.Getenv("EVICTD_PEERS_PODS"), scenarios)
	var runs []PeerRun
	for _, cfg := range configs {
		for _, sc := range scenarios {
			t.Run(cfg.name+"/"+sc.name, func(t *testing.T) {
				r := peerRun(t, n, cfg, sc, ceiling)
				runs = append(runs, r)
				t.Logf("%s", PeersTable([]PeerRun{r}, evictdMemoryThreshold))
			})
		}
	}
	for _, r := range runs {
		if len(r.Samples) == 0 {
			t.Errorf("%s / %s: no reading of memory.available: the run has no result", r.Config, r.Scenario)
		}
	}
	table := PeersTable(runs, evictdMemoryThreshold)
	t.Logf("peers on the VM node (TCG guest, %d MiB/s leak):\n%s", peersRate, table)
	overhead := OverheadTable(runs)
	t.Logf("each daemon's own cost (idle: the %s before the pressure; run: from then to the run's end):\n%s", peersIdle, overhead)
	table += "\n" + overhead
	if dir := os.Getenv("EVICTD_BENCH_OUT"); dir != "" {
		name := "peers-node.txt"
		if os.Getenv("EVICTD_PEERS_NODE") == "swap" {
			name = "peers-node-swap.txt"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// daemon is the process whose cost the run reads: the peer's, evictd's,
// or none for the kubelet alone.
func (c peerConfig) daemon() string {
	switch {
	case c.peer != nil:
		return c.peer.Comm
	case c.evictd != nil:
		return "evictd"
	}
	return ""
}

// peersIdle is how long a run reads its daemon idle, the scenario's pods
// running, before the pressure starts.
const peersIdle = 20 * time.Second

// idleUsage reads comm's process, waits peersIdle and reads it again, and
// counts the pods on the node then. What cannot be read is said in the
// table, not a failure: the run's result is the eviction's.
func idleUsage(t *testing.T, ctx context.Context, n *Node, comm string) *DaemonUsage {
	u := &DaemonUsage{Daemon: comm}
	var err error
	if u.Idle, err = daemonSample(ctx, n, comm); err != nil {
		u.Unreadable = err.Error()
		return u
	}
	time.Sleep(peersIdle)
	if u.IdleEnd, err = daemonSample(ctx, n, comm); err != nil {
		u.Unreadable = err.Error()
		return u
	}
	pods, err := n.Cluster.Admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		t.Fatal(err)
	}
	u.Pods = len(pods.Items)
	return u
}

// daemonSampleScript prints, for the one process whose comm is $1, its PID,
// /proc/uptime, its /proc/PID/stat and the memory lines of its status.
// Two processes of that name are an error: the figures would mix them. One
// grep reads every comm: a shell reading them one by one took over a minute
// under TCG on a node of 110 pods.
const daemonSampleScript = `name=$1
set -- $(grep -lxF -- "$name" /proc/[0-9]*/comm 2>/dev/null)
[ $# -gt 0 ] || { echo "no process named $name" >&2; exit 1; }
[ $# -eq 1 ] || { echo "$# processes named $name: $*" >&2; exit 1; }
pid=${1%/comm}
pid=${pid#/proc/}
echo "pid $pid"
cat /proc/uptime "/proc/$pid/stat"
grep -E '^(VmRSS|VmHWM|RssAnon|RssFile):' "/proc/$pid/status"`

// daemonSample reads comm's process in the guest (daemonSampleScript).
func daemonSample(ctx context.Context, n *Node, comm string) (DaemonSample, error) {
	r, err := n.Exec(ctx, []string{"/bin/sh", "-c", daemonSampleScript, "sh", comm}, WithTimeout(time.Minute))
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return DaemonSample{}, err
	}
	return ParseDaemonSample(r.Stdout)
}

// peerScenariosOf are the scenarios a comma-separated list of their
// numbers names (EVICTD_PEERS_SCENARIOS), all of them for an empty one.
func peerScenariosOf(t *testing.T, list string) []peerScenario {
	if list == "" {
		return peerScenarios
	}
	var out []peerScenario
	for _, f := range strings.Split(list, ",") {
		num, err := strconv.Atoi(strings.TrimSpace(f))
		i := slices.IndexFunc(peerScenarios, func(sc peerScenario) bool { return sc.num == num })
		if err != nil || i < 0 {
			t.Fatalf("EVICTD_PEERS_SCENARIOS=%q: %q is not the number of a scenario", list, f)
		}
		out = append(out, peerScenarios[i])
	}
	return out
}

// peerRun sets the configuration up, starts the scenario's pressure, runs
// until the pod the kubelet's order would take has ended (or 4 minutes),
// and puts the node back.
func peerRun(t *testing.T, n *Node, cfg peerConfig, sc peerScenario, ceiling podCeiling) PeerRun {
	ctx := context.Background()
	var ev *corev1.Pod
	if cfg.evictd != nil {
		ev = evictdPodWith(t, n, cfg.evictd...)
	} else {
		removeEvictd(t, n)
	}
	waitNoMemoryPressure(t, n)
	waitQuietNode(t, n, ceiling.keep()...)
	ceiling.fill(t, ctx, n, sc.pods)
	if cfg.peer != nil {
		out, err := n.StartPeer(ctx, *cfg.peer)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s runs: %s", cfg.peer.Name, out)
		defer func() {
			if err := n.StopPeer(ctx, *cfg.peer); err != nil {
				t.Error(err)
			}
		}()
	}
	ns := newNamespace(t, n, "peers")
	avail, err := evictdAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	trigger, run := sc.setup(t, ctx, n, ns, avail)
	run.Config, run.Scenario = cfg.name, sc.name
	if comm := cfg.daemon(); comm != "" {
		run.Usage = idleUsage(t, ctx, n, comm)
		// Now, in case the run leaves the guest unable to answer.
		t.Logf("%s idle:\n%s", comm, OverheadTable([]PeerRun{run}))
	}
	logGuestLoad(t, ctx, n, "before the pressure")
	oomBefore, err := oomKills(ctx, n)
	if err != nil {
		t.Fatal(err)
	}

	rw := watchRun(t, n, ns, func(p *corev1.Pod, ev watch.EventType) string {
		if by := PeerFateOf(p); by != "" || ev != watch.Deleted {
			return by
		}
		return "deleted"
	}, evictdAvailable, 200*time.Millisecond, ceiling.keep()...)
	pressed := time.Now()
	for _, p := range trigger {
		if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ended := rw.waitEnded(run.Want, 4*time.Minute)
	time.Sleep(15 * time.Second)
	rw.stop()
	run.Ends, run.Samples = rw.ends, rw.samples
	uids := rw.uids
	var oomAfter int64
	if err := n.poll(ctx, 5*time.Minute, "the guest answering after the run", func(ctx context.Context) error {
		oomAfter, err = oomKills(ctx, n)
		return err
	}); err != nil {
		run.Unresponsive = 5 * time.Minute
		if u := run.Usage; u != nil {
			u.EndUnreadable = "the guest did not answer"
		}
		t.Logf("the guest has not answered: %v\n%s", err, n.Diagnostics())
	} else {
		run.OOMKills = oomAfter - oomBefore
		if u := run.Usage; u != nil && u.Unreadable == "" {
			if u.End, err = daemonSample(ctx, n, u.Daemon); err != nil {
				u.EndUnreadable = err.Error()
			}
		}
		// Whether the guest was short of memory or of CPU through the run
		// (a TCG guest at 110 pods can be both), and what evictd said.
		logGuestLoad(t, ctx, n, "after the run")
		if ev != nil {
			t.Logf("evictd's log since the pressure began:\n%s", tail(evictdLogSince(t, n, ev, pressed), 60))
		}
	}
	// A container the kernel killed outside its own limit shows exit 137
	// only, as a daemon's SIGKILL does: dmesg names the pod.
	if run.OOMKills > 0 {
		if out, err := n.Sh(ctx, "dmesg | grep 'oom-kill:'"); err == nil {
			killed := OOMKilledPods(out)
			for i, e := range run.Ends {
				if e.By == ByDaemon && killed[uids[e.Pod]] {
					run.Ends[i].By = ByOOM
				}
			}
		}
	}
	if cfg.peer == nil {
		// No daemon ran: a signal not the kernel's is none of theirs.
		for i, e := range run.Ends {
			if e.By == ByDaemon {
				run.Ends[i].By = "signal"
			}
		}
	}
	// The pod the kubelet's order takes ends the run: what is left goes, so
	// the next starts clean.
	if err := n.Cluster.Admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	if cfg.peer != nil {
		who, _ := n.Sh(ctx, "journalctl -b --no-pager -o cat -u earlyoom -u systemd-oomd --since=-6min | grep -iE 'kill|sending' | tail -n 20")
		t.Logf("what %s said it killed:\n%s", cfg.peer.Name, strings.TrimSpace(who))
	}
	if !ended {
		t.Logf("nothing ended %s within 4 minutes", run.Want)
	}
	t.Logf("%s / %s: ends %v, OOM kills %d, lowest %d MiB", cfg.name, sc.name, run.Ends, run.OOMKills, lowestOf(run.Samples)>>20)
	return run
}

// logGuestLoad logs the guest's load average and its CPU and memory
// pressure (the kernel's averages over 10 s, 1 and 5 minutes), one read.
func logGuestLoad(t *testing.T, ctx context.Context, n *Node, when string) {
	out, err := n.Sh(ctx, "cat /proc/loadavg; for r in cpu memory io; do echo \"$r $(head -n1 /proc/pressure/$r)\"; done")
	if err != nil {
		t.Logf("the guest's load %s: unreadable: %v", when, err)
		return
	}
	t.Logf("the guest's load %s (loadavg; some-pressure):\n%s", when, strings.TrimSpace(out))
}
