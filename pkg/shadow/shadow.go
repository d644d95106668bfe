// SPDX-License-Identifier: Apache-2.0

// Package shadow compares, per pressure episode, what a dry-run evictd
// would have evicted with what the kubelet beside it did evict and what the
// kernel's OOM killer killed: the report an operator reads before letting
// evictd enforce (docs/shadow.md).
//
// Compare is pure: the agent gathers the episode, the kubelet's evictions
// (read from the pods of its node, KubeletEviction) and the OOM-kill
// count; Compare only lines them up.
package shadow

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Action is one eviction, evictd's would-be or the kubelet's.
type Action struct {
	// Pod is namespace/name.
	Pod string    `json:"pod"`
	UID string    `json:"uid,omitempty"`
	At  time.Time `json:"at"`
	// AtFrom says, for a kubelet eviction, where At was read: AtCondition,
	// AtContainerExit or AtSeen.
	AtFrom string `json:"atFrom,omitempty"`
	// Signal is what evictd acted for; the kubelet's message (the pod's
	// status.message) says its own in words (Why).
	Signal string `json:"signal,omitempty"`
	Why    string `json:"why,omitempty"`
}

// Episode is one pressure episode of a dry-run evictd.
type Episode struct {
	Resource string    `json:"resource"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// WouldEvict are evictd's dry-run evictions in the episode, in order.
	WouldEvict []Action `json:"wouldEvict"`
	// FirstOOMKill is the first pass of the episode that saw the node's
	// OOM-kill count risen since the pass before (the kill came at or
	// before it); zero when none did.
	FirstOOMKill time.Time `json:"firstOOMKill,omitzero"`
}

// Report is the comparison for one episode.
type Report struct {
	Episode
	// KubeletEvicted are the kubelet's evictions on the node from the
	// episode's start to its end, in order.
	KubeletEvicted []Action `json:"kubeletEvicted"`
	// OOMKills is how many processes the kernel's OOM killer killed on the
	// node during the episode (a pod's or any other); -1 when it could not
	// be read.
	OOMKills int64 `json:"oomKills"`
	// Both are the pods evictd would have evicted and the kubelet did;
	// EvictdOnly and KubeletOnly the others.
	Both        []string `json:"both"`
	EvictdOnly  []string `json:"evictdOnly"`
	KubeletOnly []string `json:"kubeletOnly"`
	// SameOrder: the pods in Both come in the same order in both lists.
	SameOrder bool `json:"sameOrder"`
	// First says who acted first in the episode: FirstEvictd,
	// FirstKubelet (an eviction for the episode's resource),
	// FirstOOMKiller (memory episodes) or FirstNone.
	First string `json:"first"`
	// Lead is how long before the kubelet's first eviction evictd would
	// have made its own (negative: after); set when both acted.
	Lead    time.Duration `json:"lead"`
	HasLead bool          `json:"hasLead"`
	// Summary says it in one sentence.
	Summary string `json:"summary"`
}

// Compare lines up the episode with the kubelet's evictions and the OOM
// kills. Kubelet evictions outside the episode are left out: the caller may
// pass all it saw.
func Compare(ep Episode, kubelet []Action, oomKills int64) Report {
	r := Report{Episode: ep, OOMKills: oomKills}
	for _, k := range kubelet {
		start := ep.Start
		if k.At.Nanosecond() == 0 {
			// The times a pod carries (a condition's lastTransitionTime,
			// a container's finishedAt) are whole seconds, truncated: an
			// eviction in the episode's first second reads as before its
			// start.
			start = start.Truncate(time.Second)
		}
		if !k.At.Before(start) && !k.At.After(ep.End) {
			r.KubeletEvicted = append(r.KubeletEvicted, k)
		}
	}
	slices.SortStableFunc(r.KubeletEvicted, func(a, b Action) int { return a.At.Compare(b.At) })
	key := func(a Action) string { return a.Pod + "\x00" + a.UID }
	byKubelet := map[string]int{}
	for i, k := range r.KubeletEvicted {
		if _, ok := byKubelet[key(k)]; !ok {
			byKubelet[key(k)] = i
		}
	}
	seen := map[string]bool{}
	r.SameOrder = true
	last := -1
	for _, w := range ep.WouldEvict {
		if seen[key(w)] {
			continue
		}
		seen[key(w)] = true
		i, ok := byKubelet[key(w)]
		if !ok {
			r.EvictdOnly = append(r.EvictdOnly, w.Pod)
			continue
		}
		r.Both = append(r.Both, w.Pod)
		if i < last {
			r.SameOrder = false
		}
		last = i
	}
	kseen := map[string]bool{}
	for _, k := range r.KubeletEvicted {
		if !seen[key(k)] && !kseen[key(k)] {
			r.KubeletOnly = append(r.KubeletOnly, k.Pod)
		}
		kseen[key(k)] = true
	}
	if len(ep.WouldEvict) > 0 && len(r.KubeletEvicted) > 0 {
		r.Lead, r.HasLead = r.KubeletEvicted[0].At.Sub(ep.WouldEvict[0].At), true
	}
	r.First = first(r)
	r.Summary = summary(r)
	return r
}

func summary(r Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s pressure for %s: ", r.Resource, r.End.Sub(r.Start).Round(time.Second))
	switch {
	case len(r.WouldEvict) == 0 && len(r.KubeletEvicted) == 0:
		b.WriteString("neither evictd nor the kubelet evicted")
	case len(r.KubeletEvicted) == 0:
		fmt.Fprintf(&b, "evictd would have evicted %s; the kubelet evicted nothing", strings.Join(r.EvictdOnly, ", "))
	case len(r.WouldEvict) == 0:
		fmt.Fprintf(&b, "the kubelet evicted %s; evictd would have evicted nothing", strings.Join(r.KubeletOnly, ", "))
	default:
		fmt.Fprintf(&b, "evictd would have evicted %d pod(s), the kubelet evicted %d; both chose %s",
			len(r.EvictdOnly)+len(r.Both), len(r.KubeletOnly)+len(r.Both), listOrNone(r.Both))
		if len(r.Both) > 1 && !r.SameOrder {
			b.WriteString(" (in another order)")
		}
		if len(r.EvictdOnly) > 0 {
			fmt.Fprintf(&b, "; only evictd %s", strings.Join(r.EvictdOnly, ", "))
		}
		if len(r.KubeletOnly) > 0 {
			fmt.Fprintf(&b, "; only the kubelet %s", strings.Join(r.KubeletOnly, ", "))
		}
		if r.Lead >= 0 {
			fmt.Fprintf(&b, "; evictd first, by %s", r.Lead.Round(time.Millisecond))
		} else {
			fmt.Fprintf(&b, "; the kubelet first, by %s", (-r.Lead).Round(time.Millisecond))
		}
	}
	switch {
	case r.OOMKills > 0 && r.First == FirstOOMKiller:
		fmt.Fprintf(&b, "; the kernel OOM-killed %d process(es) on the node, the first before anyone evicted", r.OOMKills)
	case r.OOMKills > 0:
		fmt.Fprintf(&b, "; the kernel OOM-killed %d process(es) on the node", r.OOMKills)
	case r.OOMKills == 0:
		b.WriteString("; no OOM kill")
	default:
		b.WriteString("; OOM kills unknown")
	}
	return b.String()
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none of the same pods"
	}
	return strings.Join(s, ", ")
}
