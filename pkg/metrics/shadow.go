// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// shadowMetrics are shadow mode's evidence for a fleet (pkg/shadow counts
// them): what evictd would have evicted, what the kubelet and the OOM
// killer did meanwhile, and who acted first in each episode. They come
// from what a shadow agent already reads (its node's pods, from its
// informer; the node's /proc/vmstat): no API request of their own. No
// series without --shadow, so a sum across nodes counts shadow agents
// alone; every label is from a closed set, never a pod's name.
type shadowMetrics struct {
	wouldEvict *prometheus.CounterVec
	kubelet    *prometheus.CounterVec
	oomKills   *prometheus.CounterVec
	episodes   *prometheus.CounterVec
}

func (m *Metrics) initShadow() {
	s := &m.shadow
	s.wouldEvict = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "shadow", Name: "would_evictions_total",
		Help: "Evictions evictd in shadow mode (--shadow) would have made: the dry-run evictions the API server allowed, each pod once per pressure episode, by the episode's resource (memory, memory-stall, memory-high, nodefs, imagefs, pids) and the signal it acted for. No series without --shadow.",
	}, []string{"resource", "signal"})
	s.kubelet = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "shadow", Name: "kubelet_evictions_total",
		Help: "The kubelet's evictions on this node that evictd in shadow mode saw (its pods left Failed with reason Evicted, read from the informer on the node's pods; not those refused at admission, not those dated before the agent started), each pod once, by what the kubelet's message says it evicted for: memory, ephemeral-storage, inodes, pids, ephemeral-storage-limit (a pod over its own local storage limit, no node pressure) or other. No series without --shadow.",
	}, []string{"resource"})
	s.oomKills = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "shadow", Name: "oom_kills_total",
		Help: "Processes the kernel's OOM killer killed on the node (any process, whichever limit it hit: the rise of oom_kill in /proc/vmstat from one pass to the next), as evictd in shadow mode saw them, by the pressure episode under way (its resource, a memory one first when several are; none outside episodes). No series without --shadow.",
	}, []string{"episode"})
	s.episodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "shadow", Name: "episodes_total",
		Help: "Pressure episodes of evictd in shadow mode, counted as each ends, by resource and by who acted first in it: evictd (its first would-be eviction), kubelet (its first eviction for that resource on the node), oom_killer (the first pass that saw an OOM kill; memory episodes only), or none. Kubelet times are whole seconds; an OOM kill is dated by the pass that saw it. No series without --shadow.",
	}, []string{"resource", "first"})
	m.own = append(m.own, s.wouldEvict, s.kubelet, s.oomKills, s.episodes)
}

// ShadowSeries are the label values InitShadow creates series for.
type ShadowSeries struct {
	// Signals are the signals with a threshold, each with its episode's
	// resource.
	Signals map[string]string
	// Resources are the episodes' resources those signals open.
	Resources []string
	// KubeletResources, Episodes and Firsts are pkg/shadow's closed sets.
	KubeletResources []string
	Episodes         []string
	Firsts           []string
}

// InitShadow creates shadow mode's series at 0, so that increase() sees
// the first event and a sum across nodes sees every shadow agent: called
// only with --shadow.
func (m *Metrics) InitShadow(s ShadowSeries) {
	if m == nil {
		return
	}
	for signal, resource := range s.Signals {
		m.shadow.wouldEvict.WithLabelValues(resource, signal)
	}
	for _, r := range s.KubeletResources {
		m.shadow.kubelet.WithLabelValues(r)
	}
	for _, e := range s.Episodes {
		m.shadow.oomKills.WithLabelValues(e)
	}
	for _, r := range s.Resources {
		for _, f := range s.Firsts {
			m.shadow.episodes.WithLabelValues(r, f)
		}
	}
}

// ShadowWouldEvict counts one would-be eviction (shadow.Counter).
func (m *Metrics) ShadowWouldEvict(resource, signal string) {
	if m == nil {
		return
	}
	m.shadow.wouldEvict.WithLabelValues(resource, signal).Inc()
}

// ShadowKubeletEviction counts one of the kubelet's evictions on the node
// (shadow.Counter).
func (m *Metrics) ShadowKubeletEviction(resource string) {
	if m == nil {
		return
	}
	m.shadow.kubelet.WithLabelValues(resource).Inc()
}

// ShadowOOMKills counts n OOM kills during episode (shadow.Counter).
func (m *Metrics) ShadowOOMKills(episode string, n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.shadow.oomKills.WithLabelValues(episode).Add(float64(n))
}

// ShadowEpisode counts an ended episode by who acted first
// (shadow.Counter).
func (m *Metrics) ShadowEpisode(resource, first string) {
	if m == nil {
		return
	}
	m.shadow.episodes.WithLabelValues(resource, first).Inc()
}
