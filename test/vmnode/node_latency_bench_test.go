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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/bench"
)

// The v2 fast path's detection latency on the VM node,
// as hack/bench-latency.sh measures it on the host's cgroup v1: a pod takes
// the node across memory.available<300Mi in one step, and the time from the
// crossing to evictd noticing it is measured per wake-up configuration,
// against the timer alone. Run with `make bench-latency-node`; not in
// `make test` (it takes a quarter of an hour and measures, it does not
// check).
//
// Both ends are on the guest's clock: the crossing is timed inside the
// guest by `vmagent crossing` (memory.available as the kubelet computes it,
// read every millisecond), evictd's reaction by the ts of its own log lines.

const fillerImage = "evictd-filler:e2e-node"

func init() { extraImages["filler.tar"] = []string{"TestNodeLatency"} }

const (
	nodeLatencyThreshold = 300 << 20
	// nodeLatencyRestMiB is where the base pod leaves the node before a
	// step; each step is sized from the level just before it to end at
	// nodeLatencyEndMiB: lower, this guest starts to thrash on its
	// binaries' pages (its kubelet stalled near 160 MiB in the head-to-head)
	// and evictd's own probes and API calls time out with everything else.
	nodeLatencyRestMiB = 440
	nodeLatencyEndMiB  = 200
)

// The configurations, the timer-only baseline first. Acting early is off in
// the three that measure detection (a one-step crossing has no slope to
// predict from anyway); each trial is an episode of its own (a 1 s
// transition period), so each has its "threshold met".
type nodeLatencyConfig struct {
	name, about string
	flags       []string
}

var nodeLatencyConfigs = []nodeLatencyConfig{
	{"polling-1s", "timer only, every 1s", []string{"--wakeup-sources=none", "--housekeeping-interval=1s", "--act-early=false"}},
	{"adaptive", "adaptive polling only (1s, faster near a threshold)", []string{"--wakeup-sources=adaptive", "--act-early=false"}},
	{"psi+memory-events", "PSI triggers and kubepods' memory.events, 1s timer", []string{"--wakeup-sources=psi,memory-events", "--act-early=false"}},
	{"default", "as built: every wake-up source, acting early", nil},
	// The same sources with the pod cgroups writable (--actuator and its
	// mount): kubepods' PSI trigger arms, where the read-only mount leaves
	// only the system-wide one (docs/actuator.md).
	{"psi+memory-events+actuator", "as psi+memory-events, the pod cgroups writable: kubepods' PSI trigger armed", []string{"--wakeup-sources=psi,memory-events", "--act-early=false", "--actuator"}},
}

// The steps, each measured in every configuration. A step that free memory
// covers stalls no one and hits no limit, so PSI and memory.events have
// nothing to report (the first run of this benchmark); a step inside a
// memory limit that page cache fills is reclaim, which both report.
type nodeLatencyStep struct {
	name, about string
	// atLimit: the step pod first writes page cache up to nodeLatencyCacheGapMiB
	// below its step, and has a memory limit nodeLatencyLimitSlackMiB above
	// it, so that the step must reclaim that cache.
	atLimit bool
}

const (
	nodeLatencyLimitSlackMiB = 16
	nodeLatencyCacheGapMiB   = 32
)

var nodeLatencySteps = []nodeLatencyStep{
	{"plain", "a BestEffort pod maps anonymous memory in one MAP_POPULATE call; free memory covers it: no reclaim, no stall", false},
	{"at-limit", fmt.Sprintf("the pod first writes page cache %d MiB short of its step, and its limit is %d MiB above the step: the same MAP_POPULATE reclaims that cache inside the limit (memory.events max, a memory stall)",
		nodeLatencyCacheGapMiB, nodeLatencyLimitSlackMiB), true},
}

// pickByName is the items of all the environment variable env names, a
// comma-separated list, in its order; all of them when it is unset.
func pickByName[T any](t *testing.T, env string, all []T, name func(T) string) []T {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return all
	}
	var have []string
	for _, x := range all {
		have = append(have, name(x))
	}
	var picked []T
	for _, n := range strings.Split(v, ",") {
		i := slices.Index(have, n)
		if i < 0 {
			t.Fatalf("%s=%q: no %q (have %s)", env, v, n, strings.Join(have, ", "))
		}
		picked = append(picked, all[i])
	}
	return picked
}

func TestNodeLatency(t *testing.T) {
	n := sharedNode(t)
	ctx := context.Background()
	trials := 8
	if v := os.Getenv("EVICTD_BENCH_TRIALS"); v != "" {
		var err error
		if trials, err = strconv.Atoi(v); err != nil || trials < 1 {
			t.Fatalf("EVICTD_BENCH_TRIALS=%q: want a positive number", v)
		}
	}
	steps := pickByName(t, "EVICTD_BENCH_STEPS", nodeLatencySteps, func(s nodeLatencyStep) string { return s.name })
	const rest = 3 * time.Second // longer than evictd's 2 s fill-rate window
	ns := newNamespace(t, n, "latency")
	// The base pod holds what keeps the node resting at nodeLatencyRestMiB,
	// within its request so that the step pod ranks first. It is sized
	// anew for each configuration, once evictd's pod runs: every pod the
	// node ran leaves a little memory behind (kernel and runtime state), and
	// the node's level drifts down over the trials.
	sizeBase := func(t *testing.T) {
		if err := n.Cluster.Admin.CoreV1().Pods(ns).Delete(ctx, "base", metav1.DeleteOptions{}); err == nil {
			if err := n.poll(ctx, 2*time.Minute, "the old base pod gone", func(ctx context.Context) error {
				if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "base", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there (%v)", err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := n.Sh(ctx, "sync; echo 1 > /proc/sys/vm/drop_caches"); err != nil {
			t.Fatal(err)
		}
		avail, err := nodeAvailable(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		hold := avail>>20 - nodeLatencyRestMiB
		if hold < 64 {
			t.Fatalf("the node has only %d MiB available; the benchmark needs %d MiB more than its rest level", avail>>20, 64)
		}
		createRunning(t, ctx, n, workloadPod(ns, "base", (hold+64)<<20, (hold+64)<<20, "--hold-mib="+strconv.FormatInt(hold, 10)))
		// Until the base holds all it asked for: near the rest level, and
		// two reads 3 s apart within 8 MiB. (Stable alone is not enough: the
		// node is stable too before the base starts filling, and a step
		// taken then met the base's own fill.)
		last := int64(-1 << 40)
		if err := n.poll(ctx, 3*time.Minute, "memory.available settled", func(ctx context.Context) error {
			a, err := nodeAvailable(ctx, n)
			if err != nil {
				return err
			}
			d := a - last
			last = a
			if a > (nodeLatencyRestMiB+48)<<20 || d < -8<<20 || d > 8<<20 {
				time.Sleep(3 * time.Second)
				return fmt.Errorf("%d MiB, moving or above %d MiB", a>>20, nodeLatencyRestMiB+48)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// results[step][config]
	results := map[string]map[string][]NodeLatencyTrial{}
	rests := map[string][]int64{}
	var names []string
	configs := pickByName(t, "EVICTD_BENCH_CONFIGS", nodeLatencyConfigs, func(c nodeLatencyConfig) string { return c.name })
	for _, cfg := range configs {
		names = append(names, cfg.name)
		t.Run(cfg.name, func(t *testing.T) {
			ev := evictdPodWith(t, n, append(slices.Clone(cfg.flags), "--eviction-pressure-transition-period=1s")...)
			sizeBase(t)
			for _, step := range steps {
				if results[step.name] == nil {
					results[step.name] = map[string][]NodeLatencyTrial{}
				}
				for i := range trials {
					// A trial whose victim was the base (evictd acting on
					// something else) leaves the node resting far higher:
					// the next step would be too big for this guest.
					if _, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, "base", metav1.GetOptions{}); err != nil {
						t.Logf("the base pod is gone (%v): sized anew", err)
						sizeBase(t)
					}
					name := fmt.Sprintf("%s-%s-%d", step.name, strings.ReplaceAll(cfg.name, "+", "-"), i)
					tr, restAvail := nodeLatencyTrial(t, ctx, n, ns, ev, name, step, rest)
					rests[step.name] = append(rests[step.name], restAvail>>20)
					if tr.Miss != "" {
						t.Logf("%s trial %d: no figure: %s", step.name, i, tr.Miss)
					} else {
						t.Logf("%s trial %d: crossing→threshold met %s (found by %s), →evicted %s (%s); crossing timed to %s; rest %d MiB",
							step.name, i, bench.Ms(tr.Detection()), tr.WokenBy, bench.Ms(tr.ToEviction()), tr.Victim, tr.Crossing.Resolution().Round(time.Microsecond), restAvail>>20)
					}
					results[step.name][cfg.name] = append(results[step.name][cfg.name], tr)
				}
			}
		})
	}
	var out strings.Builder
	for _, step := range steps {
		out.WriteString(nodeLatencyReport(step, trials, rest, names, results[step.name], rests[step.name]))
		out.WriteString("\n")
		for _, name := range names {
			if len(results[step.name][name]) == 0 {
				t.Errorf("%s, %s step: no trial ran", name, step.name)
			}
		}
	}
	t.Logf("\n%s", out.String())
	if dir := os.Getenv("EVICTD_BENCH_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "latency-node.txt"), []byte(out.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// nodeLatencyReport is one step's table, every configuration against the
// timer alone.
func nodeLatencyReport(step nodeLatencyStep, trials int, rest time.Duration, names []string, results map[string][]NodeLatencyTrial, rests []int64) string {
	tab := NodeLatencyTable(fmt.Sprintf("Detection latency on the VM node, %s step: one-step crossing of memory.available<300Mi (down to ~%d MiB) -> evictd's \"threshold met\"\n"+
		"cgroup v2, Debian 6.1 kernel, QEMU TCG (emulated: every figure is slower than on hardware), 2 vCPUs, 2048 MiB; evictd in its DaemonSet pod; %d trials per configuration, %s rest before each",
		step.name, nodeLatencyEndMiB, trials, rest), names, results)
	tab.Notes = append(tab.Notes, step.name+" step: "+step.about)
	if len(rests) > 0 {
		tab.Notes = append(tab.Notes, fmt.Sprintf("memory.available before the steps: %d-%d MiB", slices.Min(rests), slices.Max(rests)))
	}
	tab.Notes = append(tab.Notes,
		"detection = ts of evictd's \"threshold met\" - the guest's last read of memory.available still at or above 300Mi (an upper bound, off by at most the resolution)",
		"to eviction = ts of evictd's \"evicted pod\" line (after the API server, on the host, answered through the guest's forward)",
		"found by = the wake-up that started the pass that met the threshold")
	for _, cfg := range nodeLatencyConfigs {
		if slices.Contains(names, cfg.name) {
			tab.Notes = append(tab.Notes, fmt.Sprintf("%s: %s (%s)", cfg.name, strings.Join(cfg.flags, " "), cfg.about))
		}
	}
	for _, name := range names {
		for i, tr := range results[name] {
			if tr.Miss != "" {
				tab.Notes = append(tab.Notes, fmt.Sprintf("%s trial %d: no figure: %s", name, i, tr.Miss))
			}
		}
	}
	return tab.String()
}

// nodeLatencyTrial runs one step: a filler pod that maps, in one call when
// signalled, what takes memory.available from where it rests to
// nodeLatencyEndMiB; the crossing timed in the guest, evictd's lines read
// from its log, and the pod's eviction waited for. It returns the trial and
// memory.available just before the step.
func nodeLatencyTrial(t *testing.T, ctx context.Context, n *Node, ns string, evictd *corev1.Pod, name string, step nodeLatencyStep, rest time.Duration) (NodeLatencyTrial, int64) {
	t.Helper()
	// Page cache turns active as the node runs (pod logs, the images'
	// binaries), which memory.available does not count: dropped before
	// each step, so every step starts from about the same level.
	if _, err := n.Sh(ctx, "sync; echo 1 > /proc/sys/vm/drop_caches"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	level, err := nodeAvailable(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if level < nodeLatencyThreshold+30<<20 {
		return NodeLatencyTrial{Miss: fmt.Sprintf("the node rested at %d MiB, too close to the threshold", level>>20)}, level
	}
	stepMiB := level>>20 - nodeLatencyEndMiB
	pod := workloadPod(ns, name, 0, 0, "--step-mib="+strconv.FormatInt(stepMiB, 10))
	if step.atLimit {
		// The cache fits under the limit before the step, and the step
		// squeezes all but the slack out of it.
		cacheMiB := stepMiB - nodeLatencyCacheGapMiB
		if cacheMiB < 64 {
			return NodeLatencyTrial{Miss: fmt.Sprintf("a %d MiB step leaves too little cache to reclaim", stepMiB)}, level
		}
		// A small request, so that the pod ranks first (usage over
		// request) ahead of the base, which keeps within its own.
		pod = workloadPod(ns, name, 16<<20, (stepMiB+nodeLatencyLimitSlackMiB)<<20,
			"--step-mib="+strconv.FormatInt(stepMiB, 10), "--cache-file=/cache/data", "--cache-mib="+strconv.FormatInt(cacheMiB, 10))
		withEmptyDir(pod, "/cache")
	}
	pod.Spec.Containers[0].Image = fillerImage
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	p := createRunning(t, ctx, n, pod)[0]
	if err := n.poll(ctx, time.Minute, name+" ready", func(ctx context.Context) error {
		out, err := n.Sh(ctx, fmt.Sprintf("cat /var/log/pods/%s_%s_%s/work/*.log", ns, name, p.UID))
		if err != nil {
			return err
		}
		if !strings.Contains(out, "filler: ready") {
			return fmt.Errorf("its log: %q", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(rest)
	cid, err := containerID(p, "work")
	if err != nil {
		t.Fatal(err)
	}
	r, err := n.Exec(ctx, []string{n.VMAgent, "crossing", "--below=" + strconv.Itoa(nodeLatencyThreshold), "--interval=1ms", "--timeout=60s",
		n.Ctr, "-n", "k8s.io", "task", "kill", "-s", "SIGUSR1", cid}, WithTimeout(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		return NodeLatencyTrial{Miss: err.Error()}, 0
	}
	c, err := ParseGuestCrossing(r.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	tr := NodeLatencyTrial{Crossing: c}
	if c.LastAboveUnixNano == 0 {
		tr.Miss = fmt.Sprintf("memory.available was already below the threshold before the step (%d MiB)", c.Before>>20)
	}
	from := c.Earliest().Add(-time.Second)
	err = n.poll(ctx, time.Minute, "evictd's lines for "+name, func(ctx context.Context) error {
		lines := CRILogLines(evictdLog(t, n, evictd))
		det, ok := FirstLogAfter(lines, from, "threshold met", map[string]string{"signal": "memory.available"})
		if !ok {
			return fmt.Errorf("no \"threshold met\" since %s", from.UTC().Format(time.RFC3339Nano))
		}
		ev, ok := FirstLogAfter(lines, from, "evicted pod", nil)
		if !ok {
			return fmt.Errorf("no \"evicted pod\" since %s", from.UTC().Format(time.RFC3339Nano))
		}
		tr.Detected, tr.WokenBy, tr.Evicted, tr.Victim = det.TS, det.Str("wokenBy"), ev.TS, ev.Str("pod")
		return nil
	})
	if err != nil {
		tr.Miss = err.Error()
	}
	if tr.Miss == "" && tr.Victim != ns+"/"+name {
		tr.Miss = fmt.Sprintf("evictd evicted %s first, not the step pod", tr.Victim)
	}
	// The next step starts from a quiet node: the pod gone, its memory back.
	// Deleted by the test only when evictd did not evict it, and then
	// gracefully: a pod object force-deleted while its process still holds
	// memory stops counting as evictd's reclaim at once, and evictd would
	// evict more.
	if tr.Miss != "" {
		_ = n.Cluster.Admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
	if err := n.poll(ctx, 2*time.Minute, name+" gone", func(ctx context.Context) error {
		_, err := n.Cluster.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("still there")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// And its memory back: the next step must start above the threshold.
	if err := n.poll(ctx, time.Minute, "memory.available back over 350 MiB", func(ctx context.Context) error {
		a, err := nodeAvailable(ctx, n)
		if err == nil && a < nodeLatencyThreshold+50<<20 {
			err = fmt.Errorf("%d MiB", a>>20)
		}
		return err
	}); err != nil {
		t.Log(err)
	}
	return tr, c.Before
}
