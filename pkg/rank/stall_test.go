// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/thresholds"
)

func swapped(q string) statsOpt {
	return func(ps *statsapi.PodStats) {
		qty := resource.MustParse(q)
		v := uint64(qty.Value())
		ps.Swap = &statsapi.SwapStats{SwapUsageBytes: &v}
	}
}

func memPSI(someAvg10, fullAvg10 float64) statsOpt {
	return func(ps *statsapi.PodStats) {
		if ps.Memory == nil {
			ps.Memory = &statsapi.MemoryStats{}
		}
		ps.Memory.PSI = &statsapi.PSIStats{Some: statsapi.PSIData{Avg10: someAvg10}, Full: statsapi.PSIData{Avg10: fullAvg10}}
	}
}

// A pod that pushed its excess to swap ranks by its footprint: the kubelet
// (working set alone) would take "resident" first.
func TestSwapCountsInMemoryUsage(t *testing.T) {
	swapper := newPod("ns", "swapper", memRequest("100Mi"))
	resident := newPod("ns", "resident", memRequest("100Mi"))
	s := summaryOf(
		podStats(swapper, workingSet("150Mi"), swapped("100Mi")),
		podStats(resident, workingSet("200Mi"), swapped("0")),
	)
	for _, sig := range []thresholds.Signal{thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable} {
		r := Rank(sig, s, []*v1.Pod{swapper, resident}, Options{})
		if got := strings.Join(names(r), ","); got != "ns/swapper,ns/resident" {
			t.Errorf("%s: order %s, want swapper,resident", sig, got)
		}
		if c := r.Candidates[0]; c.Usage != 250<<20 || c.Swap != 100<<20 {
			t.Errorf("%s: swapper usage %d swap %d, want 250Mi and 100Mi", sig, c.Usage, c.Swap)
		}
	}
	// Switched off (--swap-in-ranking=false): working set alone, the
	// kubelet's order.
	r := Rank(thresholds.MemoryAvailable, s, []*v1.Pod{swapper, resident}, Options{WorkingSetOnly: true})
	if got := strings.Join(names(r), ","); got != "ns/resident,ns/swapper" {
		t.Errorf("working set only: order %s, want resident,swapper", got)
	}
	if c := r.Candidates[1]; c.Usage != 150<<20 || c.Swap != 0 {
		t.Errorf("working set only: swapper usage %d swap %d, want 150Mi and none", c.Usage, c.Swap)
	}
	// swap.available: by swap in use; a pod with none frees none.
	r = Rank(thresholds.SwapAvailable, s, []*v1.Pod{resident, swapper}, Options{})
	if c := r.Candidates[0]; c.Name != "swapper" || !c.Eligible || c.Usage != 100<<20 {
		t.Errorf("swap.available: first %s (eligible %v, usage %d), want swapper with 100Mi", c.Name, c.Eligible, c.Usage)
	}
	if c := r.Candidates[1]; c.Eligible || !strings.Contains(c.SkipReason, CheckFreesNothing) {
		t.Errorf("swap.available: resident eligible %v (%q), want ineligible (frees nothing)", c.Eligible, c.SkipReason)
	}
}

// Under a stall signal only pods in the stall are eligible, in the memory
// order among themselves, whatever the quiet pods use.
func TestStallRanking(t *testing.T) {
	big := newPod("ns", "big", memRequest("10Mi"))           // quiet, far over its request
	thrasher := newPod("ns", "thrasher", memRequest("64Mi")) // within its request, stalling
	low := newPod("ns", "low", memRequest("64Mi"), priority(-10))
	crit := newPod("kube-system", "crit", priority(2_000_000_000))
	s := summaryOf(
		podStats(big, workingSet("500Mi")),
		podStats(thrasher, workingSet("60Mi")),
		podStats(low, workingSet("30Mi")),
		podStats(crit, workingSet("1Gi")),
	)
	pods := []*v1.Pod{big, thrasher, low, crit}
	opts := Options{PodStall: map[string]PodStall{
		string(big.UID):      {Some: 0.01},
		string(thrasher.UID): {Some: 0.70, Full: 0.30},
		string(low.UID):      {Some: 0.06, Full: 0.01},
		string(crit.UID):     {Some: 0.90, Full: 0.90},
	}}
	r := Rank(thresholds.MemoryPressureSome, s, pods, opts)
	if got := strings.Join(names(r), ","); got != "ns/low,ns/thrasher,ns/big,kube-system/crit" {
		t.Fatalf("some: order %s, want low,thrasher,big,crit", got)
	}
	want := map[string]bool{"low": true, "thrasher": true, "big": false, "crit": false}
	for _, c := range r.Candidates {
		if c.Eligible != want[c.Name] {
			t.Errorf("some: %s eligible %v (%s), want %v", c.Name, c.Eligible, c.SkipReason, want[c.Name])
		}
	}
	if c := r.Candidates[2]; !strings.Contains(c.SkipReason, "not-stalling: its own memory stall 1.0% is under 5.0%") {
		t.Errorf("big's skip reason %q", c.SkipReason)
	}
	if c := r.Candidates[3]; !strings.Contains(c.SkipReason, CheckCritical) {
		t.Errorf("a critical pod in the stall must stay protected: %q", c.SkipReason)
	}
	// full: low's 1 % is under the floor.
	r = Rank(thresholds.AllocatableMemoryPressureFull, s, pods, opts)
	if c := r.Candidates[0]; c.Name != "thrasher" || c.Stall != 0.30 || !c.Stalling {
		t.Errorf("full: first %s at %v (stalling %v), want the thrasher at 30%%", c.Name, c.Stall, c.Stalling)
	}
	// A higher floor leaves nobody.
	r = Rank(thresholds.MemoryPressureSome, s, pods, Options{PodStall: opts.PodStall, StallingShare: 0.95})
	if r.Candidates[0].Eligible {
		t.Errorf("floor 95%%: %s eligible", r.Candidates[0].Name)
	}
}

// evictd rank has one Summary: a pod's stall is its PSI avg10; a pod
// without PSI is never a stall victim.
func TestStallRankingFromSummary(t *testing.T) {
	a := newPod("ns", "a")
	b := newPod("ns", "b")
	s := summaryOf(podStats(a, workingSet("10Mi"), memPSI(42.5, 3)), podStats(b, workingSet("10Mi")))
	r := Rank(thresholds.MemoryPressureSome, s, []*v1.Pod{b, a}, Options{})
	if c := r.Candidates[0]; c.Name != "a" || !c.Eligible || c.Stall != 0.425 {
		t.Errorf("first %s at %v (eligible %v), want a at 42.5%%", c.Name, c.Stall, c.Eligible)
	}
	if c := r.Candidates[1]; c.Eligible || !strings.Contains(c.SkipReason, "no memory.pressure figure") {
		t.Errorf("b eligible %v (%q), want ineligible without a figure", c.Eligible, c.SkipReason)
	}
}
