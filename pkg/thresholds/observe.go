// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"math"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Observation is one reading of a signal.
type Observation struct {
	// Available is what is left; it may be negative when a source reports
	// more in use than it has (seen on real kernels, kubernetes#52386).
	Available int64
	// Capacity is what percentages are taken of.
	Capacity int64
	// Time is when the source measured it.
	Time time.Time
}

// Observe derives the signals from a kubelet Summary the way the kubelet's
// makeSignalObservations does. A signal whose inputs are missing from the
// summary is left out, and thresholds on it are then never met.
//
//   - memory.available: Node.Memory.AvailableBytes; capacity adds the working set.
//   - allocatableMemory.available: the same for the "pods" system container.
//   - nodefs.*: Node.Fs bytes and inodes; imagefs.*: Node.Runtime.ImageFs.
//   - pid.available: Node.Rlimit MaxPID minus the running processes.
//   - swap.available: Node.Swap; capacity adds the swap in use. Left out on
//     a node without swap, like every signal without its inputs.
//
// The stall signals need two readings a window apart and come from
// pkg/stall instead.
func Observe(s *statsapi.Summary) map[Signal]Observation {
	obs := make(map[Signal]Observation, len(signalOrder))
	if s == nil {
		return obs
	}
	n := &s.Node
	if o, ok := memoryObservation(n.Memory); ok {
		obs[MemoryAvailable] = o
	}
	for i := range n.SystemContainers {
		if n.SystemContainers[i].Name == statsapi.SystemContainerPods {
			if o, ok := memoryObservation(n.SystemContainers[i].Memory); ok {
				obs[AllocatableMemoryAvailable] = o
			}
			break
		}
	}
	addFs(obs, n.Fs, NodeFsAvailable, NodeFsInodesFree)
	if n.Runtime != nil {
		addFs(obs, n.Runtime.ImageFs, ImageFsAvailable, ImageFsInodesFree)
	}
	if sw := n.Swap; sw != nil && sw.SwapAvailableBytes != nil && sw.SwapUsageBytes != nil {
		avail := toInt64(*sw.SwapAvailableBytes)
		if c := addClamp(avail, toInt64(*sw.SwapUsageBytes)); c > 0 {
			obs[SwapAvailable] = Observation{Available: avail, Capacity: c, Time: sw.Time.Time}
		}
	}
	if r := n.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		maxPID := *r.MaxPID
		obs[PIDAvailable] = Observation{Available: maxPID - *r.NumOfRunningProcesses, Capacity: maxPID, Time: r.Time.Time}
	}
	return obs
}

func memoryObservation(m *statsapi.MemoryStats) (Observation, bool) {
	if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil {
		return Observation{}, false
	}
	avail := toInt64(*m.AvailableBytes)
	return Observation{Available: avail, Capacity: addClamp(avail, toInt64(*m.WorkingSetBytes)), Time: m.Time.Time}, true
}

func addFs(obs map[Signal]Observation, fs *statsapi.FsStats, bytes, inodes Signal) {
	if fs == nil {
		return
	}
	if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
		obs[bytes] = Observation{Available: toInt64(*fs.AvailableBytes), Capacity: toInt64(*fs.CapacityBytes), Time: fs.Time.Time}
	}
	if fs.InodesFree != nil && fs.Inodes != nil {
		obs[inodes] = Observation{Available: toInt64(*fs.InodesFree), Capacity: toInt64(*fs.Inodes), Time: fs.Time.Time}
	}
}

// toInt64 saturates instead of wrapping: a corrupt 2^64-ish reading must not
// turn into a negative "available".
func toInt64(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

func addClamp(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
