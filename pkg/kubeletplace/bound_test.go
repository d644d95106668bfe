// SPDX-License-Identifier: Apache-2.0

package kubeletplace

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/kubeletplace/kubelettest"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

// TestPlaceRefusesAKubeletBeyondHalfTheCapacity: a kubelet config that
// says memory.available<1Ti on a 4Gi node, nodefs.available<99% and
// pid.available<60% (what the impostor of issue 58 gave) moves nothing:
// each is refused with a warning naming the value and the bound, and
// evictd's defaults stay where the kubelet's defaults put them. A
// threshold within the bound is still adopted: imagefs.available<20%, where
// evictd's default then sits (the kubelet deletes images there first).
func TestPlaceRefusesAKubeletBeyondHalfTheCapacity(t *testing.T) {
	root := kubelettest.Root(t)
	cfg := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n" +
		"  memory.available: 1Ti\n  nodefs.available: 99%\n  pid.available: 60%\n  imagefs.available: 20%\n"
	if err := os.WriteFile(filepath.Join(root, "var/lib/kubelet/config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	caps := map[thresholds.Signal]thresholds.Observation{
		thresholds.MemoryAvailable:            {Capacity: 4 << 30},
		thresholds.AllocatableMemoryAvailable: {Capacity: 4 << 30},
		thresholds.PIDAvailable:               {Capacity: 100000},
		thresholds.NodeFsAvailable:            {Capacity: 100 << 30},
		thresholds.ImageFsAvailable:           {Capacity: 100 << 30},
	}
	o := kubelettest.Options(t, root)
	m, _ := metrics.New(buildinfo.Info{})
	core, logs := observer.New(zap.InfoLevel)
	PlaceAbove(o, View{Signals: caps}, zap.New(core), m)
	got := o.Config.EvictionHard
	for signal, want := range map[string]string{"memory.available": "300Mi", "allocatableMemory.available": "300Mi",
		"nodefs.available": "15%", "pid.available": "10%", "imagefs.available": "20%"} {
		if got[signal] != want {
			t.Errorf("%s<%s: want %s", signal, got[signal], want)
		}
	}
	warned := logs.FilterMessage("a kubelet hard threshold beyond the share of capacity evictd adopts is refused: placement takes the kubelet's default for the signal instead")
	for signal, want := range map[string][3]string{
		"memory.available":            {"1Ti", "50% of 4Gi", "100Mi"},
		"allocatableMemory.available": {"1Ti", "50% of 4Gi", "100Mi"},
		"nodefs.available":            {"99%", "50%", "10%"},
		"pid.available":               {"60%", "50%", "none"},
	} {
		l := warned.FilterField(zap.String("signal", signal)).All()
		if len(l) != 1 {
			t.Errorf("%d warnings for %s, want 1", len(l), signal)
			continue
		}
		f := l[0].ContextMap()
		if f["kubelet"] != want[0] || f["bound"] != want[1] || f["kept"] != want[2] {
			t.Errorf("the warning for %s: %v, want kubelet %s, bound %s, kept %s", signal, f, want[0], want[1], want[2])
		}
	}
	if n := warned.Len(); n != 4 {
		t.Errorf("%d refusals, want 4", n)
	}
}
