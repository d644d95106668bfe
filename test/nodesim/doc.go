// SPDX-License-Identifier: Apache-2.0

// Package nodesim is a kubelet stand-in for end-to-end tests: it turns a
// real cgroup subtree and a directory into a Node of a real API server, and
// runs the pods bound to that Node as real processes.
//
// # What it does
//
// Start creates, on the cgroup v1 memory and pids hierarchies or in the
// cgroup v2 unified hierarchy, whichever the host mounts at
// Options.CgroupFS (with containerd/cgroups' cgroup1 or cgroup2; see
// cgroup.go and cgroup2.go for what stays hand-written),
//
//	/evictd-test-<pid>-<rand>/<node>               memory limit = MemoryBytes
//	  kubepods/                                    limit = MemoryBytes - ReservedMemoryBytes
//	    pod<uid>/<container id>/                   Guaranteed pods
//	    burstable/pod<uid>/<container id>/
//	    besteffort/pod<uid>/<container id>/
//
// (the kubelet's cgroupfs-driver layout, with the kubelet's pod and container
// memory limits: v1 memory.limit_in_bytes, v2 memory.max; on v2, memory and
// pids are enabled in each parent's cgroup.subtree_control and processes
// join the container cgroups only, the leaves), a host root directory (see Node.HostRoot) with sys and
// proc linked to the real ones and var/lib/kubelet, var/log/pods and
// var/lib/containerd, optionally on a tmpfs of DiskBytes, and registers a
// Node whose capacity and allocatable match. evictd watches such a node with
//
//	evictd run --node-name=<Node.Name> --host-root=<Node.HostRoot> --cgroup-root=<Node.CgroupRoot> --node-cgroup=<Node.CgroupRoot>
//
// --node-cgroup makes the node cgroup's working set and limit the node's
// memory; without it evictd would read the host's root cgroup, as the
// kubelet of a real node does.
//
// For every pod bound to the node it:
//   - creates the pod and container cgroups and the pod's emptyDir and log
//     directories;
//   - runs init containers to completion, then each container as a process
//     of the workload binary (an empty command or one named "workload";
//     anything else runs as given), with args and env from the pod spec,
//     $(VAR) expanded; WORKLOAD_DIR names the container's first emptyDir.
//     The process joins its cgroups before exec, so all of its memory is
//     charged there; stdout and stderr go to var/log/pods/.../<container>/0.log;
//   - reports status Running with Ready=True and container statuses;
//   - on a deletionTimestamp: SIGTERM to each container's process group,
//     up to deletionGracePeriodSeconds, SIGKILL, cgroups and directories
//     removed, the pod deleted with grace 0 (UID precondition);
//   - when the kernel OOM-kills one of its processes (oom_kill in v1
//     memory.oom_control or v2 memory.events.local, polled every OOMPollInterval and on every
//     unexpected exit): kills the rest, reports phase Failed with reason
//     OOMKilled and counts the kill (Node.OOMKills).
//
// Each step is timestamped in a Timeline (Node.Record, Node.WaitRecord), so
// tests can check grace periods against what really happened.
// CreateStaticPod makes a static pod's mirror pod.
//
// # Faults on demand
//
//   - Evict plays the kubelet's eviction manager on a pod (a hard
//     threshold's eviction): its processes killed, its cgroups removed, and
//     the pod left in the API as the kubelet leaves one it evicted, written
//     through pods/status: phase Failed, reason Evicted, the message and a
//     DisruptionTarget condition with reason TerminationByKubelet.
//   - A pod annotated HangTerminationAnnotation="true" hangs on deletion:
//     SIGTERM, then nothing (no SIGKILL, no status, no final delete), as
//     with a hung runtime; it stays Terminating with phase Running.
//   - A pod annotated VolumeRemovalRateAnnotation="N" is taken down as on
//     a slow disk: once its processes exit it is reported Failed, then the
//     files of its emptyDir volumes go at N a second, its cgroups still
//     there, and only then are the cgroups removed and the pod deleted.
//     Options.DiskInodes bounds the node's tmpfs in inodes, so that files
//     can take nodefs.inodesFree low.
//   - CreateCgroup makes an empty cgroup below the node cgroup: a cgroup
//     root without kubepods.
//   - NewFaultRoot makes a second host root in which chosen files of the
//     node cgroup's memory directory are copies mounted over the real ones;
//     FaultRoot.Break turns them into garbage and Restore puts them back,
//     while the real files, the pods and their cgroups stay intact.
//
// Not simulated: container restarts (an exited container stays exited;
// when all have, the pod is Succeeded or Failed), probes, images, networking,
// Secrets/ConfigMaps in env, emptyDir medium Memory or sizeLimit, node
// heartbeats (no node lifecycle controller runs).
//
// # Cleaning up
//
// Stop kills every process, closes the fault roots, removes the cgroups,
// unmounts the tmpfs and removes the host root. Processes also die with the test binary (parent
// death signal), and cgroups and directories that a killed test binary
// left are removed by the next Start.
package nodesim
