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
	usage     func(ps *statsapi.PodStats, p *v1.Pod) (int64, bool)
}

// measureFor maps a signal to its measure. Inodes have no request in
// Kubernetes; the kubelet nonetheless subtracts the ephemeral-storage request
// (bytes) from the inode count, mixing units. evictd instead treats the inode
// request as 0: every pod using inodes exceeds it (the kubelet's practical
// outcome too), and pods then order by priority and raw inode count.
func measureFor(s thresholds.Signal) measure {
	switch s {
	case thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable:
		return measure{request: v1.ResourceMemory, byRequest: true, usage: memoryUsage}
	case thresholds.NodeFsAvailable, thresholds.ImageFsAvailable:
		return measure{request: v1.ResourceEphemeralStorage, byRequest: true, usage: diskBytes}
	case thresholds.NodeFsInodesFree, thresholds.ImageFsInodesFree:
		return measure{byRequest: true, usage: diskInodes}
	case thresholds.PIDAvailable:
		return measure{usage: processCount}
	}
	return measure{usage: func(*statsapi.PodStats, *v1.Pod) (int64, bool) { return 0, false }}
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

func diskBytes(ps *statsapi.PodStats, p *v1.Pod) (int64, bool) {
	return diskUsage(ps, p, func(fs *statsapi.FsStats) *uint64 { return fs.UsedBytes })
}

func diskInodes(ps *statsapi.PodStats, p *v1.Pod) (int64, bool) {
	return diskUsage(ps, p, func(fs *statsapi.FsStats) *uint64 { return fs.InodesUsed })
}

// diskUsage prefers the pod's ephemeral-storage figure, which the kubelet
// computes over the pod's writable layers, logs and local volumes. Without
// it, it adds up the same parts itself. It does not know the node's
// filesystem layout, so both nodefs and imagefs count the same parts, which
// is right for the common single-filesystem node.
func diskUsage(ps *statsapi.PodStats, p *v1.Pod, field func(*statsapi.FsStats) *uint64) (int64, bool) {
	if ps.EphemeralStorage != nil {
		if v := field(ps.EphemeralStorage); v != nil {
			return toInt64(*v), true
		}
	}
	var sum int64
	found := false
	add := func(fs *statsapi.FsStats) {
		if fs == nil {
			return
		}
		if v := field(fs); v != nil {
			sum = addSat(sum, toInt64(*v))
			found = true
		}
	}
	for i := range ps.Containers {
		add(ps.Containers[i].Rootfs)
		add(ps.Containers[i].Logs)
	}
	if len(ps.VolumeStats) > 0 && p != nil {
		local := localVolumes(p)
		for i := range ps.VolumeStats {
			if local[ps.VolumeStats[i].Name] {
				add(&ps.VolumeStats[i].FsStats)
			}
		}
	}
	return sum, found
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
