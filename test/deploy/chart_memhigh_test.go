// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/memhigh"
)

// TestChartMemoryHigh: memoryHigh.enabled (off by default) puts the
// memory.high family's switch and tunings into the EvictdConfiguration,
// which evictd decodes to the thresholds given; off, nothing of it is
// rendered (evictd refuses a tuning without the switch); the schema refuses
// what evictd would.
func TestChartMemoryHigh(t *testing.T) {
	objs := mustRender(t, "")
	if has(objs, "ConfigMap") {
		t.Errorf("default values render a ConfigMap; memoryHigh is off by default and nothing else needs one")
	}
	objs = mustRender(t, "memoryHigh: {eventRate: 50}")
	if has(objs, "ConfigMap") {
		t.Errorf("memoryHigh tuned but not enabled renders a ConfigMap; evictd would refuse the tuning without the switch")
	}
	for values, want := range map[string]memhigh.Thresholds{
		"memoryHigh: {enabled: true}": {HighRate: 10, MaxRate: 1, Some: 0.1, Window: 30 * time.Second, Grace: time.Minute},
		"memoryHigh: {enabled: true, eventRate: 50, maxEventRate: 0, pressureSome: 25%, window: 1m, gracePeriod: 5m}": {
			HighRate: 50, Some: 0.25, Window: time.Minute, Grace: 5 * time.Minute},
		"memoryHigh: {enabled: true, eventRate: 2.5, pressureSome: 0%}": {HighRate: 2.5, MaxRate: 1, Window: 30 * time.Second, Grace: time.Minute},
	} {
		objs, err := render(t, values)
		if err != nil {
			t.Errorf("%s: %v", values, err)
			continue
		}
		file := nested[string](t, find(t, objs, "ConfigMap", "evictd-config"), "data", "config.yaml")
		cfg, err := config.Decode([]byte(file))
		if err != nil {
			t.Errorf("%s: evictd refuses the chart's file: %v\n%s", values, err, file)
			continue
		}
		if got := cfg.MemoryHighThresholds(); got != want {
			t.Errorf("%s: evictd reads %+v; want %+v\n%s", values, got, want, file)
		}
	}
	for values, field := range map[string]string{
		"memoryHigh: {enabled: true, eventRate: -1}":      "eventRate",
		"memoryHigh: {enabled: true, maxEventRate: fast}": "maxEventRate",
		"memoryHigh: {enabled: true, pressureSome: 10}":   "pressureSome",
		"memoryHigh: {enabled: true, pressureSome: 100%}": "pressureSome",
		"memoryHigh: {enabled: true, window: soon}":       "window",
		"memoryHigh: {enabled: true, gracePeriod: 1 day}": "gracePeriod",
		"memoryHigh: {enabled: yes please}":               "enabled",
		"memoryHigh: {enabled: true, highRate: 10}":       "highRate",
	} {
		if _, err := render(t, values); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v; want a schema error naming %s", values, err, field)
		}
	}
}
