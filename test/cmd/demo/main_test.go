// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestStoryHeld: --verify passes only when the hog was evicted and seen
// gone, every protected pod (and the static pod's mirror) still runs, no
// OOM kill happened and the brake went on and was lifted; pods ranked
// before the hog may go too.
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
		// noBrake: the brake never went on; leftBrake: it was still on
		// after evictd stopped.
		noBrake, leftBrake bool
		want               string
	}{
		{name: "the story", evicted: good, present: allThere(), hogGone: true},
		{name: "hog not evicted", evicted: map[string]string{"batch-report": "x"}, present: allThere(), hogGone: false, want: "the hog memory-leak was not evicted"},
		{name: "hog evicted but not gone", evicted: good, present: allThere(), hogGone: false, want: "the hog memory-leak was not evicted and gone"},
		{name: "protected pod evicted", evicted: map[string]string{hog.name: "x", "database": "y"}, present: allThere(), hogGone: true, want: "protected pod database"},
		{name: "static pod gone", evicted: good, present: map[string]bool{"web-frontend": true, "database": true, "node-agent": true}, hogGone: true, want: "protected pod " + mirror},
		{name: "OOM kill", evicted: good, present: allThere(), hogGone: true, oomKills: 1, want: "OOM killer struck 1 times"},
		{name: "no brake", evicted: good, present: allThere(), hogGone: true, noBrake: true, want: "never logged its memory brake on"},
		{name: "brake left", evicted: good, present: allThere(), hogGone: true, leftBrake: true, want: "still carried evictd's brake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := storyHeld(tt.evicted, tt.present, tt.hogGone, mirror, tt.oomKills, !tt.noBrake, !tt.leftBrake)
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

// TestServiceAccountOf: the demo binds the ServiceAccount the API server
// names for --evictd-kubeconfig's user, and refuses any other user.
func TestServiceAccountOf(t *testing.T) {
	got, err := serviceAccountOf("system:serviceaccount:evictd-system:evictd")
	if err != nil || got.Namespace != "evictd-system" || got.Name != "evictd" {
		t.Fatalf("serviceAccountOf = %v, %v; want evictd-system/evictd", got, err)
	}
	for _, user := range []string{"admin", "system:serviceaccount:evictd-system", "system:serviceaccount::evictd",
		"system:serviceaccount:ns:", "system:serviceaccount:ns:a:b", "system:node:evictd-system:evictd"} {
		if got, err := serviceAccountOf(user); err == nil || !strings.Contains(err.Error(), strconv.Quote(user)) {
			t.Errorf("serviceAccountOf(%q) = %v, %v; want an error naming the user", user, got, err)
		}
	}
}

// TestRankNote: each victim's line says why it went where it did, from
// evictd's reason: a pod over its request of lower priority before the
// leak, the leak after them, and nothing for a reason the order does not
// explain.
func TestRankNote(t *testing.T) {
	tests := []struct {
		name, pod, reason string
		before            []string
		want              string
	}{
		{name: "lower priority first", pod: "batch-report", reason: "usage 101Mi exceeds request 0, priority 0",
			want: "before memory-leak, though that one grows: both use more than they request, and priority 0 is below its 10000"},
		{name: "web below important", pod: "cache", reason: "usage 121Mi exceeds request 64Mi, priority 1000; memory.available predicted below 300Mi in 1.2s",
			want: "priority 1000 is below its 10000"},
		{name: "the leak after the others", pod: hog.name, reason: "usage 310Mi exceeds request 100Mi, priority 10000", before: []string{"batch-report", "cache"},
			want: "batch-report and cache, of lower priority, went first"},
		{name: "the leak alone", pod: hog.name, reason: "usage 310Mi exceeds request 100Mi, priority 10000",
			want: "rank: it uses more than it requests, at priority 10000"},
		{name: "within its request", pod: "cache", reason: "usage 60Mi within request 64Mi, priority 1000"},
		{name: "not the demo's pod", pod: "other", reason: "usage 60Mi exceeds request 0, priority 0"},
		{name: "higher priority", pod: "database", reason: "usage 300Mi exceeds request 256Mi, priority 10000"},
		{name: "only lower priorities named", pod: hog.name, reason: "usage 310Mi exceeds request 100Mi, priority 10000", before: []string{"database", "cache"},
			want: "; cache, of lower priority, went first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rankNote(tt.pod, tt.reason, tt.before)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Fatalf("rankNote(%q, %q, %v) = %q; want it to say %q", tt.pod, tt.reason, tt.before, got, tt.want)
			}
		})
	}
}
