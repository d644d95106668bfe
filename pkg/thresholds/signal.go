// SPDX-License-Identifier: Apache-2.0

// Package thresholds holds evictd's kubelet-compatible eviction thresholds:
// the signals, the threshold syntax, the observations derived from a kubelet
// Summary, and a clock-driven state machine that says which thresholds to act
// on. Everything here is pure: no I/O, time comes from an injected clock.
package thresholds

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Signal names an eviction signal, spelled as the kubelet spells it.
type Signal string

// The signals evictd understands. containerfs.* is left out on purpose: the
// kubelet overrides user-given containerfs thresholds with those of the
// filesystem the writable layers are on, nodefs or imagefs, and so the
// signal of that filesystem covers containerfs (pkg/fslayout).
const (
	MemoryAvailable            Signal = "memory.available"
	AllocatableMemoryAvailable Signal = "allocatableMemory.available"
	NodeFsAvailable            Signal = "nodefs.available"
	NodeFsInodesFree           Signal = "nodefs.inodesFree"
	ImageFsAvailable           Signal = "imagefs.available"
	ImageFsInodesFree          Signal = "imagefs.inodesFree"
	PIDAvailable               Signal = "pid.available"

	// SwapAvailable is the node's free swap (SwapFree against SwapTotal);
	// never observed on a node without swap.
	SwapAvailable Signal = "swap.available"

	// The memory stall signals (docs/stall.md): the share of time tasks
	// lost to memory shortage over the stall window, from PSI's totals,
	// for the node (/proc/pressure/memory) and for kubepods (its
	// memory.pressure). Their thresholds read SIGNAL>PERCENT, "stalled
	// more than", where every other signal reads SIGNAL<VALUE.
	MemoryPressureSome            Signal = "memory.pressureSome"
	MemoryPressureFull            Signal = "memory.pressureFull"
	AllocatableMemoryPressureSome Signal = "allocatableMemory.pressureSome"
	AllocatableMemoryPressureFull Signal = "allocatableMemory.pressureFull"

	// MemoryHighStuck counts the pods with a container stuck at its
	// memory.high (docs/memhigh.md): its threshold comes from the
	// --memory-high-* flags, not from the threshold maps, and its
	// observation is the negated count, so that it is met, as every
	// threshold, when what is "available" drops below its amount (0).
	MemoryHighStuck Signal = "memory.highStuck"
)

// signalOrder is the order in which starved signals are acted on: memory
// first, because it is the one the kernel OOM killer races us for, then disk,
// then PIDs (the kubelet's byEvictionPriority puts memory first too).
var signalOrder = []Signal{
	MemoryAvailable,
	AllocatableMemoryAvailable,
	SwapAvailable,
	MemoryPressureFull,
	AllocatableMemoryPressureFull,
	MemoryPressureSome,
	AllocatableMemoryPressureSome,
	MemoryHighStuck,
	NodeFsAvailable,
	NodeFsInodesFree,
	ImageFsAvailable,
	ImageFsInodesFree,
	PIDAvailable,
}

// Signals returns every known signal in action order.
func Signals() []Signal {
	return append([]Signal(nil), signalOrder...)
}

// Valid reports whether s is a known signal.
func (s Signal) Valid() bool {
	return s.order() >= 0
}

func (s Signal) order() int {
	for i, k := range signalOrder {
		if k == s {
			return i
		}
	}
	return -1
}

// ParseSignal returns the signal named by name, or an error that lists the
// known ones.
func ParseSignal(name string) (Signal, error) {
	s := Signal(name)
	if strings.HasPrefix(name, "containerfs.") {
		// The kubelet takes these, then ignores them with a log line.
		return "", fmt.Errorf("eviction signal %q is not set directly: as in the kubelet, containerfs takes the thresholds of the filesystem the writable layers are on; set nodefs.* or imagefs.* (evictd observe names that filesystem)", name)
	}
	if s == MemoryHighStuck {
		return "", fmt.Errorf("eviction signal %q is not set in the threshold maps: it takes its thresholds from the memory-high settings (docs/memhigh.md), and evictd observe shows it", name)
	}
	if !s.Valid() {
		return "", fmt.Errorf("unknown eviction signal %q (known: %s)", name, knownSignals())
	}
	return s, nil
}

func knownSignals() string {
	names := make([]string, 0, len(signalOrder))
	for _, s := range signalOrder {
		if s != MemoryHighStuck {
			names = append(names, string(s))
		}
	}
	return strings.Join(names, ", ")
}

// Condition is the node condition a signal drives, as the kubelet reports it.
func (s Signal) Condition() v1.NodeConditionType {
	switch s {
	case MemoryAvailable, AllocatableMemoryAvailable, SwapAvailable,
		MemoryPressureSome, MemoryPressureFull, AllocatableMemoryPressureSome, AllocatableMemoryPressureFull,
		MemoryHighStuck:
		return v1.NodeMemoryPressure
	case PIDAvailable:
		return v1.NodePIDPressure
	default:
		return v1.NodeDiskPressure
	}
}

// Resource is what evicting a pod reclaims for this signal, in the kubelet's
// words (it appears in its "Attempting to reclaim" events).
func (s Signal) Resource() string {
	switch s {
	case MemoryAvailable, AllocatableMemoryAvailable, SwapAvailable,
		MemoryPressureSome, MemoryPressureFull, AllocatableMemoryPressureSome, AllocatableMemoryPressureFull,
		MemoryHighStuck:
		return string(v1.ResourceMemory)
	case NodeFsAvailable, ImageFsAvailable:
		return string(v1.ResourceEphemeralStorage)
	case NodeFsInodesFree, ImageFsInodesFree:
		return "inodes"
	case PIDAvailable:
		return "pids"
	}
	return ""
}

// Filesystem is the filesystem a disk signal measures, "nodefs" or
// "imagefs"; "" for the others.
func (s Signal) Filesystem() string {
	switch s {
	case NodeFsAvailable, NodeFsInodesFree:
		return "nodefs"
	case ImageFsAvailable, ImageFsInodesFree:
		return "imagefs"
	}
	return ""
}

// Stall reports whether s is a memory stall signal, whose thresholds are
// shares of time stalled (SIGNAL>PERCENT).
func (s Signal) Stall() bool {
	switch s {
	case MemoryPressureSome, MemoryPressureFull, AllocatableMemoryPressureSome, AllocatableMemoryPressureFull:
		return true
	}
	return false
}

// MemoryHigh reports whether s is the memory.high signal, whose pods are
// those with a container stuck at its memory.high.
func (s Signal) MemoryHigh() bool { return s == MemoryHighStuck }

// FullStall reports whether s counts the time all tasks stalled at once
// (PSI's "full" line) rather than at least one ("some").
func (s Signal) FullStall() bool {
	return s == MemoryPressureFull || s == AllocatableMemoryPressureFull
}

// Allocatable reports whether s measures the kubepods cgroup rather than
// the node.
func (s Signal) Allocatable() bool {
	switch s {
	case AllocatableMemoryAvailable, AllocatableMemoryPressureSome, AllocatableMemoryPressureFull:
		return true
	}
	return false
}

// Operator is how thresholds on s are written: ">" for the stall signals
// (stalled more than), "<" for the others (available less than).
func (s Signal) Operator() string {
	if s.Stall() {
		return ">"
	}
	return "<"
}

// Conditions lists the node conditions evictd tracks, in a stable order.
func Conditions() []v1.NodeConditionType {
	return []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
}

// lessSignal orders signals in action order (unknown ones last, by name).
func lessSignal(a, b Signal) bool {
	oa, ob := a.order(), b.order()
	if oa != ob {
		if oa < 0 {
			return false
		}
		if ob < 0 {
			return true
		}
		return oa < ob
	}
	return a < b
}
