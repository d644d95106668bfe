// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"encoding/json"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// rankCase ranks pods (with the stats built for them) and expects an order.
type rankCase struct {
	name   string
	signal thresholds.Signal
	pods   []*v1.Pod
	stats  func(byName map[string]*v1.Pod) []statsapi.PodStats
	opts   Options
	want   []string
}

func (tc rankCase) run(t *testing.T) Result {
	t.Helper()
	byName := map[string]*v1.Pod{}
	for _, p := range tc.pods {
		byName[p.Name] = p
	}
	var s *statsapi.Summary
	if tc.stats != nil {
		s = summaryOf(tc.stats(byName)...)
	}
	sig := tc.signal
	if sig == "" {
		sig = thresholds.MemoryAvailable
	}
	res := Rank(sig, s, tc.pods, tc.opts)
	if got := names(res); !reflect.DeepEqual(got, tc.want) {
		t.Errorf("order = %v\n       want %v", got, tc.want)
		for _, c := range res.Candidates {
			t.Logf("  %s/%s eligible=%v prio=%d eff=%d usage=%d(%v) req=%d exceeds=%v skip=%q", c.Namespace, c.Name, c.Eligible, c.Priority, c.EffectivePriority, c.Usage, c.HasUsage, c.Request, c.ExceedsRequest, c.SkipReason)
		}
	}
	if res.Signal != string(sig) {
		t.Errorf("Signal = %q, want %q", res.Signal, sig)
	}
	return res
}

func TestRankMemory(t *testing.T) {
	tests := []rankCase{
		{
			// The kubelet docs: pods over their requests go first, by
			// priority, then by usage above request; pods under their
			// requests go last, by priority.
			name: "kubelet documented order",
			pods: []*v1.Pod{
				newPod("ns", "guaranteed-low", priority(0), memRequest("1Gi")),
				newPod("ns", "burstable-over-high", priority(1000), memRequest("100Mi")),
				newPod("ns", "besteffort-low", priority(0)),
				newPod("ns", "burstable-over-low", priority(0), memRequest("100Mi")),
				newPod("ns", "guaranteed-neg", priority(-5), memRequest("1Gi")),
			},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{
					podStats(p["guaranteed-low"], workingSet("900Mi")),
					podStats(p["burstable-over-high"], workingSet("2Gi")),
					podStats(p["besteffort-low"], workingSet("50Mi")),
					podStats(p["burstable-over-low"], workingSet("300Mi")),
					podStats(p["guaranteed-neg"], workingSet("10Mi")),
				}
			},
			// besteffort-low is 50Mi over its request of 0, burstable-over-low
			// 200Mi: the larger excess goes first.
			want: []string{"ns/burstable-over-low", "ns/besteffort-low", "ns/burstable-over-high", "ns/guaranteed-neg", "ns/guaranteed-low"},
		},
		{
			name: "usage equal to request does not exceed it",
			pods: []*v1.Pod{newPod("ns", "at", memRequest("100Mi")), newPod("ns", "over", priority(10), memRequest("100Mi"))},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{podStats(p["at"], workingSet("100Mi")), podStats(p["over"], workingSet("101Mi"))}
			},
			want: []string{"ns/over", "ns/at"},
		},
		{
			// The kubelet evicts pods without stats first (#123591).
			name: "pods without a usage figure rank after every pod with one",
			pods: []*v1.Pod{newPod("ns", "nostats", priority(-100)), newPod("ns", "under", priority(100), memRequest("1Gi")), newPod("ns", "nomemory", priority(-100))},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{podStats(p["under"], workingSet("1Mi")), podStats(p["nomemory"], processes(3))}
			},
			want: []string{"ns/under", "ns/nomemory", "ns/nostats"},
		},
		{
			name: "full ties break by namespace then name",
			pods: []*v1.Pod{newPod("b", "x"), newPod("a", "y"), newPod("a", "x"), newPod("b", "a")},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				var out []statsapi.PodStats
				for _, pod := range p {
					out = append(out, podStats(pod, workingSet("10Mi")))
				}
				return out
			},
			want: []string{"a/x", "a/y", "b/a", "b/x"},
		},
		{
			name:   "allocatableMemory.available ranks like memory",
			signal: thresholds.AllocatableMemoryAvailable,
			pods:   []*v1.Pod{newPod("ns", "small"), newPod("ns", "big")},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{podStats(p["small"], workingSet("1Mi")), podStats(p["big"], workingSet("1Gi"))}
			},
			want: []string{"ns/big", "ns/small"},
		},
		{
			name: "stats without a UID match by namespace/name; a different UID does not",
			pods: []*v1.Pod{newPod("ns", "byname"), newPod("ns", "recreated"), newPod("ns", "plain")},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				byName := podStats(p["byname"], workingSet("5Mi"))
				byName.PodRef.UID = ""
				old := podStats(p["recreated"], workingSet("9Gi"))
				old.PodRef.UID = "uid-of-the-previous-pod"
				return []statsapi.PodStats{byName, old, podStats(p["plain"], workingSet("1Mi"))}
			},
			want: []string{"ns/byname", "ns/plain", "ns/recreated"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func TestRankDiskAndPID(t *testing.T) {
	es := v1.ResourceEphemeralStorage
	tests := []rankCase{
		{
			name:   "nodefs.available uses the ephemeral-storage figure and request",
			signal: thresholds.NodeFsAvailable,
			pods: []*v1.Pod{
				newPod("ns", "under", request(es, "10Gi")),
				newPod("ns", "over-a-little", request(es, "1Gi")),
				newPod("ns", "over-a-lot", priority(5), request(es, "1Gi")),
			},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{
					podStats(p["under"], ephemeral(5<<30, 10)),
					podStats(p["over-a-little"], ephemeral(2<<30, 10)),
					podStats(p["over-a-lot"], ephemeral(8<<30, 10)),
				}
			},
			want: []string{"ns/over-a-little", "ns/over-a-lot", "ns/under"},
		},
		{
			name:   "imagefs.available falls back to rootfs, logs and local volumes",
			signal: thresholds.ImageFsAvailable,
			pods: []*v1.Pod{
				newPod("ns", "emptydir", func(p *v1.Pod) {
					p.Spec.Volumes = []v1.Volume{
						{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
						{Name: "ram", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
						{Name: "pvc", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
						{Name: "labels", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
						{Name: "huge", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}},
						{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
					}
				}),
				newPod("ns", "rootfs"),
			},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				e := podStats(p["emptydir"])
				e.Containers = []statsapi.ContainerStats{{Name: "main", Rootfs: &statsapi.FsStats{UsedBytes: u64(100)}, Logs: &statsapi.FsStats{UsedBytes: u64(50)}}}
				e.VolumeStats = []statsapi.VolumeStats{
					{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: u64(1000)}},
					{Name: "ram", FsStats: statsapi.FsStats{UsedBytes: u64(1 << 40)}},
					{Name: "pvc", FsStats: statsapi.FsStats{UsedBytes: u64(1 << 40)}},
					{Name: "labels", FsStats: statsapi.FsStats{UsedBytes: u64(1 << 40)}},
					{Name: "huge", FsStats: statsapi.FsStats{UsedBytes: u64(1 << 40)}},
					{Name: "cfg", FsStats: statsapi.FsStats{UsedBytes: u64(500)}},
				}
				r := podStats(p["rootfs"])
				r.Containers = []statsapi.ContainerStats{{Name: "main", Rootfs: &statsapi.FsStats{UsedBytes: u64(2000)}}}
				return []statsapi.PodStats{e, r}
			},
			// emptydir: 100+50+1000+500 = 1650: the default-medium emptyDir
			// and the configMap count (IsLocalEphemeralVolume); memory- and
			// hugepages-backed emptyDirs, the downwardAPI volume (tmpfs) and
			// the PVC do not. rootfs: 2000.
			want: []string{"ns/rootfs", "ns/emptydir"},
		},
		{
			// Inodes have no request: the ephemeral-storage request (bytes)
			// must not be subtracted from an inode count.
			name:   "inodes ignore the ephemeral-storage request",
			signal: thresholds.NodeFsInodesFree,
			pods: []*v1.Pod{
				newPod("ns", "few-inodes-no-request"),
				newPod("ns", "many-inodes-big-request", request(es, "100Gi")),
			},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{
					podStats(p["few-inodes-no-request"], ephemeral(1, 10)),
					podStats(p["many-inodes-big-request"], ephemeral(1, 5000)),
				}
			},
			want: []string{"ns/many-inodes-big-request", "ns/few-inodes-no-request"},
		},
		{
			// The kubelet: rankPIDPressure = orderedBy(priority, process).
			name:   "pid.available: priority, then process count",
			signal: thresholds.PIDAvailable,
			pods: []*v1.Pod{
				newPod("ns", "high-many", priority(100)),
				newPod("ns", "low-few", priority(0)),
				newPod("ns", "low-many", priority(0)),
				newPod("ns", "low-unknown", priority(-1)),
			},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{
					podStats(p["high-many"], processes(5000)),
					podStats(p["low-few"], processes(2)),
					podStats(p["low-many"], processes(300)),
				}
			},
			want: []string{"ns/low-many", "ns/low-few", "ns/high-many", "ns/low-unknown"},
		},
		{
			name:   "unknown signal: priority only",
			signal: thresholds.Signal("swap.available"),
			pods:   []*v1.Pod{newPod("ns", "b", priority(2)), newPod("ns", "a", priority(1))},
			stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
				return []statsapi.PodStats{podStats(p["b"], workingSet("1Gi"))}
			},
			want: []string{"ns/a", "ns/b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func TestRankCandidateFields(t *testing.T) {
	p := newPod("ns", "web", priority(7), memRequest("100Mi"))
	res := Rank(thresholds.MemoryAvailable, summaryOf(podStats(p, workingSet("150Mi"))), []*v1.Pod{p, nil}, Options{})
	if len(res.Candidates) != 1 {
		t.Fatalf("got %d candidates, want 1 (nil pods are dropped)", len(res.Candidates))
	}
	c := res.Candidates[0]
	want := Candidate{Namespace: "ns", Name: "web", UID: "uid-ns-web", Eligible: true, Priority: 7, EffectivePriority: 7,
		ExceedsRequest: true, Usage: 150 << 20, Request: 100 << 20, HasUsage: true, Pod: p}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("candidate = %+v\nwant        %+v", c, want)
	}

	pidRes := Rank(thresholds.PIDAvailable, summaryOf(podStats(p, processes(9))), []*v1.Pod{p}, Options{})
	if c := pidRes.Candidates[0]; c.Request != 0 || c.ExceedsRequest || c.Usage != 9 {
		t.Errorf("pid candidate = %+v, want usage 9, no request, not exceeding", c)
	}
}

func TestCandidateJSONKeys(t *testing.T) {
	b, err := json.Marshal(Result{Signal: "memory.available", Candidates: []Candidate{{Name: "x", Pod: newPod("a", "b")}}})
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Signal     string                       `json:"signal"`
		Candidates []map[string]json.RawMessage `json:"candidates"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range raw.Candidates[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"effectivePriority", "eligible", "exceedsRequest", "name", "namespace", "priority", "request", "skipReason", "uid", "usage"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("JSON keys = %v, want %v", keys, want)
	}
	if raw.Signal != "memory.available" {
		t.Errorf("signal = %q", raw.Signal)
	}
}

func TestEligibility(t *testing.T) {
	mayOptOut := Options{OptOut: OptOut{Namespaces: []string{"ns"}}}
	tests := []struct {
		name string
		pod  *v1.Pod
		opts Options
		// want is the skip reason; "" means eligible.
		want string
	}{
		{name: "plain pod", pod: newPod("ns", "p"), want: ""},
		{name: "api config source", pod: newPod("ns", "p", annotation(ConfigSourceAnnotation, "api")), want: ""},
		{
			name: "mirror of a static pod, as the API server shows it",
			pod:  newPod("kube-system", "etcd-node1", annotation(ConfigSourceAnnotation, "file"), annotation(ConfigMirrorAnnotation, "abc"), mirrorOwner("node1", "node1-uid"), priority(2000001000)),
			opts: Options{Node: NodeRef{Name: "node1", UID: "node1-uid"}},
			want: "mirror: mirror of a static pod, controlled by Node node1; critical: priority 2000001000",
		},
		{name: "system-cluster-critical", pod: newPod("ns", "p", priority(2_000_000_000)), want: "critical: priority 2000000000"},
		{name: "just below critical", pod: newPod("ns", "p", priority(1_999_999_999)), want: ""},
		{name: "critical by class name when priority is unset", pod: newPod("ns", "p", priorityClass("system-node-critical")), want: "critical: priority 2000001000"},
		{
			name: "class resolved from options",
			pod:  newPod("ns", "p", priorityClass("platform")),
			opts: Options{PriorityClasses: map[string]int32{"platform": 2_100_000_000}},
			want: "critical: priority 2100000000",
		},
		{
			name: "a group offset cannot make a pod critical",
			pod:  newPod("vip", "p", priority(1_000_000_000)),
			opts: Options{PriorityGroups: []PriorityGroup{{Name: "vip", Namespaces: []string{"vip"}, Offset: math.MaxInt32}}},
			want: "",
		},
		{
			name: "a fence cannot make a critical pod evictable",
			pod:  newPod("t", "p", priority(2_000_000_000)),
			opts: Options{PriorityGroups: []PriorityGroup{{Name: "t", Namespaces: []string{"t"}, Offset: -10, Fence: true}}},
			want: "critical: priority 2000000000",
		},
		{name: "daemonset skipped by default", pod: newPod("ns", "p", ownedBy("DaemonSet", "node-agent", true)), want: "daemonset: owned by DaemonSet node-agent"},
		{name: "daemonset included on request", pod: newPod("ns", "p", ownedBy("DaemonSet", "node-agent", true)), opts: Options{IncludeDaemonSetPods: true}, want: ""},
		{name: "non-controller DaemonSet reference", pod: newPod("ns", "p", ownedBy("DaemonSet", "x", false)), want: ""},
		{name: "replicaset-owned", pod: newPod("ns", "p", ownedBy("ReplicaSet", "web-1", true)), want: ""},
		{name: "terminating", pod: newPod("ns", "p", terminating()), want: "terminating: deletion requested"},
		{name: "succeeded", pod: newPod("ns", "p", phase(v1.PodSucceeded)), want: "finished: phase Succeeded"},
		{name: "failed", pod: newPod("ns", "p", phase(v1.PodFailed)), want: "finished: phase Failed"},
		{name: "pending is eligible", pod: newPod("ns", "p", phase(v1.PodPending)), want: ""},
		{name: "excluded namespace", pod: newPod("infra", "p"), opts: Options{ExcludedNamespaces: []string{"a", "infra"}}, want: "excluded-namespace: namespace infra"},
		{name: "opt-out false", pod: newPod("ns", "p", annotation(OptOutAnnotation, "false")), opts: mayOptOut, want: "opt-out: annotation evictd.io/evict=false"},
		{name: "opt-out False", pod: newPod("ns", "p", annotation(OptOutAnnotation, "False")), opts: mayOptOut, want: "opt-out: annotation evictd.io/evict=False"},
		{name: "opt-out 0", pod: newPod("ns", "p", annotation(OptOutAnnotation, "0")), opts: mayOptOut, want: "opt-out: annotation evictd.io/evict=0"},
		{name: "opt-in true", pod: newPod("ns", "p", annotation(OptOutAnnotation, "true")), opts: mayOptOut, want: ""},
		{name: "unreadable value is not an opt-out", pod: newPod("ns", "p", annotation(OptOutAnnotation, "never")), opts: mayOptOut, want: ""},
		{
			name: "every failing check is reported",
			pod:  newPod("infra", "p", terminating(), phase(v1.PodFailed), annotation(OptOutAnnotation, "false")),
			opts: Options{ExcludedNamespaces: []string{"infra"}, OptOut: OptOut{Namespaces: []string{"infra"}}},
			want: "terminating: deletion requested; finished: phase Failed; excluded-namespace: namespace infra; opt-out: annotation evictd.io/evict=false",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Rank(thresholds.MemoryAvailable, nil, []*v1.Pod{tc.pod}, tc.opts)
			c := res.Candidates[0]
			if c.SkipReason != tc.want {
				t.Errorf("skip reason = %q, want %q", c.SkipReason, tc.want)
			}
			if c.Eligible != (tc.want == "") {
				t.Errorf("eligible = %v with reason %q", c.Eligible, c.SkipReason)
			}
		})
	}
	if got := CheckNames(); len(got) != 7 || got[0] != CheckMirror || got[6] != CheckOptOut {
		t.Errorf("CheckNames() = %v", got)
	}
}

func TestIneligibleAfterEligible(t *testing.T) {
	// The static pod uses the most memory, but is listed after every
	// eligible pod, itself in the order it would have had.
	static := newPod("kube-system", "static", annotation(ConfigMirrorAnnotation, "h"), mirrorOwner("n1", "u1"))
	ds := newPod("kube-system", "ds", ownedBy("DaemonSet", "x", true))
	a, b := newPod("ns", "a"), newPod("ns", "b")
	s := summaryOf(podStats(static, workingSet("8Gi")), podStats(ds, workingSet("1Mi")), podStats(a, workingSet("1Gi")), podStats(b, workingSet("2Gi")))
	res := Rank(thresholds.MemoryAvailable, s, []*v1.Pod{static, ds, a, b}, Options{Node: NodeRef{Name: "n1", UID: "u1"}})
	want := []string{"ns/b", "ns/a", "kube-system/static", "kube-system/ds"}
	if got := names(res); !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestEffectivePriority(t *testing.T) {
	groups := []PriorityGroup{
		{Name: "batch", Namespaces: []string{"batch"}, Offset: -1000},
		{Name: "tenant", Namespaces: []string{"tenant-a"}, Selector: labels.SelectorFromSet(labels.Set{"tenant": "yes"}), Offset: 500, Fence: true},
		{Name: "boost", Selector: labels.SelectorFromSet(labels.Set{"tier": "gold"}), Offset: math.MaxInt32},
		{Name: "sink", Selector: labels.SelectorFromSet(labels.Set{"tier": "junk"}), Offset: math.MinInt32},
	}
	nsLabels := map[string]map[string]string{
		"tenant-b": {"tenant": "yes"},
		"gold":     {"tier": "gold"},
		"both":     {"tier": "gold", "tenant": "yes"},
		"junk":     {"tier": "junk"},
		// Listed by name in batch; its labels must not move it.
		"batch": {"tier": "gold"},
	}
	tests := []struct {
		ns        string
		own, want int32
	}{
		{ns: "nogroup", own: 42, want: 42},
		{ns: "nogroup", own: math.MinInt32, want: math.MinInt32},
		{ns: "batch", own: 100, want: -900},
		{ns: "batch", own: math.MinInt32 + 5, want: math.MinInt32},
		{ns: "tenant-a", own: 1_000_000_000, want: 500},
		{ns: "tenant-a", own: -7, want: 500},
		{ns: "tenant-b", own: 3, want: 500},
		{ns: "gold", own: 1, want: math.MaxInt32},
		{ns: "gold", own: -1, want: math.MaxInt32 - 1},
		{ns: "junk", own: -1, want: math.MinInt32},
		{ns: "junk", own: math.MaxInt32, want: -1},
		// First matching selector in config order wins.
		{ns: "both", own: 3, want: 500},
	}
	for _, tc := range tests {
		p := newPod(tc.ns, "p", priority(tc.own))
		res := Rank(thresholds.MemoryAvailable, nil, []*v1.Pod{p}, Options{PriorityGroups: groups, NamespaceLabels: nsLabels})
		c := res.Candidates[0]
		if c.EffectivePriority != tc.want || c.Priority != tc.own {
			t.Errorf("ns %s own %d: priority %d effective %d, want effective %d", tc.ns, tc.own, c.Priority, c.EffectivePriority, tc.want)
		}
	}
}

func TestFencedGroupOrdering(t *testing.T) {
	// The tenant gives its pods huge priorities; behind the fence they all
	// look like 100 from outside, so the outsider at 200 outranks them all,
	// while inside the group they still order by their own priorities.
	opts := Options{PriorityGroups: []PriorityGroup{{Name: "tenant", Namespaces: []string{"tenant"}, Offset: 100, Fence: true}}}
	pods := []*v1.Pod{
		newPod("tenant", "t-huge", priority(1_000_000_000)),
		newPod("tenant", "t-low", priority(-50)),
		newPod("other", "outsider-200", priority(200)),
		newPod("other", "outsider-50", priority(50)),
		// Ties the group's effective 100: own priority then decides.
		newPod("other", "outsider-100", priority(100)),
	}
	var stats []statsapi.PodStats
	for _, p := range pods {
		stats = append(stats, podStats(p, workingSet("1Gi")))
	}
	res := Rank(thresholds.MemoryAvailable, summaryOf(stats...), pods, opts)
	want := []string{"other/outsider-50", "tenant/t-low", "other/outsider-100", "tenant/t-huge", "other/outsider-200"}
	if got := names(res); !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestPodRequest(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	c := func(name, mem string) v1.Container {
		ct := v1.Container{Name: name}
		if mem != "" {
			ct.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resourceMust(mem)}
		}
		return ct
	}
	sidecar := func(name, mem string) v1.Container {
		ct := c(name, mem)
		ct.RestartPolicy = &always
		return ct
	}
	tests := []struct {
		name string
		spec v1.PodSpec
		want int64
	}{
		{name: "no requests", spec: v1.PodSpec{Containers: []v1.Container{c("a", "")}}, want: 0},
		{name: "sum of containers", spec: v1.PodSpec{Containers: []v1.Container{c("a", "100Mi"), c("b", "50Mi")}}, want: 150 << 20},
		{name: "larger init container wins", spec: v1.PodSpec{InitContainers: []v1.Container{c("i", "1Gi")}, Containers: []v1.Container{c("a", "100Mi")}}, want: 1 << 30},
		{name: "smaller init container ignored", spec: v1.PodSpec{InitContainers: []v1.Container{c("i", "10Mi"), c("j", "20Mi")}, Containers: []v1.Container{c("a", "100Mi")}}, want: 100 << 20},
		{name: "sidecars count with the containers", spec: v1.PodSpec{InitContainers: []v1.Container{sidecar("s", "30Mi")}, Containers: []v1.Container{c("a", "100Mi")}}, want: 130 << 20},
		{
			// KEP-753: an init container runs next to the sidecars started
			// before it, not the ones after.
			name: "init container after a sidecar adds it",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{sidecar("s1", "200Mi"), c("i", "500Mi"), sidecar("s2", "1Gi")},
				Containers:     []v1.Container{c("a", "10Mi")},
			},
			// max(10+200+1024, 500+200) = 1234Mi
			want: 1234 << 20,
		},
		{
			name: "init container with sidecar before it beats the containers",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{sidecar("s1", "200Mi"), c("i", "500Mi")},
				Containers:     []v1.Container{c("a", "100Mi")},
			},
			want: 700 << 20,
		},
		{
			name: "overhead is added",
			spec: v1.PodSpec{Containers: []v1.Container{c("a", "100Mi")}, Overhead: v1.ResourceList{v1.ResourceMemory: resourceMust("20Mi")}},
			want: 120 << 20,
		},
		{
			name: "limit without request counts as the request",
			spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resourceMust("64Mi")}}}}},
			want: 64 << 20,
		},
		{
			name: "pod-level request replaces the containers",
			spec: v1.PodSpec{
				Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resourceMust("1Gi")}},
				Containers: []v1.Container{c("a", "100Mi")},
				Overhead:   v1.ResourceList{v1.ResourceMemory: resourceMust("1Mi")},
			},
			want: 1025 << 20,
		},
		{
			// The kubelet skips every container-level request once
			// pod-level resources are set, whatever they set.
			name: "pod-level resources without a memory request: no memory request",
			spec: v1.PodSpec{
				Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resourceMust("1")}},
				Containers: []v1.Container{c("a", "100Mi")},
			},
			want: 0,
		},
		{
			name: "a pod-level limit without a request counts as the request",
			spec: v1.PodSpec{
				Resources:  &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resourceMust("512Mi")}},
				Containers: []v1.Container{c("a", "100Mi")},
			},
			want: 512 << 20,
		},
		{
			name: "no overhead on a zero request",
			spec: v1.PodSpec{Containers: []v1.Container{c("a", "")}, Overhead: v1.ResourceList{v1.ResourceMemory: resourceMust("20Mi")}},
			want: 0,
		},
		{
			name: "sums saturate",
			spec: v1.PodSpec{Containers: []v1.Container{c("a", "8Ei"), c("b", "8Ei")}},
			want: math.MaxInt64,
		},
		{
			// Quantity.Value() returns 0 for this one.
			name: "a decimal request beyond int64 saturates",
			spec: v1.PodSpec{Containers: []v1.Container{c("a", "10E")}},
			want: math.MaxInt64,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Pod{Spec: tc.spec}
			if got := podRequest(p, v1.ResourceMemory); got != tc.want {
				t.Errorf("request = %d, want %d", got, tc.want)
			}
		})
	}
}

// Ephemeral storage has no pod-level request: once pod-level resources are
// set, the containers' do not count either (the kubelet's
// GetResourceRequestQuantity).
func TestPodRequestEphemeralStorageWithPodLevelResources(t *testing.T) {
	ct := v1.Container{Name: "a", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resourceMust("1Gi")}}}
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ct}}}
	if got := podRequest(p, v1.ResourceEphemeralStorage); got != 1<<30 {
		t.Fatalf("without pod-level resources: %d, want 1Gi", got)
	}
	p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resourceMust("1Gi")}}
	if got := podRequest(p, v1.ResourceEphemeralStorage); got != 0 {
		t.Errorf("with pod-level resources: %d, want 0", got)
	}
}

// hugepages-* are pod-level resources too (component-helpers'
// IsSupportedPodLevelResource): a pod that sets only a pod-level hugepages
// limit has pod-level resources set, so its containers' memory requests no
// longer count and, with no pod-level memory, its memory request is 0.
func TestPodRequestWithOnlyPodLevelHugePages(t *testing.T) {
	ct := v1.Container{Name: "a", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resourceMust("1Gi")}}}
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ct},
		Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{"hugepages-2Mi": resourceMust("4Mi")}}}}
	if got := podRequest(p, v1.ResourceMemory); got != 0 {
		t.Errorf("memory request = %d, want 0 (pod-level resources set by hugepages-2Mi)", got)
	}
	// Another resource at pod level (not one pod-level resources support)
	// leaves the containers' requests counting.
	p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resourceMust("1Gi")}}
	if got := podRequest(p, v1.ResourceMemory); got != 1<<30 {
		t.Errorf("memory request with only pod-level ephemeral-storage = %d, want 1Gi", got)
	}
}

func TestRankDoesNotChangeInput(t *testing.T) {
	pods := []*v1.Pod{newPod("ns", "b"), newPod("ns", "a")}
	Rank(thresholds.MemoryAvailable, nil, pods, Options{})
	if pods[0].Name != "b" || pods[1].Name != "a" {
		t.Error("Rank reordered the caller's slice")
	}
}

func TestSkipReasonsHaveCheckNames(t *testing.T) {
	p := newPod("ns", "p", annotation(ConfigMirrorAnnotation, "x"), mirrorOwner("n1", "u1"), priority(2e9),
		ownedBy("DaemonSet", "d", true), terminating(), phase(v1.PodSucceeded), annotation(OptOutAnnotation, "false"))
	res := Rank(thresholds.MemoryAvailable, nil, []*v1.Pod{p}, Options{ExcludedNamespaces: []string{"ns"}, OptOut: OptOut{Namespaces: []string{"ns"}},
		Node: NodeRef{Name: "n1", UID: "u1"}})
	parts := strings.Split(res.Candidates[0].SkipReason, "; ")
	if len(parts) != len(CheckNames()) {
		t.Fatalf("reasons %q, want one per check %v", parts, CheckNames())
	}
	for i, name := range CheckNames() {
		if !strings.HasPrefix(parts[i], name+": ") {
			t.Errorf("reason %d = %q, want it to start with %q", i, parts[i], name)
		}
	}
}
