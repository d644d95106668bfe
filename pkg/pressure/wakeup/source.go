// SPDX-License-Identifier: Apache-2.0

package wakeup

import "time"

// Source is the kind of event that woke the agent; its value is the label
// used in metrics.
type Source string

// The wake-up sources.
const (
	SourceMemcgThreshold Source = "memcg_threshold"
	SourceMemoryEvents   Source = "memory_events"
	SourcePSI            Source = "psi"
	SourcePoll           Source = "poll"
	// SourceKick: the caller asked for a look now (Set.Kick), e.g. because
	// an evicted pod is gone and pressure may need the next eviction.
	SourceKick Source = "kick"
)

// AllSources lists every source kind, for initialising per-source metrics.
func AllSources() []Source {
	return []Source{SourceMemcgThreshold, SourceMemoryEvents, SourcePSI, SourcePoll, SourceKick}
}

// Wakeup is one reason to look at memory now.
type Wakeup struct {
	Source Source
	// Name is the name the caller gave the source instance when adding it
	// (e.g. "node", "kubepods"), or passed to Kick; empty for SourcePoll.
	Name string
	// At is when the wake-up was taken from the kernel, on the injected clock.
	At time.Time
}

// Status describes one added source instance, for logs and the active-sources
// gauge.
type Status struct {
	Source Source
	Name   string
	// Path is the file the source watches or writes (memory.usage_in_bytes,
	// memory.events, the pressure file).
	Path string
	// Active is false when the source could not be armed or has gone away;
	// the agent must poll instead.
	Active bool
	// Reason says why the source is inactive, or, for an active PSI trigger,
	// which regime the kernel granted.
	Reason string
	// Privileged is true for a PSI trigger armed with CAP_SYS_RESOURCE (or a
	// sub-2 s window the kernel accepted), false for the unprivileged 2 s
	// regime; always false for other sources.
	Privileged bool
	// Ignored counts events swallowed by design: the first event of an
	// unprivileged PSI trigger; memory.events notifications that showed no
	// rise of a counter meaning the cgroup's own pressure (a pod hitting its
	// own limit, on kubepods), or could not be read.
	Ignored int
	// Suppressed counts memory.events rises not delivered at once because
	// the watch had woken the agent less than Options.MemoryEventsInterval
	// before; one wake-up is delivered for them when the interval ends.
	Suppressed int
}
