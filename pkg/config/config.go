// SPDX-License-Identifier: Apache-2.0

// Package config is evictd's configuration: the EvictdConfiguration file,
// the kubelet-named flags that override it, defaults and validation. The
// order is fixed: strict decoding, flag overrides, defaults, validation.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The file's type, which must be given exactly.
const (
	APIVersion = "evictd.io/v1alpha1"
	Kind       = "EvictdConfiguration"
)

// DefaultPressureTransitionPeriod is the kubelet's default, kept so that
// evictd's pressure state and the node's conditions agree.
const DefaultPressureTransitionPeriod = 5 * time.Minute

// DefaultStallWindow is the stall signals' window: PSI's shortest average
// (avg10), and the longest window a PSI trigger accepts, so a trigger can
// watch exactly what the threshold measures.
const DefaultStallWindow = 10 * time.Second

// The stall window's bounds: under a second PSI's totals move in steps of
// the scheduler's accounting; past five minutes a stall victim waits too
// long for the next (one per window).
const (
	MinStallWindow = time.Second
	MaxStallWindow = 5 * time.Minute
)

// DefaultEvictionHard returns evictd's default hard thresholds. Each acts
// before the kubelet's own default (memory.available<100Mi,
// nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%,
// imagefs.inodesFree<5%, no PID threshold), because evictd is meant to be
// the one that evicts: through the Eviction API, honouring
// PodDisruptionBudgets and grace periods. The kubelet's thresholds stay as
// the backstop, with a margin between the two for an evicted pod to
// terminate before the kubelet kills without asking:
//
//   - memory.available<300Mi and allocatableMemory.available<300Mi: an
//     absolute margin, so evictd acts 200Mi ahead of the kubelet on every
//     node size (a percentage would fall below 100Mi on small nodes); the
//     kubelet adds the allocatable threshold itself for every hard memory
//     one, so evictd derives it the same way (deriveAllocatable).
//   - nodefs.available<15% and 10% for both inode signals: the kubelet's
//     values plus five points.
//   - imagefs.available<15%, where the kubelet's own is: not five points
//     above it, because the kubelet's image garbage collection starts there
//     (imageGCHighThresholdPercent, 85 % used), and a disk episode, taint
//     included, must not open on a healthy node before the collection has
//     had its turn. There the kubelet's eviction manager deletes unused
//     images before it evicts anyone, and evictd counts them as that
//     reclaim (--expect-image-gc), so unused images still go before any pod.
//     nodefs.available<15% is the same point on a one-disk node.
//     Placement keeps both at or below the node's own collection threshold
//     (kubeletcfg.Place).
//   - pid.available<10%: the kubelet has none at all (kubernetes#98206),
//     and a fork bomb takes a node down faster than any other signal.
//
// Every signal not named in the file or flags keeps its default (unlike the
// kubelet, kubernetes#119985); the value "none" switches one off.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		string(thresholds.MemoryAvailable): "300Mi",
		// allocatableMemory.available follows memory.available
		// (deriveAllocatable), 300Mi by default with it.
		string(thresholds.NodeFsAvailable):   "15%",
		string(thresholds.NodeFsInodesFree):  "10%",
		string(thresholds.ImageFsAvailable):  "15%",
		string(thresholds.ImageFsInodesFree): "10%",
		string(thresholds.PIDAvailable):      "10%",
	}
}

// Config is the EvictdConfiguration file, and what the flags override.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	// The thresholds, as the kubelet's configuration spells them: signal
	// name to "500Mi", "10%" or "none" (hard, soft, minimum reclaim), and
	// signal name to a duration such as "1m30s" (grace periods).
	EvictionHard            SignalMap `json:"evictionHard,omitempty"`
	EvictionSoft            SignalMap `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod SignalMap `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMinimumReclaim  SignalMap `json:"evictionMinimumReclaim,omitempty"`

	// EvictionMaxPodGracePeriod caps, in seconds, the grace period given to
	// pods evicted for a soft threshold; 0 leaves the pod's own
	// terminationGracePeriodSeconds. Negative values are rejected (the
	// kubelet's −1 means SIGKILL, which its help text does not say).
	EvictionMaxPodGracePeriod int32 `json:"evictionMaxPodGracePeriod,omitempty"`

	// EvictionPressureTransitionPeriod is how long a pressure condition
	// stays after its thresholds cleared; default 5m.
	EvictionPressureTransitionPeriod *metav1.Duration `json:"evictionPressureTransitionPeriod,omitempty"`

	// EvictionStallWindow is the window the stall signals' shares are
	// measured over (docs/stall.md); default 10s, within 1s..5m.
	EvictionStallWindow *metav1.Duration `json:"evictionStallWindow,omitempty"`

	// MemoryHighEviction switches on the eviction of pods with a
	// container stuck at its memory.high (docs/memhigh.md); off by
	// default. The MemoryHigh* fields below tune it (and are refused
	// without it); a rate or share of 0 leaves its signal out.
	MemoryHighEviction bool `json:"memoryHighEviction,omitempty"`
	// MemoryHighEventRate is memory.events high per second over the
	// window above which a container is over; default 10.
	MemoryHighEventRate *float64 `json:"memoryHighEventRate,omitempty"`
	// MemoryHighMaxEventRate is memory.events max per second; default 1.
	MemoryHighMaxEventRate *float64 `json:"memoryHighMaxEventRate,omitempty"`
	// MemoryHighPressureSome is the share of the window the container's
	// tasks stalled on memory (memory.pressure some); default "10%".
	MemoryHighPressureSome string `json:"memoryHighPressureSome,omitempty"`
	// MemoryHighWindow is what the rates and share are measured over;
	// default 30s, within 1s..5m.
	MemoryHighWindow *metav1.Duration `json:"memoryHighWindow,omitempty"`
	// MemoryHighGracePeriod is how long a container must stay over
	// before its pod is evicted; default 1m.
	MemoryHighGracePeriod *metav1.Duration `json:"memoryHighGracePeriod,omitempty"`

	// EvictionRequest asks for soft evictions with a
	// lifecycle.k8s.io/v1alpha1 EvictionRequest (docs/evictionrequest.md);
	// off by default. EvictionRequestResponderWait is how long a responder
	// has before evictd evicts through the Eviction API itself; default 1m,
	// within 1s..1h.
	EvictionRequest              bool             `json:"evictionRequest,omitempty"`
	EvictionRequestResponderWait *metav1.Duration `json:"evictionRequestResponderWait,omitempty"`

	// PriorityGroups, in order: for a namespace matched only by selectors,
	// the first matching group wins.
	PriorityGroups []PriorityGroup `json:"priorityGroups,omitempty"`

	// ExcludedNamespaces are never evicted from.
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`

	// OptOut names the namespaces whose pods may keep evictd away with
	// the evictd.io/evict: "false" annotation. A pod's author writes the
	// annotation; the operator decides whose is honoured. Nil: nobody's.
	OptOut *OptOut `json:"optOut,omitempty"`

	// IncludeDaemonSetPods makes DaemonSet pods eligible; by default they
	// are skipped because their controller recreates them on the same node.
	IncludeDaemonSetPods bool `json:"includeDaemonSetPods,omitempty"`

	// SwapInRanking ranks pods for the memory signals by footprint, working
	// set + swap (the default, nil or true), or, false, by working set
	// alone, as the kubelet does. It changes nothing on a node without swap.
	SwapInRanking *bool `json:"swapInRanking,omitempty"`

	// HugepageAwareEviction takes the node's hugepage pool off
	// memory.available and its capacity (the default, nil or true), as the
	// kubelet does with its HugepageAwareEviction feature gate, beta and on
	// by default from Kubernetes 1.37; false for a node whose kubelet has
	// the gate off, so that evictd sees what that kubelet sees.
	HugepageAwareEviction *bool `json:"hugepageAwareEviction,omitempty"`

	flags *flagValues
	// sourcePath and source are the file the config was read from, and
	// its bytes (a trace's header keeps them).
	sourcePath string
	source     []byte
	// allocDerived, allocReclaimDerived: SetDefaults derived
	// allocatableMemory.available's threshold and minimum reclaim from
	// memory.available's (deriveAllocatable).
	allocDerived, allocReclaimDerived bool
	// hardDefaulted: the EvictionHard signals SetDefaults filled, which
	// placement above the kubelet's may move (placed.go).
	hardDefaulted map[string]bool
}

// SignalMap maps signal names to values. In the file a value may be a
// string ("500Mi") or a bare number (pid.available: 1000), which YAML would
// otherwise turn into a type error that names no signal.
type SignalMap map[string]string

// UnmarshalJSON accepts strings and numbers, keeping a number's text.
func (m *SignalMap) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		// A type error without an offset: the decoder adds the field's
		// name, and decode says it wants a map.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &json.UnmarshalTypeError{Value: te.Value, Type: reflect.TypeOf(SignalMap{})}
		}
		return fmt.Errorf("want a map of signal to value: %w", err)
	}
	if raw == nil {
		*m = nil
		return nil
	}
	out := make(SignalMap, len(raw))
	for k, v := range raw {
		v = bytes.TrimSpace(v)
		switch {
		case len(v) > 0 && v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			out[k] = s
		case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
			out[k] = string(v)
		default:
			return fmt.Errorf("%s: value %s is not a string or number", k, v)
		}
	}
	*m = out
	return nil
}

// PriorityGroup is one group of namespaces (see rank.PriorityGroup).
type PriorityGroup struct {
	Name              string                `json:"name"`
	Namespaces        []string              `json:"namespaces,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	Offset            int32                 `json:"offset,omitempty"`
	Fence             bool                  `json:"fence,omitempty"`
}

// OptOut is who may opt out of eviction: the namespaces listed, and those
// whose labels the selector matches (an empty selector matches every
// namespace).
type OptOut struct {
	Namespaces        []string              `json:"namespaces,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// Default returns a valid configuration with every default set.
func Default() *Config {
	c := &Config{}
	c.SetDefaults()
	return c
}

// Load reads, strictly decodes, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	c, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Decode strictly decodes data (YAML or JSON), then defaults and validates.
func Decode(data []byte) (*Config, error) {
	c, err := decode(data)
	if err != nil {
		return nil, err
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func readFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.sourcePath, c.source = path, data
	return c, nil
}

// Source is the file the config was read from and its bytes; "" and nil
// when it was not read from a file.
func (c *Config) Source() (path string, data []byte) { return c.sourcePath, c.source }

// decode is strict the way the kubelet's own config is: unknown fields,
// duplicate fields and fields in the wrong case are errors, and the type
// must be named exactly.
func decode(data []byte) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty file; want apiVersion: " + APIVersion + ", kind: " + Kind)
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, oneLine(err)
	}
	c := &Config{}
	strict, err := kjson.UnmarshalStrict(js, c)
	if err != nil {
		return nil, oneLine(describeDecodeError(js, err))
	}
	if len(strict) > 0 {
		return nil, oneLine(strict[0])
	}
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want apiVersion %s, kind %s", c.APIVersion, c.Kind, APIVersion, Kind)
	}
	return c, nil
}

// oneLine keeps decoder errors, which may quote multi-line input, to the
// single line the CLI contract asks for.
func oneLine(err error) error {
	return errors.New(strings.Join(strings.Fields(err.Error()), " "))
}

// deriveAllocatable gives allocatableMemory.available, unless it is named,
// the hard memory.available threshold (and its minimum reclaim), as the
// kubelet's addAllocatableThresholds (pkg/kubelet/eviction/helpers.go) adds
// one for every hard memory.available threshold when it enforces node
// allocatable for pods. A value it derived is derived again on the next
// SetDefaults, so that a flag given after the defaults moves both.
func deriveAllocatable(c *Config) {
	mem, alloc := string(thresholds.MemoryAvailable), string(thresholds.AllocatableMemoryAvailable)
	v, memSet := c.EvictionHard[mem]
	if _, set := c.EvictionHard[alloc]; (set && !c.allocDerived) || !memSet {
		return
	}
	if _, err := thresholds.ParseValue(v); err != nil && strings.TrimSpace(v) != thresholds.Disabled &&
		!thresholds.SwitchedOff(thresholds.MemoryAvailable, v) {
		return // a bad value: the error is memory.available's, not a copy's
	}
	c.EvictionHard[alloc] = v
	c.allocDerived = true
	if _, set := c.EvictionMinimumReclaim[alloc]; set && !c.allocReclaimDerived {
		return
	}
	if r, ok := c.EvictionMinimumReclaim[mem]; ok {
		c.EvictionMinimumReclaim[alloc] = r
		c.allocReclaimDerived = true
	} else if c.allocReclaimDerived {
		delete(c.EvictionMinimumReclaim, alloc)
	}
}

// SetDefaults fills what is unset: every signal missing from EvictionHard
// gets its default (see DefaultEvictionHard), and the transition period 5m.
func (c *Config) SetDefaults() {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if c.EvictionHard == nil {
		c.EvictionHard = SignalMap{}
	}
	for k, v := range DefaultEvictionHard() {
		if _, set := c.EvictionHard[k]; !set {
			c.EvictionHard[k] = v
			c.markDefaulted(k)
		}
	}
	deriveAllocatable(c)
	if c.EvictionPressureTransitionPeriod == nil {
		c.EvictionPressureTransitionPeriod = &metav1.Duration{Duration: DefaultPressureTransitionPeriod}
	}
	if c.EvictionStallWindow == nil {
		c.EvictionStallWindow = &metav1.Duration{Duration: DefaultStallWindow}
	}
}

// Validate checks everything and returns the first problem, naming the bad
// value.
func (c *Config) Validate() error {
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return fmt.Errorf("apiVersion %q, kind %q: want apiVersion %s, kind %s", c.APIVersion, c.Kind, APIVersion, Kind)
	}
	if _, err := c.Thresholds(); err != nil {
		return err
	}
	if c.EvictionMaxPodGracePeriod < 0 {
		return fmt.Errorf("evictionMaxPodGracePeriod %d must not be negative (the kubelet 1.37 takes a negative value as 1 s, as 0; evictd's 0 is the pod's own grace, docs/decide.md)", c.EvictionMaxPodGracePeriod)
	}
	if c.EvictionPressureTransitionPeriod != nil && c.EvictionPressureTransitionPeriod.Duration < 0 {
		return fmt.Errorf("evictionPressureTransitionPeriod %s must not be negative", c.EvictionPressureTransitionPeriod.Duration)
	}
	if w := c.StallWindow(); w < MinStallWindow || w > MaxStallWindow {
		return fmt.Errorf("evictionStallWindow %s must be within %s..%s", w, MinStallWindow, MaxStallWindow)
	}
	if err := c.validateMemoryHigh(); err != nil {
		return err
	}
	if err := c.validateEvictionRequest(); err != nil {
		return err
	}
	for i, ns := range c.ExcludedNamespaces {
		if err := checkNamespace(ns); err != nil {
			return fmt.Errorf("excludedNamespaces[%d]: %w", i, err)
		}
	}
	if err := c.validateOptOut(); err != nil {
		return err
	}
	return c.validateGroups()
}

func (c *Config) validateOptOut() error {
	o := c.OptOut
	if o == nil {
		return nil
	}
	if len(o.Namespaces) == 0 && o.NamespaceSelector == nil {
		return errors.New("optOut: needs namespaces or a namespaceSelector (leave optOut out to let no pod opt out)")
	}
	seen := map[string]bool{}
	for i, ns := range o.Namespaces {
		if err := checkNamespace(ns); err != nil {
			return fmt.Errorf("optOut.namespaces[%d]: %w", i, err)
		}
		if seen[ns] {
			return fmt.Errorf("optOut.namespaces[%d]: namespace %q is listed twice", i, ns)
		}
		seen[ns] = true
	}
	if o.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(o.NamespaceSelector); err != nil {
			return fmt.Errorf("optOut.namespaceSelector: %w", oneLine(err))
		}
	}
	return nil
}

func (c *Config) validateGroups() error {
	names := map[string]bool{}
	owner := map[string]string{}
	for i, g := range c.PriorityGroups {
		where := fmt.Sprintf("priorityGroups[%d]", i)
		if g.Name == "" {
			return fmt.Errorf("%s: name is empty", where)
		}
		where = fmt.Sprintf("%s (%q)", where, g.Name)
		if names[g.Name] {
			return fmt.Errorf("%s: name is used by another group", where)
		}
		names[g.Name] = true
		if len(g.Namespaces) == 0 && g.NamespaceSelector == nil {
			return fmt.Errorf("%s: needs namespaces or a namespaceSelector", where)
		}
		if g.NamespaceSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(g.NamespaceSelector); err != nil {
				return fmt.Errorf("%s: namespaceSelector: %w", where, oneLine(err))
			}
		}
		for _, ns := range g.Namespaces {
			if err := checkNamespace(ns); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if prev, dup := owner[ns]; dup {
				if prev == g.Name {
					return fmt.Errorf("%s: namespace %q is listed twice", where, ns)
				}
				return fmt.Errorf("%s: namespace %q is already in group %q", where, ns, prev)
			}
			owner[ns] = g.Name
		}
	}
	return nil
}

func checkNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", ns, errs[0])
	}
	return nil
}

// Thresholds parses the threshold maps.
func (c *Config) Thresholds() ([]thresholds.Threshold, error) {
	return thresholds.Parse(c.ThresholdSpec())
}

// ThresholdSpec is the threshold maps, unparsed.
func (c *Config) ThresholdSpec() thresholds.Spec {
	return thresholds.Spec{
		Hard:           c.EvictionHard,
		Soft:           c.EvictionSoft,
		GracePeriod:    c.EvictionSoftGracePeriod,
		MinimumReclaim: c.EvictionMinimumReclaim,
	}
}

// TransitionPeriod is the pressure transition period, defaulted.
func (c *Config) TransitionPeriod() time.Duration {
	if c.EvictionPressureTransitionPeriod == nil {
		return DefaultPressureTransitionPeriod
	}
	return c.EvictionPressureTransitionPeriod.Duration
}

// StallWindow is the stall signals' window, defaulted.
func (c *Config) StallWindow() time.Duration {
	if c.EvictionStallWindow == nil {
		return DefaultStallWindow
	}
	return c.EvictionStallWindow.Duration
}

// MaxPodGracePeriod is EvictionMaxPodGracePeriod as a duration; 0 means the
// pod's own grace period.
func (c *Config) MaxPodGracePeriod() time.Duration {
	return time.Duration(c.EvictionMaxPodGracePeriod) * time.Second
}

// RankOptions is the part of rank.Options the configuration holds; the
// caller adds PriorityClasses and NamespaceLabels from the API server.
func (c *Config) RankOptions() (rank.Options, error) {
	opts := rank.Options{
		ExcludedNamespaces:   append([]string(nil), c.ExcludedNamespaces...),
		IncludeDaemonSetPods: c.IncludeDaemonSetPods,
		WorkingSetOnly:       c.SwapInRanking != nil && !*c.SwapInRanking,
	}
	if o := c.OptOut; o != nil {
		opts.OptOut.Namespaces = append([]string(nil), o.Namespaces...)
		if o.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(o.NamespaceSelector)
			if err != nil {
				return rank.Options{}, fmt.Errorf("optOut.namespaceSelector: %w", oneLine(err))
			}
			opts.OptOut.Selector = sel
		}
	}
	for _, g := range c.PriorityGroups {
		rg := rank.PriorityGroup{
			Name:       g.Name,
			Namespaces: append([]string(nil), g.Namespaces...),
			Offset:     g.Offset,
			Fence:      g.Fence,
		}
		if g.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(g.NamespaceSelector)
			if err != nil {
				return rank.Options{}, fmt.Errorf("priority group %q: namespaceSelector: %w", g.Name, oneLine(err))
			}
			rg.Selector = sel
		}
		opts.PriorityGroups = append(opts.PriorityGroups, rg)
	}
	return opts, nil
}

// HugepageAware is HugepageAwareEviction, defaulted: true unless set false.
func (c *Config) HugepageAware() bool {
	return c.HugepageAwareEviction == nil || *c.HugepageAwareEviction
}

// HasSelectors reports whether any group, or the opt-out, needs namespace
// labels.
func (c *Config) HasSelectors() bool {
	if c.OptOut != nil && c.OptOut.NamespaceSelector != nil {
		return true
	}
	for _, g := range c.PriorityGroups {
		if g.NamespaceSelector != nil {
			return true
		}
	}
	return false
}
