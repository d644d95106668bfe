package rank

import (
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
	case thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable:
		return measure{request: v1.ResourceMemory, byRequest: true, usage: memoryUsage}
	case thresholds.NodeFsAvailable, thresholds.ImageFsAvailable:
		on := disk.partsOn(s)
		return measure{request: v1.ResourceEphemeralStorage, byRequest: true, fs: fsName(s), usage: func(ps *statsapi.PodStats, p *v1.Pod) (int64, bool) {
			return diskUsage(ps, p, disk.parts, on, false)
		}}
	case thresholds.NodeFsInodesFree, thresholds.ImageFsInodesFree:
		on := disk.partsOn(s)
		return measure{byRequest: true, fs: fsName(s), usage: func(ps *statsapi.PodStats, p *v1.Pod) (int64, bool) {
			return diskUsage(ps, p, disk.parts, on, true)
		}}
	case thresholds.PIDAvailable:
		return measure{usage: processCount}
	}
	return measure{usage: func(*statsapi.PodStats, *v1.Pod) (int64, bool) { return 0, false }}
}

func fsName(s thresholds.Signal) string {
	if s == thresholds.ImageFsAvailable || s == thresholds.ImageFsInodesFree {
		return "imagefs"
	}
	return "nodefs"
}

func memoryUsage(ps *statsapi.PodStats, _ *v1.Pod) (int64, bool) {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return 0, false
	}
	return toInt64(*ps.Memory.WorkingSetBytes), true
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

// partSet says which parts of a pod's ephemeral storage are on a filesystem.
type partSet struct{ writable, logs, volumes bool }

func (s partSet) all() bool { return s.writable && s.logs && s.volumes }

// diskLayout is what the ranking knows of the node's filesystems.
type diskLayout struct {
	// dedicated: the image store (and with it, on containerd, the
	// containers' writable layers) has a filesystem of its own; nil when
	// unknown.
	dedicated *bool
	parts     map[string]DiskParts
}

// partsOn is the kubelet's choice (buildSignalToRankFunc in
// pkg/kubelet/eviction/helpers.go): with one filesystem, every part counts
// for both signals; with a dedicated imagefs, nodefs counts the logs and
// local volumes and imagefs the writable layers. (The kubelet's third
// layout, a containerfs apart from the images, only CRI-O reports.)
// Unknown counts everything, as on one filesystem.
func (d diskLayout) partsOn(s thresholds.Signal) partSet {
	if d.dedicated == nil || !*d.dedicated {
		return partSet{true, true, true}
	}
	if fsName(s) == "imagefs" {
		return partSet{writable: true}
	}
	return partSet{logs: true, volumes: true}
}

// diskUsage adds up the parts of the pod's ephemeral storage that are on the
// signal's filesystem: from the caller's parts when it has them, else from
// the Summary's containers and local volumes, else (only when every part
// counts) from the pod's ephemeral-storage total.
func diskUsage(ps *statsapi.PodStats, p *v1.Pod, parts map[string]DiskParts, on partSet, inodes bool) (int64, bool) {
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
		}{{on.writable, dp.WritableLayer}, {on.logs, dp.Logs}, {on.volumes, dp.Volumes}} {
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
		add(on.writable, ps.Containers[i].Rootfs)
		add(on.logs, ps.Containers[i].Logs)
	}
	if len(ps.VolumeStats) > 0 && p != nil {
		local := localVolumes(p)
		for i := range ps.VolumeStats {
			if local[ps.VolumeStats[i].Name] {
				add(on.volumes, &ps.VolumeStats[i].FsStats)
			}
		}
	}
	if found {
		return sum, true
	}
	if ps.EphemeralStorage != nil && on.all() {
		if v := field(ps.EphemeralStorage); v != nil {
			return toInt64(*v), true
		}
	}
	return 0, false
}

// dedicatedImageFs tells from a Summary whether the image store has a
// filesystem of its own, as far as it can: two filesystems of the same
// capacity and inode count are taken for one. nil when either is missing.
func dedicatedImageFs(s *statsapi.Summary) *bool {
	if s == nil || s.Node.Fs == nil || s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil {
		return nil
	}
	n, i := s.Node.Fs, s.Node.Runtime.ImageFs
	if n.CapacityBytes == nil || i.CapacityBytes == nil || n.Inodes == nil || i.Inodes == nil {
		return nil
	}
	d := *n.CapacityBytes != *i.CapacityBytes || *n.Inodes != *i.Inodes
	return &d
}

// localVolumes names the pod's volumes that live on the node's filesystem
// and count as ephemeral storage: disk-backed emptyDirs and the volumes the
// kubelet writes there (configMap, downwardAPI, gitRepo).
func localVolumes(p *v1.Pod) map[string]bool {
	out := map[string]bool{}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		if (v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory) || v.ConfigMap != nil || v.DownwardAPI != nil || v.GitRepo != nil {
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
