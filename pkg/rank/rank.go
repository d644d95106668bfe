// SPDX-License-Identifier: Apache-2.0

// Package rank orders the pods on a node for eviction under one starved
// signal, the kubelet's way (exceeds request, then priority, then usage above
// request), minus its known mistakes: pods without stats go last instead of
// first, ties break by namespace/name instead of at random, DaemonSet pods
// are skipped by default, and priority groups bound what a namespace gains
// from giving its pods high priorities. It is pure: no I/O, no clock.
package rank

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Options tune eligibility and priority.
type Options struct {
	// PriorityGroups, in config order (the first selector match wins).
	PriorityGroups []PriorityGroup
	// NamespaceLabels holds each namespace's labels, for group selectors.
	NamespaceLabels map[string]map[string]string
	// ExcludedNamespaces are never evicted from.
	ExcludedNamespaces []string
	// OptOut is who may keep their pods from evictd with OptOutAnnotation;
	// the zero value: nobody.
	OptOut OptOut
	// Node is the node the pods run on: a pod is a static pod's mirror only
	// with this Node as its controller.
	Node NodeRef
	// IncludeDaemonSetPods makes DaemonSet-owned pods eligible.
	IncludeDaemonSetPods bool
	// WorkingSetOnly ranks the memory signals by working set alone, as the
	// kubelet does; by default they rank by footprint, working set + swap.
	WorkingSetOnly bool
	// PriorityClasses maps PriorityClass names to values, to resolve
	// spec.priorityClassName when spec.priority is unset.
	PriorityClasses map[string]int32
	// DiskParts holds pods' ephemeral storage by part, by pod UID, when the
	// caller measured it; pods not in it are measured from the Summary.
	DiskParts map[string]DiskParts
	// DiskLayout is the node's disk layout, which decides what each disk
	// signal counts; Unknown: told from the Summary's filesystems.
	DiskLayout fslayout.Layout
	// PodStall holds each pod's own memory stall, by pod UID, for the stall
	// signals: the agent's shares over its stall window. A pod without an
	// entry is measured from its Summary PSI (avg10), or has no figure.
	PodStall map[string]PodStall
	// StallingShare is the share of time a pod's own memory.pressure must
	// show stalled for it to be evicted under a stall signal;
	// 0 means DefaultStallingShare.
	StallingShare float64
	// MemoryHigh holds, by pod UID, the pods with a container over a
	// memory.high threshold, for the memory.high signal; a pod without an
	// entry is not a target for it (docs/memhigh.md).
	MemoryHigh map[string]PodMemoryHigh
}

// PodMemoryHigh is a pod's container over a memory.high threshold: which
// one, what is over, and whether it has been for the grace period.
type PodMemoryHigh struct {
	Container string
	// Detail says which signal is over and by how much.
	Detail string
	Stuck  bool
}

// PodStall is the share of time a pod's tasks stalled on memory, in [0, 1].
type PodStall struct{ Some, Full float64 }

// DefaultStallingShare: a pod whose tasks lost less than 5 % of the window
// to memory stall is not the pod thrashing; docs/stall.md has the figures.
const DefaultStallingShare = 0.05

// Result is the ranking for one signal.
type Result struct {
	Signal     string      `json:"signal"`
	Candidates []Candidate `json:"candidates"`
}

// Candidate is one pod in the ranking.
type Candidate struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Eligible is false when a check forbids evicting the pod; SkipReason
	// then says which ("check: detail", joined with "; ").
	Eligible   bool   `json:"eligible"`
	SkipReason string `json:"skipReason"`
	// NotTaken lists the claims to be spared that the pod's author made
	// and evictd did not take (a forged mirror annotation, an opt-out from
	// a namespace that may not opt out), joined with "; ".
	NotTaken string `json:"notTaken,omitempty"`
	// Priority is the pod's own; EffectivePriority after its group.
	Priority          int32 `json:"priority"`
	EffectivePriority int32 `json:"effectivePriority"`
	// Group is the priority group the pod's namespace belongs to, which
	// made EffectivePriority; "" for none.
	Group          string `json:"group,omitempty"`
	ExceedsRequest bool   `json:"exceedsRequest"`
	// Usage and Request are in the signal's unit (bytes, inodes or
	// processes); Usage is 0 when HasUsage is false. For the memory
	// signals Usage is the pod's footprint: its working set plus the swap
	// it uses, Swap of it.
	Usage    int64 `json:"usage"`
	Request  int64 `json:"request"`
	Swap     int64 `json:"swap,omitempty"`
	HasUsage bool  `json:"-"`
	// Stall is, under a stall signal, the share of time the pod's own
	// tasks stalled on memory (some or full, as the signal), and Stalling
	// whether it reaches Options.StallingShare.
	Stall    float64 `json:"stall,omitempty"`
	Stalling bool    `json:"stalling,omitempty"`
	// MemoryHigh is, under the memory.high signal, the container stuck
	// at its memory.high and why ("" for a pod with none).
	MemoryHigh string `json:"memoryHigh,omitempty"`
	// Pod is the input pod, for the caller that evicts it.
	Pod *v1.Pod `json:"-"`
}

// Rank orders pods for eviction under signal: the eligible ones first, in
// eviction order, then the ineligible ones in the order they would have had.
// Under a stall signal only the pods whose own memory.pressure shows a stall
// (Options.StallingShare) are eligible, and they take the memory order.
// The memory signals' usage is working set plus swap (footprint), so that a
// pod that pushed its excess to swap does not hide behind a small working
// set; swap.available ranks by swap in use. The order, for memory and disk
// signals:
//
//  1. pods with a usage figure before pods without one;
//  2. pods whose usage exceeds their request first;
//  3. lower effective priority first, then lower own priority;
//  4. larger usage − request first;
//  5. namespace, then name, then UID.
//
// For pid.available, steps 2 and 4 become "more processes first" after
// priority. An unknown signal gives no pod a usage figure, so pods order by
// priority alone. summary may be nil.
func Rank(signal thresholds.Signal, summary *statsapi.Summary, pods []*v1.Pod, opts Options) Result {
	disk := diskLayout{layout: opts.DiskLayout, parts: opts.DiskParts}
	if disk.layout == fslayout.Unknown {
		disk.layout = layoutOf(summary)
	}
	m := measureFor(signal, disk)
	stats := indexStats(summary)
	groups := newGroupIndex(opts.PriorityGroups, opts.NamespaceLabels)
	env := newCheckEnv(&opts)

	cands := make([]Candidate, 0, len(pods))
	for _, p := range pods {
		if p == nil {
			continue
		}
		c := Candidate{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Pod: p}
		c.Priority = ownPriority(p, opts.PriorityClasses)
		g := groups.lookup(p.Namespace)
		c.EffectivePriority = effectivePriority(c.Priority, g)
		if g != nil {
			c.Group = g.Name
		}
		env.own = c.Priority
		c.SkipReason = skipReason(p, &env)
		c.Eligible = c.SkipReason == ""
		c.NotTaken = claimsNotTaken(p, &env)
		if m.request != "" {
			c.Request = podRequest(p, m.request)
		}
		ps := stats.find(p)
		if ps != nil {
			c.Usage, c.HasUsage = m.usage(ps, p)
			if m.request == v1.ResourceMemory && c.HasUsage && !opts.WorkingSetOnly {
				// The footprint: a pod that pushed its excess to swap does
				// not hide behind a small working set.
				c.Swap = swapUsage(ps)
				c.Usage = addSat(c.Usage, c.Swap)
			}
		}
		if signal.Stall() {
			markStall(&c, signal.FullStall(), ps, opts)
		}
		if signal.MemoryHigh() {
			markMemoryHigh(&c, opts.MemoryHigh)
		}
		c.ExceedsRequest = m.byRequest && c.HasUsage && c.Usage > c.Request
		if m.fs != "" && c.HasUsage && c.Usage == 0 {
			// Evicting it would free nothing where the space is short.
			c.Eligible = false
			c.SkipReason = joinReasons(c.SkipReason, CheckFreesNothing+": nothing on "+m.fs)
		}
		cands = append(cands, c)
	}
	// Sorting indices instead of the candidates themselves: a candidate is
	// over a hundred bytes with pointers, and moving those dominated the
	// cost (write barriers) at a thousand pods.
	order := make([]int32, len(cands))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int { return compare(&cands[i], &cands[j], m.byRequest) })
	out := make([]Candidate, len(cands))
	for k, i := range order {
		out[k] = cands[i]
	}
	return Result{Signal: string(signal), Candidates: out}
}

// markStall fills a candidate's stall under a stall signal and makes a pod
// not in the stall ineligible.
func markStall(c *Candidate, full bool, ps *statsapi.PodStats, opts Options) {
	floor := opts.StallingShare
	if floor <= 0 {
		floor = DefaultStallingShare
	}
	st, ok := opts.PodStall[c.UID]
	if !ok && ps != nil && ps.Memory != nil && ps.Memory.PSI != nil {
		// The kernel's 10 s average, in percent: `evictd rank` has one
		// Summary, not a window of readings.
		st, ok = PodStall{Some: ps.Memory.PSI.Some.Avg10 / 100, Full: ps.Memory.PSI.Full.Avg10 / 100}, true
	}
	if ok {
		c.Stall = st.Some
		if full {
			c.Stall = st.Full
		}
	}
	c.Stalling = ok && c.Stall >= floor
	if !c.Stalling {
		detail := "no memory.pressure figure"
		if ok {
			detail = fmt.Sprintf("its own memory stall %.1f%% is under %.1f%%", c.Stall*100, floor*100)
		}
		c.Eligible = false
		c.SkipReason = joinReasons(c.SkipReason, CheckNotStalling+": "+detail)
	}
}

// markMemoryHigh fills a candidate under the memory.high signal: a pod with
// a container over a threshold counts one, what its eviction gives back
// (the signal counts such pods); only one stuck for the grace period is
// eligible.
func markMemoryHigh(c *Candidate, byUID map[string]PodMemoryHigh) {
	mh, ok := byUID[c.UID]
	if ok {
		c.MemoryHigh = "container " + mh.Container + ": " + mh.Detail
		c.Usage, c.HasUsage = 1, true
	}
	if !ok || !mh.Stuck {
		detail := "no container over a memory.high threshold"
		if ok {
			detail = "container " + mh.Container + " not yet over it for the grace period"
		}
		c.Eligible = false
		c.SkipReason = joinReasons(c.SkipReason, CheckNotStuck+": "+detail)
	}
}

// compare is a total order, so the sort needs no stability and the output
// does not depend on the input order.
func compare(a, b *Candidate, byRequest bool) int {
	if c := cmpTrueFirst(a.Eligible, b.Eligible); c != 0 {
		return c
	}
	if c := cmpTrueFirst(a.HasUsage, b.HasUsage); c != 0 {
		return c
	}
	if c := cmpTrueFirst(a.ExceedsRequest, b.ExceedsRequest); c != 0 {
		return c
	}
	if c := cmp.Compare(a.EffectivePriority, b.EffectivePriority); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
		return c
	}
	if byRequest {
		// Larger usage − request first. Both are non-negative, so the
		// differences cannot overflow.
		if c := cmp.Compare(b.Usage-b.Request, a.Usage-a.Request); c != 0 {
			return c
		}
	} else if c := cmp.Compare(b.Usage, a.Usage); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.UID, b.UID)
}

func cmpTrueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

// statsIndex finds a pod's stats by UID, or by namespace/name for entries
// that carry no UID (a recreated pod with the same name but another UID must
// not inherit its predecessor's usage).
type statsIndex struct {
	byUID  map[string]*statsapi.PodStats
	byName map[string]*statsapi.PodStats
}

func indexStats(s *statsapi.Summary) statsIndex {
	var idx statsIndex
	if s == nil {
		return idx
	}
	idx.byUID = make(map[string]*statsapi.PodStats, len(s.Pods))
	for i := range s.Pods {
		ps := &s.Pods[i]
		if ps.PodRef.UID != "" {
			idx.byUID[ps.PodRef.UID] = ps
			continue
		}
		if idx.byName == nil {
			idx.byName = map[string]*statsapi.PodStats{}
		}
		idx.byName[ps.PodRef.Namespace+"/"+ps.PodRef.Name] = ps
	}
	return idx
}

func (idx statsIndex) find(p *v1.Pod) *statsapi.PodStats {
	if ps, ok := idx.byUID[string(p.UID)]; ok && p.UID != "" {
		return ps
	}
	if idx.byName != nil {
		return idx.byName[p.Namespace+"/"+p.Name]
	}
	return nil
}

func joinReasons(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
