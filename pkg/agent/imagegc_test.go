// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/kubeletplace/kubelettest"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/thresholds"
)

// TestLoopDiskLeavesUnusedImagesToTheKubelet: on a one-disk node at 12 %
// available against nodefs.available<15 %, the 3 GiB short are covered by
// an unused 10 GiB image, which the kubelet's image garbage collection
// deletes before it evicts anyone: evictd evicts nothing, and once the
// image is gone there is no pressure. When the unused images cannot cover
// the need, are too young for the kubelet to delete (listed less than
// seven minutes: its 5-minute detection and 2-minute minimum age), or the
// rule is off, evictd evicts the writer.
func TestLoopDiskLeavesUnusedImagesToTheKubelet(t *testing.T) {
	const gi = 1 << 30
	spec := thresholds.Spec{Hard: map[string]string{"nodefs.available": "15%"}}
	images := func(sizes ...int64) *v1.Node {
		n := &v1.Node{}
		for i, s := range sizes {
			n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{"docker.io/library/unused:" + string(rune('a'+i))}, SizeBytes: s})
		}
		return n
	}
	for _, tc := range []struct {
		name      string
		node      *v1.Node
		expect    bool
		listedFor time.Duration // before the pressure comes
		wantCalls []string
	}{
		{"unused images cover the need", images(10 * gi), true, 8 * time.Minute, nil},
		{"unused images cover part of it", images(gi), true, 8 * time.Minute, []string{"writer"}},
		{"the image too young for the kubelet", images(10 * gi), true, 6 * time.Minute, []string{"writer"}},
		{"the rule off", images(10 * gi), false, 8 * time.Minute, []string{"writer"}},
		{"no Node object", nil, true, 8 * time.Minute, []string{"writer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := imageGCNode(t, tc.node)
			cfg := testLoopConfig(mustThresholds(t, spec))
			cfg.ExpectImageGC = tc.expect
			w := n.run(t, cfg, tc.listedFor)
			if len(n.victims()) != 0 {
				t.Fatalf("eviction calls %v before the pressure", n.victims())
			}
			n.mu.Lock()
			n.diskBase = 80 * gi
			n.mu.Unlock()
			n.runMore(t, 10*time.Second, w)
			if !eq(n.victims(), tc.wantCalls) {
				t.Fatalf("eviction calls %v; want %v", n.victims(), tc.wantCalls)
			}
			if tc.wantCalls != nil {
				return
			}
			// The kubelet deletes the image: 10 GiB back, nothing to do.
			n.mu.Lock()
			n.diskBase -= 10 * gi
			n.node = &v1.Node{}
			n.mu.Unlock()
			n.runMore(t, 10*time.Second, w)
			if len(n.victims()) != 0 {
				t.Errorf("eviction calls %v after the image collection; want none", n.victims())
			}
		})
	}
}

// The kubelet gets a bounded chance. Unused images cover the need, but the
// kubelet never deletes them (its collection waits for 85 % use): after
// imagegc.Patience evictd stops counting them and evicts the writer.
func TestLoopImageGCDeferralEnds(t *testing.T) {
	const gi = 1 << 30
	node := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"docker.io/library/unused:a"}, SizeBytes: 10 * gi}}}}
	n := imageGCNode(t, node)
	cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"nodefs.available": "15%"}}))
	cfg.ExpectImageGC = true
	w := n.run(t, cfg, 8*time.Minute) // the image listed long enough
	n.mu.Lock()
	n.diskBase = 80 * gi // 12 % available: 3 GiB short, the image covers it
	n.mu.Unlock()
	n.runMore(t, imagegc.Patience-30*time.Second, w)
	if len(n.victims()) != 0 {
		t.Fatalf("eviction calls %v within the kubelet's chance; want none", n.victims())
	}
	n.runMore(t, time.Minute, w)
	if !eq(n.victims(), []string{"writer"}) {
		t.Fatalf("eviction calls %v after the kubelet's chance; want [writer]", n.victims())
	}
}

// TestLoopDiskVictimWritingInItsGraceIsItsOwn: the pod evicted for
// nodefs.available goes on writing through its grace period (1 GiB/s for
// 5 s), and the observer caches each pod's disk figure for 10 s, as the
// real one caches its walks. The node's available space falls on, by what
// the victim writes; re-measured at every pass while in flight, the victim
// covers that fall with what it will free, and the quiet pod stays. With
// the victim's figure cached (no re-measure), the fall was left to no pod
// and the quiet one evicted too (seen on the real node: TestNodeDiskInodes).
func TestLoopDiskVictimWritingInItsGraceIsItsOwn(t *testing.T) {
	const gi = 1 << 30
	for _, tc := range []struct {
		name      string
		remeasure bool
		want      []string
	}{
		{"re-measured in flight", true, []string{"writer"}},
		{"cached in flight", false, []string{"writer", "quiet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := []*simPod{
				{name: "writer", usage: 10 * mi, grace: 30, exitIn: 5 * time.Second, disk: 2 * gi, diskRate: gi},
				{name: "quiet", usage: 10 * mi, grace: 30, disk: gi},
			}
			// Available 17 GiB less what the writer writes: under
			// nodefs.available<15% two seconds in.
			n := runDiskSim(t, pods, tc.remeasure, 20*time.Second)
			if !eq(n.victims(), tc.want) {
				t.Fatalf("eviction calls %v; want %v", n.victims(), tc.want)
			}
		})
	}
}

// TestLoopDiskDefaultsWaitForTheImageCollection: evictd's default
// thresholds, placed against a kubelet with its defaults on a one-disk node
// (image collection from 85 % used, imagefs.available<15%), as an agent
// starts. At 82 % used, with or without an unused image, evictd looks
// (the brake is synced every pass) and does nothing: no disk brake, no
// eviction. At 87 % used, an unused image that covers the need goes first
// (the kubelet's to delete) and no pod is evicted; without one, the writer
// is.
func TestLoopDiskDefaultsWaitForTheImageCollection(t *testing.T) {
	const gi = 1 << 30
	root := t.TempDir()
	for name, data := range map[string]string{
		"proc/640/cmdline":            "/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00",
		"proc/640/cgroup":             "0::/system.slice/kubelet.service\n",
		"var/lib/kubelet/config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := kubelettest.Options(t, root)
	disk := thresholds.Observation{Capacity: 100 * gi}
	kubeletplace.PlaceAbove(o, kubeletplace.View{
		Signals:    map[thresholds.Signal]thresholds.Observation{thresholds.NodeFsAvailable: disk, thresholds.ImageFsAvailable: disk},
		DiskLayout: fslayout.OneFs,
	}, zap.NewNop(), nil)
	ths := o.Thresholds()
	for _, th := range ths {
		if th.Signal == thresholds.ImageFsAvailable || th.Signal == thresholds.NodeFsAvailable {
			t.Logf("default %s", th)
		}
	}
	unused := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"docker.io/library/unused:a"}, SizeBytes: 10 * gi}}}}
	for _, tc := range []struct {
		name string
		node *v1.Node
		// want87 is the eviction calls at 87 % used.
		want87 []string
	}{
		{"an unused image", unused, nil},
		{"no unused image", &v1.Node{}, []string{"writer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := imageGCNode(t, tc.node)
			n.brake = &brakeRecorder{n: n}
			cfg := testLoopConfig(ths)
			cfg.ExpectImageGC = true
			w := n.run(t, cfg, 8*time.Minute) // the image listed long enough to count
			diskBrake := func() bool {
				for _, s := range n.brake.syncs {
					if s.want[nodebrake.Disk].On {
						return true
					}
				}
				return false
			}

			// 82 % used: 74 GiB of other files and the writer's 8 GiB.
			n.mu.Lock()
			n.diskBase = 74 * gi
			n.mu.Unlock()
			before := len(n.brake.syncs)
			n.runMore(t, 2*time.Minute, w)
			if len(n.brake.syncs) == before {
				t.Fatal("no pass in the 2 minutes at 82 % used: nothing shows evictd looked")
			}
			if diskBrake() || len(n.victims()) != 0 {
				t.Fatalf("at 82 %% used: disk brake %v, eviction calls %v; want neither: the kubelet's image collection starts at 85 %%", diskBrake(), n.victims())
			}

			// 87 % used: 2 GiB under the 15 % the kubelet's collection and
			// evictd's defaults start at.
			n.mu.Lock()
			n.diskBase = 79 * gi
			n.mu.Unlock()
			n.runMore(t, 30*time.Second, w)
			if !diskBrake() {
				t.Errorf("at 87 %% used: no disk brake; want one, the threshold met")
			}
			if !eq(n.victims(), tc.want87) {
				t.Fatalf("at 87 %% used: eviction calls %v; want %v (an unused image goes before any pod)", n.victims(), tc.want87)
			}
		})
	}
}

// imageGCNode is the one-disk node of the image collection tests: 100 GiB,
// 60 GiB of it other files, a writer pod with 8 GiB on it and a quiet pod
// with none; node is the Node object evictd reads (its images).
func imageGCNode(t *testing.T, node *v1.Node) *simNode {
	const gi = 1 << 30
	pods := []*simPod{
		{name: "writer", usage: 10 * mi, grace: 1, disk: 8 * gi},
		{name: "quiet", usage: 10 * mi, grace: 1, disk: 0},
	}
	n := newSimNode(t, 4096*mi, base250, pods...)
	n.diskCapacity, n.diskBase, n.node = 100*gi, 60*gi, node
	return n
}
