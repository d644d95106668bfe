// SPDX-License-Identifier: Apache-2.0

// Package options is everything `evictd run` is configured with: its
// flags, the EvictdConfiguration file under them (pkg/config), defaults
// and validation, and the options a trace's header (pkg/trace) rebuilds
// for a replay. The loop (pkg/agent) and the wiring (cmd/evictd/app) are
// built from one validated Options.
package options

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/fastpath"
	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// Flag names of the agent's own options.
const (
	FlagNodeName             = "node-name"
	FlagKubeconfig           = "kubeconfig"
	FlagHostRoot             = "host-root"
	FlagCgroupRoot           = "cgroup-root"
	FlagNodeCgroup           = "node-cgroup"
	FlagImageFs              = "image-fs"
	FlagContainerFs          = "container-fs"
	FlagHousekeeping         = "housekeeping-interval"
	FlagMetricsAddress       = "metrics-bind-address"
	FlagSecureAddress        = "secure-bind-address"
	FlagTLSCertFile          = "tls-cert-file"
	FlagTLSKeyFile           = "tls-private-key-file"
	FlagSecureMetricsOnly    = "secure-metrics-only"
	FlagShadow               = "shadow"
	FlagTraceSize            = "trace-size"
	FlagIncludeDaemonSetPods = "include-daemonset-pods"
	FlagSwapInRanking        = "swap-in-ranking"
	FlagWakeupSources        = "wakeup-sources"
	FlagPollMin              = "poll-min-interval"
	FlagActEarly             = "act-early"
	FlagFitGrace             = "fit-grace"
	FlagExpectImageGC        = "expect-image-gc"
	// --eviction-request (docs/evictionrequest.md).
	FlagEvictionRequest     = config.FlagEvictionRequest
	FlagEvictionRequestWait = config.FlagEvictionRequestWait
	FlagGraceMargin         = "grace-margin"
	FlagInformerSyncTimeout = "informer-sync-timeout"
	FlagLockMemory          = "lock-memory"
	// --actuator (docs/actuator.md).
	FlagActuator = "actuator"
	// The node lease (docs/run.md, "One agent per node").
	FlagNodeLease          = "node-lease"
	FlagNodeLeaseNamespace = "node-lease-namespace"
	FlagNodeLeaseDuration  = "node-lease-duration"
	// The node brake (docs/run.md, "The node brake").
	FlagNodeBrake            = "node-brake"
	FlagNodeBrakeTaintEffect = "node-brake-taint-effect"
	// Placement above the kubelet's thresholds (kubelet_place.go).
	FlagKubeletThresholds = "kubelet-thresholds"
	FlagKubeletConfig     = "kubelet-config"
)

// NodeCgroupUsage is the help of --node-cgroup, shared by `evictd run` and
// `evictd observe`.
const NodeCgroupUsage = "Cgroup whose working set is the node's, for memory.available: the root \"/\", as the kubelet's, whatever --cgroup-root is. Name another only to make a cgroup stand for a node (tests); its memory limit then caps the node's capacity."

// Values of --kubelet-thresholds.
const (
	KubeletPlace  = "place"
	KubeletIgnore = "ignore"
)

// Wake-up source names of --wakeup-sources.
const (
	WakeupMemcg        = "memcg"
	WakeupPSI          = "psi"
	WakeupMemoryEvents = "memory-events"
	WakeupAdaptive     = "adaptive"
	WakeupNone         = "none"
)

// Defaults.
const (
	DefaultHousekeeping   = time.Second
	DefaultMetricsAddress = ":9731"
	DefaultWakeupSources  = WakeupMemcg + "," + WakeupPSI + "," + WakeupMemoryEvents + "," + WakeupAdaptive
)

// ErrUsage wraps errors that are the operator's to fix (flags, files,
// host root): `evictd run` exits 2 for them.
var ErrUsage = errors.New("bad usage")

// Options is everything `evictd run` is configured with. Fill it with the
// defaults (NewOptions), bind its flags, then Complete and Validate it.
type Options struct {
	NodeName   string
	Kubeconfig string
	HostRoot   string
	CgroupRoot string
	// NodeCgroup is the cgroup whose working set is the node's, for
	// memory.available: "/" as the kubelet's, whatever CgroupRoot is.
	NodeCgroup string
	ImageFs    string
	// ContainerFs is where the runtime keeps the writable layers; empty
	// means ImageFs (containerd).
	ContainerFs string
	// Housekeeping is the longest wait between observations.
	Housekeeping time.Duration
	MetricsAddr  string
	// SecureAddr serves /explain and /metrics over TLS to callers the API
	// server authenticates and authorizes (pkg/authdelegate); empty: off.
	SecureAddr string
	// TLSCertFile and TLSKeyFile are the secure port's certificate; none:
	// a self-signed one made at start (pkg/servingtls).
	TLSCertFile, TLSKeyFile string
	// SecureMetricsOnly: /metrics only on the secure port; the plain one
	// keeps /healthz and /readyz for the kubelet's probes.
	SecureMetricsOnly bool
	// WakeupSources is the --wakeup-sources list as given; Complete parses
	// it into Sources and Adaptive.
	WakeupSources string
	Sources       fastpath.Sources
	Adaptive      bool
	// PollMin is the fastest adaptive poll.
	PollMin time.Duration
	// ActEarly evicts when a hard memory threshold's crossing is predicted
	// within the eviction-to-gone time; FitGrace shortens grace periods to
	// the time left, keeping GraceMargin of it for the eviction itself.
	ActEarly    bool
	FitGrace    bool
	GraceMargin time.Duration
	// ExpectImageGC counts the node's unused images, less the pinned sandbox
	// image (imagegc.Pinned), as space the kubelet's image garbage
	// collection frees, on the image filesystem's signals.
	ExpectImageGC bool
	// EvictionRequest asks for soft evictions with a
	// lifecycle.k8s.io/v1alpha1 EvictionRequest; EvictionRequestWait is how
	// long a responder has before evictd uses the Eviction API itself.
	// Complete sets both from the config (its file fields and flags).
	EvictionRequest     bool
	EvictionRequestWait time.Duration
	// InformerSyncTimeout bounds the informers' initial list and watch; a
	// 403 Forbidden fails at once instead.
	InformerSyncTimeout time.Duration
	// LockMemory locks evictd's pages in RAM as they are touched, so the
	// node's thrash cannot page it out (pkg/memlock).
	LockMemory bool
	// Actuator lets evictd write the pod cgroups' memory limits: contain a
	// hard memory victim once its eviction is accepted, relax a container
	// stuck at memory.high (pkg/actuator). Off by default.
	Actuator bool
	// Shadow: a dry run that reports each pressure episode against the
	// kubelet's evictions and the kernel's OOM kills (pkg/shadow).
	Shadow bool
	// NodeLease makes evictd act only while it holds its node's Lease
	// (pkg/nodelease), in NodeLeaseNamespace, of NodeLeaseDuration.
	NodeLease          bool
	NodeLeaseNamespace string
	NodeLeaseDuration  time.Duration
	// NodeBrake sets evictd's condition and taint on its Node during each
	// pressure episode (pkg/nodebrake); NodeBrakeTaintEffect is the
	// taint's effect, or nodebrake.EffectNone for the condition only.
	// PreferNoSchedule by default: the scheduler's score still steers new
	// pods to other nodes that fit, while a taint left behind (an agent
	// gone mid-episode) can never make the node unschedulable.
	NodeBrake            bool
	NodeBrakeTaintEffect string
	// KubeletThresholds is KubeletPlace (read the node's kubelet
	// thresholds, move evictd's defaults above them) or KubeletIgnore.
	KubeletThresholds string
	// KubeletConfig is the kubelet's config file as a host path, in place
	// of the one its --config names; empty finds it.
	KubeletConfig string

	// Config holds the thresholds, priority groups, exclusions and
	// DaemonSet policy (file and kubelet-named flags).
	Config *config.Config
	// TraceSize bounds the trace of the agent's passes kept for a replay
	// (pkg/trace, /trace on the secure port), in bytes; 0: none.
	TraceSize int
	// Args are the command's flags as given, for the trace's header.
	Args []string

	// Evict holds the evictor's flags.
	Evict evict.Options

	includeDS *bool // --include-daemonset-pods, when given
	swapRank  *bool // --swap-in-ranking, when given
}

// NewOptions returns the defaults; NODE_NAME from the environment is the
// default node name, as the DaemonSet's downward API sets it.
func NewOptions() *Options {
	return &Options{
		NodeName:      os.Getenv("NODE_NAME"),
		HostRoot:      pressure.DefaultHostRoot,
		CgroupRoot:    pressure.DefaultCgroupRoot,
		NodeCgroup:    pressure.DefaultNodeCgroup,
		ImageFs:       pressure.DefaultImageFsPath,
		Housekeeping:  DefaultHousekeeping,
		MetricsAddr:   DefaultMetricsAddress,
		WakeupSources: DefaultWakeupSources,
		PollMin:       wakeup.DefaultPollMin,
		ActEarly:      true,
		FitGrace:      true,
		ExpectImageGC: true,
		// EvictionRequestWait: Complete sets it from the config, whose
		// default it is (config.DefaultEvictionRequestResponderWait).
		EvictionRequestWait: config.DefaultEvictionRequestResponderWait,
		LockMemory:          true,
		KubeletThresholds:   KubeletPlace,
		GraceMargin:         2 * time.Second,
		Config:              &config.Config{},
		Evict:               evict.Defaults(),

		InformerSyncTimeout: podwatch.DefaultSyncTimeout,

		NodeLease:          true,
		NodeLeaseNamespace: nodelease.DefaultNamespace,
		NodeLeaseDuration:  nodelease.DefaultDuration,

		NodeBrake:            true,
		NodeBrakeTaintEffect: string(v1.TaintEffectPreferNoSchedule),

		TraceSize: trace.DefaultBudget,
	}
}

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
	generic.BoolVar(&o.NodeLease, FlagNodeLease, o.NodeLease, "Act only while holding this node's coordination.k8s.io Lease (evictd-<node>), so that one evictd acts per node; another one waits, not ready. false: act regardless (tests; never with two agents on a node).")
	generic.StringVar(&o.NodeLeaseNamespace, FlagNodeLeaseNamespace, o.NodeLeaseNamespace, "Namespace of the node Lease; every install must use the same one, or two would both act.")
	generic.DurationVar(&o.NodeLeaseDuration, FlagNodeLeaseDuration, o.NodeLeaseDuration, "How long the node Lease lasts unrenewed; it is renewed every third of it, and another agent takes over this long after the holder vanished without releasing it.")
	generic.BoolVar(&o.NodeBrake, FlagNodeBrake, o.NodeBrake, "During each pressure episode, set evictd's condition (EvictdMemoryPressure, EvictdDiskPressure, EvictdPIDPressure) and taint (evictd.io/memory-pressure, disk-pressure, pid-pressure) on this node, and lift them when it ends: the scheduler brake the kubelet's MemoryPressure would have applied, had evictd not acted first. Needs patch on nodes and nodes/status (bounded to the own node by the shipped admission policy). Off, and in dry run, no brake is set, but one an earlier agent left on this node is still lifted (with the same grants).")
	generic.StringVar(&o.NodeBrakeTaintEffect, FlagNodeBrakeTaintEffect, o.NodeBrakeTaintEffect, "The brake's taint effect: PreferNoSchedule (the default: the scheduler steers new pods to other nodes that fit, and a taint left behind never makes the node unschedulable), NoSchedule (as the kubelet's: no new pod without a toleration lands here, nor a DaemonSet's pod without one in a rollout), or None (the condition only).")
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
		"Shadow mode (docs/shadow.md): a dry run (it implies --dry-run) that reports each pressure episode, what evictd would have evicted and when, against the kubelet's evictions (its Evicted Events) and the kernel's OOM kills: in the log and at /shadow on the secure port. Needs list and watch of events (the chart's shadow.enabled).")
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

// Complete merges what needs merging after parsing: the config file and
// flags (config.Complete), --include-daemonset-pods, the soft grace cap
// (config's --eviction-max-pod-grace-period, 0 meaning the pod's own),
// and the wake-up source list. Errors wrap ErrUsage.
func (o *Options) Complete() error {
	if o.Config == nil {
		o.Config = &config.Config{}
	}
	if err := o.Config.Complete(); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if o.swapRank != nil {
		o.Config.SwapInRanking = o.swapRank
	}
	if o.includeDS != nil {
		o.Config.IncludeDaemonSetPods = *o.includeDS
	}
	o.EvictionRequest, o.EvictionRequestWait = o.Config.EvictionRequest, o.Config.ResponderWait()
	if o.Shadow {
		o.Evict.DryRun = true // never evicts, whatever else is given
	}
	// --eviction-max-pod-grace-period (the kubelet's name): 0 leaves the
	// pod's own grace (the kubelet's 0 gives 1 s); the evictor takes a cap,
	// so "no cap" is the largest one.
	if g := o.Config.EvictionMaxPodGracePeriod; g > 0 {
		o.Evict.MaxPodGracePeriod = int64(g)
	} else {
		o.Evict.MaxPodGracePeriod = evict.NoGraceCap
	}
	src, adaptive, err := ParseWakeupSources(o.WakeupSources)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	o.Sources, o.Adaptive = src, adaptive
	return nil
}

// ParseWakeupSources parses --wakeup-sources.
func ParseWakeupSources(s string) (fastpath.Sources, bool, error) {
	var src fastpath.Sources
	adaptive := false
	items := strings.Split(s, ",")
	seen := map[string]bool{}
	for _, it := range items {
		it = strings.TrimSpace(it)
		if seen[it] {
			return src, false, fmt.Errorf("invalid --%s %q: %q is given twice", FlagWakeupSources, s, it)
		}
		seen[it] = true
		switch it {
		case WakeupMemcg:
			src.Memcg = true
		case WakeupPSI:
			src.PSI = true
		case WakeupMemoryEvents:
			src.MemoryEvents = true
		case WakeupAdaptive:
			adaptive = true
		case WakeupNone:
			if len(items) != 1 {
				return src, false, fmt.Errorf("invalid --%s %q: %q cannot be combined with other sources", FlagWakeupSources, s, WakeupNone)
			}
		default:
			return src, false, fmt.Errorf("invalid --%s %q: unknown source %q (want %s, %s, %s, %s, or %s alone)",
				FlagWakeupSources, s, it, WakeupMemcg, WakeupPSI, WakeupMemoryEvents, WakeupAdaptive, WakeupNone)
		}
	}
	return src, adaptive, nil
}

// Validate checks every option after Complete and returns the first
// problem, naming the flag and its value; it wraps ErrUsage.
func (o *Options) Validate() error {
	if err := o.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return nil
}

func (o *Options) validate() error {
	switch {
	case o.NodeName == "":
		return fmt.Errorf("--%s is required (or set NODE_NAME)", FlagNodeName)
	case len(validation.IsDNS1123Subdomain(o.NodeName)) > 0:
		return fmt.Errorf("invalid --%s %q: %s", FlagNodeName, o.NodeName, strings.Join(validation.IsDNS1123Subdomain(o.NodeName), "; "))
	case o.Housekeeping < 10*time.Millisecond || o.Housekeeping > 10*time.Minute:
		return fmt.Errorf("invalid --%s %v: must be within 10ms..10m", FlagHousekeeping, o.Housekeeping)
	case o.PollMin <= 0 || o.PollMin > o.Housekeeping:
		return fmt.Errorf("invalid --%s %v: must be more than 0 and at most --%s (%v)", FlagPollMin, o.PollMin, FlagHousekeeping, o.Housekeeping)
	case o.GraceMargin < 0:
		return fmt.Errorf("invalid --%s %v: must not be negative", FlagGraceMargin, o.GraceMargin)
	case o.InformerSyncTimeout <= 0:
		return fmt.Errorf("invalid --%s %v: must be more than 0", FlagInformerSyncTimeout, o.InformerSyncTimeout)
	case o.NodeLease && len(validation.IsDNS1123Label(o.NodeLeaseNamespace)) > 0:
		return fmt.Errorf("invalid --%s %q: %s", FlagNodeLeaseNamespace, o.NodeLeaseNamespace, strings.Join(validation.IsDNS1123Label(o.NodeLeaseNamespace), "; "))
	case o.NodeLease && (o.NodeLeaseDuration < nodelease.MinDuration || o.NodeLeaseDuration > 10*time.Minute || o.NodeLeaseDuration%time.Second != 0):
		return fmt.Errorf("invalid --%s %v: must be whole seconds within %v..10m", FlagNodeLeaseDuration, o.NodeLeaseDuration, nodelease.MinDuration)
	case o.HostRoot == "":
		return fmt.Errorf("invalid --%s %q: must name a directory", FlagHostRoot, o.HostRoot)
	case !validEffect(o.NodeBrakeTaintEffect):
		_, err := nodebrake.ParseEffect(o.NodeBrakeTaintEffect)
		return fmt.Errorf("invalid --%s: %w", FlagNodeBrakeTaintEffect, err)
	case o.KubeletThresholds != KubeletPlace && o.KubeletThresholds != KubeletIgnore:
		return fmt.Errorf("invalid --%s %q: want %s or %s", FlagKubeletThresholds, o.KubeletThresholds, KubeletPlace, KubeletIgnore)
	case o.KubeletConfig != "" && !strings.HasPrefix(o.KubeletConfig, "/"):
		return fmt.Errorf("invalid --%s %q: want an absolute path on the host", FlagKubeletConfig, o.KubeletConfig)
	case pressure.CheckAbsPath(o.CgroupRoot) != nil:
		return fmt.Errorf("invalid --%s %q: %v", FlagCgroupRoot, o.CgroupRoot, pressure.CheckAbsPath(o.CgroupRoot))
	case pressure.CheckAbsPath(o.NodeCgroup) != nil:
		return fmt.Errorf("invalid --%s %q: %v", FlagNodeCgroup, o.NodeCgroup, pressure.CheckAbsPath(o.NodeCgroup))
	case o.Kubeconfig != "":
		if _, err := os.Stat(o.Kubeconfig); err != nil {
			return fmt.Errorf("invalid --%s %q: %w", FlagKubeconfig, o.Kubeconfig, err)
		}
	}
	if err := validateAddress(FlagMetricsAddress, o.MetricsAddr); err != nil {
		return err
	}
	if o.SecureAddr != "" {
		if err := validateAddress(FlagSecureAddress, o.SecureAddr); err != nil {
			return err
		}
	}
	switch {
	case o.SecureMetricsOnly && o.SecureAddr == "":
		return fmt.Errorf("invalid --%s: it needs --%s (there would be no /metrics at all)", FlagSecureMetricsOnly, FlagSecureAddress)
	case (o.TLSCertFile == "") != (o.TLSKeyFile == ""):
		return fmt.Errorf("invalid --%s %q and --%s %q: give both or neither", FlagTLSCertFile, o.TLSCertFile, FlagTLSKeyFile, o.TLSKeyFile)
	case o.TLSCertFile != "" && o.SecureAddr == "":
		return fmt.Errorf("invalid --%s %q: it needs --%s", FlagTLSCertFile, o.TLSCertFile, FlagSecureAddress)
	case o.TraceSize < 0 || (o.TraceSize > 0 && o.TraceSize < trace.MinBudget) || o.TraceSize > trace.MaxBudget:
		return fmt.Errorf("invalid --%s %d: want 0 (no trace) or %d..%d bytes", FlagTraceSize, o.TraceSize, trace.MinBudget, trace.MaxBudget)
	}
	if o.Config == nil {
		return errors.New("no configuration: call Complete first")
	}
	if err := o.Evict.Validate(); err != nil {
		return err
	}
	if _, err := o.Config.Thresholds(); err != nil {
		return err
	}
	if _, err := o.Config.RankOptions(); err != nil {
		return err
	}
	return o.validateWindows()
}

// validateWindows refuses a --housekeeping-interval that leaves the
// memory.high family without readings inside its window. Nothing but the
// housekeeping timer wakes the loop for a quiet container, and the timer
// starts when a pass ends, so two readings are up to the interval plus a
// pass apart; the family takes a reading more than its window after the one
// before as a break and measures nothing across it. At most half the window
// leaves the other half for the pass. (The stall signals need no such
// bound: across a gap longer than their window they count the least stall
// it can have held, which at the kubelet's 10 s cadence and the default
// 10 s window is the pass's few milliseconds short of the interpolation.)
func (o *Options) validateWindows() error {
	h := o.Housekeeping
	if th := o.Config.MemoryHighThresholds(); th.Enabled() && h > th.Window/2 {
		return fmt.Errorf("invalid --%s %v: more than half of --%s %v (memoryHighWindow in --%s): a quiet container's readings could fall more than that window apart, and memory.high eviction measures nothing across such a gap",
			FlagHousekeeping, h, config.FlagMemoryHighWindow, th.Window, config.FlagConfig)
	}
	return nil
}

func validateAddress(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid --%s %q: want [host]:port", flag, addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Errorf("invalid --%s %q: port %q is not a number in 0..65535", flag, addr, port)
	}
	if host != "" && net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(host)) > 0 {
		return fmt.Errorf("invalid --%s %q: host %q is neither an IP address nor a host name", flag, addr, host)
	}
	return nil
}

func validEffect(s string) bool {
	_, err := nodebrake.ParseEffect(s)
	return err == nil
}

// Thresholds is the configuration's thresholds, the memory.high family's
// included; validated before, so no error.
func (o *Options) Thresholds() []thresholds.Threshold {
	ths, _ := o.Config.Thresholds()
	if mh := o.Config.MemoryHighThresholds(); mh.Enabled() {
		ths = append(ths, family.MemHighThreshold(mh))
	}
	return ths
}

// CloneConfig is a copy of c whose threshold maps placement may change.
func CloneConfig(c *config.Config) *config.Config {
	cp := *c
	cp.EvictionHard = maps.Clone(c.EvictionHard)
	cp.EvictionMinimumReclaim = maps.Clone(c.EvictionMinimumReclaim)
	return &cp
}
