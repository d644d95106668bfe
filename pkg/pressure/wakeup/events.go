// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"time"

	"github.com/evictd/evictd/pkg/pressure"
)

// What a cgroup v2 memory.events notification means.
//
// The kernel (mm/memcontrol.c, memcg_memory_event) counts each event in the
// cgroup where it happened, in memory.events.local (kernel ≥ 5.2), and in
// memory.events of that cgroup and of every ancestor. kubepods' memory.events
// is therefore bumped whenever any container reaches its own memory.high or
// memory.max, which is routine and says nothing about the node. Where the
// event happens:
//
//   - low, high, max, oom: in the cgroup whose protection or limit was hit.
//     In kubepods' memory.events.local they mean kubepods' own memory.low was
//     breached by node-wide reclaim, or kubepods' own memory.high or
//     memory.max (the node allocatable the kubelet enforces) was reached, or
//     a charge failed against it: node pressure.
//   - oom_kill: in the cgroup of the killed task, whichever limit (or the
//     whole machine) ran out. oom_group_kill: in the cgroup with
//     memory.oom.group set. Tasks and oom.group sit in containers, so in
//     kubepods' local file these stay zero in practice; any rise there is
//     still kubepods' own.
//
// So, with memory.events.local, every counter above rising means node
// pressure, and nothing else in the file does (newer kernels add keys such as
// sock_throttled, which are ignored).
//
// With only the hierarchical file, high, max and oom of kubepods are the sum
// of its own events and its pods', and cannot be told apart: they never wake.
// What the sums still show is a kill by the kernel's global OOM killer, the
// one node-pressure event a pod's own limit cannot cause: such a kill raises
// oom_kill with no memcg OOM (oom) in the subtree. A container's OOM raises
// oom first and then oom_kill (once per task for a group kill); the two may
// land in separate reads, so a kill within oomKillAttribution of a rise of
// oom counts as that OOM's. The rule is a heuristic: a global OOM kill within
// that second of a container OOM does not wake, and a container OOM whose kill
// is counted later than that does.

// DefaultMemoryEventsInterval is the shortest time between two memory_events
// wake-ups of one watch (Options.MemoryEventsInterval). kubepods pinned at its
// memory.max bumps max on every charge attempt, and the kernel notifies up to
// 100 times per second; one look per second is enough for the loop, whose
// poll runs fast while memory is near a threshold anyway.
const DefaultMemoryEventsInterval = time.Second

// oomKillAttribution is how long after a rise of oom a rise of oom_kill is
// taken as that memcg OOM's kill (hierarchical counters only).
const oomKillAttribution = time.Second

// eventKey indexes the memory.events counters that are read.
type eventKey int

const (
	evLow eventKey = iota
	evHigh
	evMax
	evOOM
	evOOMKill
	evOOMGroupKill
	numEventKeys
)

var eventKeyNames = [numEventKeys]string{"low", "high", "max", "oom", "oom_kill", "oom_group_kill"}

func (k eventKey) String() string { return eventKeyNames[k] }

// eventCounters is one read of a memory.events-format file. Keys the file
// does not hold (another kernel's) are absent, never zero; so is every key of
// a read that does not parse (one that caught the file mid-write).
type eventCounters struct {
	v   [numEventKeys]uint64
	has [numEventKeys]bool
}

// parseEventCounters reads the "key value" lines of a memory.events file
// with the observer's strict parser (pressure.ScanFlatKeyed): unknown keys
// are skipped, but a read that does not parse as a whole (empty, truncated
// without its final newline, or any malformed line) yields no counters at
// all, which eventJudge.observe takes as no rise and no new baseline. It does
// not allocate.
func parseEventCounters(b []byte) eventCounters {
	var c eventCounters
	err := pressure.ScanFlatKeyed(b, func(key []byte, v uint64) {
		for k, name := range eventKeyNames {
			if string(key) == name {
				c.v[k], c.has[k] = v, true
				return
			}
		}
	})
	if err != nil {
		return eventCounters{}
	}
	return c
}

// eventJudge decides, read by read, whether a memory.events file shows node
// pressure.
type eventJudge struct {
	// local: the file holds the cgroup's own counters (memory.events.local);
	// otherwise the hierarchical memory.events.
	local bool
	last  eventCounters
	// lastOOM is when oom last rose (hierarchical only).
	lastOOM time.Time
}

// observe takes a new read at now and reports whether a counter that means
// node pressure rose since the last read, and which. A counter that went
// down (never done by the kernel) or was absent from either read counts as
// no rise; the new value is the baseline for the next read.
func (j *eventJudge) observe(c eventCounters, now time.Time) (eventKey, bool) {
	var rise [numEventKeys]bool
	for k := range numEventKeys {
		if !c.has[k] {
			continue
		}
		rise[k] = j.last.has[k] && c.v[k] > j.last.v[k]
		j.last.v[k], j.last.has[k] = c.v[k], true
	}
	if j.local {
		for k := range numEventKeys {
			if rise[k] {
				return k, true
			}
		}
		return 0, false
	}
	if rise[evOOM] {
		j.lastOOM = now
	}
	if rise[evOOMKill] && (j.lastOOM.IsZero() || now.Sub(j.lastOOM) >= oomKillAttribution) {
		return evOOMKill, true
	}
	return 0, false
}
