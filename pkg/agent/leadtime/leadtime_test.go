// SPDX-License-Identifier: Apache-2.0

package leadtime

import (
	"testing"
	"time"
)

// TestSample: the average moves three tenths toward each sample, stays
// within its bounds whatever one sample says, and the last sample is kept
// as measured.
func TestSample(t *testing.T) {
	l := New(2 * time.Second)
	if got := l.LastTook(); got != 0 {
		t.Fatalf("LastTook before any sample = %v, want 0", got)
	}
	steps := []struct {
		took, want time.Duration
	}{
		{took: 1 * time.Second, want: 1700 * time.Millisecond},
		{took: 1700 * time.Millisecond, want: 1700 * time.Millisecond},
		{took: 0, want: 1190 * time.Millisecond},
		{took: 0, want: 833 * time.Millisecond},
		{took: 0, want: 583100 * time.Microsecond},
		{took: 0, want: Min}, // 408 ms would do: the floor holds
		{took: 0, want: Min},
		{took: 10 * time.Minute, want: Max},
		{took: 30 * time.Second, want: Max},
	}
	for i, s := range steps {
		got := l.Sample(s.took)
		if got != s.want || l.Get() != s.want {
			t.Fatalf("step %d: Sample(%v) = %v (Get %v), want %v", i, s.took, got, l.Get(), s.want)
		}
		if l.LastTook() != s.took {
			t.Fatalf("step %d: LastTook = %v, want the sample as measured, %v", i, l.LastTook(), s.took)
		}
	}
}
