// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/evictd/evictd/pkg/thresholds"
)

func TestEvictionNote(t *testing.T) {
	tests := []struct {
		name  string
		req   Request
		grace int64
		want  string
	}{
		{
			name: "memory, hard, usage above request",
			req: Request{Signal: thresholds.MemoryAvailable, Hard: true,
				Threshold: 100 << 20, Available: 92 << 20, Usage: 1 << 30, Request: 0},
			grace: 5,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi. " +
				"Pod was using 1Gi, request is 0, has larger consumption of memory. " +
				"Evicted by evictd: memory.available met its hard threshold; grace period 5s.",
		},
		{
			name: "disk, soft, within request, odd byte count",
			req: Request{Signal: thresholds.NodeFsAvailable, Hard: false,
				Threshold: 1 << 30, Available: 1000000000, Usage: 200 << 20, Request: 512 << 20},
			grace: 30,
			want: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 1000000000. " +
				"Pod was using 200Mi, request is 512Mi. " +
				"Evicted by evictd: nodefs.available met its soft threshold; grace period 30s.",
		},
		{
			// Before PredictedIn the Event said the threshold was met, with
			// 310Mi of 300Mi available.
			name: "memory, acting early, grace shortened by the fast path",
			req: Request{Signal: thresholds.MemoryAvailable, Hard: true, PredictedIn: 499 * time.Millisecond,
				Threshold: 300 << 20, Available: 310 << 20, Usage: 700 << 20, Request: 100 << 20,
				GraceOverride: ptrInt64(2), GraceReason: "memory.available predicted to cross 300Mi in 3.1s"},
			grace: 2,
			want: "The node was low on resource: memory. Threshold quantity: 300Mi, available: 310Mi. " +
				"Pod was using 700Mi, request is 100Mi, has larger consumption of memory. " +
				"Evicted by evictd: memory.available predicted to cross its hard threshold in 499ms (acting early); grace period 2s. " +
				"The grace period was shortened: memory.available predicted to cross 300Mi in 3.1s.",
		},
		{
			name: "pids are counts",
			req: Request{Signal: thresholds.PIDAvailable, Hard: true,
				Threshold: 1024, Available: 1000, Usage: 3000, Request: 0},
			grace: 1,
			want: "The node was low on resource: pids. Threshold quantity: 1024, available: 1k. " +
				"Pod was using 3k, request is 0, has larger consumption of pids. " +
				"Evicted by evictd: pid.available met its hard threshold; grace period 1s.",
		},
		{
			name: "rank and runner-up",
			req: Request{Signal: thresholds.MemoryAvailable, Hard: true,
				Threshold: 100 << 20, Available: 92 << 20, Usage: 1 << 30, Request: 0,
				Rank: 1, RunnerUp: "shop/cart-7d9f", RunnerUpRank: 2, RunnerUpReason: "usage 300Mi exceeds request 200Mi, priority 0"},
			grace: 5,
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi. " +
				"Pod was using 1Gi, request is 0, has larger consumption of memory. " +
				"Evicted by evictd: memory.available met its hard threshold; grace period 5s. " +
				"Rank 1 in evictd's eviction order; next in line: shop/cart-7d9f, rank 2 (usage 300Mi exceeds request 200Mi, priority 0).",
		},
		{
			name: "rank, no other pod",
			req: Request{Signal: thresholds.PIDAvailable, Hard: true,
				Threshold: 1024, Available: 1000, Usage: 3000, Request: 0, Rank: 2},
			grace: 1,
			want: "The node was low on resource: pids. Threshold quantity: 1024, available: 1k. " +
				"Pod was using 3k, request is 0, has larger consumption of pids. " +
				"Evicted by evictd: pid.available met its hard threshold; grace period 1s. " +
				"Rank 2 in evictd's eviction order; no other pod could have been evicted in its place.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evictionNote(tt.req, tt.grace); got != tt.want {
				t.Errorf("evictionNote:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestThresholdNote(t *testing.T) {
	got := thresholdNote(thresholds.MemoryAvailable, false, 500<<20, 300<<20)
	want := "Attempting to reclaim memory: memory.available is 300Mi, below the soft threshold of 500Mi."
	if got != want {
		t.Errorf("thresholdNote = %q, want %q", got, want)
	}
}

func TestStallNotes(t *testing.T) {
	const window = 10_000_000
	req := Request{
		Signal: thresholds.MemoryPressureSome, Hard: true,
		Threshold: StallPPM(window*6/10, window), Available: StallPPM(window*38/100, window),
		Usage: 70 << 20, Request: 64 << 20, Swap: 6 << 20, Stall: 0.85,
	}
	got := evictionNote(req, 5)
	want := "The node's tasks were stalled on memory: memory.pressureSome 62.0% of the stall window, above the threshold of 40.0%. " +
		"Pod's own memory stall 85.0%. Pod was using 70Mi, request is 64Mi (6Mi of it in swap), has larger consumption of memory. " +
		"Evicted by evictd: memory.pressureSome met its hard threshold; grace period 5s."
	if got != want {
		t.Errorf("evictionNote:\n got %q\nwant %q", got, want)
	}
	got = thresholdNote(thresholds.AllocatableMemoryPressureFull, false, 100_000, 250_000)
	want = "Attempting to end a memory stall: allocatableMemory.pressureFull is 25.0% of the stall window, above the soft threshold of 10.0%."
	if got != want {
		t.Errorf("thresholdNote = %q, want %q", got, want)
	}
	if StallPPM(0, 0) != 0 {
		t.Error("StallPPM of an empty window is not 0")
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg..."},
		{"ééééé", 8, "éé..."}, // 10 bytes; cutting at 5 would split an é
	}
	for _, tt := range tests {
		got := truncate(tt.in, tt.n)
		if got != tt.want || len(got) > tt.n || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q (valid UTF-8, at most %d bytes)", tt.in, tt.n, got, tt.want, tt.n)
		}
	}
	long := strings.Repeat("x", 5000)
	if got := truncate(long, maxNoteBytes); len(got) != maxNoteBytes {
		t.Errorf("truncated note is %d bytes, want %d", len(got), maxNoteBytes)
	}
}

func ptrInt64(v int64) *int64 { return &v }

// The memory.high signal's Events name the container and what it is stuck
// on, not the node's figures, which played no part.
func TestMemoryHighNotes(t *testing.T) {
	req := Request{Signal: thresholds.MemoryHighStuck, Threshold: 0, Available: -1,
		MemoryHigh: "container app: memory.events high 50.0/s over 10s (threshold 10/s), for 30s"}
	got := evictionNote(req, 20)
	want := "A container of the pod was stuck at its memory.high: container app: memory.events high 50.0/s over 10s (threshold 10/s), for 30s. " +
		"Evicted by evictd: memory.highStuck met its soft threshold; grace period 20s."
	if got != want {
		t.Errorf("evictionNote:\n got %q\nwant %q", got, want)
	}
	got = thresholdNote(thresholds.MemoryHighStuck, false, 0, -2)
	want = "Attempting to free containers stuck at memory.high: memory.highStuck has 2 pods with a container over a memory.high threshold (soft threshold)."
	if got != want {
		t.Errorf("thresholdNote = %q, want %q", got, want)
	}
}
