// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"strings"
	"testing"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func summaryWith(avail, podWS uint64, procs int64) *statsv1alpha1.Summary {
	fs := &statsv1alpha1.FsStats{CapacityBytes: u64(1 << 30), AvailableBytes: u64(512 << 20), Inodes: u64(1000), InodesFree: u64(900)}
	return &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			Memory: &statsv1alpha1.MemoryStats{AvailableBytes: u64(avail), WorkingSetBytes: u64(100 << 20)},
			SystemContainers: []statsv1alpha1.ContainerStats{{Name: statsv1alpha1.SystemContainerPods,
				Memory: &statsv1alpha1.MemoryStats{AvailableBytes: u64(avail), WorkingSetBytes: u64(50 << 20)}}},
			Fs:      fs,
			Runtime: &statsv1alpha1.RuntimeStats{ImageFs: fs},
			Rlimit:  &statsv1alpha1.RlimitStats{MaxPID: i64(4096), NumOfRunningProcesses: i64(procs)},
		},
		Pods: []statsv1alpha1.PodStats{{
			PodRef: statsv1alpha1.PodReference{Name: "p", Namespace: "ns", UID: "u1"},
			Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: u64(podWS), UsageBytes: u64(podWS)},
		}},
	}
}

func TestCompareParity(t *testing.T) {
	tol := ParityTolerance{Memory: 64 << 20, PodMemory: 2 << 20, Bytes: 16 << 20, Inodes: 50, Processes: 20}
	rows := CompareParity(summaryWith(1<<30, 64<<20, 100), summaryWith(1<<30+(10<<20), 64<<20+4096, 110), []string{"u1", "gone"}, tol)
	byName := map[string]ParityRow{}
	for _, r := range rows {
		byName[r.Signal] = r
	}
	for _, s := range []string{"memory.available", "allocatableMemory.available", "nodefs.available", "imagefs.inodesFree",
		"pid.available", "pod ns/p working set", "pod ns/p usage"} {
		r, ok := byName[s]
		if !ok {
			t.Errorf("no row %q in %v", s, rows)
			continue
		}
		if !r.Agrees() {
			t.Errorf("%s: %+v does not agree", s, r)
		}
	}
	if r := byName["pod gone working set"]; r.Missing != "both" || r.Agrees() {
		t.Errorf("a pod neither lists: %+v; want missing in both, not agreeing", r)
	}

	rows = CompareParity(summaryWith(1<<30, 64<<20, 100), summaryWith(1<<30, 80<<20, 100), []string{"u1"}, tol)
	for _, r := range rows {
		if r.Signal == "pod ns/p working set" && r.Agrees() {
			t.Errorf("16 MiB apart with a 2 MiB tolerance agrees: %+v", r)
		}
	}
	table := ParityTable(rows)
	if !strings.Contains(table, "NO") || !strings.Contains(table, "64.0 MiB") {
		t.Errorf("the table does not show the disagreement:\n%s", table)
	}
}
