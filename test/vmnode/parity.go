// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"fmt"
	"strings"
	"text/tabwriter"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// ParityRow is one figure as evictd and the kubelet report it.
type ParityRow struct {
	Signal           string
	Evictd, Kubelet  int64
	Tolerance        int64 // the largest |Evictd-Kubelet| that still agrees
	Unit             string
	Missing          string // who lacks the figure, when one does
	ToleranceReasons string
}

// Agrees says whether both have the figure and it is within tolerance.
func (r ParityRow) Agrees() bool {
	if r.Missing != "" {
		return false
	}
	d := r.Evictd - r.Kubelet
	if d < 0 {
		d = -d
	}
	return d <= r.Tolerance
}

// ParityTolerance is how far apart the two may be, and why.
type ParityTolerance struct {
	// Memory covers node memory moving between the two reads: the
	// kubelet's figures come from cAdvisor's housekeeping (every 10-15 s),
	// evictd's from the moment it reads, and evictd observe itself (a
	// one-shot process in the guest) is part of the node's working set.
	Memory int64
	// PodMemory covers a pod that holds still (its own pages do not move).
	PodMemory int64
	// Bytes and Inodes cover the filesystems between the reads (logs, the
	// exec's own files).
	Bytes, Inodes int64
	// Processes covers the exec that runs evictd observe (ctr, the shim,
	// evictd itself) and the kubelet's own helpers.
	Processes int64
	// PodDiskBytes and PodDiskInodes cover what one counts in a pod's
	// ephemeral storage and the other does not: the kubelet its etc-hosts
	// file, evictd the sandbox's own writable layer.
	PodDiskBytes, PodDiskInodes int64
}

// CompareParity lines up evictd's observation and the kubelet's summary,
// node signals first, then each pod in pods (by UID) that both list.
func CompareParity(evictd, kubelet *statsv1alpha1.Summary, pods []string, tol ParityTolerance) []ParityRow {
	var rows []ParityRow
	add := func(signal, unit string, tolerance int64, e, k *uint64, why string) {
		r := ParityRow{Signal: signal, Unit: unit, Tolerance: tolerance, ToleranceReasons: why}
		switch {
		case e == nil && k == nil:
			r.Missing = "both"
		case e == nil:
			r.Missing = "evictd"
		case k == nil:
			r.Missing = "kubelet"
		}
		if e != nil {
			r.Evictd = int64(*e)
		}
		if k != nil {
			r.Kubelet = int64(*k)
		}
		rows = append(rows, r)
	}
	en, kn := evictd.Node, kubelet.Node
	if en.Memory != nil && kn.Memory != nil {
		add("memory.available", "MiB", tol.Memory, en.Memory.AvailableBytes, kn.Memory.AvailableBytes, "cAdvisor's cache, evictd observe's own pages")
		add("node working set", "MiB", tol.Memory, en.Memory.WorkingSetBytes, kn.Memory.WorkingSetBytes, "same")
	} else {
		rows = append(rows, ParityRow{Signal: "memory.available", Missing: missing(en.Memory == nil, kn.Memory == nil)})
	}
	ep, kp := podsContainer(en), podsContainer(kn)
	if ep != nil && kp != nil {
		add("allocatableMemory.available", "MiB", tol.Memory, ep.AvailableBytes, kp.AvailableBytes, "cAdvisor's cache")
		add("kubepods working set", "MiB", tol.Memory, ep.WorkingSetBytes, kp.WorkingSetBytes, "cAdvisor's cache")
	} else {
		rows = append(rows, ParityRow{Signal: "allocatableMemory.available", Missing: missing(ep == nil, kp == nil)})
	}
	fsRows := func(name string, e, k *statsv1alpha1.FsStats) {
		if e == nil || k == nil {
			rows = append(rows, ParityRow{Signal: name + ".available", Missing: missing(e == nil, k == nil)})
			return
		}
		add(name+" capacity", "MiB", 0, e.CapacityBytes, k.CapacityBytes, "fixed")
		add(name+".available", "MiB", tol.Bytes, e.AvailableBytes, k.AvailableBytes, "logs written between reads")
		add(name+" inodes", "", 0, e.Inodes, k.Inodes, "fixed")
		add(name+".inodesFree", "", tol.Inodes, e.InodesFree, k.InodesFree, "files made between reads")
	}
	fsRows("nodefs", en.Fs, kn.Fs)
	var eImg, kImg, eCtr, kCtr *statsv1alpha1.FsStats
	if evictd.Node.Runtime != nil {
		eImg, eCtr = evictd.Node.Runtime.ImageFs, evictd.Node.Runtime.ContainerFs
	}
	if kubelet.Node.Runtime != nil {
		kImg, kCtr = kubelet.Node.Runtime.ImageFs, kubelet.Node.Runtime.ContainerFs
	}
	fsRows("imagefs", eImg, kImg)
	// Kubelets before 1.30 have no containerFs; evictd's must match one
	// that has.
	if kCtr != nil {
		fsRows("containerfs", eCtr, kCtr)
	}
	if en.Rlimit != nil && kn.Rlimit != nil && en.Rlimit.MaxPID != nil && kn.Rlimit.MaxPID != nil &&
		en.Rlimit.NumOfRunningProcesses != nil && kn.Rlimit.NumOfRunningProcesses != nil {
		e := uint64(*en.Rlimit.MaxPID - *en.Rlimit.NumOfRunningProcesses)
		k := uint64(*kn.Rlimit.MaxPID - *kn.Rlimit.NumOfRunningProcesses)
		add("pid.available", "", tol.Processes, &e, &k, "the exec's processes")
	} else {
		rows = append(rows, ParityRow{Signal: "pid.available", Missing: missing(en.Rlimit == nil, kn.Rlimit == nil)})
	}
	for _, uid := range pods {
		e, k := podByUID(evictd, uid), podByUID(kubelet, uid)
		name := "pod " + uid
		if k != nil {
			name = "pod " + k.PodRef.Namespace + "/" + k.PodRef.Name
		}
		if e == nil || k == nil || e.Memory == nil || k.Memory == nil {
			rows = append(rows, ParityRow{Signal: name + " working set", Missing: missing(e == nil || e.Memory == nil, k == nil || k.Memory == nil)})
			continue
		}
		add(name+" working set", "MiB", tol.PodMemory, e.Memory.WorkingSetBytes, k.Memory.WorkingSetBytes, "the pod holds still")
		add(name+" usage", "MiB", tol.PodMemory, e.Memory.UsageBytes, k.Memory.UsageBytes, "the pod holds still")
		if e.EphemeralStorage == nil || k.EphemeralStorage == nil {
			rows = append(rows, ParityRow{Signal: name + " ephemeral", Missing: missing(e.EphemeralStorage == nil, k.EphemeralStorage == nil)})
			continue
		}
		add(name+" ephemeral", "MiB", tol.PodDiskBytes, e.EphemeralStorage.UsedBytes, k.EphemeralStorage.UsedBytes, "etc-hosts, the sandbox's layer")
		add(name+" ephemeral inodes", "", tol.PodDiskInodes, e.EphemeralStorage.InodesUsed, k.EphemeralStorage.InodesUsed, "same")
	}
	return rows
}

func missing(e, k bool) string {
	switch {
	case e && k:
		return "both"
	case e:
		return "evictd"
	case k:
		return "kubelet"
	}
	return ""
}

func podsContainer(n statsv1alpha1.NodeStats) *statsv1alpha1.MemoryStats {
	for _, c := range n.SystemContainers {
		if c.Name == statsv1alpha1.SystemContainerPods {
			return c.Memory
		}
	}
	return nil
}

func podByUID(s *statsv1alpha1.Summary, uid string) *statsv1alpha1.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.UID == uid {
			return &s.Pods[i]
		}
	}
	return nil
}

// ParityTable prints the rows side by side.
func ParityTable(rows []ParityRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "signal\tevictd\tkubelet\tdifference\ttolerance\tagree\t")
	for _, r := range rows {
		if r.Missing != "" {
			fmt.Fprintf(w, "%s\t\t\t\t\tmissing in %s\t\n", r.Signal, r.Missing)
			continue
		}
		agree := "yes"
		if !r.Agrees() {
			agree = "NO"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Signal, scaled(r.Evictd, r.Unit), scaled(r.Kubelet, r.Unit),
			scaled(r.Evictd-r.Kubelet, r.Unit), scaled(r.Tolerance, r.Unit), agree)
	}
	w.Flush()
	return b.String()
}

func scaled(v int64, unit string) string {
	if unit == "MiB" {
		return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20))
	}
	return fmt.Sprintf("%d", v)
}
