// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/pressure"
)

// t0 is the tests' clock origin (UTC, no monotonic reading, so that times
// read back from JSON are reflect.DeepEqual to the originals).
var t0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

func u64(v uint64) *uint64 { return &v }

// subSecond is the sub-second part of the k-th timestamp of a summary:
// never zero, different for each, so that a lost or misplaced part shows.
func subSecond(k int) time.Duration { return time.Duration(123456789 + 1000*k) }

// figures gives random-ish byte counts: distinct, so that gzip cannot
// shrink a trace of many observations away.
type figures struct{ rng *rand.Rand }

func newFigures(seed uint64) *figures {
	return &figures{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (f *figures) n(lo, hi uint64) *uint64 { return u64(lo + f.rng.Uint64N(hi-lo)) }

// makeSummary is a node's Summary at at with pods pods, as the observer
// shapes it: node memory, filesystems and the pods' system container;
// for each pod (sorted by UID) memory, CPU and ephemeral storage, with one
// container. Every timestamp has a sub-second part.
func makeSummary(at time.Time, pods int, f *figures) *statsapi.Summary {
	k := 0
	ts := func(t time.Time) metav1.Time {
		k++
		return metav1.NewTime(t.Add(subSecond(k)))
	}
	fs := func() *statsapi.FsStats {
		return &statsapi.FsStats{Time: ts(at), AvailableBytes: f.n(10<<30, 40<<30), CapacityBytes: u64(100 << 30),
			UsedBytes: f.n(20<<30, 60<<30), InodesFree: f.n(1e6, 5e6), Inodes: u64(6553600), InodesUsed: f.n(1e5, 1e6)}
	}
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		NodeName:  "node-a",
		StartTime: ts(at.Add(-72 * time.Hour)),
		Memory: &statsapi.MemoryStats{Time: ts(at), AvailableBytes: f.n(1<<30, 4<<30), UsageBytes: f.n(4<<30, 8<<30),
			WorkingSetBytes: f.n(3<<30, 6<<30), RSSBytes: f.n(2<<30, 4<<30), PageFaults: f.n(1e6, 1e8), MajorPageFaults: f.n(0, 1e4)},
		CPU:     &statsapi.CPUStats{Time: ts(at), UsageNanoCores: f.n(1e8, 4e9), UsageCoreNanoSeconds: f.n(1e12, 1e14)},
		Fs:      fs(),
		Runtime: &statsapi.RuntimeStats{ImageFs: fs(), ContainerFs: fs()},
		SystemContainers: []statsapi.ContainerStats{{Name: statsapi.SystemContainerPods, StartTime: ts(at.Add(-72 * time.Hour)),
			Memory: &statsapi.MemoryStats{Time: ts(at), AvailableBytes: f.n(1<<30, 4<<30), UsageBytes: f.n(3<<30, 6<<30), WorkingSetBytes: f.n(2<<30, 5<<30)}}},
	}}
	for i := range pods {
		start := at.Add(-time.Duration(i+1) * time.Minute)
		s.Pods = append(s.Pods, statsapi.PodStats{
			PodRef:    statsapi.PodReference{Name: fmt.Sprintf("pod-%03d", i), Namespace: fmt.Sprintf("ns-%d", i%7), UID: podUID(i)},
			StartTime: ts(start),
			Containers: []statsapi.ContainerStats{{Name: "app", StartTime: ts(start),
				CPU:    &statsapi.CPUStats{Time: ts(at), UsageNanoCores: f.n(1e6, 2e9), UsageCoreNanoSeconds: f.n(1e9, 1e13)},
				Memory: &statsapi.MemoryStats{Time: ts(at), UsageBytes: f.n(16<<20, 2<<30), WorkingSetBytes: f.n(8<<20, 2<<30), RSSBytes: f.n(8<<20, 1<<30)}}},
			CPU:              &statsapi.CPUStats{Time: ts(at), UsageNanoCores: f.n(1e6, 2e9), UsageCoreNanoSeconds: f.n(1e9, 1e13)},
			Memory:           &statsapi.MemoryStats{Time: ts(at), UsageBytes: f.n(16<<20, 2<<30), WorkingSetBytes: f.n(8<<20, 2<<30), RSSBytes: f.n(8<<20, 1<<30)},
			EphemeralStorage: &statsapi.FsStats{Time: ts(at), UsedBytes: f.n(4<<10, 1<<30), InodesUsed: f.n(1, 1e4)},
		})
	}
	return s
}

func podUID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// makeObs is an observation taken at at with pods pods.
func makeObs(at time.Time, pods int, f *figures) *pressure.Observation {
	o := &pressure.Observation{
		Time:    at,
		Summary: makeSummary(at, pods, f),
		Node: pressure.NodeExtras{MemTotalBytes: 8 << 30, MemoryCapacityBytes: 8 << 30, NodeFsPath: "/var/lib/kubelet",
			ImageFsPath: "/var/lib/containerd", ContainerFsPath: "/var/lib/containerd", DiskLayout: fslayout.OneFs},
		Layout: pressure.Layout{Mode: pressure.ModeV2, Driver: pressure.DriverSystemd, CgroupRoot: "/", NodeCgroup: "/",
			KubepodsCgroup: "/kubepods.slice", MemoryMount: "/sys/fs/cgroup"},
	}
	for i := range pods {
		o.Pods = append(o.Pods, pressure.PodExtras{UID: podUID(i), QoS: v1.PodQOSBurstable,
			Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(podUID(i), "-", "_") + ".slice"})
	}
	return o
}

// makePods is the informer's view of pods pods, with managed fields as an
// API server sends them.
func makePods(n int) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%03d", i), Namespace: fmt.Sprintf("ns-%d", i%7), UID: types.UID(podUID(i)),
				ResourceVersion: fmt.Sprint(1000 + i), Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%5)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("app-%d-7d9f8c", i%5), UID: "rs-uid"}},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
					APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{}}}`)}}},
			Spec: v1.PodSpec{NodeName: "node-a", PriorityClassName: "standard", Containers: []v1.Container{{Name: "app", Image: "registry.example/app:1.2.3",
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi"), v1.ResourceCPU: resource.MustParse("100m")},
					Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)}},
		}
	}
	return out
}

func testNode(rv string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid", ResourceVersion: rv, Labels: map[string]string{"zone": "a"}},
		Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"registry.example/app:1.2.3"}, SizeBytes: 123 << 20}},
			Capacity: v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")}},
	}
}

// export writes r's trace and reads it back.
func export(t *testing.T, r *Recorder) (*Trace, []byte) {
	t.Helper()
	var buf bytes.Buffer
	n, err := r.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d bytes, %v; wrote %d", n, err, buf.Len())
	}
	out := buf.Bytes()
	tr, err := Read(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("Read of WriteTo's output: %v", err)
	}
	return tr, out
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// summaryTimes are the Summary's timestamps, named, in an order of their
// own (not nanos.go's walk).
func summaryTimes(s *statsapi.Summary) map[string]time.Time {
	m := map[string]time.Time{
		"node.startTime":          s.Node.StartTime.Time,
		"node.memory":             s.Node.Memory.Time.Time,
		"node.cpu":                s.Node.CPU.Time.Time,
		"node.fs":                 s.Node.Fs.Time.Time,
		"node.runtime.imageFs":    s.Node.Runtime.ImageFs.Time.Time,
		"node.runtime.containerF": s.Node.Runtime.ContainerFs.Time.Time,
	}
	for i, c := range s.Node.SystemContainers {
		m[fmt.Sprintf("node.sys[%d].startTime", i)] = c.StartTime.Time
		m[fmt.Sprintf("node.sys[%d].memory", i)] = c.Memory.Time.Time
	}
	for i, p := range s.Pods {
		m[fmt.Sprintf("pod[%d].startTime", i)] = p.StartTime.Time
		m[fmt.Sprintf("pod[%d].memory", i)] = p.Memory.Time.Time
		m[fmt.Sprintf("pod[%d].cpu", i)] = p.CPU.Time.Time
		m[fmt.Sprintf("pod[%d].ephemeral", i)] = p.EphemeralStorage.Time.Time
		for j, c := range p.Containers {
			m[fmt.Sprintf("pod[%d].c[%d].startTime", i, j)] = c.StartTime.Time
			m[fmt.Sprintf("pod[%d].c[%d].memory", i, j)] = c.Memory.Time.Time
			m[fmt.Sprintf("pod[%d].c[%d].cpu", i, j)] = c.CPU.Time.Time
		}
	}
	return m
}

// TestRoundTrip: a recorded run (header, passes with drains, deletions,
// observations and pod state) reads back as recorded, the Summary's
// timestamps to the nanosecond although their JSON stops at the second.
func TestRoundTrip(t *testing.T) {
	h := Header{
		Node: "node-a", Version: "v1.2.3", Started: t0.Add(-time.Minute),
		Args:   []string{"--node-name=node-a", "--eviction-hard=memory.available<300Mi"},
		Config: "thresholds:\n  hard:\n    memory.available: 300Mi\n",
		Start: &Placement{Thresholds: []string{"memory.available<300Mi", "nodefs.available<10%"}, KubeletRead: true,
			KubeletHard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
			Capacity:    map[string]int64{"memory.available": 8 << 30, "nodefs.available": 100 << 30},
			DiskLayout:  "onefs", ImageGCHigh: 90, ImageGCLow: 85},
	}
	r := NewRecorder(h, DefaultBudget)
	f := newFigures(1)
	pods := makePods(3)
	classes := map[string]int32{"standard": 1000, "critical": 1e6}
	// ns-9 has no pod on the node: its labels are not recorded.
	nsLabels := map[string]map[string]string{"ns-0": {"team": "a"}, "ns-1": {"team": "b"}, "ns-9": {"team": "c"}}
	node := testNode("77")

	const passes = 4
	var obs []*pressure.Observation
	var calls [][]Call
	var dels []Deletion
	for i := range passes {
		n := uint64(i + 1)
		at := t0.Add(time.Duration(i) * 1500 * time.Millisecond)
		w := Wakeup{Source: "psi", Name: "memory.pressure", At: at.Add(-3 * time.Millisecond)}
		r.Begin(n, uint64(i), at, w)
		c := []Call{{Seq: n, Decision: Decision{Pass: n - 1, Launched: at.Add(-time.Second), Pod: "ns-0/pod-000", UID: types.UID(podUID(0)),
			Signal: "memory.available", Hard: true, Rank: 1, Reason: "usage above requests", RunnerUp: "ns-1/pod-001",
			Threshold: 300 << 20, Available: 200 << 20, Usage: 900 << 20, PredictedIn: 2 * time.Second},
			At: at.Add(-10 * time.Millisecond), Result: "evicted", GracePeriodSeconds: 30, Accepted: at.Add(-20 * time.Millisecond),
			RetryAfter: time.Second, Attempts: 2, Error: "", ErrorKind: ""}}
		if i == 2 {
			c[0].Result, c[0].Error, c[0].ErrorKind = "failed", "too many evictions in the episode", ErrorEpisodeCap
		}
		r.Drained(0, c)
		r.Drained(1, nil) // no answers: no drain recorded
		calls = append(calls, c)
		d := Deletion{At: at.Add(-time.Millisecond), UID: types.UID(fmt.Sprint("gone-", i)), Namespace: "ns-0", Name: fmt.Sprint("gone-", i)}
		r.Deleted(d)
		dels = append(dels, d)
		o := makeObs(at.Add(7*time.Millisecond), 1+i%2, f)
		r.Observed(o, nil, at.Add(9*time.Millisecond), true)
		obs = append(obs, o)
		r.PodState(pods, classes, nsLabels, node)
		r.End()
	}

	tr, _ := export(t, r)
	got := tr.Header
	if got.Format != Format || got.Node != h.Node || got.Version != h.Version || !got.Started.Equal(h.Started) ||
		!reflect.DeepEqual(got.Args, h.Args) || got.Config != h.Config ||
		!reflect.DeepEqual(got.Start, h.Start) {
		t.Errorf("header read back as %+v, want %+v", got, h)
	}
	if got.Passes != passes || got.Dropped != 0 || len(tr.Passes) != passes {
		t.Fatalf("header says %d passes, %d dropped; %d read; want %d, 0 dropped", got.Passes, got.Dropped, len(tr.Passes), passes)
	}
	for i, p := range tr.Passes {
		at := t0.Add(time.Duration(i) * 1500 * time.Millisecond)
		if p.N != uint64(i+1) || p.Calls != uint64(i) || !p.At.Equal(at) || !p.Acting {
			t.Errorf("pass %d: n %d, calls %d, at %v, acting %v", i+1, p.N, p.Calls, p.At, p.Acting)
		}
		if want := (Wakeup{Source: "psi", Name: "memory.pressure", At: at.Add(-3 * time.Millisecond)}); !reflect.DeepEqual(p.Wakeup, want) {
			t.Errorf("pass %d: wakeup %+v, want %+v", i+1, p.Wakeup, want)
		}
		if want := []Drain{{Point: 0, Calls: calls[i]}}; !reflect.DeepEqual(p.Drains, want) {
			t.Errorf("pass %d: drains %+v, want %+v", i+1, p.Drains, want)
		}
		if want := []Deletion{dels[i]}; !reflect.DeepEqual(p.Deleted, want) {
			t.Errorf("pass %d: deleted %+v, want %+v", i+1, p.Deleted, want)
		}
		if !p.ObservedAt.Equal(at.Add(9*time.Millisecond)) || p.ObserveError != "" {
			t.Errorf("pass %d: observed at %v (error %q), want %v", i+1, p.ObservedAt, p.ObserveError, at.Add(9*time.Millisecond))
		}
		o := p.Observation
		if o == nil || o.Summary == nil {
			t.Fatalf("pass %d: no observation read back", i+1)
		}
		if !o.Time.Equal(obs[i].Time) || !reflect.DeepEqual(o.Pods, obs[i].Pods) || o.Node != obs[i].Node || o.Layout != obs[i].Layout {
			t.Errorf("pass %d: observation read back as %+v, want %+v", i+1, o, obs[i])
		}
		want, have := summaryTimes(obs[i].Summary), summaryTimes(o.Summary)
		if len(want) != len(have) {
			t.Fatalf("pass %d: %d summary times read back, want %d", i+1, len(have), len(want))
		}
		for k, w := range want {
			if w.Nanosecond() == 0 {
				t.Fatalf("pass %d: the test's %s has no sub-second part", i+1, k)
			}
			if !have[k].Equal(w) {
				t.Errorf("pass %d: %s read back as %v, want %v (off by %v)", i+1, k, have[k], w, have[k].Sub(w))
			}
		}
		sm, om := o.Summary, obs[i].Summary
		if *sm.Node.Memory.AvailableBytes != *om.Node.Memory.AvailableBytes || *sm.Node.Memory.WorkingSetBytes != *om.Node.Memory.WorkingSetBytes ||
			len(sm.Pods) != len(om.Pods) || sm.Pods[0].PodRef != om.Pods[0].PodRef ||
			*sm.Pods[0].Memory.WorkingSetBytes != *om.Pods[0].Memory.WorkingSetBytes ||
			*sm.Pods[0].EphemeralStorage.UsedBytes != *om.Pods[0].EphemeralStorage.UsedBytes {
			t.Errorf("pass %d: summary figures read back differ", i+1)
		}
	}
	// The pod state: whole in the first pass, not again (same objects).
	ps := tr.Passes[0].Pods
	if ps == nil {
		t.Fatal("the first pass has no pod list")
	}
	if len(ps.Pods) != len(pods) || ps.Pods[2].Name != "pod-002" || ps.Pods[2].ResourceVersion != "1002" ||
		!ps.Pods[0].Spec.Containers[0].Resources.Requests.Memory().Equal(resource.MustParse("256Mi")) {
		t.Errorf("pod list read back as %+v", ps.Pods)
	}
	if want := map[string]map[string]string{"ns-0": {"team": "a"}, "ns-1": {"team": "b"}}; !reflect.DeepEqual(ps.PriorityClasses, classes) ||
		!reflect.DeepEqual(ps.NamespaceLabels, want) {
		t.Errorf("classes %v, namespace labels %v; want %v, %v", ps.PriorityClasses, ps.NamespaceLabels, classes, want)
	}
	if ps.Node == nil || ps.Node.Name != "node-a" || ps.Node.ResourceVersion != "77" || !reflect.DeepEqual(ps.Node.Status.Images, node.Status.Images) ||
		ps.Node.Labels != nil || ps.Node.Status.Capacity != nil {
		t.Errorf("node read back as %+v; want its name, version and images alone", ps.Node)
	}
	for i, p := range tr.Passes[1:] {
		if p.Pods != nil {
			t.Errorf("pass %d records the unchanged pod list again", i+2)
		}
	}
}

// TestReadPlain: WriteTo's output, unzipped, reads the same.
func TestReadPlain(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a", Args: []string{"--x"}}, MinBudget)
	f := newFigures(2)
	pods := makePods(2)
	for i := range 3 {
		r.Begin(uint64(i+1), 0, t0.Add(time.Duration(i)*time.Second), Wakeup{Source: "timer"})
		r.Observed(makeObs(t0.Add(time.Duration(i)*time.Second), 2, f), nil, t0.Add(time.Duration(i)*time.Second), false)
		r.PodState(pods, nil, nil, nil)
		r.End()
	}
	zipped, raw := export(t, r)
	plainBytes := gunzip(t, raw)
	if bytes.HasPrefix(plainBytes, []byte{0x1f, 0x8b}) || bytes.Count(plainBytes, []byte("\n")) != 4 {
		t.Fatalf("the unzipped trace is not 4 JSON lines:\n%s", plainBytes)
	}
	plain, err := Read(bytes.NewReader(plainBytes))
	if err != nil {
		t.Fatalf("Read of the plain trace: %v", err)
	}
	if !reflect.DeepEqual(plain, zipped) {
		t.Errorf("plain and gzipped traces read differently:\n%+v\n%+v", plain, zipped)
	}
	if len(plain.Passes) != 3 || plain.Header.Node != "node-a" {
		t.Errorf("plain trace: %d passes, node %q", len(plain.Passes), plain.Header.Node)
	}
}

// TestPodStateDedup: a pass records the pod list only when it differs from
// the last recorded one: other pod objects, other resource versions, other
// classes, namespace labels or node; the recorded copies are pruned
// (PrunePod), the caller's pods keep their managed fields.
func TestPodStateDedup(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	pods := makePods(3)
	classes := map[string]int32{"standard": 1000}
	nsLabels := map[string]map[string]string{"ns-0": {"team": "a"}}
	node := testNode("1")
	n := uint64(0)
	pass := func(pods []*v1.Pod, classes map[string]int32, nsLabels map[string]map[string]string, node *v1.Node) {
		n++
		r.Begin(n, 0, t0.Add(time.Duration(n)*time.Second), Wakeup{Source: "timer"})
		r.PodState(pods, classes, nsLabels, node)
		r.End()
	}
	type step struct {
		what   string
		record bool
	}
	var steps []step
	do := func(what string, record bool, pods []*v1.Pod, classes map[string]int32, nsLabels map[string]map[string]string, node *v1.Node) {
		steps = append(steps, step{what, record})
		pass(pods, classes, nsLabels, node)
	}
	do("first", true, pods, classes, nsLabels, node)
	do("same objects", false, pods, classes, nsLabels, node)
	do("same objects, copied slice and maps", false, append([]*v1.Pod(nil), pods...),
		map[string]int32{"standard": 1000}, map[string]map[string]string{"ns-0": {"team": "a"}}, testNode("1"))

	fresh := *pods[1] // a new object, same resource version
	pods2 := []*v1.Pod{pods[0], &fresh, pods[2]}
	do("a new pod object", true, pods2, classes, nsLabels, node)
	do("same again", false, pods2, classes, nsLabels, node)

	pods2[2].ResourceVersion = "2002" // same object, updated in place
	do("a new resource version", true, pods2, classes, nsLabels, node)
	do("same again", false, pods2, classes, nsLabels, node)

	do("a pod fewer", true, pods2[:2], classes, nsLabels, node)
	do("new classes", true, pods2[:2], map[string]int32{"standard": 2000}, nsLabels, node)
	do("new namespace labels", true, pods2[:2], map[string]int32{"standard": 2000}, map[string]map[string]string{"ns-0": {"team": "b"}}, node)
	do("labels of a namespace with no pod here", false, pods2[:2], map[string]int32{"standard": 2000},
		map[string]map[string]string{"ns-0": {"team": "b"}, "ns-9": {"team": "z"}}, node)
	do("new node version", true, pods2[:2], map[string]int32{"standard": 2000}, map[string]map[string]string{"ns-0": {"team": "b"}}, testNode("2"))
	do("no node", true, pods2[:2], map[string]int32{"standard": 2000}, map[string]map[string]string{"ns-0": {"team": "b"}}, nil)
	do("same again", false, pods2[:2], map[string]int32{"standard": 2000}, map[string]map[string]string{"ns-0": {"team": "b"}}, nil)

	// A second PodState in a pass keeps the first.
	n++
	r.Begin(n, 0, t0.Add(time.Duration(n)*time.Second), Wakeup{Source: "timer"})
	r.PodState(pods, classes, nil, nil)
	r.PodState(pods[:1], classes, nil, nil)
	r.End()
	steps = append(steps, step{"two PodStates in a pass (first kept)", true})

	tr, _ := export(t, r)
	if len(tr.Passes) != len(steps) {
		t.Fatalf("%d passes read, want %d", len(tr.Passes), len(steps))
	}
	for i, s := range steps {
		if got := tr.Passes[i].Pods != nil; got != s.record {
			t.Errorf("pass %d (%s): pod list recorded %v, want %v", i+1, s.what, got, s.record)
		}
	}
	if p := tr.Passes[5].Pods; p != nil && (len(p.Pods) != 3 || p.Pods[2].ResourceVersion != "2002") {
		t.Errorf("after the in-place update the recorded list is %+v, want pod-002 at 2002", p.Pods)
	}
	if p := tr.Passes[len(steps)-1].Pods; p != nil && len(p.Pods) != 3 {
		t.Errorf("the second PodState of a pass replaced the first: %d pods", len(p.Pods))
	}
	for i, p := range tr.Passes {
		if p.Pods == nil {
			continue
		}
		for _, pod := range p.Pods.Pods {
			if pod.ManagedFields != nil || pod.Labels != nil {
				t.Errorf("pass %d: pod %s recorded with its managed fields or labels", i+1, pod.Name)
			}
			if len(pod.OwnerReferences) != 1 || pod.Spec.PriorityClassName != "standard" {
				t.Errorf("pass %d: pod %s lost what the decisions read: %+v", i+1, pod.Name, pod)
			}
		}
	}
	for _, p := range append(pods, &fresh) {
		if len(p.ManagedFields) != 1 || p.ManagedFields[0].FieldsV1 == nil {
			t.Errorf("the caller's pod %s lost its managed fields", p.Name)
		}
	}
	if node.Labels["zone"] != "a" || node.Status.Capacity == nil {
		t.Error("the caller's node was trimmed")
	}
}

// TestObservedCopies: what the loop adds to the observation after Observed
// (the signal families' errors, appended in place) is not recorded.
func TestObservedCopies(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	obs := makeObs(t0, 1, newFigures(3))
	obs.SignalErrors = make([]pressure.SignalError, 1, 8) // room to append in place
	obs.SignalErrors[0] = pressure.SignalError{Signal: "memory.available", Path: "/proc/meminfo", Err: errors.New("malformed")}
	obs.SkippedFiles = 1
	r.Begin(1, 0, t0, Wakeup{Source: "timer"})
	r.Observed(obs, nil, t0, true)
	obs.SignalErrors = append(obs.SignalErrors, pressure.SignalError{Signal: "memory.high.stuck", Path: "(container cgroups)", Err: errors.New("gone")})
	obs.SkippedFiles = 7
	r.End()
	if len(obs.SignalErrors) != 2 || cap(obs.SignalErrors) != 8 {
		t.Fatalf("the test's append did not happen in place: len %d cap %d", len(obs.SignalErrors), cap(obs.SignalErrors))
	}
	tr, raw := export(t, r)
	o := tr.Passes[0].Observation
	if o == nil {
		t.Fatal("no observation recorded")
	}
	if len(o.SignalErrors) != 1 || o.SignalErrors[0].Signal != "memory.available" || o.SignalErrors[0].Path != "/proc/meminfo" {
		t.Errorf("recorded signal errors %+v, want memory.available's alone", o.SignalErrors)
	}
	if o.SkippedFiles != 1 {
		t.Errorf("recorded %d skipped files, want 1 (as observed)", o.SkippedFiles)
	}
	if plain := gunzip(t, raw); bytes.Contains(plain, []byte("memory.high.stuck")) || !bytes.Contains(plain, []byte(`"error":"malformed"`)) {
		t.Errorf("the trace's signal errors are wrong:\n%s", plain)
	}
}

// TestObserveError: a failed observation is recorded as its error, without
// an observation.
func TestObserveError(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	r.Begin(1, 0, t0, Wakeup{Source: "timer"})
	r.Observed(nil, errors.New("no kubepods cgroup"), t0.Add(time.Millisecond), false)
	r.End()
	tr, _ := export(t, r)
	p := tr.Passes[0]
	if p.Observation != nil || p.ObservationNanos != nil || p.ObserveError != "no kubepods cgroup" || !p.ObservedAt.Equal(t0.Add(time.Millisecond)) || p.Acting {
		t.Errorf("failed observation recorded as %+v", p)
	}
}

// sealedFirstPasses decodes each sealed chunk's first pass.
func sealedFirstPasses(t *testing.T, r *Recorder) []Pass {
	t.Helper()
	r.mu.Lock()
	var sealed [][]byte
	for _, c := range r.sealed {
		sealed = append(sealed, bytes.Clone(c.b))
	}
	r.mu.Unlock()
	var out []Pass
	for i, c := range sealed {
		first, err := bufio.NewReader(bytes.NewReader(gunzip(t, c))).ReadBytes('\n')
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		var l line
		if err := json.Unmarshal(first, &l); err != nil || l.Pass == nil {
			t.Fatalf("chunk %d does not begin with a pass: %v", i, err)
		}
		out = append(out, *l.Pass)
	}
	return out
}

// TestBudget: a recorder at the least budget, fed far more than it keeps,
// stays within it (a chunk's worth over at most), drops whole chunks of the
// oldest passes and says how many, and every chunk, the first kept
// included, begins with the whole pod list.
func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		name            string
		obsPods, podsN  int
		passes          int
		severalPerChunk bool
	}{
		// A pass bigger than a chunk: a chunk per pass.
		{"50 pods", 50, 50, 60, false},
		// Small passes: several to a chunk, the pod list in the first alone.
		{"4 pods", 4, 3, 400, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder(Header{Node: "node-a"}, MinBudget)
			f := newFigures(uint64(tc.obsPods))
			pods := makePods(tc.podsN)
			limit := MinBudget + MinBudget/8
			maxSize := 0
			for i := range tc.passes {
				n := uint64(i + 1)
				at := t0.Add(time.Duration(i) * time.Second)
				r.Begin(n, 0, at, Wakeup{Source: "timer"})
				r.Observed(makeObs(at, tc.obsPods, f), nil, at, true)
				r.PodState(pods, nil, nil, nil)
				r.End()
				s := r.Size()
				if s <= 0 || s > limit {
					t.Fatalf("after pass %d the trace holds %d bytes, over the budget %d + a chunk", n, s, MinBudget)
				}
				maxSize = max(maxSize, s)
			}
			if maxSize < MinBudget/2 {
				t.Fatalf("the trace never held more than %d bytes: the test does not reach the budget", maxSize)
			}
			tr, _ := export(t, r)
			h := tr.Header
			if len(tr.Passes) > 0 && !r.Oldest().Equal(tr.Passes[0].At) {
				t.Errorf("Oldest says %s, the first pass kept is at %s", r.Oldest(), tr.Passes[0].At)
			}
			if h.Dropped == 0 || h.Passes != len(tr.Passes) || h.Dropped+uint64(h.Passes) != uint64(tc.passes) {
				t.Fatalf("header: %d passes, %d dropped; %d read; %d recorded", h.Passes, h.Dropped, len(tr.Passes), tc.passes)
			}
			if len(tr.Passes) == 0 {
				t.Fatal("no passes kept")
			}
			t.Logf("%d passes recorded, %d kept, %d dropped; at most %d bytes held", tc.passes, h.Passes, h.Dropped, maxSize)
			if first := tr.Passes[0]; first.N != h.Dropped+1 || first.Pods == nil || len(first.Pods.Pods) != tc.podsN {
				t.Errorf("the first kept pass is %d (want %d) with pod list %v: a trace must begin with the whole list",
					first.N, h.Dropped+1, first.Pods != nil)
			}
			for i := 1; i < len(tr.Passes); i++ {
				if tr.Passes[i].N != tr.Passes[i-1].N+1 {
					t.Fatalf("pass %d follows pass %d", tr.Passes[i].N, tr.Passes[i-1].N)
				}
			}
			if last := tr.Passes[len(tr.Passes)-1].N; last != uint64(tc.passes) {
				t.Errorf("the last pass kept is %d, want %d", last, tc.passes)
			}
			withoutPods := 0
			for _, p := range tr.Passes {
				if p.Pods == nil {
					withoutPods++
				}
				if p.Observation == nil || len(p.Observation.Summary.Pods) != tc.obsPods {
					t.Fatalf("pass %d: observation lost", p.N)
				}
			}
			if tc.severalPerChunk != (withoutPods > 0) {
				t.Errorf("%d of %d passes have no pod list; several passes to a chunk: %v", withoutPods, len(tr.Passes), tc.severalPerChunk)
			}
			firsts := sealedFirstPasses(t, r)
			if len(firsts) == 0 {
				t.Fatal("nothing sealed")
			}
			for _, p := range firsts {
				if p.Pods == nil {
					t.Errorf("the chunk beginning with pass %d has no pod list", p.N)
				}
			}
		})
	}
}

// lines is a trace of JSON lines.
func lines(t *testing.T, ls ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, l := range ls {
		switch l := l.(type) {
		case string:
			b.WriteString(l)
		default:
			j, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(j)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func gzipped(b []byte) []byte { return gz(b) }

// TestReadErrors: each bad input is refused with one error saying what is
// wrong, gzipped or not.
func TestReadErrors(t *testing.T) {
	hdr := line{Header: &Header{Format: Format, Node: "node-a"}}
	pass := func(n uint64) line { return line{Pass: &Pass{N: n, At: t0.Add(time.Duration(n) * time.Second)}} }
	withObs := func(n uint64, s *statsapi.Summary, nanos []int32) line {
		p := pass(n)
		p.Pass.Observation = &pressure.Observation{Time: t0, Summary: s}
		p.Pass.ObservationNanos = nanos
		return p
	}
	sum := makeSummary(t0, 1, newFigures(4))
	good := nanos(sum)
	if len(good) < 2 {
		t.Fatalf("the summary has %d timestamps", len(good))
	}
	for _, tc := range []struct {
		name  string
		input []byte
		want  []string
	}{
		{"empty", nil, []string{"empty"}},
		{"a first line that is a pass", lines(t, pass(1), pass(2)), []string{"line 1", "not an evictd trace"}},
		{"a newer format", lines(t, line{Header: &Header{Format: Format + 1, Node: "node-a"}}, pass(1)),
			[]string{fmt.Sprintf("format %d, this evictd reads formats %d to %d", Format+1, MinFormat, Format)}},
		{"an older format", lines(t, line{Header: &Header{Format: MinFormat - 1, Node: "node-a"}}, pass(1)), []string{fmt.Sprintf("format %d,", MinFormat-1)}},
		{"pods as before, with no pass before", lines(t, hdr, func() line {
			l := withObs(1, sum, good)
			l.Pass.ObservationPodsAsBefore = true
			return l
		}()), []string{"line 2", "pass 1", "earlier observation"}},
		{"malformed JSON", lines(t, hdr, pass(1), `{"pass":{"n":2,`, pass(3)), []string{"line 3"}},
		{"passes out of order", lines(t, hdr, pass(1), pass(3), pass(2)), []string{"line 4", "pass 2 after pass 3"}},
		{"a pass twice", lines(t, hdr, pass(1), pass(1)), []string{"line 3", "pass 1 after pass 1"}},
		{"a second header", lines(t, hdr, pass(1), hdr), []string{"line 3", "a second header"}},
		{"neither header nor pass", lines(t, hdr, `{"other":1}`), []string{"line 2", "neither a header nor a pass"}},
		{"an observation without summary", lines(t, hdr, withObs(1, nil, nil)), []string{"line 2", "pass 1", "without a summary"}},
		{"too few sub-second parts", lines(t, hdr, withObs(1, sum, good[:len(good)-1])), []string{"line 2", "pass 1", "sub-second"}},
		{"too many sub-second parts", lines(t, hdr, withObs(1, sum, append(append([]int32(nil), good...), 5))), []string{"line 2", "sub-second"}},
		{"no sub-second parts", lines(t, hdr, withObs(1, sum, nil)), []string{"line 2", "sub-second"}},
		{"blank lines only", []byte("\n  \n"), []string{"empty"}},
		{"one byte", []byte("{"), []string{"line 1"}},
		{"a blank line, then a pass", lines(t, "", pass(1)), []string{"line 2", "not an evictd trace"}},
		{"a header and a pass on one line", lines(t, line{Header: hdr.Header, Pass: pass(1).Pass}), []string{"line 1", "a header and a pass at once"}},
		{"cut at a line", lines(t, line{Header: &Header{Format: Format, Node: "node-a", Passes: 3}}, pass(1), pass(2)), []string{"2 passes, its header says 3", "cut short"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, in := range []struct {
				how string
				b   []byte
			}{{"plain", tc.input}, {"gzipped", gzipped(tc.input)}} {
				tr, err := Read(bytes.NewReader(in.b))
				if err == nil {
					t.Fatalf("%s: read without error: %+v", in.how, tr)
				}
				if tr != nil {
					t.Errorf("%s: a trace returned with the error %v", in.how, err)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "trace: ") || strings.Count(msg, "trace:") != 1 {
					t.Errorf("%s: error %q is not one trace error", in.how, msg)
				}
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%s: error %q does not say %q", in.how, msg, w)
					}
				}
			}
		})
	}

	// The right count of sub-second parts reads, and restores them.
	tr, err := Read(bytes.NewReader(lines(t, hdr, withObs(1, sum, good))))
	if err != nil {
		t.Fatalf("a good pass: %v", err)
	}
	if got, want := tr.Passes[0].Observation.Summary.Node.Memory.Time, sum.Node.Memory.Time; !got.Equal(&want) {
		t.Errorf("node memory time read back as %v, want %v", got, want)
	}

	// A trace cut short in its gzip stream is an error, not fewer passes.
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	for i := range 3 {
		r.Begin(uint64(i+1), 0, t0, Wakeup{Source: "timer"})
		r.End()
	}
	_, whole := export(t, r)
	if _, err := Read(bytes.NewReader(whole[:len(whole)-6])); err == nil || !strings.HasPrefix(err.Error(), "trace: ") {
		t.Errorf("a truncated trace reads with error %v", err)
	}
}

// TestUnfinishedPass: a pass begun and not ended is left out when the next
// begins; nothing of it (drains, deletions, observation) goes to the next.
func TestUnfinishedPass(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	f := newFigures(5)
	r.Begin(1, 0, t0, Wakeup{Source: "timer"})
	r.Drained(0, []Call{{Seq: 1, Decision: Decision{Pod: "ns/a"}}})
	r.Deleted(Deletion{At: t0, UID: "u1", Namespace: "ns", Name: "one"})
	r.Observed(makeObs(t0, 1, f), nil, t0, true)
	// No End: pass 2 begins.
	r.Begin(2, 1, t0.Add(time.Second), Wakeup{Source: "psi"})
	r.Deleted(Deletion{At: t0.Add(time.Second), UID: "u2", Namespace: "ns", Name: "two"})
	r.End()
	// Pass 3 observes after an unfinished pass that did.
	r.Begin(3, 1, t0.Add(2*time.Second), Wakeup{Source: "timer"})
	r.Observed(makeObs(t0.Add(2*time.Second), 2, f), nil, t0.Add(2*time.Second), false)
	r.Begin(4, 1, t0.Add(3*time.Second), Wakeup{Source: "timer"})
	r.End()
	if r.Size() == 0 {
		t.Fatal("nothing recorded")
	}

	tr, _ := export(t, r)
	if tr.Header.Passes != 2 || tr.Header.Dropped != 0 || len(tr.Passes) != 2 {
		t.Fatalf("header: %d passes, %d dropped; %d read; want passes 2 and 4 alone", tr.Header.Passes, tr.Header.Dropped, len(tr.Passes))
	}
	p := tr.Passes[0]
	if p.N != 2 || p.Calls != 1 || p.Wakeup.Source != "psi" || p.Drains != nil || p.Observation != nil || p.Acting ||
		len(p.Deleted) != 1 || p.Deleted[0].Name != "two" {
		t.Errorf("pass 2 read back as %+v; want its own deletion alone", p)
	}
	if p := tr.Passes[1]; p.N != 4 || p.Observation != nil || !p.ObservedAt.IsZero() {
		t.Errorf("pass 4 read back as %+v; want no observation (pass 3's was not ended)", p)
	}

	// Calls outside a pass are ignored.
	r.Deleted(Deletion{Name: "outside"})
	r.Drained(0, []Call{{Seq: 9}})
	r.Observed(makeObs(t0, 1, f), nil, t0, true)
	r.PodState(makePods(1), nil, nil, nil)
	r.End()
	if tr2, _ := export(t, r); len(tr2.Passes) != 2 {
		t.Errorf("calls outside a pass recorded a pass: %d passes", len(tr2.Passes))
	}
}

// A pod list recorded in a pass that was never written is not one a later
// pass may refer to: the next pass with the same pods records them.
func TestPodListOfAnUnfinishedPass(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	pods := makePods(3)
	r.Begin(1, 0, t0, Wakeup{Source: "timer"})
	r.PodState(pods, nil, nil, nil)
	// No End: pass 2 begins, with the same pods.
	r.Begin(2, 0, t0.Add(time.Second), Wakeup{Source: "timer"})
	r.PodState(pods, nil, nil, nil)
	r.End()
	r.Begin(3, 0, t0.Add(2*time.Second), Wakeup{Source: "timer"})
	r.PodState(pods, nil, nil, nil)
	r.End()
	tr, _ := export(t, r)
	if len(tr.Passes) != 2 || tr.Passes[0].N != 2 || tr.Passes[0].Pods == nil || len(tr.Passes[0].Pods.Pods) != 3 || tr.Passes[1].Pods != nil {
		t.Fatalf("passes %d, want 2 and 3 with the pod list in 2 only: %+v", len(tr.Passes), tr.Passes)
	}
}

// A call's decision is kept with the pass that made it, its answer apart.
func TestLaunchedCalls(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	r.Begin(1, 0, t0, Wakeup{Source: "timer"})
	r.Launched(Call{Seq: 1, Decision: Decision{Pass: 1, Launched: t0, Pod: "ns/a", Rank: 1, Reason: "usage above request"}})
	r.End()
	r.Begin(2, 1, t0.Add(time.Second), Wakeup{Source: "kick", Name: "call_done"})
	r.Drained(0, []Call{{Seq: 1, Decision: Decision{Pass: 1, Pod: "ns/a"}, Result: "evicted"}})
	r.End()
	tr, _ := export(t, r)
	if l := tr.Passes[0].Launched; len(l) != 1 || l[0].Seq != 1 || l[0].Pod != "ns/a" || l[0].Reason != "usage above request" || l[0].Result != "" {
		t.Errorf("pass 1 launched %+v", l)
	}
	if d := tr.Passes[1].Drains; len(d) != 1 || d[0].Calls[0].Result != "evicted" || len(tr.Passes[1].Launched) != 0 {
		t.Errorf("pass 2: drains %+v, launched %+v", d, tr.Passes[1].Launched)
	}
}
