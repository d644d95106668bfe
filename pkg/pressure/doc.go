// SPDX-License-Identifier: Apache-2.0

// Package pressure observes node and pod pressure from the kernel and
// reports it in the shape of the kubelet's Summary API
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1), with the kubelet's definitions:
//
//   - memory.available: capacity − working set of the node cgroup
//     (Options.NodeCgroup), where capacity = min(MemTotal, the node cgroup's
//     memory limit) and working set = usage − inactive_file.
//     Node.Memory.AvailableBytes + WorkingSetBytes is the capacity, as the
//     kubelet's eviction code derives it. The node cgroup is the root "/" by
//     default, as the kubelet's Summary reads it whatever its --cgroup-root:
//     Options.CgroupRoot only says where kubepods is.
//     From Kubernetes 1.37 (the HugepageAwareEviction gate, on by default)
//     the node's hugepage pool comes off it too, floored at 0: the sum over
//     page sizes of nr_hugepages × the size, from /sys/kernel/mm/hugepages
//     (or, when that is not under the host root, the Hugetlb line of
//     /proc/meminfo, the same sum). The working set stays, so the capacity
//     drops by the pool as well. Options.NoHugepageAwareEviction keeps the
//     pool in, as a kubelet with the gate off does; a node cgroup other
//     than "/" never has it taken off.
//   - allocatableMemory.available: the same for the kubepods cgroup, in the
//     Node.SystemContainers entry named "pods", with no hugepage pool taken
//     off (the kubelet adjusts only the node's figure).
//   - nodefs / imagefs: statfs of /var/lib/kubelet and of the image store.
//   - pid.available: Node.Rlimit, min(pid_max, threads-max) and the task
//     count of /proc/loadavg.
//   - PSI of the node (/proc/pressure) and, where the cgroup has a cgroup2
//     directory, of kubepods and each pod.
//   - swap.available: Node.Swap, SwapFree against SwapTotal of
//     /proc/meminfo; none on a node without swap (SwapTotal 0). Pods' swap
//     (PodStats.Swap) and kubepods' (the "pods" system container): v2
//     memory.swap.current, with memory.swap.max − usage available unless
//     the limit is "max"; v1 memory.memsw.usage_in_bytes − usage, no limit.
//     The cgroups' swap files are read only while the node has swap (or
//     /proc/meminfo cannot tell): without it their figures are left out,
//     and a pass reads no file more per pod. A cgroup whose kernel has no
//     such file (swap accounting off) has no figure.
//
// Pods are found by listing kubepods and its QoS cgroups (cgroupfs and
// systemd drivers; cgroup v1, v2 and hybrid hosts), the UID coming from the
// directory name. Each pass reads only the few files each signal needs, and
// keeps them open to re-read them with pread: containerd/cgroups' Stat()
// opens some twenty files per cgroup, far too many for a loop that runs every
// second or faster over hundreds of pods (docs/kernel.md, "What reading the files costs");
// BenchmarkPodMemoryRead measures it on one pod. Parsing is done by pure,
// allocation-free functions over the bytes read. The cgroup mode comes from
// containerd/cgroups' Mode() only when the host root is "/" (layout.go).
//
// Every host path is read under Options.HostRoot, so the agent can run in a
// container with the host mounted at /host, and tests can use fixture trees.
//
// A pod cgroup that disappears while it is read is skipped quietly (the pod
// was deleted). A malformed or unreadable pod file skips its pod with one
// warning naming the file and its content, and is counted in the
// Observation; it never stops the observation. A node-level file a signal
// needs that is malformed or unreadable leaves that signal out of the
// Summary (never a guessed or zero value) and is listed in
// Observation.SignalErrors, with a warning at most once a minute per file
// and cause. Without a kubepods cgroup there is no observation at all:
// Observe fails with ErrNoKubepods, naming where it looked.
package pressure
