// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/thresholds"
)

// Flag names, as the kubelet spells them.
const (
	FlagConfig                   = "config"
	FlagEvictionHard             = "eviction-hard"
	FlagEvictionSoft             = "eviction-soft"
	FlagEvictionSoftGracePeriod  = "eviction-soft-grace-period"
	FlagEvictionMinimumReclaim   = "eviction-minimum-reclaim"
	FlagEvictionMaxPodGrace      = "eviction-max-pod-grace-period"
	FlagEvictionPressureTransPer = "eviction-pressure-transition-period"
	FlagEvictionStallWindow      = "eviction-stall-window"
	// FlagHugepageAwareEviction mirrors the kubelet's feature gate of that
	// name: evictd's own flag, for a kubelet with the gate off.
	FlagHugepageAwareEviction = "hugepage-aware-eviction"

	// The memory.high family's (docs/memhigh.md): evictd's own.
	FlagMemoryHighEviction    = "memory-high-eviction"
	FlagMemoryHighEventRate   = "memory-high-event-rate"
	FlagMemoryHighMaxRate     = "memory-high-max-event-rate"
	FlagMemoryHighPressure    = "memory-high-pressure-some"
	FlagMemoryHighWindow      = "memory-high-window"
	FlagMemoryHighGracePeriod = "memory-high-grace-period"
)

// flagValues holds what the flags said until Complete merges it.
type flagValues struct {
	configFile string
	hard       map[string]string
	soft       map[string]string
	grace      map[string]string
	minReclaim map[string]string
	maxGrace   int32
	transition time.Duration
	stall      time.Duration
	// The scalar flags override the file only when given.
	maxGraceFlag, transitionFlag, stallFlag *pflag.Flag
	memHigh                                 memHighFlags
	evictReq                                evictReqFlags

	// --hugepage-aware-eviction, applied only when given.
	hugepageAware     bool
	hugepageAwareFlag *pflag.Flag
}

// memHighFlags are the memory.high flags, each applied only when given.
type memHighFlags struct {
	on                bool
	highRate, maxRate float64
	pressure          string
	window, grace     time.Duration
	onF, highF, maxF  *pflag.Flag
	pressureF         *pflag.Flag
	windowF, graceF   *pflag.Flag
}

func (m *memHighFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&m.on, FlagMemoryHighEviction, false,
		"Evict the pod of a container stuck at its memory.high (cgroup v2; docs/memhigh.md). Off by default; the --memory-high-* flags tune it.")
	fs.Float64Var(&m.highRate, FlagMemoryHighEventRate, DefaultMemoryHighEventRate,
		"memory.events high per second over --"+FlagMemoryHighWindow+" above which a container is over memory.high; 0 leaves this signal out.")
	fs.Float64Var(&m.maxRate, FlagMemoryHighMaxRate, DefaultMemoryHighMaxEventRate,
		"memory.events max per second over --"+FlagMemoryHighWindow+" above which a container with memory.high set is over; 0 leaves this signal out.")
	fs.StringVar(&m.pressure, FlagMemoryHighPressure, DefaultMemoryHighPressureSome,
		"Share of --"+FlagMemoryHighWindow+" a container's tasks stalled on memory (memory.pressure some) above which it is over; 0% leaves this signal out.")
	fs.DurationVar(&m.window, FlagMemoryHighWindow, DefaultMemoryHighWindow,
		"Window of the memory.high rates and share.")
	fs.DurationVar(&m.grace, FlagMemoryHighGracePeriod, DefaultMemoryHighGracePeriod,
		"How long a container must stay over a memory.high threshold before its pod is evicted.")
	m.onF, m.highF, m.maxF = fs.Lookup(FlagMemoryHighEviction), fs.Lookup(FlagMemoryHighEventRate), fs.Lookup(FlagMemoryHighMaxRate)
	m.pressureF, m.windowF, m.graceF = fs.Lookup(FlagMemoryHighPressure), fs.Lookup(FlagMemoryHighWindow), fs.Lookup(FlagMemoryHighGracePeriod)
}

// apply overrides c's memory.high fields with the flags given.
func (m *memHighFlags) apply(c *Config) {
	for _, o := range []struct {
		flag *pflag.Flag
		set  func()
	}{
		{m.onF, func() { c.MemoryHighEviction = m.on }},
		{m.highF, func() { c.MemoryHighEventRate = &m.highRate }},
		{m.maxF, func() { c.MemoryHighMaxEventRate = &m.maxRate }},
		{m.pressureF, func() { c.MemoryHighPressureSome = m.pressure }},
		{m.windowF, func() { c.MemoryHighWindow = &metav1.Duration{Duration: m.window} }},
		{m.graceF, func() { c.MemoryHighGracePeriod = &metav1.Duration{Duration: m.grace} }},
	} {
		if o.flag != nil && o.flag.Changed {
			o.set()
		}
	}
}

// BindFlags registers --config on file, the kubelet's threshold flags on
// thresholds, and --eviction-max-pod-grace-period and --eviction-request's
// two on eviction (the sections
// of `evictd run --help`; pass one flag set three times where sections do
// not matter). After parsing, call Complete. A map flag may be repeated; its
// entries add up.
//
// The config owns --eviction-max-pod-grace-period, not the evictor: it is a
// field of the file as well, and a flag given overrides the file.
func (c *Config) BindFlags(file, thresholdFlags, eviction *pflag.FlagSet) {
	f := &flagValues{}
	c.flags = f
	file.StringVar(&f.configFile, FlagConfig, "", "Path of an EvictdConfiguration file (apiVersion "+APIVersion+"); flags given on the command line override it.")
	thresholdFlags.Var(&signalMapValue{dst: &f.hard, split: thresholds.SplitStatements}, FlagEvictionHard,
		"Hard thresholds, e.g. memory.available<500Mi,nodefs.available<10%. Signals not named keep their defaults ("+thresholds.JoinStatements(DefaultEvictionHard())+"; allocatableMemory.available follows memory.available, as in the kubelet); SIGNAL<none disables one. The memory stall signals take a share of time stalled: memory.pressureSome>40% (docs/stall.md).")
	thresholdFlags.Var(&signalMapValue{dst: &f.soft, split: thresholds.SplitStatements}, FlagEvictionSoft,
		"Soft thresholds, same syntax as --"+FlagEvictionHard+"; each needs a grace period.")
	thresholdFlags.Var(&signalMapValue{dst: &f.grace, split: thresholds.SplitPairs}, FlagEvictionSoftGracePeriod,
		"Grace periods of the soft thresholds, e.g. memory.available=1m30s.")
	thresholdFlags.Var(&signalMapValue{dst: &f.minReclaim, split: thresholds.SplitPairs}, FlagEvictionMinimumReclaim,
		"Minimum reclaim per signal, e.g. nodefs.available=500Mi,memory.available=5%.")
	thresholdFlags.DurationVar(&f.transition, FlagEvictionPressureTransPer, DefaultPressureTransitionPeriod,
		"How long a pressure condition stays after its thresholds cleared.")
	f.transitionFlag = thresholdFlags.Lookup(FlagEvictionPressureTransPer)
	thresholdFlags.DurationVar(&f.stall, FlagEvictionStallWindow, DefaultStallWindow,
		"Window over which the stall signals (memory.pressureSome>P%, ...) measure the share of time stalled on memory.")
	f.stallFlag = thresholdFlags.Lookup(FlagEvictionStallWindow)
	thresholdFlags.BoolVar(&f.hugepageAware, FlagHugepageAwareEviction, true,
		"Take the node's hugepage pool off memory.available and its capacity, as the kubelet does with its HugepageAwareEviction feature gate (on by default from 1.37). Set it false when the node's kubelet has the gate off.")
	f.hugepageAwareFlag = thresholdFlags.Lookup(FlagHugepageAwareEviction)
	f.memHigh.bind(thresholdFlags)
	eviction.Var(&secondsValue{dst: &f.maxGrace}, FlagEvictionMaxPodGrace,
		"Longest grace period, in seconds, given to a pod evicted for a soft threshold: min(pod's terminationGracePeriodSeconds, this). 0, the default, gives each pod its own terminationGracePeriodSeconds.")
	f.maxGraceFlag = eviction.Lookup(FlagEvictionMaxPodGrace)
	f.evictReq.bind(eviction)
}

// signalMapValue is a repeatable flag of signal entries, the kubelet's
// mapStringString.
//
// The kubelet's own types (k8s.io/component-base/cli/flag:
// LangleSeparatedMapStringString for --eviction-hard, MapStringString for
// the grace periods) cost nothing measurable (+57 kB of binary, no change in
// idle RSS; docs/performance.md) but accept what evictd refuses and refuse
// what it reads: a signal given twice keeps the last value silently,
// "memory.available<=1Gi" is the value "=1Gi", and a stall signal's ">" is
// malformed. Keeping evictd's answers would put its own parser in front of
// theirs on every value, so thresholds.SplitStatements and SplitPairs stay
// the parser.
// TestThresholdFlagsReadAsTheKubelet runs both on the same values: where the
// kubelet accepts one, evictd reads the same map.
type signalMapValue struct {
	dst   *map[string]string
	split func(string) (map[string]string, error)
}

func (v *signalMapValue) Set(s string) error {
	m, err := v.split(s)
	if err != nil {
		return err
	}
	return mergeFlag(v.dst, m)
}

// String lists the entries sorted, so help and errors read the same each time.
func (v *signalMapValue) String() string {
	if v.dst == nil || len(*v.dst) == 0 {
		return ""
	}
	keys := make([]string, 0, len(*v.dst))
	for k := range *v.dst {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + (*v.dst)[k]
	}
	return strings.Join(parts, ",")
}

// Type is the kubelet's name for these flags' type.
func (v *signalMapValue) Type() string { return "mapStringString" }

// secondsValue is a whole number of seconds that fits the kubelet's int32.
type secondsValue struct{ dst *int32 }

func (v *secondsValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		// pflag's error already quotes the value.
		return errors.New("not a whole number of seconds in the int32 range")
	}
	*v.dst = int32(n)
	return nil
}

func (v *secondsValue) String() string { return strconv.FormatInt(int64(*v.dst), 10) }

func (v *secondsValue) Type() string { return "int32" }

func mergeFlag(dst *map[string]string, m map[string]string) error {
	if *dst == nil {
		*dst = map[string]string{}
	}
	for k, v := range m {
		if _, dup := (*dst)[k]; dup {
			return fmt.Errorf("signal %s is given twice (the kubelet keeps the last one given; give it once)", k)
		}
		(*dst)[k] = v
	}
	return nil
}

// Complete finishes a Config whose flags were bound and parsed: it loads
// --config (replacing c's fields) when given, lets every flag that was set
// override the file per signal, fills in the defaults and validates. Without
// BindFlags it only defaults and validates.
func (c *Config) Complete() error {
	f := c.flags
	if f != nil && f.configFile != "" {
		loaded, err := readFile(f.configFile)
		if err != nil {
			return err
		}
		loaded.flags = f
		*c = *loaded
	}
	if f != nil {
		c.EvictionHard = overlay(c.EvictionHard, f.hard)
		c.EvictionSoft = overlay(c.EvictionSoft, f.soft)
		c.EvictionSoftGracePeriod = overlay(c.EvictionSoftGracePeriod, f.grace)
		c.EvictionMinimumReclaim = overlay(c.EvictionMinimumReclaim, f.minReclaim)
		if f.maxGraceFlag != nil && f.maxGraceFlag.Changed {
			c.EvictionMaxPodGracePeriod = f.maxGrace
		}
		if f.transitionFlag != nil && f.transitionFlag.Changed {
			c.EvictionPressureTransitionPeriod = &metav1.Duration{Duration: f.transition}
		}
		if f.stallFlag != nil && f.stallFlag.Changed {
			c.EvictionStallWindow = &metav1.Duration{Duration: f.stall}
		}
		if f.hugepageAwareFlag != nil && f.hugepageAwareFlag.Changed {
			aware := f.hugepageAware
			c.HugepageAwareEviction = &aware
		}
		f.memHigh.apply(c)
		f.evictReq.apply(c)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		if f != nil && f.configFile != "" {
			return fmt.Errorf("config %s (with flags): %w", f.configFile, err)
		}
		return err
	}
	return nil
}

func overlay(base SignalMap, over map[string]string) SignalMap {
	if len(over) == 0 {
		return base
	}
	out := make(SignalMap, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
