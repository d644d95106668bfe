// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"slices"
	"strings"
	"time"
)

// Who acted first in an episode (Report.First, the first label of
// evictd_shadow_episodes_total).
const (
	// FirstEvictd: evictd's first would-be eviction came before the
	// kubelet's first eviction for the episode's resource and before the
	// first OOM kill.
	FirstEvictd = "evictd"
	// FirstKubelet: the kubelet evicted a pod for the episode's resource
	// before evictd would have.
	FirstKubelet = "kubelet"
	// FirstOOMKiller: the kernel OOM-killed a process before either
	// (memory episodes only).
	FirstOOMKiller = "oom_killer"
	// FirstNone: nobody acted in the episode.
	FirstNone = "none"
)

// Firsts lists every value of Report.First.
var Firsts = []string{FirstEvictd, FirstKubelet, FirstOOMKiller, FirstNone}

// What the kubelet evicted a pod for, read from the pod's status.message
// (KubeletResource): the kubelet's own resource names, and two more.
const (
	KubeletMemory           = "memory"
	KubeletEphemeralStorage = "ephemeral-storage" // nodefs, imagefs or containerfs: the kubelet does not say which
	KubeletInodes           = "inodes"
	KubeletPIDs             = "pids"
	// KubeletStorageLimit: a pod over its own local storage limit (a
	// container's, the pod's, an emptyDir's sizeLimit): no node pressure.
	KubeletStorageLimit = "ephemeral-storage-limit"
	// KubeletOther: a message this version does not know.
	KubeletOther = "other"
)

// KubeletResources lists every value KubeletResource returns.
var KubeletResources = []string{KubeletMemory, KubeletEphemeralStorage, KubeletInodes, KubeletPIDs, KubeletStorageLimit, KubeletOther}

// The kubelet's eviction manager's messages (pkg/kubelet/eviction,
// nodeLowMessageFmt and the three local storage limit ones).
const nodeLowPrefix = "The node was low on resource: "

var storageLimitPrefixes = []string{
	"Container ",                  // containerEphemeralStorageMessageFmt: "Container %s exceeded its local ephemeral storage limit %q. "
	"Pod ephemeral local storage", // podEphemeralStorageMessageFmt
	"Usage of EmptyDir volume ",   // emptyDirMessageFmt
}

// KubeletResource is what the kubelet evicted a pod for, from the message
// its eviction manager left on the pod: one of KubeletResources, whatever
// the message says, so that it can be a label.
func KubeletResource(message string) string {
	if rest, ok := strings.CutPrefix(message, nodeLowPrefix); ok {
		name, _, _ := strings.Cut(rest, ". ")
		name = strings.TrimSuffix(name, ".")
		switch name {
		case KubeletMemory, KubeletEphemeralStorage, KubeletInodes, KubeletPIDs:
			return name
		}
		return KubeletOther
	}
	for _, p := range storageLimitPrefixes {
		if strings.HasPrefix(message, p) && strings.Contains(message, "limit") {
			return KubeletStorageLimit
		}
	}
	return KubeletOther
}

// KubeletResourcesFor are the kubelet's resources whose evictions relieve
// what an episode of resource (the loop's names: memory, memory-stall,
// memory-high, nodefs, imagefs, pids) is about; nil for a resource it does
// not know.
func KubeletResourcesFor(resource string) []string {
	switch resource {
	case "memory", "memory-stall", "memory-high":
		return []string{KubeletMemory}
	case "nodefs", "imagefs":
		return []string{KubeletEphemeralStorage, KubeletInodes}
	case "pids":
		return []string{KubeletPIDs}
	}
	return nil
}

// memoryEpisode reports whether an episode of resource is about memory,
// where the OOM killer is the other actor.
func memoryEpisode(resource string) bool {
	return resource == "memory" || strings.HasPrefix(resource, "memory-")
}

// first is who acted first in the report's episode: the earliest of
// evictd's first would-be eviction, the kubelet's first eviction for the
// episode's resource, and, in a memory episode, the first pass that saw
// the node's OOM-kill count rise.
//
// The OOM kill came at or before the pass that saw it, so it wins a tie.
// Between evictd and the kubelet a tie is evictd's, as the report's lead
// (0 or more: evictd first); the kubelet's times are whole seconds.
func first(r Report) string {
	who, at := FirstNone, time.Time{}
	earlier := func(name string, t time.Time, tieWins bool) {
		if t.IsZero() {
			return
		}
		if at.IsZero() || t.Before(at) || (tieWins && t.Equal(at)) {
			who, at = name, t
		}
	}
	var kubelet time.Time
	want := KubeletResourcesFor(r.Resource)
	for _, k := range r.KubeletEvicted {
		if slices.Contains(want, KubeletResource(k.Why)) && (kubelet.IsZero() || k.At.Before(kubelet)) {
			kubelet = k.At
		}
	}
	var evictd time.Time
	for _, w := range r.WouldEvict {
		if evictd.IsZero() || w.At.Before(evictd) {
			evictd = w.At
		}
	}
	earlier(FirstKubelet, kubelet, false)
	earlier(FirstEvictd, evictd, true)
	if memoryEpisode(r.Resource) {
		earlier(FirstOOMKiller, r.FirstOOMKill, true)
	}
	return who
}

// oomEpisode is the episode an OOM kill is counted under when the episodes
// of open are under way: a memory one first, in the loop's order, else
// another, else none.
func oomEpisode(open map[string]*openEpisode) string {
	for _, r := range []string{"memory", "memory-stall", "memory-high"} {
		if open[r] != nil {
			return r
		}
	}
	var others []string
	for r := range open {
		others = append(others, r)
	}
	if len(others) == 0 {
		return OOMOutsideEpisodes
	}
	slices.Sort(others)
	return others[0]
}

// OOMOutsideEpisodes is the episode label of OOM kills while no episode is
// under way.
const OOMOutsideEpisodes = "none"
