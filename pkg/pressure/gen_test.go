// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file generates host trees of any size for tests and benchmarks. The
// file formats are those of the kernel (v1 memory.stat as on this project's
// machines, v2 memory.stat in the 6.x key order); the small exact fixtures
// under testdata/ are checked in instead.

const (
	mi = uint64(1) << 20
	gi = uint64(1) << 30
	// v1Unlimited is what v1 memory.limit_in_bytes reads with no limit.
	v1Unlimited = uint64(9223372036854771712)
)

type genPod struct {
	uid                              string
	qos                              int // qosGuaranteed, qosBurstable, qosBestEffort
	usage, inactive, rss, pgf, pgmaj uint64
	pids                             uint64
	// swap is the pod's swap usage; swapMax its v2 memory.swap.max, 0 for "max".
	swap, swapMax uint64
}

// genPods makes n pods with distinct, predictable figures.
func genPods(n int) []genPod {
	pods := make([]genPod, n)
	for i := range pods {
		usage := (32 + uint64(i%97)) * mi
		var swap, swapMax uint64
		if i%4 != 0 {
			swap = usage / 16
		}
		if i%3 == qosBurstable {
			swapMax = usage // LimitedSwap-like: a limit that grows with the pod
		}
		pods[i] = genPod{
			uid:      fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", 0x1000+i, i%0xffff, i%0xfff, (i*7)%0xfff, i*7919),
			qos:      i % 3,
			usage:    usage,
			inactive: usage / 8,
			rss:      usage / 2,
			pgf:      uint64(1000 + i),
			pgmaj:    uint64(i % 5),
			pids:     uint64(1 + i%40),
			swap:     swap,
			swapMax:  swapMax,
		}
	}
	return pods
}

// v1StatContent renders a v1 memory.stat. The pod cgroup itself holds no
// process, so its local counters are zero and the total_* ones carry the figures.
func v1StatContent(cache, rss, inactiveFile, pgfault, pgmajfault uint64, local bool) string {
	activeFile := uint64(0)
	if cache > inactiveFile {
		activeFile = cache - inactiveFile
	}
	kv := []struct {
		k string
		v uint64
	}{
		{"cache", cache}, {"rss", rss}, {"rss_huge", 0}, {"shmem", 0}, {"mapped_file", cache / 8}, {"dirty", cache / 64},
		{"writeback", 0}, {"workingset_refault_anon", 0}, {"workingset_refault_file", 17}, {"swap", 0}, {"swapcached", 0},
		{"pgpgin", pgfault / 2}, {"pgpgout", pgfault / 3}, {"pgfault", pgfault}, {"pgmajfault", pgmajfault},
		{"inactive_anon", rss / 16}, {"active_anon", rss - rss/16}, {"inactive_file", inactiveFile},
		{"active_file", activeFile}, {"unevictable", 0},
	}
	var b strings.Builder
	for _, e := range kv {
		v := e.v
		if !local {
			v = 0
		}
		fmt.Fprintf(&b, "%s %d\n", e.k, v)
	}
	fmt.Fprintf(&b, "hierarchical_memory_limit %d\nhierarchical_memsw_limit %d\n", v1Unlimited, v1Unlimited)
	for _, e := range kv {
		fmt.Fprintf(&b, "total_%s %d\n", e.k, e.v)
	}
	return b.String()
}

// v2StatContent renders a v2 memory.stat with a 6.x kernel's keys.
func v2StatContent(anon, file, inactiveFile, pgfault, pgmajfault uint64) string {
	activeFile := uint64(0)
	if file > inactiveFile {
		activeFile = file - inactiveFile
	}
	kv := []struct {
		k string
		v uint64
	}{
		{"anon", anon}, {"file", file}, {"kernel", 2908160}, {"kernel_stack", 229376}, {"pagetables", 978944},
		{"sec_pagetables", 0}, {"percpu", 21200}, {"sock", 0}, {"vmalloc", 8192}, {"shmem", 0}, {"zswap", 0},
		{"zswapped", 0}, {"file_mapped", file / 8}, {"file_dirty", 8192}, {"file_writeback", 0}, {"swapcached", 0},
		{"anon_thp", 0}, {"file_thp", 0}, {"shmem_thp", 0}, {"inactive_anon", anon / 16}, {"active_anon", anon - anon/16},
		{"inactive_file", inactiveFile}, {"active_file", activeFile}, {"unevictable", 0}, {"slab_reclaimable", 1163904},
		{"slab_unreclaimable", 482880}, {"slab", 1646784}, {"workingset_refault_anon", 0}, {"workingset_refault_file", 31},
		{"workingset_activate_anon", 0}, {"workingset_activate_file", 4}, {"workingset_restore_anon", 0},
		{"workingset_restore_file", 0}, {"workingset_nodereclaim", 0}, {"pswpin", 0}, {"pswpout", 0}, {"pgscan", 0},
		{"pgsteal", 0}, {"pgscan_kswapd", 0}, {"pgscan_direct", 0}, {"pgscan_khugepaged", 0}, {"pgscan_proactive", 0},
		{"pgsteal_kswapd", 0}, {"pgsteal_direct", 0}, {"pgsteal_khugepaged", 0}, {"pgsteal_proactive", 0},
		{"pgfault", pgfault}, {"pgmajfault", pgmajfault}, {"pgrefill", 0}, {"pgactivate", 12}, {"pgdeactivate", 0},
		{"pglazyfree", 0}, {"pglazyfreed", 0}, {"swpin_zero", 0}, {"swpout_zero", 0}, {"zswpin", 0}, {"zswpout", 0},
		{"zswpwb", 0}, {"thp_fault_alloc", 0}, {"thp_collapse_alloc", 0}, {"thp_swpout", 0}, {"thp_swpout_fallback", 0},
		{"numa_pages_migrated", 0}, {"numa_pte_updates", 0}, {"numa_hint_faults", 0}, {"pgdemote_kswapd", 0},
		{"pgdemote_direct", 0}, {"pgdemote_khugepaged", 0}, {"pgdemote_proactive", 0}, {"hugetlb", 0},
	}
	var b strings.Builder
	for _, e := range kv {
		fmt.Fprintf(&b, "%s %d\n", e.k, e.v)
	}
	return b.String()
}

const eventsContent = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"

func psiContent(some10, full10 float64, total uint64) string {
	return fmt.Sprintf("some avg10=%.2f avg60=0.00 avg300=0.00 total=%d\nfull avg10=%.2f avg60=0.00 avg300=0.00 total=%d\n",
		some10, total, full10, total/2)
}

type treeWriter struct {
	tb   testing.TB
	root string
}

func (w treeWriter) file(rel, content string) {
	w.tb.Helper()
	p := filepath.Join(w.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.tb.Fatal(err)
	}
}

// writeProc writes the /proc files the observer reads: an 8 GiB node with
// a 2 GiB swap file, 256 MiB of it in use.
func (w treeWriter) writeProc() {
	w.writeMeminfo(2097148, 1835004)
	w.file("proc/loadavg", "0.52 0.58 0.59 3/412 12345\n")
	w.file("proc/sys/kernel/pid_max", "4194304\n")
	w.file("proc/sys/kernel/threads-max", "63432\n")
	w.file("proc/pressure/memory", psiContent(1.25, 0.75, 1234567))
	w.file("proc/pressure/cpu", psiContent(12, 0, 98765432))
	w.file("proc/pressure/io", psiContent(0.31, 0, 2049707))
}

// writeMeminfo writes /proc/meminfo with the given SwapTotal and SwapFree
// (kB); 0, 0 is a node without swap.
func (w treeWriter) writeMeminfo(swapTotal, swapFree uint64) {
	w.file("proc/meminfo", "MemTotal:        8388608 kB\nMemFree:         4194304 kB\nMemAvailable:    6291456 kB\n"+
		"Buffers:           49380 kB\nCached:          4283844 kB\nSwapCached:            0 kB\nActive:          2779564 kB\n"+
		"Inactive:        1976352 kB\nActive(anon):       1604 kB\nInactive(anon):   429964 kB\nActive(file):    2777960 kB\n"+
		"Inactive(file):  1546388 kB\nUnevictable:       16496 kB\nMlocked:           15584 kB\n"+
		fmt.Sprintf("SwapTotal:       %8d kB\nSwapFree:        %8d kB\n", swapTotal, swapFree)+
		"Zswap:                 0 kB\nZswapped:              0 kB\nDirty:             22196 kB\n")
}

// swapMaxContent is a v2 memory.swap.max: "max" for 0.
func swapMaxContent(v uint64) string {
	if v == 0 {
		return "max\n"
	}
	return fmt.Sprint(v, "\n")
}

// podDir is where a generated pod lives relative to the hierarchy root.
func genPodDir(driver Driver, p genPod) string {
	if driver == DriverSystemd {
		u := strings.ReplaceAll(p.uid, "-", "_")
		switch p.qos {
		case qosBurstable:
			return "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u + ".slice"
		case qosBestEffort:
			return "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + u + ".slice"
		}
		return "kubepods.slice/kubepods-pod" + u + ".slice"
	}
	switch p.qos {
	case qosBurstable:
		return "kubepods/burstable/pod" + p.uid
	case qosBestEffort:
		return "kubepods/besteffort/pod" + p.uid
	}
	return "kubepods/pod" + p.uid
}

// writeTree writes a host root with the given pods, each with a container
// and a pause sub-cgroup. v1 trees use the cgroupfs driver and a pids
// hierarchy; v2 trees use whichever driver is asked.
func writeTree(tb testing.TB, root string, mode Mode, driver Driver, pods []genPod) {
	w := treeWriter{tb, root}
	w.writeProc()
	for _, d := range []string{"var/lib/kubelet", "var/lib/containerd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	const ctr = "3b8f1c2d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"
	const pause = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"
	kubepods := "kubepods"
	if driver == DriverSystemd {
		kubepods = "kubepods.slice"
	}
	if mode == ModeV2 {
		cg := "sys/fs/cgroup/"
		w.file(cg+"cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
		w.file(cg+"memory.stat", v2StatContent(2*gi, gi, gi, 424242, 42))
		w.file(cg+"memory.pressure", psiContent(0.5, 0.1, 4242))
		w.file(cg+kubepods+"/memory.current", fmt.Sprint(6*gi, "\n"))
		w.file(cg+kubepods+"/memory.max", fmt.Sprint(7*gi, "\n"))
		w.file(cg+kubepods+"/memory.stat", v2StatContent(4*gi, 2*gi, gi, 99000, 44))
		w.file(cg+kubepods+"/memory.pressure", psiContent(2.5, 1, 5000))
		w.file(cg+kubepods+"/memory.swap.current", fmt.Sprint(gi, "\n"))
		w.file(cg+kubepods+"/memory.swap.max", "max\n")
		for _, p := range pods {
			d := cg + genPodDir(driver, p) + "/"
			w.file(d+"memory.current", fmt.Sprint(p.usage, "\n"))
			w.file(d+"memory.max", "max\n")
			w.file(d+"memory.swap.current", fmt.Sprint(p.swap, "\n"))
			w.file(d+"memory.swap.max", swapMaxContent(p.swapMax))
			w.file(d+"memory.stat", v2StatContent(p.rss, p.usage-p.rss, p.inactive, p.pgf, p.pgmaj))
			w.file(d+"memory.events", eventsContent)
			w.file(d+"memory.pressure", psiContent(4.5, 1.5, 777))
			w.file(d+"pids.current", fmt.Sprint(p.pids, "\n"))
			for _, c := range []string{ctr, pause} {
				name := c
				if driver == DriverSystemd {
					name = "cri-containerd-" + c + ".scope"
				}
				w.file(d+name+"/memory.current", fmt.Sprint(p.usage/2, "\n"))
				w.file(d+name+"/memory.stat", v2StatContent(p.rss/2, p.usage/2-p.rss/2, 0, p.pgf/3, 0))
				w.file(d+name+"/memory.events", eventsContent)
				w.file(d+name+"/memory.pressure", psiContent(0, 0, 0))
			}
		}
		return
	}
	mem := "sys/fs/cgroup/memory/"
	w.file(mem+"memory.stat", v1StatContent(1536*mi, gi, gi, 15176776, 454, true))
	w.file(mem+"memory.usage_in_bytes", fmt.Sprint(3*gi, "\n"))
	w.file(mem+"memory.limit_in_bytes", fmt.Sprint(v1Unlimited, "\n"))
	w.file(mem+kubepods+"/memory.usage_in_bytes", fmt.Sprint(6*gi, "\n"))
	w.file(mem+kubepods+"/memory.limit_in_bytes", fmt.Sprint(7*gi, "\n"))
	w.file(mem+kubepods+"/memory.stat", v1StatContent(2*gi, 4*gi, gi, 99000, 44, false))
	w.file(mem+kubepods+"/memory.memsw.usage_in_bytes", fmt.Sprint(7*gi, "\n"))
	for _, p := range pods {
		d := mem + genPodDir(driver, p) + "/"
		w.file(d+"memory.usage_in_bytes", fmt.Sprint(p.usage, "\n"))
		w.file(d+"memory.memsw.usage_in_bytes", fmt.Sprint(p.usage+p.swap, "\n"))
		w.file(d+"memory.limit_in_bytes", fmt.Sprint(v1Unlimited, "\n"))
		w.file(d+"memory.stat", v1StatContent(p.usage-p.rss, p.rss, p.inactive, p.pgf, p.pgmaj, false))
		w.file("sys/fs/cgroup/pids/"+genPodDir(driver, p)+"/pids.current", fmt.Sprint(p.pids, "\n"))
		for _, c := range []string{ctr, pause} {
			name := c
			if driver == DriverSystemd {
				name = "cri-containerd-" + c + ".scope"
			}
			w.file(d+name+"/memory.usage_in_bytes", fmt.Sprint(p.usage/2, "\n"))
			w.file(d+name+"/memory.stat", v1StatContent(p.usage/2-p.rss/2, p.rss/2, 0, p.pgf/3, 0, true))
		}
	}
}
