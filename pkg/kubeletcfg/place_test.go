// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/pkg/thresholds"
)

// evictdDefaults is pkg/config's DefaultEvictionHard, as the agent passes
// it (allocatableMemory.available derived from memory.available).
func evictdDefaults() map[string]string {
	return map[string]string{
		"memory.available": "300Mi", "allocatableMemory.available": "300Mi",
		"nodefs.available": "15%", "nodefs.inodesFree": "10%",
		"imagefs.available": "15%", "imagefs.inodesFree": "10%", "pid.available": "10%",
	}
}

func kubelet(t *testing.T, m map[string]string) map[thresholds.Signal]thresholds.Value {
	t.Helper()
	v, _, err := ParseHard(m)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const gib = 1 << 30

func capacities(known bool) Capacity {
	return func(s thresholds.Signal) (int64, bool) {
		switch {
		case !known:
			return 0, false
		case s == thresholds.MemoryAvailable || s == thresholds.AllocatableMemoryAvailable:
			return 8 * gib, true
		case s == thresholds.NodeFsAvailable || s == thresholds.ImageFsAvailable:
			return 100 * gib, true
		}
		return 1_000_000, true
	}
}

func TestPlace(t *testing.T) {
	for _, c := range []struct {
		name     string
		kubelet  map[string]string
		operator map[string]bool
		evictd   map[string]string // overrides of evictdDefaults
		known    bool
		placed   map[string]string
		warn     []thresholds.Signal
		note     string
		// gcHigh is imageGCHighThresholdPercent, 85 when 0; oneDisk: the
		// images are on nodefs too.
		gcHigh  int32
		oneDisk bool
		capped  []thresholds.Signal
	}{
		// evictd's defaults are the kubelet's plus the margins: nothing moves.
		// (imagefs.available: the image collection's bound, below.)
		{name: "kubelet defaults", kubelet: DefaultHard(), known: true, placed: map[string]string{},
			capped: []thresholds.Signal{thresholds.ImageFsAvailable}},
		{name: "distribution 750Mi", kubelet: map[string]string{"memory.available": "750Mi", "nodefs.available": "12%"}, known: true,
			placed: map[string]string{"memory.available": "950Mi", "nodefs.available": "17%"}},
		{name: "capacity not needed for the same units", kubelet: map[string]string{"memory.available": "1Gi", "imagefs.inodesFree": "30%"},
			placed: map[string]string{"memory.available": "1224Mi", "imagefs.inodesFree": "35%"}},
		// Mixed: 10% of 8Gi is 819.2Mi; + 200Mi = 1019.2Mi, rounded up.
		{name: "kubelet percentage, evictd quantity", kubelet: map[string]string{"memory.available": "10%"}, known: true,
			placed: map[string]string{"memory.available": "1020Mi"}},
		// 20Gi of 100Gi is 20%; + 5 points.
		{name: "kubelet quantity, evictd percentage", kubelet: map[string]string{"nodefs.available": "20Gi"}, known: true,
			placed: map[string]string{"nodefs.available": "25%"}},
		{name: "mixed without capacity: stays", kubelet: map[string]string{"nodefs.available": "20Gi"}, known: false,
			placed: map[string]string{}, note: "capacity unknown"},
		{name: "capped below 100%", kubelet: map[string]string{"nodefs.available": "97%"}, known: true,
			placed: map[string]string{"nodefs.available": "99%"}},
		{name: "an operator's value is kept, with a warning", kubelet: map[string]string{"memory.available": "750Mi", "nodefs.available": "10%"},
			operator: map[string]bool{"memory.available": true, "nodefs.available": true},
			evictd:   map[string]string{"memory.available": "500Mi", "nodefs.available": "11%"}, known: true,
			placed: map[string]string{}, warn: []thresholds.Signal{thresholds.MemoryAvailable}},
		{name: "equal counts as at or below", kubelet: map[string]string{"memory.available": "750Mi"},
			operator: map[string]bool{"memory.available": true}, evictd: map[string]string{"memory.available": "750Mi"},
			placed: map[string]string{}, warn: []thresholds.Signal{thresholds.MemoryAvailable}},
		// On disk the kubelet deletes images and dead containers at its
		// threshold before it evicts: evictd's own there is in time. The
		// README's example values against the kubelet's defaults warn of
		// nothing; a disk threshold below the kubelet's still warns.
		{name: "a disk value equal to the kubelet's does not warn", kubelet: DefaultHard(), known: true,
			operator: map[string]bool{"memory.available": true, "nodefs.available": true, "imagefs.available": true},
			evictd:   map[string]string{"memory.available": "500Mi", "nodefs.available": "10%", "imagefs.available": "15%"},
			placed:   map[string]string{}},
		{name: "a disk value below the kubelet's warns", kubelet: DefaultHard(), known: true,
			operator: map[string]bool{"nodefs.available": true}, evictd: map[string]string{"nodefs.available": "9%"},
			placed: map[string]string{}, warn: []thresholds.Signal{thresholds.NodeFsAvailable},
			capped: []thresholds.Signal{thresholds.ImageFsAvailable}},
		// 10Gi of 100Gi is the kubelet's 10%: at it, on disk, in mixed units too.
		{name: "a disk quantity equal to the kubelet's percentage does not warn", kubelet: DefaultHard(), known: true,
			operator: map[string]bool{"nodefs.available": true}, evictd: map[string]string{"nodefs.available": "10Gi"},
			placed: map[string]string{}, capped: []thresholds.Signal{thresholds.ImageFsAvailable}},
		// The kubelet's image collection bounds the disk space defaults:
		// 85 % used is 15 % available, the kubelet's own imagefs
		// threshold, which the margin would raise to 20 %.
		{name: "kubelet defaults, one disk", kubelet: DefaultHard(), known: true, oneDisk: true, placed: map[string]string{},
			capped: []thresholds.Signal{thresholds.ImageFsAvailable}},
		{name: "one disk: nodefs bounded too", kubelet: map[string]string{"nodefs.available": "12%"}, known: true, oneDisk: true,
			placed: map[string]string{}, capped: []thresholds.Signal{thresholds.NodeFsAvailable}},
		{name: "split disks: nodefs holds no images", kubelet: map[string]string{"nodefs.available": "12%"}, known: true,
			placed: map[string]string{"nodefs.available": "17%"}},
		// The kubelet's eviction manager deletes unused images at its own
		// threshold: on one disk, imagefs.available<15% is a turn of the
		// collection for nodefs too.
		{name: "collection at 90%, kubelet's imagefs at 15%", kubelet: DefaultHard(), known: true, oneDisk: true, gcHigh: 90,
			placed: map[string]string{}, capped: []thresholds.Signal{thresholds.ImageFsAvailable}},
		{name: "collection at 90%, kubelet at 5%: the defaults go down to 10%", kubelet: map[string]string{"nodefs.available": "5%", "imagefs.available": "5%"},
			known: true, oneDisk: true, gcHigh: 90,
			placed: map[string]string{"nodefs.available": "10%", "imagefs.available": "10%"},
			capped: []thresholds.Signal{thresholds.ImageFsAvailable, thresholds.NodeFsAvailable}},
		{name: "kubelet's imagefs at 30%: evictd there, not 5 points above", kubelet: map[string]string{"imagefs.available": "30%"}, known: true,
			placed: map[string]string{"imagefs.available": "30%"}, capped: []thresholds.Signal{thresholds.ImageFsAvailable}},
		{name: "kubelet's imagefs at 30% on one disk: nodefs up to it", kubelet: map[string]string{"nodefs.available": "25%", "imagefs.available": "30%"}, known: true, oneDisk: true,
			placed: map[string]string{"nodefs.available": "30%", "imagefs.available": "30%"},
			capped: []thresholds.Signal{thresholds.ImageFsAvailable}},
		{name: "collection at 80%: the margin holds", kubelet: DefaultHard(), known: true, oneDisk: true, gcHigh: 80,
			placed: map[string]string{"imagefs.available": "20%"}},
		{name: "collection off: the margin holds", kubelet: DefaultHard(), known: true, oneDisk: true, gcHigh: 100,
			placed: map[string]string{"imagefs.available": "20%"}},
		{name: "an operator's disk value is not bounded", kubelet: DefaultHard(), known: true, oneDisk: true,
			operator: map[string]bool{"imagefs.available": true}, evictd: map[string]string{"imagefs.available": "20%"},
			placed: map[string]string{}},
		{name: "operator none where the kubelet has one", kubelet: map[string]string{"pid.available": "5%"},
			operator: map[string]bool{"pid.available": true}, evictd: map[string]string{"pid.available": "none"},
			placed: map[string]string{}, warn: []thresholds.Signal{thresholds.PIDAvailable}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := evictdDefaults()
			maps.Copy(ev, c.evictd)
			gc := ImageGC{High: DefaultImageGCHigh, Low: DefaultImageGCLow}
			if c.gcHigh != 0 {
				gc = ImageGC{High: c.gcHigh}
			}
			imagesOn := func(s thresholds.Signal) bool { return s == thresholds.ImageFsAvailable || c.oneDisk }
			ps, placed := Place(ev, c.operator, kubelet(t, c.kubelet), capacities(c.known), gc, imagesOn)
			if !maps.Equal(placed, c.placed) {
				t.Errorf("placed %v, want %v", placed, c.placed)
			}
			var warn, capped []thresholds.Signal
			notes := ""
			for _, p := range ps {
				if p.Capped {
					capped = append(capped, p.Signal)
				}
				if p.Signal == thresholds.AllocatableMemoryAvailable {
					t.Errorf("allocatableMemory.available placed on its own: it follows memory.available")
				}
				if p.Operator && p.KubeletFirst {
					warn = append(warn, p.Signal)
				}
				if p.Moved != (placed[string(p.Signal)] != "") {
					t.Errorf("%s: Moved %v but placed %q", p.Signal, p.Moved, placed[string(p.Signal)])
				}
				notes += p.Note
			}
			if len(warn) != len(c.warn) || (len(warn) > 0 && warn[0] != c.warn[0]) {
				t.Errorf("warnings for %v, want %v\n%s", warn, c.warn, strings.Join(Summary(ps), "\n"))
			}
			if !slices.Equal(capped, c.capped) {
				t.Errorf("bounded by the image collection: %v, want %v\n%s", capped, c.capped, strings.Join(Summary(ps), "\n"))
			}
			if !strings.Contains(notes, c.note) {
				t.Errorf("notes %q, want %q", notes, c.note)
			}
			// Every placed value parses and sits the margin above.
			for k, v := range placed {
				if _, err := thresholds.ParseValue(v); err != nil {
					t.Errorf("%s=%s does not parse: %v", k, v, err)
				}
			}
		})
	}
}

func TestSummary(t *testing.T) {
	ps, _ := Place(evictdDefaults(), nil, kubelet(t, map[string]string{"memory.available": "750Mi", "imagefs.available": "15%"}), capacities(true),
		ImageGC{High: 90, Low: 80}, nil)
	got := strings.Join(Summary(ps), "; ")
	for _, want := range []string{"memory.available<950Mi (placed: kubelet 750Mi + margin; default 300Mi)", "nodefs.available<15% (kubelet: none)",
		"imagefs.available<15% (bounded by the kubelet's image collection: from 90% used, and at its own threshold, kubelet 15%; default 15%)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q: want %q", got, want)
		}
	}
}
