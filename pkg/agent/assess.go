// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// view is what one pass sees: the observation and what it means.
type view struct {
	obs     *pressure.Observation
	signals map[thresholds.Signal]thresholds.Observation
	status  thresholds.Status
	// targets are every threshold to act on, all resources, in action order.
	targets []decide.Target
	pods    []*v1.Pod
	rates   map[thresholds.Signal]float64
	trends  map[thresholds.Signal]bool
	rank    rank.Options
	ranked  map[thresholds.Signal][]rank.Candidate
	byUID   map[types.UID]*statsapi.PodStats
	// families rank the pods for their own signals.
	families []family.Family
	now      time.Time
	// woke is the wake-up that started the pass.
	woke wakeup.Wakeup
	// unusedImages is the bytes of the node's unused images, -1 until
	// needed in this pass.
	unusedImages int64
}

// podStats is the observation's figures for a pod, nil when it has none.
func (v *view) podStats(uid types.UID) *statsapi.PodStats {
	if v.byUID == nil {
		v.byUID = make(map[types.UID]*statsapi.PodStats, len(v.obs.Summary.Pods))
		for i := range v.obs.Summary.Pods {
			ps := &v.obs.Summary.Pods[i]
			v.byUID[types.UID(ps.PodRef.UID)] = ps
		}
	}
	return v.byUID[uid]
}

// cgroupOf is a pod's cgroup in the observation, "" when it has none.
func (v *view) cgroupOf(uid string) string {
	for i := range v.obs.Pods {
		if v.obs.Pods[i].UID == uid {
			return v.obs.Pods[i].Cgroup
		}
	}
	return ""
}

// rankFor ranks the pods for a signal once per pass.
func (v *view) rankFor(s thresholds.Signal) []rank.Candidate {
	if c, ok := v.ranked[s]; ok {
		return c
	}
	if s.Condition() == v1.NodeDiskPressure && v.rank.DiskParts == nil {
		// Built on the first disk ranking of a pass: memory passes do not pay for it.
		v.rank.DiskLayout = v.obs.Node.DiskLayout
		v.rank.DiskParts = rank.DiskPartsOf(v.obs)
	}
	for _, f := range v.families {
		if c, ok := f.Targets(s, v.obs.Summary, v.pods, v.rank); ok {
			v.ranked[s] = c
			return c
		}
	}
	c := rank.Rank(s, v.obs.Summary, v.pods, v.rank).Candidates
	v.ranked[s] = c
	return c
}

// assess turns an observation into the pass's view: signals, fill rates,
// the threshold state and the episodes it starts or ends.
func (l *Loop) assess(obs *pressure.Observation, w wakeup.Wakeup) *view {
	m := l.deps.Metrics
	v := &view{obs: obs, woke: w, signals: thresholds.Observe(obs.Summary), ranked: map[thresholds.Signal][]rank.Candidate{}, unusedImages: -1,
		families: l.families}
	for _, f := range l.families {
		f.Assess(v.signals)
	}
	for s, o := range v.signals {
		m.SetSignal(s, o.Available, o.Capacity)
	}
	v.rates = make(map[thresholds.Signal]float64, len(l.learned.estimates))
	v.trends = make(map[thresholds.Signal]bool, len(l.learned.estimates))
	for s, e := range l.learned.estimates {
		if o, ok := v.signals[s]; ok {
			e.Push(o.Time, o.Available)
		}
		v.rates[s] = e.Rate()
		v.trends[s] = e.Sustained()
	}
	v.status = l.tracker.Update(v.signals)
	l.thresholdMetrics(v.status, v.signals)
	l.features.Assessed(feature.Assessment{Thresholds: l.cfg.Thresholds, Signals: v.signals, Rates: v.rates, Trends: v.trends,
		ActEarly: l.cfg.Decide.ActEarly, LastLead: l.learned.lead.LastTook()})
	if l.deps.Arming != nil {
		l.deps.Arming.Sync(obs, v.signals)
	}
	v.pods = l.deps.Pods.Pods()
	v.now = l.clk.Now()
	if l.cfg.ExpectImageGC {
		l.learned.imageAges.Observe(l.deps.Pods.Node(), v.now)
	}
	v.rank = l.cfg.Rank
	v.rank.PriorityClasses = l.deps.Pods.PriorityClasses()
	v.rank.NamespaceLabels = l.deps.Pods.NamespaceLabels()
	v.rank.Node = rankNode(v.rank.Node, l.deps.Pods.Node())
	l.tracePods(v)
	in := l.decideInput(v, nil)
	l.noteInput(v, in)
	v.targets = decide.Targets(l.decideOptions(), in)
	l.trackEpisodes(v)
	return v
}

func (l *Loop) decideOptions() decide.Options {
	opts := l.cfg.Decide
	opts.Lead = l.learned.lead.Get()
	return opts
}

// decideInput is the decision's input for the thresholds keep admits (all
// when nil). It changes nothing the loop keeps: the explanation makes the
// same input for its plans (planNow). What a decision must remember of it,
// noteInput records.
func (l *Loop) decideInput(v *view, keep func(thresholds.Threshold) bool) decide.Input {
	st := v.status
	ths := l.cfg.Thresholds
	if keep != nil {
		st = thresholds.Status{Time: st.Time}
		for _, a := range v.status.Active {
			if keep(a.Threshold) {
				st.Active = append(st.Active, a)
			}
		}
		ths = nil
		for _, th := range l.cfg.Thresholds {
			if keep(th) {
				ths = append(ths, th)
			}
		}
	}
	in := decide.Input{
		Now: v.now, Status: st, Thresholds: ths, Observations: v.signals, Rates: v.rates, Sustained: v.trends,
		Rank: v.rankFor, InFlight: l.inFlightView(), Tried: map[types.UID]bool{},
		NodeReclaim: l.nodeReclaim(v, st),
	}
	for _, f := range l.families {
		f.Settle(&in)
	}
	return in
}

// noteInput records what a decision on in, made by the pass (assess, act)
// and never by the explanation, saw: the families' victims in flight (the
// stall's window runs from the last decision that saw one), and the start
// of the kubelet's chance at the unused images of each signal in
// in.NodeReclaim.
func (l *Loop) noteInput(v *view, in decide.Input) {
	for _, f := range l.families {
		f.Note(in)
	}
	for s := range in.NodeReclaim {
		l.imageGCChance(s, v.unusedImages, v.now)
	}
}

func signalErrs(lost []pressure.SignalError) []error {
	out := make([]error, len(lost))
	for i := range lost {
		out[i] = lost[i]
	}
	return out
}

// nodeReclaim is what the kubelet's image garbage collection frees toward
// each active bytes signal of the filesystem holding the images: imagefs,
// and nodefs when the image store is on it. nil when no such signal is
// active, or ExpectImageGC is off.
//
// The kubelet gets a bounded chance: its image collection runs every
// imagegc.GCPeriod (and its eviction manager's node-level reclaim within
// its 10 s loop once its own threshold is met), so a signal whose unused
// images have been counted for imagegc.Patience without the pressure
// ending stops counting them, and evictd says so.
func (l *Loop) nodeReclaim(v *view, st thresholds.Status) map[thresholds.Signal]int64 {
	if !l.cfg.ExpectImageGC {
		return nil
	}
	var out map[thresholds.Signal]int64
	for _, a := range st.Active {
		s := a.Signal
		if (s != thresholds.ImageFsAvailable && s != thresholds.NodeFsAvailable) ||
			!fslayout.ImagesOn(v.obs.Node.DiskLayout, s.Filesystem()) {
			continue
		}
		if out == nil {
			if v.unusedImages < 0 {
				v.unusedImages, _ = imagegc.Unused(l.deps.Pods.Node(), v.pods, func(img v1.ContainerImage) bool { return l.learned.imageAges.OldEnough(img, v.now) })
			}
			out = map[thresholds.Signal]int64{}
		}
		out[s] = l.learned.imageGC.Counts(s, v.unusedImages, v.now)
	}
	return out
}

func (l *Loop) thresholdMetrics(st thresholds.Status, signals map[thresholds.Signal]thresholds.Observation) {
	type key struct {
		s    thresholds.Signal
		hard bool
	}
	met := map[key]bool{}
	for _, th := range st.Met {
		met[key{th.Signal, th.Hard()}] = true
	}
	for _, th := range l.cfg.Thresholds {
		k := key{th.Signal, th.Hard()}
		if share, ok := th.Value.Stalled(); ok {
			l.deps.Metrics.SetStallThreshold(th.Signal, th.Hard(), met[k], share)
			continue
		}
		amount := int64(-1)
		if o, ok := signals[th.Signal]; ok {
			amount = th.Value.Amount(o.Capacity)
		}
		l.deps.Metrics.SetThreshold(th.Signal, th.Hard(), met[k], amount)
	}
}

// rankNode is the node a mirror pod's owner must be: the Node the informer
// holds, by name and UID; without it, the configured name alone (the
// kubelet cannot write a mirror without its Node either).
func rankNode(configured rank.NodeRef, n *v1.Node) rank.NodeRef {
	if n == nil {
		return configured
	}
	return rank.NodeRef{Name: n.Name, UID: n.UID}
}
