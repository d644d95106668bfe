// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// kubeletShaped gives a pod the Summary's parts: one container with a
// writable layer and logs, and an emptyDir volume.
func kubeletShaped(rootfs, logs, volume uint64) statsOpt {
	return func(ps *statsapi.PodStats) {
		ps.Containers = []statsapi.ContainerStats{{Name: "app",
			Rootfs: &statsapi.FsStats{UsedBytes: u64(rootfs), InodesUsed: u64(rootfs >> 20)},
			Logs:   &statsapi.FsStats{UsedBytes: u64(logs), InodesUsed: u64(logs >> 20)}}}
		ps.VolumeStats = []statsapi.VolumeStats{{Name: "scratch",
			FsStats: statsapi.FsStats{UsedBytes: u64(volume), InodesUsed: u64(volume >> 20)}}}
	}
}

func withScratch(p *v1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
}

// withFilesystems sets the node's filesystems for a layout, told apart by
// size as the Summary allows: nodefs 100 GiB, a dedicated imagefs 500 GiB
// (with the writable layers, so no containerFs of its own, as containerd
// reports it), and in the split layout a containerFs the size of nodefs.
func withFilesystems(s *statsapi.Summary, l fslayout.Layout) *statsapi.Summary {
	fs := func(capacity uint64) *statsapi.FsStats {
		return &statsapi.FsStats{CapacityBytes: u64(capacity), Inodes: u64(1 << 20)}
	}
	s.Node.Fs = fs(100 << 30)
	s.Node.Runtime = &statsapi.RuntimeStats{ImageFs: fs(100 << 30)}
	switch l {
	case fslayout.DedicatedImageFs:
		s.Node.Runtime.ImageFs = fs(500 << 30)
	case fslayout.SplitImageFs:
		s.Node.Runtime.ImageFs, s.Node.Runtime.ContainerFs = fs(500<<30), fs(100<<30)
	}
	return s
}

// TestRankDiskLayouts: each disk signal counts the parts of a pod's
// ephemeral storage that are on its filesystem, as the kubelet does: all of
// them on one filesystem; with a dedicated imagefs, the writable layers for
// imagefs and logs and volumes for nodefs. A pod with nothing there frees
// nothing by going and is not chosen.
func TestRankDiskLayouts(t *testing.T) {
	layer := newPod("ns", "layer", withScratch) // writes into its writable layer
	logger := newPod("ns", "logger", withScratch)
	volume := newPod("ns", "volume", withScratch)
	pods := []*v1.Pod{layer, logger, volume}
	stats := []statsapi.PodStats{
		podStats(layer, kubeletShaped(6<<30, 0, 0)),
		podStats(logger, kubeletShaped(0, 3<<30, 0)),
		podStats(volume, kubeletShaped(0, 0, 4<<30)),
	}
	parts := map[string]DiskParts{
		string(layer.UID):  {WritableLayer: DiskUse{6 << 30, 6 << 10}},
		string(logger.UID): {Logs: DiskUse{3 << 30, 3 << 10}},
		string(volume.UID): {Volumes: DiskUse{4 << 30, 4 << 10}},
	}
	tests := []struct {
		name       string
		layout     fslayout.Layout
		opts       Options
		signal     thresholds.Signal
		want       []string // eligible, in order
		freesNoone []string
	}{
		{"one filesystem, nodefs", fslayout.OneFs, Options{}, thresholds.NodeFsAvailable, []string{"ns/layer", "ns/volume", "ns/logger"}, nil},
		{"one filesystem, imagefs", fslayout.OneFs, Options{}, thresholds.ImageFsAvailable, []string{"ns/layer", "ns/volume", "ns/logger"}, nil},
		{"dedicated imagefs, nodefs", fslayout.DedicatedImageFs, Options{}, thresholds.NodeFsAvailable, []string{"ns/volume", "ns/logger"}, []string{"ns/layer"}},
		{"dedicated imagefs, imagefs", fslayout.DedicatedImageFs, Options{}, thresholds.ImageFsAvailable, []string{"ns/layer"}, []string{"ns/logger", "ns/volume"}},
		{"dedicated imagefs, imagefs inodes", fslayout.DedicatedImageFs, Options{}, thresholds.ImageFsInodesFree, []string{"ns/layer"}, []string{"ns/logger", "ns/volume"}},
		{"dedicated imagefs from the caller's parts", fslayout.OneFs, Options{DiskParts: parts, DiskLayout: fslayout.DedicatedImageFs},
			thresholds.NodeFsInodesFree, []string{"ns/volume", "ns/logger"}, []string{"ns/layer"}},
		// CRI-O's split image store: the writable layers on nodefs with
		// the rest; a pod has nothing on imagefs, which only images use.
		{"split imagefs, nodefs", fslayout.SplitImageFs, Options{}, thresholds.NodeFsAvailable, []string{"ns/layer", "ns/volume", "ns/logger"}, nil},
		{"split imagefs, imagefs", fslayout.SplitImageFs, Options{}, thresholds.ImageFsAvailable, nil, []string{"ns/layer", "ns/logger", "ns/volume"}},
		{"split imagefs from the caller's parts", fslayout.OneFs, Options{DiskParts: parts, DiskLayout: fslayout.SplitImageFs},
			thresholds.ImageFsAvailable, nil, []string{"ns/layer", "ns/logger", "ns/volume"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := withFilesystems(summaryOf(stats...), tt.layout)
			r := Rank(tt.signal, s, pods, tt.opts)
			var eligible, skipped []string
			for _, c := range r.Candidates {
				if c.Eligible {
					eligible = append(eligible, c.Namespace+"/"+c.Name)
					continue
				}
				skipped = append(skipped, c.Namespace+"/"+c.Name)
				if !strings.HasPrefix(c.SkipReason, CheckFreesNothing+": nothing on ") {
					t.Errorf("%s skipped for %q; want %s", c.Name, c.SkipReason, CheckFreesNothing)
				}
			}
			slices.Sort(skipped)
			if !slices.Equal(eligible, tt.want) || !slices.Equal(skipped, tt.freesNoone) {
				t.Errorf("eligible %v, freeing nothing %v; want %v and %v", eligible, skipped, tt.want, tt.freesNoone)
			}
		})
	}
}

// TestRankDiskTotalOnly: a pod with only the ephemeral-storage total has a
// usage on one filesystem, where every part counts, and none on a dedicated
// imagefs layout, where the total cannot be split: it ranks after the pods
// with a figure, and is not called one that frees nothing.
func TestRankDiskTotalOnly(t *testing.T) {
	a, b := newPod("ns", "a", withScratch), newPod("ns", "b")
	stats := []statsapi.PodStats{podStats(a, kubeletShaped(0, 1<<20, 0)), podStats(b, ephemeral(9<<30, 10))}
	r := Rank(thresholds.NodeFsAvailable, withFilesystems(summaryOf(stats...), fslayout.OneFs), []*v1.Pod{a, b}, Options{})
	if got := names(r); !slices.Equal(got, []string{"ns/b", "ns/a"}) {
		t.Errorf("one filesystem: %v; want the total counted", got)
	}
	r = Rank(thresholds.NodeFsAvailable, withFilesystems(summaryOf(stats...), fslayout.DedicatedImageFs), []*v1.Pod{a, b}, Options{})
	if got := names(r); !slices.Equal(got, []string{"ns/a", "ns/b"}) || r.Candidates[1].HasUsage || !r.Candidates[1].Eligible {
		t.Errorf("dedicated imagefs: %v, %+v; want b last without a usage figure, still eligible", got, r.Candidates[1])
	}
}
