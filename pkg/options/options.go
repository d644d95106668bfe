// SPDX-License-Identifier: Apache-2.0

// Package options is everything `evictd run` is configured with: its
// flags, the EvictdConfiguration file under them (pkg/config), defaults
// and validation, and the options a trace's header (pkg/trace) rebuilds
// for a replay. The loop (pkg/agent) and the wiring (cmd/evictd/app) are
// built from one validated Options.
package options

import (
	"errors"
	"maps"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/kube"
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
	FlagSandbox             = "sandbox"
	// --actuator (docs/actuator.md).
	FlagActuator = "actuator"
	// The install the agent belongs to (docs/install.md, "Two installs").
	FlagInstall = "install"
	// The node lease (docs/run.md, "One agent per node").
	FlagNodeLease          = "node-lease"
	FlagNodeLeaseNamespace = "node-lease-namespace"
	FlagNodeLeaseDuration  = "node-lease-duration"
	FlagNodeLeaseIdle      = "node-lease-idle-duration"
	// The node brake (docs/run.md, "The node brake").
	FlagNodeBrake            = "node-brake"
	FlagNodeBrakeTaintEffect = "node-brake-taint-effect"
	// Placement above the kubelet's thresholds (pkg/kubeletplace).
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

// Values of --sandbox: cmd/evictd/app/sandbox's kinds (its tests hold the
// two lists equal; options cannot import a room of the process's tier).
const (
	SandboxSeccomp = "seccomp"
	SandboxNone    = "none"
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
	Sources       wakeup.Sources
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
	// Sandbox is the sandbox evictd puts its own process in at start
	// (SandboxSeccomp: the file-handle calls refused) or SandboxNone.
	Sandbox string
	// Actuator lets evictd write the pod cgroups' memory limits: contain a
	// hard memory victim once its eviction is accepted, relax a container
	// stuck at memory.high (pkg/actuator). Off by default.
	Actuator bool
	// Shadow: a dry run that reports each pressure episode against the
	// kubelet's evictions and the kernel's OOM kills (pkg/shadow).
	Shadow bool
	// Install is the install the agent belongs to, its DaemonSet's
	// "NAMESPACE/NAME" (package install): what the agent writes names it.
	Install string
	// NodeLease makes evictd act only while it holds its node's Lease
	// (pkg/nodelease), in NodeLeaseNamespace, of NodeLeaseDuration.
	NodeLease          bool
	NodeLeaseNamespace string
	NodeLeaseDuration  time.Duration
	// NodeLeaseIdle is the Lease's duration with no pressure near: the
	// idle pace, renewed every third of it.
	NodeLeaseIdle time.Duration
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
		Sandbox:             SandboxSeccomp,
		KubeletThresholds:   KubeletPlace,
		GraceMargin:         2 * time.Second,
		Config:              &config.Config{},
		Evict:               evict.Defaults(),

		InformerSyncTimeout: kube.DefaultSyncTimeout,

		Install: install.Default(),

		NodeLease:          true,
		NodeLeaseNamespace: nodelease.DefaultNamespace(),
		NodeLeaseDuration:  nodelease.DefaultDuration,
		NodeLeaseIdle:      nodelease.DefaultIdleDuration,

		NodeBrake:            true,
		NodeBrakeTaintEffect: string(v1.TaintEffectPreferNoSchedule),

		TraceSize: trace.DefaultBudget,
	}
}

// Thresholds is the configuration's thresholds, the memory.high family's
// included; validated before, so no error.
func (o *Options) Thresholds() []thresholds.Threshold {
	ths, _ := o.Config.Thresholds()
	if mh := o.Config.MemoryHighThresholds(); mh.Enabled() {
		ths = append(ths, mh.Threshold())
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
