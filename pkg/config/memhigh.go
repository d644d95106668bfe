// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/pkg/memhigh"
)

// The memory.high family's defaults (docs/memhigh.md has the reasoning).
const (
	// DefaultMemoryHighEventRate: ten throttlings into direct reclaim a
	// second, every second of the window. A container that touches
	// memory.high in a burst and falls back counts a handful; one living
	// above it counts one for each charge it makes over the limit.
	DefaultMemoryHighEventRate = 10.0
	// DefaultMemoryHighMaxEventRate: once a second at memory.max without
	// an OOM kill means reclaim only just saves it, over and over.
	DefaultMemoryHighMaxEventRate = 1.0
	// DefaultMemoryHighPressureSome: a tenth of the window with a task
	// waiting on memory, twice the share the stall family asks of a pod
	// to count as in the stall (rank.DefaultStallingShare).
	DefaultMemoryHighPressureSome = "10%"
	// DefaultMemoryHighWindow: three of PSI's avg10 periods, long enough
	// to span a garbage-collected runtime's heap cycle.
	DefaultMemoryHighWindow = 30 * time.Second
	// DefaultMemoryHighGracePeriod: the KEP's kind of patience for
	// throttling, which costs latency and not the node.
	DefaultMemoryHighGracePeriod = time.Minute
)

// MemoryHighThresholds is the memory.high family's thresholds, defaulted;
// none (the family is off) unless MemoryHighEviction is on. The values are
// validated (Validate).
func (c *Config) MemoryHighThresholds() memhigh.Thresholds {
	th, _ := c.memoryHigh()
	return th
}

func (c *Config) memoryHigh() (memhigh.Thresholds, error) {
	if !c.MemoryHighEviction {
		return memhigh.Thresholds{}, nil
	}
	th := memhigh.Thresholds{
		HighRate: orDefault(c.MemoryHighEventRate, DefaultMemoryHighEventRate),
		MaxRate:  orDefault(c.MemoryHighMaxEventRate, DefaultMemoryHighMaxEventRate),
		Window:   DefaultMemoryHighWindow,
		Grace:    DefaultMemoryHighGracePeriod,
	}
	if c.MemoryHighWindow != nil {
		th.Window = c.MemoryHighWindow.Duration
	}
	if c.MemoryHighGracePeriod != nil {
		th.Grace = c.MemoryHighGracePeriod.Duration
	}
	raw := c.MemoryHighPressureSome
	if raw == "" {
		raw = DefaultMemoryHighPressureSome
	}
	share, err := parseShare(raw)
	if err != nil {
		return th, fmt.Errorf("memoryHighPressureSome %q: %w", raw, err)
	}
	th.Some = share
	return th, nil
}

func orDefault(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}

// parseShare reads "10%" as 0.1; "0%" leaves the signal out.
func parseShare(raw string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(raw), "%")
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || f < 0 || f >= 100 {
		return 0, fmt.Errorf("want a percentage in [0%%, 100%%), such as 10%%")
	}
	return f / 100, nil
}

// validateMemoryHigh names the first bad memory.high setting.
func (c *Config) validateMemoryHigh() error {
	if !c.MemoryHighEviction {
		if f := c.memoryHighTuned(); f != "" {
			return fmt.Errorf("%s is set but memoryHighEviction is off (--memory-high-eviction): it would tune nothing", f)
		}
		return nil
	}
	th, err := c.memoryHigh()
	if err != nil {
		return err
	}
	if err := th.Validate(); err != nil {
		return err
	}
	if !th.Enabled() {
		return fmt.Errorf("memoryHighEviction is on with every threshold 0: set memoryHighEventRate, memoryHighMaxEventRate or memoryHighPressureSome")
	}
	if th.Window < MinStallWindow || th.Window > MaxStallWindow {
		return fmt.Errorf("memoryHighWindow %s must be within %s..%s", th.Window, MinStallWindow, MaxStallWindow)
	}
	return nil
}

// memoryHighTuned names the first memory.high tuning field set.
func (c *Config) memoryHighTuned() string {
	switch {
	case c.MemoryHighEventRate != nil:
		return "memoryHighEventRate"
	case c.MemoryHighMaxEventRate != nil:
		return "memoryHighMaxEventRate"
	case c.MemoryHighPressureSome != "":
		return "memoryHighPressureSome"
	case c.MemoryHighWindow != nil:
		return "memoryHighWindow"
	case c.MemoryHighGracePeriod != nil:
		return "memoryHighGracePeriod"
	}
	return ""
}
