// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// TestStoryHeld: --verify passes only when the hog was evicted and seen
// gone, every protected pod (and the static pod's mirror) still runs and no
// OOM kill happened; pods ranked before the hog may go too.
func TestStoryHeld(t *testing.T) {
	const mirror = "node-proxy-demo-node"
	allThere := func() map[string]bool {
		return map[string]bool{"web-frontend": true, "database": true, "node-agent": true, mirror: true, "cache": true}
	}
	good := map[string]string{hog.name: "evicted as rank 1: memory", "batch-report": "evicted as rank 1: memory"}
	tests := []struct {
		name     string
		evicted  map[string]string
		present  map[string]bool
		hogGone  bool
		oomKills int
		want     string
	}{
		{name: "the story", evicted: good, present: allThere(), hogGone: true},
		{name: "hog not evicted", evicted: map[string]string{"batch-report": "x"}, present: allThere(), hogGone: false, want: "the hog memory-leak was not evicted"},
		{name: "hog evicted but not gone", evicted: good, present: allThere(), hogGone: false, want: "the hog memory-leak was not evicted and gone"},
		{name: "protected pod evicted", evicted: map[string]string{hog.name: "x", "database": "y"}, present: allThere(), hogGone: true, want: "protected pod database"},
		{name: "static pod gone", evicted: good, present: map[string]bool{"web-frontend": true, "database": true, "node-agent": true}, hogGone: true, want: "protected pod " + mirror},
		{name: "OOM kill", evicted: good, present: allThere(), hogGone: true, oomKills: 1, want: "OOM killer struck 1 times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := storyHeld(tt.evicted, tt.present, tt.hogGone, mirror, tt.oomKills)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("storyHeld = %v; want an error saying %q", err, tt.want)
			}
		})
	}
}
