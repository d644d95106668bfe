// SPDX-License-Identifier: Apache-2.0

package options

import (
	"fmt"
	"strconv"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
)

// Sections of `evictd run --help`, in their order; the command adds
// SectionLogging and SectionGlobal after AddFlags's.
const (
	SectionGeneric     = "generic"
	SectionThresholds  = "thresholds"
	SectionEviction    = "eviction"
	SectionObservation = "observation"
	SectionServing     = "serving"
	SectionLogging     = "logging"
	SectionGlobal      = "global"
)

// AddFlags registers every flag of Options, the config's and the evictor's
// included, each on the section of the help it belongs to.
func (o *Options) AddFlags(s *cliflag.Sections) {
	generic := s.Section(SectionGeneric)
	thresholdFlags := s.Section(SectionThresholds)
	eviction := s.Section(SectionEviction)
	observation := s.Section(SectionObservation)
	serving := s.Section(SectionServing)

	generic.StringVar(&o.NodeName, FlagNodeName, o.NodeName, "This node's name; required. Defaults to $NODE_NAME, which the DaemonSet sets from spec.nodeName.")
	generic.StringVar(&o.Kubeconfig, FlagKubeconfig, o.Kubeconfig, "Kubeconfig file; empty uses the in-cluster ServiceAccount.")
	if o.Config == nil {
		o.Config = &config.Config{}
	}
	// The evictor's flags first: the config adds the soft grace cap after
	// the evictor's own grace and rate flags.
	o.Evict.AddFlags(eviction)
	o.Config.BindFlags(generic, thresholdFlags, eviction)
	thresholdFlags.StringVar(&o.KubeletThresholds, FlagKubeletThresholds, o.KubeletThresholds,
		"place: read the node's kubelet eviction thresholds at start (its process under --host-root's /proc, its config file and drop-ins, or kubeadm's files) and raise each of evictd's default hard thresholds to the kubelet's plus a margin (200Mi on memory, 5 points on the others), so that evictd acts first; thresholds set with flags or --config are kept, with a warning when the kubelet would evict first (below its threshold, or at it on memory and PIDs). ignore: evictd's defaults as they are.")
	thresholdFlags.StringVar(&o.KubeletConfig, FlagKubeletConfig, o.KubeletConfig,
		"The kubelet's config file, a path on the host read under --host-root, when the one its --config names is not found there; empty finds it.")
	generic.DurationVar(&o.InformerSyncTimeout, FlagInformerSyncTimeout, o.InformerSyncTimeout, "How long to wait for the initial list and watch of pods, PriorityClasses and namespaces before exiting (a 403 Forbidden exits at once).")
	generic.StringVar(&o.Install, FlagInstall, o.Install, "The install this agent belongs to: its DaemonSet, NAMESPACE/NAME. Everything the agent writes names it (its node Lease, its taints' value, its conditions' message, its EvictionRequests' label, its Events' reportingInstance), so that the uninstall of another install of evictd leaves it alone. Default: the DaemonSet evictd in the pod's own namespace ($POD_NAMESPACE/evictd), outside a pod evictd-system/evictd; the chart passes its own.")
	generic.BoolVar(&o.NodeLease, FlagNodeLease, o.NodeLease, "Act only while holding this node's coordination.k8s.io Lease (evictd-<node>), so that one evictd acts per node; another one waits, not ready. false: act regardless (tests; never with two agents on a node).")
	generic.StringVar(&o.NodeLeaseNamespace, FlagNodeLeaseNamespace, o.NodeLeaseNamespace, "Namespace of the node Lease: the agent's own pod's (POD_NAMESPACE), outside a pod evictd-system, unless set. Agents of two installs see each other only in one namespace: in two, both act on a node.")
	generic.DurationVar(&o.NodeLeaseDuration, FlagNodeLeaseDuration, o.NodeLeaseDuration, "How long the node Lease lasts unrenewed while pressure is near (a signal within twice its threshold, an episode open); it is renewed every third of it, and another agent takes over this long after the holder vanished without releasing it.")
	generic.DurationVar(&o.NodeLeaseIdle, FlagNodeLeaseIdle, o.NodeLeaseIdle, "How long the node Lease lasts unrenewed with no pressure near; it is renewed every third of it, a little sooner at random. A holder whose pod or process is gone is taken over --"+FlagNodeLeaseDuration+" after its last renewal, however long this is.")
	generic.BoolVar(&o.NodeBrake, FlagNodeBrake, o.NodeBrake, "During each pressure episode, set evictd's condition (EvictdMemoryPressure, EvictdDiskPressure, EvictdPIDPressure) and taint (evictd.io/memory-pressure, disk-pressure, pid-pressure) on this node, and lift them when it ends: the scheduler brake the kubelet's MemoryPressure would have applied, had evictd not acted first. Needs patch on nodes and nodes/status (bounded to the own node by the shipped admission policy). Off, and in dry run, no brake is set, but one an earlier agent left on this node is still lifted (with the same grants).")
	generic.StringVar(&o.NodeBrakeTaintEffect, FlagNodeBrakeTaintEffect, o.NodeBrakeTaintEffect, "The brake's taint effect: PreferNoSchedule (the default: the scheduler steers new pods to other nodes that fit, and a taint left behind never makes the node unschedulable), NoSchedule (as the kubelet's: no new pod without a toleration lands here, nor a DaemonSet's pod without one in a rollout), or None (the condition only).")
	generic.StringVar(&o.Sandbox, FlagSandbox, o.Sandbox, "The sandbox evictd puts its own process in at start. seccomp: a seccomp filter on every thread refusing open_by_handle_at and name_to_handle_at (EPERM), with which CAP_DAC_READ_SEARCH would open any file of a mounted host filesystem by its handle, past the mounts; evictd exits when it cannot install it. none: no sandbox of evictd's own (a warning in the log, evictd_sandbox_active{kind=\"seccomp\"} 0).")
	generic.BoolVar(&o.LockMemory, FlagLockMemory, o.LockMemory, "Lock evictd's memory in RAM (mlockall, each page as it is first touched), so that the node's memory pressure cannot page it out; needs CAP_IPC_LOCK. When refused, evictd runs unlocked, logs why and reports evictd_memory_locked 0.")

	eviction.Var(optionalBool{&o.includeDS}, FlagIncludeDaemonSetPods, "Make DaemonSet pods eligible for eviction (overrides includeDaemonSetPods of --config).")
	eviction.Var(optionalBool{&o.swapRank}, FlagSwapInRanking, "Rank pods for the memory signals by working set + swap, on by default; false ranks by working set alone, as the kubelet (overrides swapInRanking of --config). Changes nothing on a node without swap.")
	eviction.Lookup(FlagIncludeDaemonSetPods).NoOptDefVal = "true"
	eviction.BoolVar(&o.ActEarly, FlagActEarly, o.ActEarly, "Evict when a hard memory threshold's crossing is predicted within the time an eviction takes to free memory.")
	eviction.BoolVar(&o.FitGrace, FlagFitGrace, o.FitGrace, "Shorten a memory eviction's grace period to the time left before memory runs out.")
	eviction.DurationVar(&o.GraceMargin, FlagGraceMargin, o.GraceMargin, "Part of the time left kept for the eviction itself when fitting a grace period.")
	eviction.BoolVar(&o.ExpectImageGC, FlagExpectImageGC, o.ExpectImageGC, "Count the node's unused images (the Node's status.images) as space the kubelet's image garbage collection frees, and evict only for disk pressure on the image filesystem that they cannot cover; false when the kubelet's image GC is off.")

	// --eviction-request and its wait are the config's (BindFlags above).
	eviction.BoolVar(&o.Shadow, FlagShadow, o.Shadow,
		"Shadow mode (docs/shadow.md): a dry run (it implies --dry-run) that reports each pressure episode, what evictd would have evicted and when, against the kubelet's evictions (the node's pods it left Failed with reason Evicted, read from the informer on the node's pods) and the kernel's OOM kills: in the log and at /shadow on the secure port. Needs no grant beyond the agent's own.")
	eviction.BoolVar(&o.Actuator, FlagActuator, o.Actuator, "Let evictd write the pod cgroups' memory limits (docs/actuator.md): stop a hard memory victim's growth once its eviction is accepted, and relax the memory.high of a container stuck at it before evicting (with --memory-high-eviction). Needs the pod cgroups mounted writable (the chart's actuator.enabled); nothing is written in dry run.")

	observation.StringVar(&o.HostRoot, FlagHostRoot, o.HostRoot, "Directory under which every host path (/proc, /sys/fs/cgroup, /var/lib/kubelet, /var/log/pods) is read.")
	observation.StringVar(&o.CgroupRoot, FlagCgroupRoot, o.CgroupRoot, "Cgroup under which kubepods lives (the kubelet's --cgroup-root).")
	observation.StringVar(&o.NodeCgroup, FlagNodeCgroup, o.NodeCgroup, NodeCgroupUsage)
	observation.StringVar(&o.ImageFs, FlagImageFs, o.ImageFs, "The container runtime's image store, whose filesystem is the imagefs.")
	observation.StringVar(&o.ContainerFs, FlagContainerFs, o.ContainerFs, "Where the runtime keeps the containers' writable layers, if not under --image-fs (CRI-O's split image store).")
	observation.DurationVar(&o.Housekeeping, FlagHousekeeping, o.Housekeeping, "Longest wait between two observations (the kubelet uses 10s).")
	observation.StringVar(&o.WakeupSources, FlagWakeupSources, o.WakeupSources,
		"Comma-separated wake-up sources besides the housekeeping timer: memcg (cgroup v1 threshold eventfds), psi (PSI triggers), memory-events (cgroup v2 inotify), adaptive (faster polls near thresholds); none = timer only, like the kubelet.")
	observation.DurationVar(&o.PollMin, FlagPollMin, o.PollMin, "Fastest adaptive poll interval, used near a threshold and right after an event.")

	serving.StringVar(&o.MetricsAddr, FlagMetricsAddress, o.MetricsAddr, "Address serving /metrics, /healthz and /readyz.")
	serving.StringVar(&o.SecureAddr, FlagSecureAddress, o.SecureAddr,
		"Address serving /explain and /metrics over TLS to callers the API server authenticates (TokenReview) and authorizes (SubjectAccessReview, get on the path) (docs/decide.md); empty: off.")
	serving.StringVar(&o.TLSCertFile, FlagTLSCertFile, o.TLSCertFile, "Certificate of the secure port (PEM); with none, a self-signed one is made at start.")
	serving.StringVar(&o.TLSKeyFile, FlagTLSKeyFile, o.TLSKeyFile, "Private key of --"+FlagTLSCertFile+".")
	serving.BoolVar(&o.SecureMetricsOnly, FlagSecureMetricsOnly, o.SecureMetricsOnly,
		"Serve /metrics on the secure port only; the plain port keeps /healthz and /readyz. Needs --"+FlagSecureAddress+".")
	serving.IntVar(&o.TraceSize, FlagTraceSize, o.TraceSize,
		"Bytes of the trace of recent passes (observations, pod lists, eviction calls and answers) kept for evictd replay, served at /trace on the secure port; 0: none. At least 65536 when set.")
}

// optionalBool is a boolean flag that remembers whether it was given, so
// that it overrides the config file only then.
type optionalBool struct{ dst **bool }

func (b optionalBool) String() string {
	if b.dst == nil || *b.dst == nil {
		return "false"
	}
	return strconv.FormatBool(**b.dst)
}

func (b optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	*b.dst = &v
	return nil
}

func (optionalBool) IsBoolFlag() bool { return true }

func (optionalBool) Type() string { return "bool" }
