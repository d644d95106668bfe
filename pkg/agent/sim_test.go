// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/feature/brake"
	"github.com/evictd/evictd/pkg/agent/feature/shadowmode"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"

	"github.com/evictd/evictd/pkg/fslayout"
)

// This file holds a scripted node for loop tests: pods with memory usage
// that may grow, a fake clock that the waker advances by each timeout, and
// a fake evictor that terminates pods the way a kubelet would (SIGTERM, exit
// after a delay or at the end of the grace period, then the API deletion).

const mi = 1 << 20

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type simPod struct {
	name     string
	usage    int64   // bytes at start
	growth   float64 // bytes per second while running (after the ramp)
	ramp     float64 // bytes per second at first, until it holds rampTo
	rampTo   int64
	request  int64
	priority int32
	grace    int64         // terminationGracePeriodSeconds
	exitIn   time.Duration // how long it takes to exit after SIGTERM; 0 = at once
	pdb      bool          // a PodDisruptionBudget protects it
	hang     bool          // the runtime cannot stop it: it stays, terminating, with its memory
	noStats  bool          // its cgroup is never observed: no usage figure
	teardown time.Duration // from its exit to the API deletion (volume teardown, status sync); negative: the object is force-deleted before the process exits
	disk     int64         // bytes in its writable layer (with simNode.diskCapacity)
	diskRate int64         // bytes per second it writes while its process runs
	diskReq  int64         // its ephemeral-storage request
	stall    float64       // share of the time its tasks stall on memory while it runs (with simNode.psi)
	// volumeGoneIn: after its exit, the kubelet removes its files over this
	// long (a slow disk), its empty cgroup still listed, then it goes
	// (teardown after that); 0: with its process.
	volumeGoneIn time.Duration
	// reportsExit gives the pod's object its container's state: running,
	// then, from its exit, terminated with the phase Failed, as the kubelet
	// writes before it removes the volumes.
	reportsExit bool

	started     time.Time
	termAt      time.Time // deletion requested
	exitAt      time.Time // process gone, memory freed
	deleted     bool
	deletionTS  *metav1.Time
	graceActual int64
}

func (p *simPod) uid() types.UID { return types.UID("uid-" + p.name) }

// cgroup is the pod's cgroup, as the observer names it.
func (p *simPod) cgroup() string { return "/kubepods/burstable/pod" + string(p.uid()) }

func (p *simPod) memAt(now time.Time) int64 {
	el, u := now.Sub(p.started).Seconds(), p.usage
	if p.ramp > 0 {
		d := min(el, float64(p.rampTo-p.usage)/p.ramp)
		u += int64(p.ramp * d)
		el -= d
	}
	return u + int64(p.growth*el)
}

type simNode struct {
	t testing.TB
	// brake, when set, receives the loop's brake syncs.
	brake    *brakeRecorder
	shadow   shadowmode.Recorder
	trace    Tracer
	mu       sync.Mutex
	clk      *testclock.FakeClock
	capacity int64
	base     int64 // usage outside pods
	pods     []*simPod
	loop     *Loop
	metrics  *metrics.Metrics // optional
	log      *zap.Logger      // optional; zaptest's by default
	// podReadLag is how long after the node's memory the pods' cgroups are
	// read in one observation: a pod exiting in between is missing from
	// both (the real observer reads the node first). Keep it under the
	// poll interval: real observations do not overlap.
	podReadLag time.Duration
	// explainW, explainWait and lastLive are explained's loop state
	// (explain_test.go).
	explainW    *simWaker
	explainWait time.Duration
	lastLive    *Live
	// explainNoNext: explained does not check each victim was named first.
	explainNoNext bool
	// torn lists memory.available in each observation that missed an
	// exiting pod's memory that way.
	torn []int64

	// diskCapacity, when set, gives the node one disk (nodefs and imagefs
	// alike) of that size, with diskBase used outside the pods' writable
	// layers (the images among it); node is the Node object, for its
	// status.images.
	diskCapacity, diskBase int64
	node                   *v1.Node
	// diskRefresh, when set, caches each pod's disk figure for that long,
	// as the real observer caches its walks, unless RemeasureEphemeral
	// names the pod; diskSeen holds the figures, remeasured the names.
	diskRefresh time.Duration
	diskSeen    map[types.UID]simDiskFigure
	remeasured  map[types.UID]bool
	// dress, when set, adds to each pod object what a test needs beyond
	// the simulated figures (annotations, owners, containers, ...).
	dress func(*v1.Pod)
	// psi gives the node, kubepods and every pod memory PSI totals: each
	// pod stalls its share of the time while it runs, and the node and
	// kubepods ("some") whenever any pod does, at most all the time.
	psi bool
	// lister, when set, makes Pods hand back the same object for a pod
	// until it changes, as an informer's lister does (listed holds them):
	// the trace recorder records a pod list only when its objects change.
	lister bool
	listed map[*simPod]*v1.Pod
	// passClock, when set, is the loop's Deps.PassClock.
	passClock clock.PassiveClock

	// Scripted by tests.
	evictResult func(p *simPod, req evict.Request) (evict.Outcome, error)

	calls      []simCall
	forced     []string
	nodeEvents int
	ended      []string // pressure-ended Event notes
	stuck      []string // pods given an EvictionStuck Event

	kicks []string
	steps int
}

// simDiskFigure is a pod's disk usage as last measured.
type simDiskFigure struct {
	bytes int64
	at    time.Time
}

// diskAt is what the pod has written by now, less what the removal of its
// files after its exit took (volumeGoneIn).
func (p *simPod) diskAt(now time.Time) int64 {
	end := now
	if !p.exitAt.IsZero() && p.exitAt.Before(end) {
		end = p.exitAt
	}
	d := p.disk + p.diskRate*int64(max(end.Sub(p.started), 0)/time.Second)
	if p.removingFiles(now) {
		d -= int64(float64(d) * float64(now.Sub(p.exitAt)) / float64(p.volumeGoneIn))
	}
	return d
}

// removingFiles: the pod has exited and the kubelet is still removing its
// files (volumeGoneIn).
func (p *simPod) removingFiles(now time.Time) bool {
	return !p.exitAt.IsZero() && !now.Before(p.exitAt) && now.Before(p.exitAt.Add(p.volumeGoneIn))
}

// diskFigure is the pod's disk usage as the observer reports it, and when
// it was measured: now, or the cached figure while diskRefresh has not
// passed and the pod is not named by RemeasureEphemeral. Called with n.mu
// held.
func (n *simNode) diskFigure(p *simPod, now time.Time) simDiskFigure {
	if n.diskRefresh == 0 {
		return simDiskFigure{bytes: p.diskAt(now), at: now}
	}
	f, ok := n.diskSeen[p.uid()]
	if !ok || now.Sub(f.at) >= n.diskRefresh || n.remeasured[p.uid()] {
		f = simDiskFigure{bytes: p.diskAt(now), at: now}
		if n.diskSeen == nil {
			n.diskSeen = map[types.UID]simDiskFigure{}
		}
		n.diskSeen[p.uid()] = f
	}
	return f
}

// RemeasureEphemeral is the real observer's (ephemeralRemeasurer).
func (n *simNode) RemeasureEphemeral(uids []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.remeasured = map[types.UID]bool{}
	for _, u := range uids {
		n.remeasured[types.UID(u)] = true
	}
}

type simCall struct {
	pod   string
	avail int64 // memory.available when the call was made
	at    time.Time
	hard  bool
	grace *int64
	rank  int
	step  int
}

func newSimNode(t testing.TB, capacity, base int64, pods ...*simPod) *simNode {
	n := &simNode{t: t, clk: testclock.NewFakeClock(t0), capacity: capacity, base: base, pods: pods}
	for _, p := range pods {
		p.started = t0
	}
	return n
}

func (n *simNode) pod(name string) *simPod {
	for _, p := range n.pods {
		if p.name == name {
			return p
		}
	}
	n.t.Fatalf("no pod %q", name)
	return nil
}

// advance applies what happened up to now: exits free memory, exited pods
// leave the API (the informer's delete event reaches the loop).
func (n *simNode) advance(now time.Time) {
	var gone []*v1.Pod
	n.mu.Lock()
	for _, p := range n.pods {
		if !p.termAt.IsZero() && !p.deleted && !now.Before(p.exitAt.Add(p.volumeGoneIn+p.teardown)) {
			p.deleted = true
			gone = append(gone, n.apiPod(p))
		}
	}
	n.mu.Unlock()
	for _, p := range gone {
		if n.loop != nil {
			n.loop.PodDeleted(p)
		}
	}
}

// Observe implements Observer.
func (n *simNode) Observe(context.Context) (*pressure.Observation, error) {
	now := n.clk.Now()
	n.advance(now)
	n.mu.Lock()
	defer n.mu.Unlock()
	ts := metav1.NewTime(now)
	var ws = n.base
	var pods []statsapi.PodStats
	var extras []pressure.PodExtras
	tornRead := false
	for _, p := range n.pods {
		if p.removingFiles(now) && n.diskCapacity > 0 {
			// Its empty cgroup, and what is left of its files.
			var zero uint64
			d, one := uint64(p.diskAt(now)), uint64(1)
			pods = append(pods, statsapi.PodStats{
				PodRef:           statsapi.PodReference{Name: p.name, Namespace: "ns", UID: string(p.uid())},
				Memory:           &statsapi.MemoryStats{Time: ts, WorkingSetBytes: &zero, UsageBytes: &zero},
				ProcessStats:     &statsapi.ProcessStats{ProcessCount: &zero},
				EphemeralStorage: &statsapi.FsStats{Time: ts, UsedBytes: &d, InodesUsed: &one},
			})
			extras = append(extras, pressure.PodExtras{UID: string(p.uid()), Cgroup: p.cgroup(),
				EphemeralParts: &pressure.EphemeralParts{WritableLayer: pressure.DiskUsage{Bytes: d, Inodes: 1}}})
			continue
		}
		// A pod object force-deleted before its process exits (negative
		// teardown) still holds its memory until then.
		if !p.exitAt.IsZero() && !now.Before(p.exitAt) {
			continue
		}
		m := uint64(p.memAt(now))
		ws += int64(m)
		if !p.exitAt.IsZero() && !now.Add(n.podReadLag).Before(p.exitAt) {
			tornRead = true
			continue
		}
		if p.noStats {
			continue
		}
		ps := statsapi.PodStats{
			PodRef: statsapi.PodReference{Name: p.name, Namespace: "ns", UID: string(p.uid())},
			Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: &m, UsageBytes: &m},
		}
		x := pressure.PodExtras{UID: string(p.uid()), Cgroup: p.cgroup()}
		if n.diskCapacity > 0 {
			f := n.diskFigure(p, now)
			d, one := uint64(f.bytes), uint64(1)
			ps.EphemeralStorage = &statsapi.FsStats{Time: metav1.NewTime(f.at), UsedBytes: &d, InodesUsed: &one}
			x.EphemeralParts = &pressure.EphemeralParts{WritableLayer: pressure.DiskUsage{Bytes: d, Inodes: 1}}
		}
		extras = append(extras, x)
		pods = append(pods, ps)
	}
	avail := uint64(max(n.capacity-ws, 0))
	if tornRead {
		n.torn = append(n.torn, int64(avail))
	}
	wsu := uint64(ws)
	if n.psi {
		n.addPSI(now, pods)
	}
	obs := &pressure.Observation{Time: now, Pods: extras, Summary: &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-a", Memory: &statsapi.MemoryStats{Time: ts, AvailableBytes: &avail, WorkingSetBytes: &wsu, UsageBytes: &wsu}},
		Pods: pods,
	}}
	if n.psi {
		node := n.stallTotal(now, nil)
		obs.Summary.Node.Memory.PSI = &statsapi.PSIStats{Some: statsapi.PSIData{Total: node}}
		kp := uint64(0)
		obs.Summary.Node.SystemContainers = []statsapi.ContainerStats{{Name: statsapi.SystemContainerPods,
			Memory: &statsapi.MemoryStats{Time: ts, AvailableBytes: &avail, WorkingSetBytes: &kp, PSI: &statsapi.PSIStats{Some: statsapi.PSIData{Total: node}}}}}
	}
	if n.diskCapacity > 0 {
		used := n.diskBase
		for _, p := range n.pods {
			if p.exitAt.IsZero() || now.Before(p.exitAt) || p.removingFiles(now) {
				used += p.diskAt(now)
			}
		}
		c, a, inodes := uint64(n.diskCapacity), uint64(max(n.diskCapacity-used, 0)), uint64(1<<20)
		fs := &statsapi.FsStats{Time: ts, CapacityBytes: &c, AvailableBytes: &a, Inodes: &inodes, InodesFree: &inodes}
		obs.Summary.Node.Fs = fs
		obs.Summary.Node.Runtime = &statsapi.RuntimeStats{ImageFs: fs}
		obs.Node.DiskLayout = fslayout.OneFs
	}
	return obs, nil
}

// stallTotal is the µs stalled from t0 to now by pod p, or, for nil, by the
// node: integrated in 10 ms steps, since pods start stalling and exit at
// different times.
func (n *simNode) stallTotal(now time.Time, p *simPod) uint64 {
	const step = 10 * time.Millisecond
	var total time.Duration
	for at := t0; at.Before(now); at = at.Add(step) {
		rate := 0.0
		for _, q := range n.pods {
			if (p == nil || q == p) && (q.exitAt.IsZero() || at.Before(q.exitAt)) {
				rate += q.stall
			}
		}
		total += time.Duration(min(rate, 1) * float64(step))
	}
	return uint64(total.Microseconds())
}

func (n *simNode) addPSI(now time.Time, pods []statsapi.PodStats) {
	for i := range pods {
		p := n.pod(pods[i].PodRef.Name)
		pods[i].Memory.PSI = &statsapi.PSIStats{Some: statsapi.PSIData{Total: n.stallTotal(now, p)}}
	}
}

func (n *simNode) availableLocked(now time.Time) int64 {
	ws := n.base
	for _, p := range n.pods {
		if p.exitAt.IsZero() || now.Before(p.exitAt) {
			ws += p.memAt(now)
		}
	}
	return n.capacity - ws
}

func (n *simNode) apiPod(p *simPod) *v1.Pod {
	grace := p.grace
	prio := p.priority
	req := v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(p.request, resource.BinarySI)}
	if p.diskReq > 0 {
		req[v1.ResourceEphemeralStorage] = *resource.NewQuantity(p.diskReq, resource.BinarySI)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: p.name, UID: p.uid(), DeletionTimestamp: p.deletionTS},
		Spec: v1.PodSpec{
			Priority:                      &prio,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	if p.reportsExit {
		st := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
		if !p.exitAt.IsZero() && !n.clk.Now().Before(p.exitAt) {
			pod.Status.Phase = v1.PodFailed
			st = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 143}}
		}
		pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: st}}
	}
	if p.deletionTS != nil {
		pod.DeletionGracePeriodSeconds = &p.graceActual
	}
	if n.dress != nil {
		n.dress(pod)
	}
	return pod
}

// Pods implements PodSource.
func (n *simNode) Pods() []*v1.Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*v1.Pod
	for _, p := range n.pods {
		if p.deleted {
			continue
		}
		if !n.lister {
			out = append(out, n.apiPod(p))
			continue
		}
		// A pod's object changes here only when it is deleted (terminate).
		o, ok := n.listed[p]
		if !ok || o.DeletionTimestamp != p.deletionTS {
			if n.listed == nil {
				n.listed = map[*simPod]*v1.Pod{}
			}
			o = n.apiPod(p)
			n.listed[p] = o
		}
		out = append(out, o)
	}
	return out
}

func (n *simNode) PriorityClasses() map[string]int32             { return nil }
func (n *simNode) Node() *v1.Node                                { n.mu.Lock(); defer n.mu.Unlock(); return n.node }
func (n *simNode) NamespaceLabels() map[string]map[string]string { return nil }

// terminate plays the API server and kubelet after an accepted eviction.
func (n *simNode) terminate(p *simPod, grace int64, now time.Time) {
	p.termAt = now
	p.graceActual = grace
	ts := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
	p.deletionTS = &ts
	exit := min(p.exitIn, time.Duration(grace)*time.Second)
	p.exitAt = now.Add(exit)
	if p.hang {
		p.exitAt = now.Add(1000 * time.Hour)
	}
}

// Evict implements Evictor.
func (n *simNode) Evict(_ context.Context, req evict.Request) (evict.Outcome, error) {
	return n.do(req, false)
}

// ForceDelete implements Evictor.
func (n *simNode) ForceDelete(_ context.Context, req evict.Request) (evict.Outcome, error) {
	return n.do(req, true)
}

func (n *simNode) do(req evict.Request, force bool) (evict.Outcome, error) {
	now := n.clk.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.pod(req.Pod.Name)
	n.calls = append(n.calls, simCall{pod: p.name, avail: n.availableLocked(now), at: now, hard: req.Hard, grace: req.GraceOverride, rank: req.Rank, step: n.steps})
	grace := evict.Defaults().GracePeriod(req.Pod, req.Hard, req.GraceOverride)
	if n.evictResult != nil {
		if out, err := n.evictResult(p, req); out.Result != "" {
			if out.Result == evict.Evicted {
				n.terminate(p, out.GracePeriodSeconds, now)
			}
			return out, err
		}
	}
	if force {
		n.forced = append(n.forced, p.name)
	} else if p.pdb {
		return evict.Outcome{Result: evict.PDBBlocked, GracePeriodSeconds: grace, Attempts: 1},
			&evict.PodError{Pod: "ns/" + p.name, Result: evict.PDBBlocked, Err: evict.ErrPDBBlocked}
	}
	if p.deleted {
		return evict.Outcome{Result: evict.NotFound, Attempts: 1}, nil
	}
	n.terminate(p, grace, now)
	res := evict.Evicted
	if force {
		res = evict.ForcedDelete
	}
	return evict.Outcome{Result: res, GracePeriodSeconds: grace, Accepted: now, Attempts: 1}, nil
}

// NewBudget implements Evictor: the scripted evictor keeps no limits.
func (n *simNode) NewBudget() *evict.Budget { return nil }

func (n *simNode) PressureEnded(note string) {
	n.mu.Lock()
	n.ended = append(n.ended, note)
	n.mu.Unlock()
}

func (n *simNode) VictimStuck(namespace, name string, _ types.UID, _ string) {
	n.mu.Lock()
	n.stuck = append(n.stuck, namespace+"/"+name)
	n.mu.Unlock()
}

func (n *simNode) NodeThresholdMet(thresholds.Signal, bool, int64, int64) {
	n.mu.Lock()
	n.nodeEvents++
	n.mu.Unlock()
}

// simWaker implements Waker on the fake clock: a kick returns at once,
// otherwise the clock steps by the timeout.
type simWaker struct {
	n       *simNode
	mu      sync.Mutex
	pending []string
	waits   []time.Duration
}

func (w *simWaker) Wait(ctx context.Context, timeout time.Duration) (wakeup.Wakeup, error) {
	if err := ctx.Err(); err != nil {
		return wakeup.Wakeup{}, err
	}
	w.mu.Lock()
	w.waits = append(w.waits, timeout)
	if len(w.pending) > 0 {
		k := w.pending[0]
		w.pending = w.pending[1:]
		w.mu.Unlock()
		return wakeup.Wakeup{Source: wakeup.SourceKick, Name: k, At: w.n.clk.Now()}, nil
	}
	w.mu.Unlock()
	w.n.clk.Step(timeout)
	return wakeup.Wakeup{Source: wakeup.SourcePoll, At: w.n.clk.Now()}, nil
}

func (w *simWaker) Kick(name string) {
	if name == KickCallDone {
		return // calls run synchronously here: answered in the pass that made them
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, name)
	w.n.kicks = append(w.n.kicks, name)
}

// syncCall runs an eviction call in the pass that makes it, so that scripted
// runs are repeatable.
func syncCall(f func()) { f() }

func mustThresholds(t testing.TB, spec thresholds.Spec) []thresholds.Threshold {
	t.Helper()
	ths, err := thresholds.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ths
}

func testLoopConfig(ths []thresholds.Threshold) LoopConfig {
	ev := evict.Defaults()
	ev.MaxPodGracePeriod = 1 << 31 / 2 // the pod's own, as with --eviction-max-pod-grace-period=0
	return LoopConfig{
		Thresholds: ths,
		// No transition period: an episode ends at the first pass without
		// pressure, so scripted episodes can follow each other quickly.
		TransitionPeriod: 0,
		Decide: decide.Options{
			Evict: ev, HardHorizon: 7 * time.Second, Lead: DefaultLead, Grace: predict.DefaultGracePolicy(),
		},
		Housekeeping: time.Second,
		Poll:         wakeup.PollPolicy{Min: 100 * time.Millisecond, Max: time.Second},
		Burst:        2 * time.Second,
		InFlight:     inflight.DefaultOptions(),
		MaxAttempts:  DefaultMaxAttempts,
		PDBRecheck:   30 * time.Second,
	}
}

// run builds the loop on the node and runs it for the given simulated time.
func (n *simNode) run(t testing.TB, cfg LoopConfig, d time.Duration) *simWaker {
	t.Helper()
	w := &simWaker{n: n}
	log := n.log
	if log == nil {
		log = zaptest.NewLogger(t)
	}
	deps := Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Metrics: n.metrics, Log: log, Clock: n.clk, Go: syncCall}
	if n.brake != nil {
		deps.Features = append(deps.Features, brake.New(n.brake))
	}
	if n.shadow != nil {
		deps.Features = append(deps.Features, shadowmode.New(n.shadow))
	}
	if n.trace != nil {
		deps.Trace = n.trace
	}
	if n.passClock != nil {
		deps.PassClock = n.passClock
	}
	l, err := NewLoop(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, d, w)
	return w
}

func (n *simNode) runMore(t testing.TB, d time.Duration, w *simWaker) {
	t.Helper()
	end := n.clk.Now().Add(d)
	ctx := context.Background()
	timeout := time.Duration(0)
	for i := 0; n.clk.Now().Before(end); i++ {
		if i > 100000 {
			t.Fatal("the loop does not advance the clock")
		}
		wk, err := w.Wait(ctx, timeout)
		if err != nil {
			t.Fatal(err)
		}
		n.steps++
		timeout = n.loop.Step(ctx, wk)
		if timeout <= 0 {
			t.Fatalf("step %d returned a wait of %v", n.steps, timeout)
		}
	}
}

func (n *simNode) victims() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, c := range n.calls {
		out = append(out, c.pod)
	}
	return out
}

func (n *simNode) evictedPods() []string {
	var out []string
	for _, p := range n.pods {
		if !p.termAt.IsZero() {
			out = append(out, p.name)
		}
	}
	sort.Strings(out)
	return out
}

func eq(a, b []string) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}
