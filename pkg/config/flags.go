package config

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/evictd/evictd/pkg/thresholds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
)

// flagValues holds what the flags said until Complete merges it.
type flagValues struct {
	fs         *flag.FlagSet
	configFile string
	hard       map[string]string
	soft       map[string]string
	grace      map[string]string
	minReclaim map[string]string
	maxGrace   int32
	transition time.Duration
}

// BindFlags registers --config and the kubelet's eviction flags on fs. After
// fs.Parse, call Complete. A map flag may be repeated; its entries add up.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	f := &flagValues{fs: fs}
	c.flags = f
	fs.StringVar(&f.configFile, FlagConfig, "", "path of an EvictdConfiguration file (apiVersion "+APIVersion+"); flags override it")
	fs.Func(FlagEvictionHard, "hard thresholds, e.g. memory.available<500Mi,nodefs.available<10%; signals not named keep their defaults ("+thresholds.JoinStatements(DefaultEvictionHard())+"); SIGNAL<none disables one",
		statementsFlag(&f.hard))
	fs.Func(FlagEvictionSoft, "soft thresholds, same syntax as --"+FlagEvictionHard+"; each needs a grace period",
		statementsFlag(&f.soft))
	fs.Func(FlagEvictionSoftGracePeriod, "grace periods of the soft thresholds, e.g. memory.available=1m30s",
		pairsFlag(&f.grace))
	fs.Func(FlagEvictionMinimumReclaim, "minimum reclaim per signal, e.g. nodefs.available=500Mi,memory.available=5%",
		pairsFlag(&f.minReclaim))
	fs.Func(FlagEvictionMaxPodGrace, "maximum grace period in seconds for pods evicted by a soft threshold; 0 keeps the pod's own", func(s string) error {
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a whole number of seconds", s)
		}
		f.maxGrace = int32(v)
		return nil
	})
	fs.DurationVar(&f.transition, FlagEvictionPressureTransPer, DefaultPressureTransitionPeriod, "how long a pressure condition stays after its thresholds cleared")
}

func statementsFlag(dst *map[string]string) func(string) error {
	return func(s string) error {
		m, err := thresholds.SplitStatements(s)
		if err != nil {
			return err
		}
		return mergeFlag(dst, m)
	}
}

func pairsFlag(dst *map[string]string) func(string) error {
	return func(s string) error {
		m, err := thresholds.SplitPairs(s)
		if err != nil {
			return err
		}
		return mergeFlag(dst, m)
	}
}

func mergeFlag(dst *map[string]string, m map[string]string) error {
	if *dst == nil {
		*dst = map[string]string{}
	}
	for k, v := range m {
		if _, dup := (*dst)[k]; dup {
			return fmt.Errorf("signal %s is given twice", k)
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
		f.fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case FlagEvictionMaxPodGrace:
				c.EvictionMaxPodGracePeriod = f.maxGrace
			case FlagEvictionPressureTransPer:
				c.EvictionPressureTransitionPeriod = &metav1.Duration{Duration: f.transition}
			}
		})
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
