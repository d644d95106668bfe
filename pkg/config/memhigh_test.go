// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/memhigh"
)

// memory.high is off unless switched on; on, it takes the defaults; each
// flag overrides one value; a tuning flag without the switch, or a bad
// value, is one error naming it.
func TestMemoryHighFlags(t *testing.T) {
	defaults := memhigh.Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: 30 * time.Second, Grace: time.Minute}
	for _, tc := range []struct {
		args    []string
		want    memhigh.Thresholds
		wantErr string
	}{
		{args: nil, want: memhigh.Thresholds{}},
		{args: []string{"--memory-high-eviction"}, want: defaults},
		{args: []string{"--memory-high-eviction", "--memory-high-event-rate=50", "--memory-high-max-event-rate=0",
			"--memory-high-pressure-some=25%", "--memory-high-window=1m", "--memory-high-grace-period=5m"},
			want: memhigh.Thresholds{HighRate: 50, Some: 0.25, Window: time.Minute, Grace: 5 * time.Minute}},
		{args: []string{"--memory-high-window=1m"}, wantErr: "memoryHighWindow is set but memoryHighEviction is off"},
		{args: []string{"--memory-high-eviction", "--memory-high-pressure-some=25"}, wantErr: `memoryHighPressureSome "25": want a percentage`},
		{args: []string{"--memory-high-eviction", "--memory-high-pressure-some=100%"}, wantErr: `memoryHighPressureSome "100%"`},
		{args: []string{"--memory-high-eviction", "--memory-high-event-rate=-1"}, wantErr: "memory.high event rate -1 must not be negative"},
		{args: []string{"--memory-high-eviction", "--memory-high-window=10m"}, wantErr: "memoryHighWindow 10m0s must be within 1s..5m0s"},
		{args: []string{"--memory-high-eviction", "--memory-high-event-rate=0", "--memory-high-max-event-rate=0", "--memory-high-pressure-some=0%"},
			wantErr: "with every threshold 0"},
	} {
		c, err := parseFlags(t, tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := c.MemoryHighThresholds(); got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

// The file's fields, and a flag over them.
func TestMemoryHighFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nmemoryHighEviction: true\nmemoryHighEventRate: 20\nmemoryHighPressureSome: 15%\nmemoryHighGracePeriod: 2m\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseFlags(t, "--config", path, "--memory-high-grace-period=30s")
	if err != nil {
		t.Fatal(err)
	}
	want := memhigh.Thresholds{HighRate: 20, MaxRate: 1, Some: 0.15, Window: 30 * time.Second, Grace: 30 * time.Second}
	if got := c.MemoryHighThresholds(); got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}
