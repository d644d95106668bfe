// SPDX-License-Identifier: Apache-2.0

package family

import (
	"errors"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// ContainerReader reads the container cgroups of an observation's pods
// (memhigh.ReadNode; tests script it).
type ContainerReader func(obs *pressure.Observation) ([]memhigh.Sample, []error)

// PodCgroupName stands for the container's name where the cgroup stuck at
// memory.high is the pod's own (pod-level resources), in metrics, logs and
// Events.
const PodCgroupName = "(pod)"

// Relax is a container the memory.high family asks the actuator to relax.
type Relax struct {
	// Pod is the container's pod, nil while the pod source does not
	// know it.
	Pod                       *v1.Pod
	PodUID, Container, Cgroup string
	// Why is what kept it stuck, for the Event and the log.
	Why string
}

// Relaxer gives a stuck container its memory.max as memory.high (stage 1,
// with --actuator) and reports it; an error means it did not, and the pod
// is evicted as without the actuator.
type Relaxer func(Relax) error

// MemHigh is the memory.high family (docs/memhigh.md): each container's
// memory.events high and max rates and memory.pressure share, the pods
// with a container over a threshold as the memory.highStuck signal, and
// those over it for the grace period as its only targets.
type MemHigh struct {
	det     *memhigh.Detector
	read    ContainerReader
	pods    func() []*v1.Pod
	metrics *metrics.Metrics
	// states are the containers of the last observation, at at; ok is
	// false when nothing could be read at all.
	states []memhigh.State
	at     time.Time
	ok     bool
	// relax is stage 1 (nil: evict after the grace period); relaxed are
	// the containers it was tried on, by pod UID and container ID, until
	// they are gone: each is relaxed once, and evicted if it stays stuck.
	relax   Relaxer
	relaxed map[string]bool
	// protected says why a pod is never evicted (static, critical, a
	// DaemonSet's, excluded, opted out); stage 1 leaves those alone: an
	// operator who protected a pod from evictd did not hand it its limits.
	protected func(*v1.Pod) string
}

// NewMemHigh returns the memory.high family of th, or nil when th has no
// threshold (the default: the family is off). read nil reads the host
// (memhigh.ReadNode); pods names the containers (nil: by ID); relax, when
// not nil, relaxes a container stuck on the high signal before its pod is
// a target.
func NewMemHigh(th memhigh.Thresholds, read ContainerReader, pods func() []*v1.Pod, m *metrics.Metrics, relax Relaxer) *MemHigh {
	if !th.Enabled() {
		return nil
	}
	if read == nil {
		read = memhigh.ReadNode
	}
	return &MemHigh{det: memhigh.NewDetector(th), read: read, pods: pods, metrics: m, relax: relax, relaxed: map[string]bool{}}
}

// Protect sets how the family tells the pods evictd never evicts, which
// stage 1 leaves alone, and returns f.
func (f *MemHigh) Protect(protected func(*v1.Pod) string) *MemHigh {
	f.protected = protected
	return f
}

// Name implements Family.
func (f *MemHigh) Name() string { return "memory-high" }

// States are the containers of the last observation, by pod UID then
// container ID.
func (f *MemHigh) States() []memhigh.State { return f.states }

// Observe reads every pod's container cgroups. A container whose file is
// unreadable or malformed is left out of the pass, and its stuck time
// starts again (memhigh.Detector.Observe): evictd never evicts on a signal
// it could not read, and says so.
func (f *MemHigh) Observe(obs *pressure.Observation, now time.Time) error {
	samples, errs := f.read(obs)
	f.at, f.ok = now, len(samples) > 0 || len(errs) == 0
	f.states = f.det.Observe(now, samples)
	f.relaxStuck(errs)
	f.setMetrics()
	if len(errs) == 0 {
		return nil
	}
	lost := make([]pressure.SignalError, len(errs))
	for i, err := range errs {
		path := "(container cgroups)"
		if fe, ok := errors.AsType[*memhigh.FileError](err); ok {
			path, err = fe.Path, fe.Err
		}
		lost[i] = pressure.SignalError{Signal: string(thresholds.MemoryHighStuck), Path: path, Err: err}
	}
	return &Unreadable{Why: "memory.high cannot be evaluated for some containers: " + errs[0].Error(), Signals: lost}
}

// relaxStuck is stage 1 (KEP-5986): a container stuck for the grace
// period with memory.events high among its signals gets its memory.max as
// memory.high, once, and starts its stuck time again; its pod is a target
// only if it stays stuck (at memory.max, or stalled) for another grace
// period. Throttled by memory.high alone, it may well have stabilised.
// errs are the pass's read errors: a relaxed container they name is still
// there, and keeps its record.
func (f *MemHigh) relaxStuck(errs []error) {
	if f.relax == nil {
		return
	}
	live := make(map[string]bool, len(f.states))
	var pods map[string]*v1.Pod
	var names map[string]string
	for i := range f.states {
		st := &f.states[i]
		k := st.PodUID + "/" + st.ContainerID
		live[k] = true
		if !st.Stuck || f.relaxed[k] || !slices.Contains(st.Over, memhigh.HighEvents) || st.Cgroup == "" {
			continue
		}
		if pods == nil {
			list := f.podList()
			pods, names = map[string]*v1.Pod{}, containerNames(list)
			for _, p := range list {
				pods[string(p.UID)] = p
			}
		}
		pod := pods[st.PodUID]
		if pod == nil || f.protected != nil && f.protected(pod) != "" {
			// Unknown to the pod source, or protected: not relaxed (and,
			// protected, never evicted either: the ranking skips it).
			continue
		}
		r := Relax{Pod: pod, PodUID: st.PodUID, Container: nameOf(names, st.ContainerID), Cgroup: st.Cgroup,
			Why: st.Describe(f.det.Thresholds()) + ", for " + st.StuckFor(f.at).Round(time.Second).String()}
		// Tried once: a failed write is not tried again at each pass while
		// the pod, now a target, goes.
		f.relaxed[k] = true
		if f.relax(r) != nil {
			continue
		}
		f.det.Forget(st.PodUID, st.ContainerID)
		st.Over, st.Since, st.Stuck = nil, time.Time{}, false
	}
	unread := unreadable(errs)
	for k := range f.relaxed {
		if !live[k] && !unread(k) {
			delete(f.relaxed, k)
		}
	}
}

// unreadable tells, by pod UID and container ID, the containers a pass's
// read errors say are there but could not be read. The reader leaves out
// quietly a container whose cgroup is gone, or whose pod is no longer on
// the node, so a relaxed container neither read nor named here is gone;
// one only unreadable for a pass must stay relaxed, or it would be relaxed
// again, with another grace period, where docs/actuator.md evicts it. An
// error on the pod's own cgroup may be its directory's: it keeps every
// container of the pod; an error that names no file keeps them all.
func unreadable(errs []error) func(key string) bool {
	ids, pods := map[string]bool{}, map[string]bool{}
	for _, err := range errs {
		fe, ok := errors.AsType[*memhigh.FileError](err)
		switch {
		case !ok:
			return func(string) bool { return true }
		case fe.ContainerID == memhigh.PodLevel:
			pods[fe.PodUID] = true
		default:
			ids[fe.PodUID+"/"+fe.ContainerID] = true
		}
	}
	return func(k string) bool {
		uid, _, _ := strings.Cut(k, "/")
		return ids[k] || pods[uid]
	}
}

func (f *MemHigh) podList() []*v1.Pod {
	if f.pods == nil {
		return nil
	}
	return f.pods()
}

// Assess implements Family: the pods with a container over a threshold,
// negated, against the pods with memory.high set.
func (f *MemHigh) Assess(signals map[thresholds.Signal]thresholds.Observation) {
	if !f.ok {
		return
	}
	over, watched := map[string]bool{}, map[string]bool{}
	for _, st := range f.states {
		if st.HighSet {
			watched[st.PodUID] = true
		}
		if len(st.Over) > 0 {
			over[st.PodUID] = true
		}
	}
	signals[thresholds.MemoryHighStuck] = thresholds.Observation{Available: -int64(len(over)), Capacity: int64(len(watched)), Time: f.at}
}

// Targets ranks the pods for memory.highStuck in priority order, only
// those with a container over a threshold for the grace period eligible.
func (f *MemHigh) Targets(s thresholds.Signal, summary *statsapi.Summary, pods []*v1.Pod, opts rank.Options) ([]rank.Candidate, bool) {
	if !s.MemoryHigh() {
		return nil, false
	}
	opts.MemoryHigh = f.byPod(pods)
	return rank.Rank(s, summary, pods, opts).Candidates, true
}

// byPod is each pod's container over a threshold: one stuck for the grace
// period if any, else the one over the longest.
func (f *MemHigh) byPod(pods []*v1.Pod) map[string]rank.PodMemoryHigh {
	names := containerNames(pods)
	out := map[string]rank.PodMemoryHigh{}
	best := map[string]time.Time{}
	for _, st := range f.states {
		if len(st.Over) == 0 {
			continue
		}
		if b, ok := best[st.PodUID]; ok && !st.Since.Before(b) {
			continue
		}
		best[st.PodUID] = st.Since
		out[st.PodUID] = rank.PodMemoryHigh{
			Container: nameOf(names, st.ContainerID),
			Detail:    st.Describe(f.det.Thresholds()) + ", for " + st.StuckFor(f.at).Round(time.Second).String(),
			Stuck:     st.Stuck,
		}
	}
	return out
}

// Settle implements Family: a victim's count comes back through the
// ranking (a pod in flight still over counts as the one pod it is), so
// there is nothing to settle.
func (f *MemHigh) Settle(*decide.Input) {}

// Note implements Family: nothing to record.
func (f *MemHigh) Note(decide.Input) {}

// Gone implements Family: a victim gone leaves the containers read.
func (f *MemHigh) Gone(inflight.Entry, time.Time) {}

func (f *MemHigh) setMetrics() {
	var names map[string]string
	if f.pods != nil {
		names = containerNames(f.pods())
	}
	var over []metrics.MemoryHighContainer
	for _, st := range f.states {
		for _, s := range st.Over {
			over = append(over, metrics.MemoryHighContainer{Container: nameOf(names, st.ContainerID), Signal: string(s), Stuck: st.Stuck})
		}
	}
	f.metrics.SetMemoryHigh(over)
}

// containerNames maps the runtime's container IDs (the part of
// containerStatuses[].containerID after "runtime://") to container names.
func containerNames(pods []*v1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range list {
				if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok {
					out[id] = cs.Name
				}
			}
		}
	}
	return out
}

// nameOf is a container's name, or, while its pod's status does not list
// it yet, its ID shortened as the runtimes print it.
func nameOf(names map[string]string, id string) string {
	if id == memhigh.PodLevel {
		// The pod's own cgroup (a pod-level memory.high): no container.
		return PodCgroupName
	}
	if n, ok := names[id]; ok {
		return n
	}
	return id[:min(12, len(id))]
}
