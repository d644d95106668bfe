// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"maps"

	"github.com/evictd/evictd/pkg/thresholds"
)

func (c *Config) markDefaulted(signal string) {
	if c.hardDefaulted == nil {
		c.hardDefaulted = map[string]bool{}
	}
	c.hardDefaulted[signal] = true
}

// OperatorHard lists the hard thresholds the operator set, in the file or
// with a flag; the others are evictd's defaults (allocatableMemory.available
// counts as set only when named, not when it follows memory.available).
func (c *Config) OperatorHard() map[string]bool {
	out := map[string]bool{}
	for k := range c.EvictionHard {
		if c.hardDefaulted[k] || (k == string(thresholds.AllocatableMemoryAvailable) && c.allocDerived) {
			continue
		}
		out[k] = true
	}
	return out
}

// PlaceHard moves default hard thresholds to the values placed (signal to
// value, from kubeletcfg.Place): only defaults move, so a signal the
// operator set is an error. allocatableMemory.available follows
// memory.available again when it was derived. The result is validated.
func (c *Config) PlaceHard(placed map[string]string) error {
	for k := range placed {
		if !c.hardDefaulted[k] {
			return fmt.Errorf("eviction-hard: %s was set by the operator; placement moves only evictd's defaults", k)
		}
	}
	hard := maps.Clone(c.EvictionHard)
	maps.Copy(c.EvictionHard, placed)
	deriveAllocatable(c)
	if err := c.Validate(); err != nil {
		c.EvictionHard = hard
		deriveAllocatable(c)
		return fmt.Errorf("placed thresholds: %w", err)
	}
	return nil
}
