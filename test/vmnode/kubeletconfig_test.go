// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"maps"
	"os"
	"strings"
	"testing"
)

// TestEffectiveKubeletConfigs reads a real kubelet v1.37.2's log of two
// starts (testdata: its config file with memory.available<400Mi and
// nodefs.available<8%, two drop-ins, and at the first start
// --eviction-hard=pid.available<7% too; an image GC threshold of 200 made
// each stop at validation, right after the line).
func TestEffectiveKubeletConfigs(t *testing.T) {
	log, err := os.ReadFile("testdata/kubelet-effective-config.log")
	if err != nil {
		t.Fatal(err)
	}
	got, err := EffectiveKubeletConfigs(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d configurations, want 2", len(got))
	}
	for i, want := range []map[string]string{
		{"pid.available": "7%"},
		{"memory.available": "450Mi", "nodefs.available": "8%", "imagefs.available": "12%"},
	} {
		if !maps.Equal(got[i].EvictionHard, want) {
			t.Errorf("start %d: evictionHard %v, want %v", i, got[i].EvictionHard, want)
		}
		if h, l := got[i].ImageGCHighThresholdPercent, got[i].ImageGCLowThresholdPercent; h == nil || *h != 200 || l == nil || *l != 80 {
			t.Errorf("start %d: image GC %v %v", i, h, l)
		}
	}
	cut := strings.Replace(string(log), "\n >\n", "\n", 1)
	if _, err := EffectiveKubeletConfigs([]byte(cut)); err == nil || !strings.Contains(err.Error(), "has no tab") {
		t.Errorf("a block without its end: %v", err)
	}
}
