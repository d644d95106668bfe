// SPDX-License-Identifier: Apache-2.0

package options

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/trace"
)

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
func ParseWakeupSources(s string) (wakeup.Sources, bool, error) {
	var src wakeup.Sources
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
	case installErr(o.Install) != nil:
		return fmt.Errorf("invalid --%s: %w", FlagInstall, installErr(o.Install))
	case o.NodeLease && len(validation.IsDNS1123Label(o.NodeLeaseNamespace)) > 0:
		return fmt.Errorf("invalid --%s %q: %s", FlagNodeLeaseNamespace, o.NodeLeaseNamespace, strings.Join(validation.IsDNS1123Label(o.NodeLeaseNamespace), "; "))
	case o.NodeLease && (o.NodeLeaseDuration < nodelease.MinDuration || o.NodeLeaseDuration > 10*time.Minute || o.NodeLeaseDuration%time.Second != 0):
		return fmt.Errorf("invalid --%s %v: must be whole seconds within %v..10m", FlagNodeLeaseDuration, o.NodeLeaseDuration, nodelease.MinDuration)
	case o.NodeLease && (o.NodeLeaseIdle < o.NodeLeaseDuration || o.NodeLeaseIdle > nodelease.MaxIdleDuration || o.NodeLeaseIdle%time.Second != 0):
		return fmt.Errorf("invalid --%s %v: must be whole seconds within --%s (%v) and %v", FlagNodeLeaseIdle, o.NodeLeaseIdle, FlagNodeLeaseDuration, o.NodeLeaseDuration, nodelease.MaxIdleDuration)
	case o.HostRoot == "":
		return fmt.Errorf("invalid --%s %q: must name a directory", FlagHostRoot, o.HostRoot)
	case !validEffect(o.NodeBrakeTaintEffect):
		_, err := nodebrake.ParseEffect(o.NodeBrakeTaintEffect)
		return fmt.Errorf("invalid --%s: %w", FlagNodeBrakeTaintEffect, err)
	case o.Sandbox != SandboxSeccomp && o.Sandbox != SandboxNone:
		return fmt.Errorf("invalid --%s %q: want %s or %s", FlagSandbox, o.Sandbox, SandboxSeccomp, SandboxNone)
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

// installErr checks --install (package install).
func installErr(id string) error {
	_, err := install.Parse(id)
	return err
}
