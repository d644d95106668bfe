// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCrossingLevel(t *testing.T) {
	tests := []struct {
		name                          string
		capacity, threshold, inactive int64
		want                          int64
		wantErr                       bool
	}{
		{"no page cache", 1024, 300, 0, 724, false},
		{"inactive_file raises the level", 1024, 300, 100, 824, false},
		{"threshold equal to capacity", 1024, 1024, 0, 0, false},
		{"threshold above capacity", 1024, 2048, 0, 0, true},
		{"zero threshold", 1024, 0, 0, 0, true},
		{"negative inactive_file", 1024, 300, -1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CrossingLevel(tt.capacity, tt.threshold, tt.inactive)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("= %d, %v; want %d (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseStatValue(t *testing.T) {
	real, err := os.ReadFile("testdata/memory.stat")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		key     string
		want    int64
		wantErr string
	}{
		{"real v1 root memory.stat", string(real), "total_inactive_file", 1044324352, ""},
		{"the local key is a different line", string(real), "inactive_file", 196608, ""},
		{"missing key", string(real), "total_nonsense", 0, "no total_nonsense line"},
		{"bad value", "total_inactive_file lots\n", "total_inactive_file", 0, `"lots" is not a byte count`},
		{"negative value", "total_inactive_file -5\n", "total_inactive_file", 0, "not a byte count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatValue([]byte(tt.in), tt.key)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// WatchCrossing reads a single-number file, as it does memory.usage_in_bytes.
func TestWatchCrossing(t *testing.T) {
	tests := []struct {
		name      string
		before    string // content when the watch starts
		after     string // content written once the watch has started; "" for none
		wantUsage int64
		wantBelow bool // a read below the level came first
		wantErr   string
	}{
		{"rises across the level", "100\n", "900\n", 900, true, ""},
		{"already above", "901\n", "", 901, false, ""},
		{"never crosses", "100\n", "500\n", 0, false, "stayed at or below 800"},
		{"not a number", "n/a\n", "", 0, false, `"n/a" is not a byte count`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.usage_in_bytes")
			if err := os.WriteFile(path, []byte(tt.before), 0o644); err != nil {
				t.Fatal(err)
			}
			// Long enough for a loaded machine; the watch that never
			// crosses ends with it.
			timeout := 10 * time.Second
			if tt.wantErr != "" {
				timeout = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			started := make(chan struct{})
			type result struct {
				c   Crossing
				err error
			}
			done := make(chan result, 1)
			go func() {
				c, err := WatchCrossing(ctx, path, 800, 200*time.Microsecond, started)
				done <- result{c, err}
			}()
			<-started
			written := time.Now()
			if tt.after != "" {
				// In place, same length, no truncation: a cgroup file never
				// reads empty, and os.WriteFile's truncate-then-write let
				// the watch read "" now and then (EOF).
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteAt([]byte(tt.after), 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			r := <-done
			if tt.wantErr != "" {
				if r.err == nil || !strings.Contains(r.err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", r.err, tt.wantErr)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.c.Usage != tt.wantUsage || r.c.LastBelow.IsZero() == tt.wantBelow {
				t.Fatalf("crossing %+v: want usage %d, a read below first: %v", r.c, tt.wantUsage, tt.wantBelow)
			}
			if tt.wantBelow {
				if r.c.At.Before(r.c.LastBelow) || r.c.Earliest() != r.c.LastBelow || r.c.Resolution() <= 0 {
					t.Errorf("crossing %+v: want LastBelow < At, Earliest = LastBelow", r.c)
				}
				if r.c.At.Before(written.Add(-time.Millisecond)) {
					t.Errorf("crossing at %s, before the value was written at %s", r.c.At, written)
				}
			} else if r.c.Earliest() != r.c.At || r.c.Resolution() != 0 {
				t.Errorf("crossing %+v: with no read below, Earliest must be At and Resolution 0", r.c)
			}
		})
	}
}
