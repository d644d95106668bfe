// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// measure says what a signal ranks pods by.
type measure struct {
	// request is the resource whose request usage is compared with; empty
	// when the signal has none (inodes, PIDs).
	request v1.ResourceName
	// byRequest is true when the order starts with "exceeds request" and
	// continues with usage − request (memory and disk); false for PIDs,
	// which order by priority and then raw usage.
	byRequest bool
	// fs names the filesystem of a disk signal ("" for the others): a pod
	// with nothing there frees nothing by going.
	fs    string
	usage func(ps *statsapi.PodStats, p *v1.Pod) (int64, bool)
}

// measureFor maps a signal to its measure. Inodes have no request in
// Kubernetes; the kubelet nonetheless subtracts the ephemeral-storage request
// (bytes) from the inode count, mixing units. evictd instead treats the inode
// request as 0: every pod using inodes exceeds it (the kubelet's practical
// outcome too), and pods then order by priority and raw inode count.
func measureFor(s thresholds.Signal, disk diskLayout) measure {
	switch s {
	case thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable,
		thresholds.MemoryPressureSome, thresholds.MemoryPressureFull,
		thresholds.AllocatableMemoryPressureSome, thresholds.AllocatableMemoryPressureFull:
		return measure{request: v1.ResourceMemory, byRequest: true, usage: memoryUsage}
	case thresholds.SwapAvailable:
		// Swap has no request of its own (LimitedSwap derives the limit
		// from the memory request): priority, then swap in use. A pod
		// with nothing in swap frees none by going.
		return measure{fs: "swap", usage: func(ps *statsapi.PodStats, _ *v1.Pod) (int64, bool) {
			if ps.Swap == nil || ps.Swap.SwapUsageBytes == nil {
				return 0, false
			}
			return toInt64(*ps.Swap.SwapUsageBytes), true
		}}
	case thresholds.NodeFsAvailable, thresholds.ImageFsAvailable:
		on := disk.partsOn(s)
		return measure{request: v1.ResourceEphemeralStorage, byRequest: true, fs: s.Filesystem(), usage: func(ps *statsapi.PodStats, p *v1.Pod) (int64, bool) {
			return diskUsage(ps, p, disk.parts, on, false)
		}}
	case thresholds.NodeFsInodesFree, thresholds.ImageFsInodesFree:
		on := disk.partsOn(s)
		return measure{byRequest: true, fs: s.Filesystem(), usage: func(ps *statsapi.PodStats, p *v1.Pod) (int64, bool) {
			return diskUsage(ps, p, disk.parts, on, true)
		}}
	case thresholds.PIDAvailable:
		return measure{usage: processCount}
	}
	return measure{usage: func(*statsapi.PodStats, *v1.Pod) (int64, bool) { return 0, false }}
}

// memoryUsage is a pod's working set, as the kubelet counts it; Rank adds
// what it has in swap unless Options.WorkingSetOnly (docs/stall.md, "Swap").
func memoryUsage(ps *statsapi.PodStats, _ *v1.Pod) (int64, bool) {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return 0, false
	}
	return toInt64(*ps.Memory.WorkingSetBytes), true
}

// swapUsage is the swap a pod uses, 0 when unknown or without swap.
func swapUsage(ps *statsapi.PodStats) int64 {
	if ps.Swap == nil || ps.Swap.SwapUsageBytes == nil {
		return 0
	}
	return toInt64(*ps.Swap.SwapUsageBytes)
}

func processCount(ps *statsapi.PodStats, _ *v1.Pod) (int64, bool) {
	if ps.ProcessStats == nil || ps.ProcessStats.ProcessCount == nil {
		return 0, false
	}
	return toInt64(*ps.ProcessStats.ProcessCount), true
}

// DiskParts is a pod's ephemeral storage by part, for a caller that
// measured it itself (evictd's observer); the kubelet's Summary has the same
// parts per container and volume.
type DiskParts struct {
	WritableLayer, Logs, Volumes DiskUse
}

// DiskUse is bytes and inodes in use.
type DiskUse struct{ Bytes, Inodes uint64 }

// diskLayout is what the ranking knows of the node's filesystems.
type diskLayout struct {
	layout fslayout.Layout
	parts  map[string]DiskParts
}

// partsOn is what the kubelet counts for the signal's filesystem
// (buildSignalToRankFunc in pkg/kubelet/eviction/helpers.go).
func (d diskLayout) partsOn(s thresholds.Signal) fslayout.Parts {
	return fslayout.PartsOn(d.layout, s.Filesystem())
}

// diskUsage adds up the parts of the pod's ephemeral storage that are on the
// signal's filesystem: from the caller's parts when it has them, else from
// the Summary's containers and local volumes, else (only when every part
// counts) from the pod's ephemeral-storage total.
func diskUsage(ps *statsapi.PodStats, p *v1.Pod, parts map[string]DiskParts, on fslayout.Parts, inodes bool) (int64, bool) {
	of := func(u DiskUse) uint64 { return u.Bytes }
	field := func(fs *statsapi.FsStats) *uint64 { return fs.UsedBytes }
	if inodes {
		of = func(u DiskUse) uint64 { return u.Inodes }
		field = func(fs *statsapi.FsStats) *uint64 { return fs.InodesUsed }
	}
	if dp, ok := parts[ps.PodRef.UID]; ok {
		var sum uint64
		for _, x := range []struct {
			in bool
			u  DiskUse
		}{{on.WritableLayers, dp.WritableLayer}, {on.Logs, dp.Logs}, {on.Volumes, dp.Volumes}} {
			if x.in {
				sum += of(x.u)
			}
		}
		return toInt64(sum), true
	}
	var sum int64
	found := false
	add := func(in bool, fs *statsapi.FsStats) {
		if fs == nil {
			return
		}
		if v := field(fs); v != nil {
			found = true
			if in {
				sum = addSat(sum, toInt64(*v))
			}
		}
	}
	for i := range ps.Containers {
		add(on.WritableLayers, ps.Containers[i].Rootfs)
		add(on.Logs, ps.Containers[i].Logs)
	}
	if len(ps.VolumeStats) > 0 && p != nil {
		local := localVolumes(p)
		for i := range ps.VolumeStats {
			if local[ps.VolumeStats[i].Name] {
				add(on.Volumes, &ps.VolumeStats[i].FsStats)
			}
		}
	}
	if found {
		return sum, true
	}
	if ps.EphemeralStorage != nil && on.All() {
		if v := field(ps.EphemeralStorage); v != nil {
			return toInt64(*v), true
		}
	}
	return 0, false
}

// layoutOf tells the disk layout from a Summary, as far as it can: two
// filesystems of the same capacity and inode count are taken for one. A
// Summary without containerFs (containerd, kubelets before 1.30) has the
// writable layers with the images. Unknown when nodefs or imagefs is missing.
func layoutOf(s *statsapi.Summary) fslayout.Layout {
	if s == nil || s.Node.Runtime == nil {
		return fslayout.Unknown
	}
	type fsID struct{ capacity, inodes uint64 }
	id := func(fs *statsapi.FsStats) (fsID, bool) {
		if fs == nil || fs.CapacityBytes == nil || fs.Inodes == nil {
			return fsID{}, false
		}
		return fsID{*fs.CapacityBytes, *fs.Inodes}, true
	}
	nodefs, ok1 := id(s.Node.Fs)
	imagefs, ok2 := id(s.Node.Runtime.ImageFs)
	if !ok1 || !ok2 {
		return fslayout.Unknown
	}
	containerfs, ok := id(s.Node.Runtime.ContainerFs)
	if !ok {
		containerfs = imagefs
	}
	ids := map[fsID]uint64{nodefs: 0}
	key := func(f fsID) uint64 {
		if k, ok := ids[f]; ok {
			return k
		}
		ids[f] = uint64(len(ids))
		return ids[f]
	}
	return fslayout.Of(key(nodefs), key(imagefs), key(containerfs))
}

// localVolumes names the pod's volumes whose stats count toward its
// ephemeral storage in the kubelet's disk ranking (localVolumeNames in
// pkg/kubelet/eviction/helpers.go): hostPath volumes, and those
// IsLocalEphemeralVolume (pkg/volume/util) names, which the kubelet keeps
// on its own disk: emptyDirs of the default medium, configMaps and gitRepos.
// Memory and hugepages emptyDirs, secrets, downwardAPI and projected volumes
// are tmpfs or hugetlbfs, and PVCs, CSI and image volumes are elsewhere.
// A hostPath volume has no stats in the Summary (its plugin reports none),
// so it adds nothing in practice.
func localVolumes(p *v1.Pod) map[string]bool {
	out := map[string]bool{}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		if v.HostPath != nil || v.GitRepo != nil || v.ConfigMap != nil ||
			(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) {
			out[v.Name] = true
		}
	}
	return out
}

func toInt64(u uint64) int64 {
	if u > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(u)
}
