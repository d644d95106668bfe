// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"math"
	"strings"
	"testing"
	"time"
)

const mi = 1 << 20

func TestThresholdUsage(t *testing.T) {
	tests := []struct {
		name                          string
		capacity, threshold, inactive int64
		want                          int64
		wantErr                       string
	}{
		{name: "node 8Gi, threshold 300Mi, no cache", capacity: 8192 * mi, threshold: 300 * mi, want: 7892 * mi},
		{name: "inactive_file raises the usage to arm at", capacity: 8192 * mi, threshold: 300 * mi, inactive: 1024 * mi, want: 8916 * mi},
		{name: "zero threshold", capacity: 1024 * mi, threshold: 0, inactive: 5, want: 1024*mi + 5},
		{name: "threshold at capacity", capacity: 1024 * mi, threshold: 1024 * mi, wantErr: "not below capacity"},
		{name: "zero capacity", capacity: 0, threshold: 1, wantErr: "capacity 0"},
		{name: "negative threshold", capacity: 1, threshold: -1, wantErr: "threshold -1"},
		{name: "negative inactive_file", capacity: 10, threshold: 1, inactive: -3, wantErr: "inactive_file -3"},
		{name: "overflow", capacity: math.MaxInt64, threshold: 1, inactive: 2, wantErr: "overflows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ThresholdUsage(tc.capacity, tc.threshold, tc.inactive)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ThresholdUsage = %d, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ThresholdUsage = %d, %v; want %d", got, err, tc.want)
			}
			// The defining property: at that usage, available equals the threshold.
			if avail := tc.capacity - (got - tc.inactive); avail != tc.threshold {
				t.Errorf("at usage %d available is %d, want the threshold %d", got, avail, tc.threshold)
			}
		})
	}
}

func TestNeedRearm(t *testing.T) {
	tests := []struct {
		armed, want, tol int64
		rearm            bool
	}{
		{1000 * mi, 1000 * mi, 8 * mi, false},
		{1000 * mi, 1008 * mi, 8 * mi, false},
		{1000 * mi, 1008*mi + 1, 8 * mi, true}, // inactive_file grew: would fire early
		{1000 * mi, 991 * mi, 8 * mi, true},    // inactive_file shrank: would fire late
		{0, 1, 0, true},
		{math.MinInt64, math.MaxInt64, 0, true},
	}
	for _, tc := range tests {
		if got := NeedRearm(tc.armed, tc.want, tc.tol); got != tc.rearm {
			t.Errorf("NeedRearm(%d, %d, %d) = %v, want %v", tc.armed, tc.want, tc.tol, got, tc.rearm)
		}
	}
}

func TestPollPolicyNext(t *testing.T) {
	def := PollPolicy{}
	tests := []struct {
		name   string
		policy PollPolicy
		in     PollInput
		want   time.Duration
	}{
		{name: "crossed: fastest", policy: def,
			in: PollInput{Available: 200 * mi, Threshold: 300 * mi}, want: DefaultPollMin},
		{name: "at the threshold: fastest", policy: def,
			in: PollInput{Available: 300 * mi, Threshold: 300 * mi}, want: DefaultPollMin},
		{name: "idle big node relaxes to housekeeping", policy: def,
			in: PollInput{Available: 60 << 30, Threshold: 100 * mi}, want: DefaultPollMax},
		{name: "1Gi node at idle: headroom/assumed/2", policy: def,
			in: PollInput{Available: 1000 * mi, Threshold: 300 * mi}, want: 350 * time.Millisecond},
		{name: "near the threshold: fastest", policy: def,
			in: PollInput{Available: 350 * mi, Threshold: 300 * mi}, want: DefaultPollMin},
		{name: "observed fill faster than assumed", policy: def,
			in: PollInput{Available: 8300 * mi, Threshold: 300 * mi, FillRate: 4000 * mi}, want: time.Second},
		{name: "falling fast near a threshold", policy: def,
			in: PollInput{Available: 500 * mi, Threshold: 300 * mi, FillRate: 3000 * mi}, want: DefaultPollMin},
		{name: "a slower observed rate does not lower the assumed one", policy: def,
			in: PollInput{Available: 1000 * mi, Threshold: 300 * mi, FillRate: 10 * mi}, want: 350 * time.Millisecond},
		{name: "NaN rate is ignored", policy: def,
			in: PollInput{Available: 1000 * mi, Threshold: 300 * mi, FillRate: math.NaN()}, want: 350 * time.Millisecond},
		{name: "relaxes at most 2x per poll", policy: def,
			in: PollInput{Available: 60 << 30, Threshold: 100 * mi, Previous: 100 * time.Millisecond}, want: 200 * time.Millisecond},
		{name: "shrinks at once", policy: def,
			in: PollInput{Available: 350 * mi, Threshold: 300 * mi, Previous: 10 * time.Second}, want: DefaultPollMin},
		{name: "custom bounds, 50ms floor", policy: PollPolicy{Min: 50 * time.Millisecond, Max: 2 * time.Second, AssumedFillRate: 100 * mi},
			in: PollInput{Available: 305 * mi, Threshold: 300 * mi}, want: 50 * time.Millisecond},
		{name: "custom bounds, capped by Max", policy: PollPolicy{Min: 50 * time.Millisecond, Max: 2 * time.Second, AssumedFillRate: 100 * mi},
			in: PollInput{Available: 2000 * mi, Threshold: 300 * mi}, want: 2 * time.Second},
		{name: "custom assumed rate", policy: PollPolicy{AssumedFillRate: 100 * mi},
			in: PollInput{Available: 400 * mi, Threshold: 300 * mi}, want: 500 * time.Millisecond},
		{name: "extreme values do not overflow", policy: def,
			in: PollInput{Available: math.MaxInt64, Threshold: math.MinInt64}, want: DefaultPollMax},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.policy.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tc.policy.Next(tc.in); got != tc.want {
				t.Errorf("Next(%+v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestPollPolicyNextIsMonotonic(t *testing.T) {
	// Less headroom or a faster fill never lengthens the interval.
	p := PollPolicy{}
	prev := time.Duration(math.MaxInt64)
	for avail := int64(20 << 30); avail >= 0; avail -= 37 * mi {
		got := p.Next(PollInput{Available: avail, Threshold: 300 * mi})
		if got > prev {
			t.Fatalf("available %d: interval grew from %v to %v as headroom shrank", avail, prev, got)
		}
		prev = got
	}
	prev = time.Duration(math.MaxInt64)
	for rate := 0.0; rate < 1e11; rate = rate*1.5 + mi {
		got := p.Next(PollInput{Available: 4 << 30, Threshold: 300 * mi, FillRate: rate})
		if got > prev {
			t.Fatalf("fill %.0f B/s: interval grew from %v to %v", rate, prev, got)
		}
		prev = got
	}
}

func TestPollPolicyValidate(t *testing.T) {
	tests := []struct {
		p       PollPolicy
		mention string
	}{
		{PollPolicy{Min: -time.Second}, "minimum -1s"},
		{PollPolicy{Min: time.Second, Max: 500 * time.Millisecond}, "maximum 500ms"},
		{PollPolicy{AssumedFillRate: -1}, "fill rate -1"},
		{PollPolicy{AssumedFillRate: math.Inf(1)}, "fill rate +Inf"},
	}
	for _, tc := range tests {
		err := tc.p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", tc.p, err, tc.mention)
		}
	}
}

func TestParsePSITrigger(t *testing.T) {
	tests := []struct {
		in      string
		want    PSITrigger
		wantErr string
	}{
		{in: "some 150000 1000000", want: PSITrigger{Stall: 150 * time.Millisecond, Window: time.Second}},
		{in: "full 50000 500000", want: PSITrigger{Full: true, Stall: 50 * time.Millisecond, Window: 500 * time.Millisecond}},
		{in: "  some   1 1 ", want: PSITrigger{Stall: time.Microsecond, Window: time.Microsecond}},
		{in: "some 1000000 10000000", want: PSITrigger{Stall: time.Second, Window: 10 * time.Second}},
		{in: "avg 1 2", wantErr: `kind "avg"`},
		{in: "some 1 10000001", wantErr: `"10000001"`},
		{in: "some 0 1000000", wantErr: `"0"`},
		{in: "some 2000000 1000000", wantErr: "stall 2s"},
		{in: "some 1x 2", wantErr: `"1x"`},
		{in: "some 1", wantErr: "want"},
		{in: "", wantErr: "want"},
	}
	for _, tc := range tests {
		got, err := ParsePSITrigger(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParsePSITrigger(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePSITrigger(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if back, _ := ParsePSITrigger(got.String()); back != got {
			t.Errorf("round trip of %q via %q gave %+v", tc.in, got.String(), back)
		}
	}
}

func TestPSITriggerUnprivileged(t *testing.T) {
	tests := []struct {
		in, want string
		changed  bool
	}{
		{"some 150000 1000000", "some 300000 2000000", true},
		{"full 50000 500000", "full 200000 2000000", true},
		{"some 10000 100000", "some 200000 2000000", true},
		{"some 1 1", "some 2000000 2000000", true},
		{"some 100 3000000", "some 133 4000000", true},
		{"some 9000000 9000001", "some 9999999 10000000", true},
		{"some 200000 2000000", "some 200000 2000000", false},
		{"full 1 10000000", "full 1 10000000", false},
	}
	for _, tc := range tests {
		in, err := ParsePSITrigger(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got, changed := in.Unprivileged()
		if got.String() != tc.want || changed != tc.changed {
			t.Errorf("%q.Unprivileged() = %q, %v; want %q, %v", tc.in, got.String(), changed, tc.want, tc.changed)
		}
		if err := got.Validate(); err != nil || got.Window%(2*time.Second) != 0 {
			t.Errorf("%q.Unprivileged() = %q is not a valid 2 s-multiple trigger: %v", tc.in, got.String(), err)
		}
	}
}
