// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseValue(t *testing.T) {
	tests := []struct {
		in       string
		capacity int64
		want     int64
		wantErr  string
	}{
		{in: "500Mi", capacity: 1 << 40, want: 500 << 20},
		{in: "1Gi", capacity: 0, want: 1 << 30},
		{in: "1000", capacity: 5, want: 1000},
		{in: "10%", capacity: 1000, want: 100},
		{in: "100%", capacity: 1000, want: 1000},
		{in: "0.5%", capacity: 1000, want: 5},
		{in: "  15%  ", capacity: 200, want: 30},
		{in: "8Ei", capacity: 0, want: 1<<63 - 1},
		{in: "9223372036854775807", capacity: 0, want: 1<<63 - 1},
		{in: "10E", wantErr: "quantity 10E is beyond the int64 range"},
		{in: "9223372036854775808", wantErr: "beyond the int64 range"},
		{in: "100%", capacity: 1<<63 - 1, want: 1<<63 - 1},
		{in: "1e3", capacity: 0, want: 1000},
		{in: "5E", capacity: 0, want: 5e18},
		{in: "1e999999999", wantErr: "beyond the int64 range"},
		{in: "1e-31", capacity: 0, want: 1},
		{in: "1e-999999999", capacity: 0, want: 1},
		{in: "-1e-999999999", wantErr: "greater than zero"},
		{in: "0e999999999", wantErr: "greater than zero"},
		{in: "1ke-200", wantErr: "not a quantity"},
		{in: "1e-20", capacity: 0, want: 1},
		{in: "1" + strings.Repeat("0", 70), wantErr: "longer than 64 characters"},
		{in: "0", wantErr: "greater than zero"},
		{in: "0Mi", wantErr: "greater than zero"},
		{in: "-100Mi", wantErr: "greater than zero"},
		{in: "0%", wantErr: "outside"},
		{in: "-5%", wantErr: "outside"},
		{in: "100.1%", wantErr: "outside"},
		{in: "NaN%", wantErr: "not a number"},
		{in: "1e39%", wantErr: "outside"},
		{in: "Inf%", wantErr: "outside"},
		{in: "ten%", wantErr: "not a percentage"},
		{in: "5 Mi", wantErr: "not a quantity"},
		{in: "", wantErr: "empty"},
		{in: "none", wantErr: "not a quantity"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			v, err := ParseValue(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseValue(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseValue(%q): %v", tc.in, err)
			}
			if got := v.Amount(tc.capacity); got != tc.want {
				t.Errorf("Amount(%d) = %d, want %d", tc.capacity, got, tc.want)
			}
		})
	}
}

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{in: "", want: map[string]string{}},
		{in: " , ", want: map[string]string{}},
		{in: "memory.available<500Mi,nodefs.available<10%", want: map[string]string{"memory.available": "500Mi", "nodefs.available": "10%"}},
		{in: " memory.available < 1Gi ", want: map[string]string{"memory.available": "1Gi"}},
		{in: "pid.available<none", want: map[string]string{"pid.available": "none"}},
		{in: "memory.available>500Mi", wantErr: "only < is allowed"},
		{in: "memory.available<=500Mi", wantErr: "only < is allowed"},
		{in: "memory.available<<500Mi", wantErr: "only < is allowed"},
		{in: "memory.available=500Mi", wantErr: "only < is allowed"},
		{in: "memory.available!500Mi", wantErr: "only < is allowed"},
		{in: "memory.available500Mi", wantErr: "no operator"},
		{in: "<500Mi", wantErr: "no signal"},
		{in: "memory.available<1Gi,memory.available<2Gi", wantErr: "given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := SplitStatements(tc.in)
			checkSplit(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestSplitPairs(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{in: "memory.available=1m30s,nodefs.available=2m", want: map[string]string{"memory.available": "1m30s", "nodefs.available": "2m"}},
		{in: "nodefs.available=500Mi", want: map[string]string{"nodefs.available": "500Mi"}},
		{in: "memory.available", wantErr: "not SIGNAL=VALUE"},
		{in: "=1m", wantErr: "no signal"},
		{in: "a=1,a=2", wantErr: "given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := SplitPairs(tc.in)
			checkSplit(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func checkSplit(t *testing.T, got map[string]string, err error, want map[string]string, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("[%s] = %q, want %q", k, got[k], v)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		// want lists each threshold as String() prints it, in order.
		want    []string
		wantErr string
	}{
		{
			name: "kubelet docs hard example",
			spec: Spec{Hard: map[string]string{"memory.available": "500Mi", "nodefs.available": "1Gi", "imagefs.available": "100Gi"}},
			want: []string{"memory.available<500Mi", "nodefs.available<1Gi", "imagefs.available<100Gi"},
		},
		{
			name: "kubelet docs minimum reclaim example",
			spec: Spec{
				Hard:           map[string]string{"memory.available": "500Mi", "nodefs.available": "1Gi", "imagefs.available": "100Gi"},
				MinimumReclaim: map[string]string{"memory.available": "0Mi", "nodefs.available": "500Mi", "imagefs.available": "2Gi"},
			},
			// A zero minimum reclaim is the same as none.
			want: []string{"memory.available<500Mi", "nodefs.available<1Gi (min-reclaim 500Mi)", "imagefs.available<100Gi (min-reclaim 2Gi)"},
		},
		{
			// The kubelet's parseThresholdStatement ignores exactly "0%" and
			// "100%"; before, 100% was a threshold always met.
			name: "0% and 100% switch a threshold off, as in the kubelet, with its grace and minimum reclaim",
			spec: Spec{
				Hard:           map[string]string{"memory.available": "100%", "nodefs.available": "0%", "pid.available": "10%"},
				Soft:           map[string]string{"imagefs.available": "100%"},
				GracePeriod:    map[string]string{"imagefs.available": "1m"},
				MinimumReclaim: map[string]string{"memory.available": "100Mi"},
			},
			want: []string{"pid.available<10%"},
		},
		{
			name: "only the exact strings: 100.0% is a threshold",
			spec: Spec{Hard: map[string]string{"memory.available": "100.0%"}},
			want: []string{"memory.available<100%"},
		},
		{
			name:    "a stall share of 100% stays an error (evictd's own signal)",
			spec:    Spec{Hard: map[string]string{"memory.pressureSome": "100%"}},
			wantErr: "can never be exceeded",
		},
		{
			name: "hard before soft, each in action order",
			spec: Spec{
				Hard:        map[string]string{"pid.available": "5%", "memory.available": "100Mi"},
				Soft:        map[string]string{"nodefs.available": "20%", "memory.available": "1Gi"},
				GracePeriod: map[string]string{"memory.available": "1m30s", "nodefs.available": "2m"},
			},
			want: []string{"memory.available<100Mi", "pid.available<5%", "memory.available<1Gi (soft, grace 1m30s)", "nodefs.available<20% (soft, grace 2m0s)"},
		},
		{
			name: "none disables a threshold",
			spec: Spec{Hard: map[string]string{"memory.available": "none", "pid.available": "10%"}},
			want: []string{"pid.available<10%"},
		},
		{name: "unknown signal", spec: Spec{Hard: map[string]string{"memory.free": "1Gi"}}, wantErr: `unknown eviction signal "memory.free"`},
		{name: "containerfs is not accepted", spec: Spec{Hard: map[string]string{"containerfs.available": "10%"}}, wantErr: `"containerfs.available" is not set directly`},
		{name: "zero quantity", spec: Spec{Hard: map[string]string{"memory.available": "0"}}, wantErr: "memory.available<0: quantity 0 must be greater than zero"},
		{name: "negative quantity", spec: Spec{Soft: map[string]string{"memory.available": "-1Gi"}}, wantErr: "eviction-soft: memory.available<-1Gi"},
		{name: "zero percent written otherwise is off too", spec: Spec{Hard: map[string]string{"nodefs.available": "0.0%"}}, want: nil},
		{name: "over 100 percent", spec: Spec{Hard: map[string]string{"nodefs.available": "101%"}}, wantErr: "nodefs.available<101%"},
		{name: "soft without grace", spec: Spec{Soft: map[string]string{"memory.available": "1Gi"}}, wantErr: "memory.available<1Gi has no grace period"},
		{
			name:    "grace without soft",
			spec:    Spec{Hard: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "1m"}},
			wantErr: "memory.available has a grace period but no soft threshold",
		},
		{
			name:    "zero grace",
			spec:    Spec{Soft: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "0s"}},
			wantErr: "memory.available=0s: the kubelet makes such a soft threshold a hard one",
		},
		{
			name:    "negative grace, refused by the kubelet too",
			spec:    Spec{Soft: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "-1s"}},
			wantErr: "memory.available=-1s must not be negative",
		},
		{
			name:    "bad grace",
			spec:    Spec{Soft: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "soon"}},
			wantErr: `memory.available="soon" is not a duration`,
		},
		{
			name:    "min reclaim without threshold",
			spec:    Spec{Hard: map[string]string{"memory.available": "none"}, MinimumReclaim: map[string]string{"memory.available": "100Mi"}},
			wantErr: "memory.available has a minimum reclaim but no threshold",
		},
		{
			name:    "negative min reclaim",
			spec:    Spec{Hard: map[string]string{"memory.available": "1Gi"}, MinimumReclaim: map[string]string{"memory.available": "-1Mi"}},
			wantErr: "eviction-minimum-reclaim: memory.available",
		},
		{
			name:    "zero percent min reclaim",
			spec:    Spec{Hard: map[string]string{"memory.available": "1Gi"}, MinimumReclaim: map[string]string{"memory.available": "0%"}},
			wantErr: "outside",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotS []string
			for _, th := range got {
				gotS = append(gotS, th.String())
			}
			if strings.Join(gotS, " | ") != strings.Join(tc.want, " | ") {
				t.Errorf("Parse =\n  %v\nwant\n  %v", gotS, tc.want)
			}
		})
	}
}

func TestParseGraceAndHard(t *testing.T) {
	ths, err := Parse(Spec{
		Hard:        map[string]string{"memory.available": "100Mi"},
		Soft:        map[string]string{"memory.available": "1Gi"},
		GracePeriod: map[string]string{"memory.available": "90s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ths) != 2 || !ths[0].Hard() || ths[1].Hard() || ths[1].GracePeriod != 90*time.Second {
		t.Fatalf("got %+v, want a hard and a 90s soft threshold", ths)
	}
}

func TestSignals(t *testing.T) {
	for _, s := range Signals() {
		if _, err := ParseSignal(string(s)); err != nil && !s.MemoryHigh() {
			t.Errorf("ParseSignal(%s): %v", s, err)
		}
		if s.Resource() == "" || s.Condition() == "" {
			t.Errorf("%s has no resource or condition", s)
		}
	}
	if _, err := ParseSignal("swap.free"); err == nil {
		t.Error("swap.free was accepted")
	}
}

// memory.highStuck takes its thresholds from the memory-high settings:
// the threshold maps refuse it, naming where it is set.
func TestMemoryHighNotInThresholdMaps(t *testing.T) {
	_, err := Parse(Spec{Hard: map[string]string{"memory.highStuck": "1"}})
	if err == nil || !strings.Contains(err.Error(), "memory-high settings (docs/memhigh.md)") {
		t.Errorf("Parse(memory.highStuck<1) = %v, want a refusal naming the memory-high settings", err)
	}
}

func TestStallThresholds(t *testing.T) {
	hard, err := SplitStatements("memory.pressureSome>40%,memory.available<300Mi")
	if err != nil {
		t.Fatal(err)
	}
	ths, err := Parse(Spec{
		Hard:           hard,
		Soft:           map[string]string{"allocatableMemory.pressureFull": "12.5%"},
		GracePeriod:    map[string]string{"allocatableMemory.pressureFull": "30s"},
		MinimumReclaim: map[string]string{"memory.pressureSome": "10%"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range ths {
		got = append(got, th.String())
	}
	want := []string{
		"memory.available<300Mi",
		"memory.pressureSome>40% (min-reclaim 10%)",
		"allocatableMemory.pressureFull>12.5% (soft, grace 30s)",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("thresholds %q, want %q", got, want)
	}
	// 40 % of a 10 s window stalled: met once more than 4 s of it was.
	some := ths[1]
	const window = 10_000_000 // µs
	amount := some.Value.Amount(window)
	for _, c := range []struct {
		stalled int64
		met     bool
	}{{0, false}, {3_999_999, false}, {4_000_000, false}, {4_000_001, true}, {window, true}} {
		if met := amount > window-c.stalled; met != c.met {
			t.Errorf("stalled %d µs of %d: met %v, want %v", c.stalled, window, met, c.met)
		}
	}
	if share, ok := some.Value.Stalled(); !ok || share != 0.4 {
		t.Errorf("Stalled() = %v, %v; want 0.4, true", share, ok)
	}
	if got := JoinStatements(hard); got != "memory.available<300Mi,memory.pressureSome>40%" {
		t.Errorf("JoinStatements = %q", got)
	}
}

func TestStallThresholdErrors(t *testing.T) {
	for _, c := range []struct {
		flag, want string
	}{
		{"memory.pressureSome<40%", "written memory.pressureSome>PERCENT"},
		{"memory.available>300Mi", "> is for the stall signals"},
		{"memory.pressureFull>=40%", "unsupported operator"},
	} {
		if _, err := SplitStatements(c.flag); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SplitStatements(%q) = %v, want an error containing %q", c.flag, err, c.want)
		}
	}
	for _, c := range []struct {
		value, want string
	}{
		{"100Mi", "memory.pressureSome>100Mi: 100Mi is not a percentage"},
		{"100%", "memory.pressureSome>100%: a stall share of 100% can never be exceeded"},
		{"0%", "memory.pressureSome>0%: percentage 0% is outside"},
		{"forty", "memory.pressureSome>forty"},
	} {
		_, err := Parse(Spec{Hard: map[string]string{"memory.pressureSome": c.value}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(memory.pressureSome=%q) = %v, want an error containing %q", c.value, err, c.want)
		}
	}
}

func TestJoinRoundTrip(t *testing.T) {
	m := map[string]string{"nodefs.available": "10%", "memory.available": "1Gi"}
	got, err := SplitStatements(JoinStatements(m))
	if err != nil {
		t.Fatal(err)
	}
	if JoinStatements(got) != "memory.available<1Gi,nodefs.available<10%" {
		t.Errorf("round trip gave %v", got)
	}
	p, err := SplitPairs(JoinPairs(map[string]string{"memory.available": "1m"}))
	if err != nil || p["memory.available"] != "1m" {
		t.Errorf("pairs round trip gave %v, %v", p, err)
	}
}

func TestSwitchedOffEntries(t *testing.T) {
	got := SwitchedOffEntries(Spec{
		Hard: map[string]string{"memory.available": "100%", "nodefs.available": "10%", "memory.pressureSome": "100%"},
		Soft: map[string]string{"pid.available": " 0%"},
	})
	want := []string{"eviction-hard: memory.available<100%", "eviction-soft: pid.available<0%"}
	if !slices.Equal(got, want) {
		t.Errorf("SwitchedOffEntries = %q, want %q", got, want)
	}
}

// TestValueStringAsWritten: a threshold prints as it was written, in logs,
// /explain and everything else that shows one: 7% is "7%", not the
// 7.000000000000001% that 0.07*100 makes; a quantity prints in its
// canonical form, which for these is as written.
func TestValueStringAsWritten(t *testing.T) {
	for _, in := range []string{"7%", "0.1%", "33.3%", "10.5%", "99.99%", "14%", "28%", "57%", "0.07%", "1.15%",
		"100%", "500Mi", "1Gi", "1500", "100Ki", "2G"} {
		v, err := ParseValue(in)
		if err != nil {
			t.Fatalf("ParseValue(%q): %v", in, err)
		}
		if got := v.String(); got != in {
			t.Errorf("ParseValue(%q).String() = %q, want it as written", in, got)
		}
	}
	// Every percentage with up to two decimals, and the stall shares,
	// which keep their own field.
	for i := 1; i <= 10000; i++ {
		in := strconv.FormatFloat(float64(i)/100, 'f', -1, 64) + "%"
		if v, err := ParseValue(in); err != nil || v.String() != in {
			t.Fatalf("ParseValue(%q).String() = %q (%v), want it as written", in, v.String(), err)
		}
		if i < 10000 {
			if got := StallValue(float64(i) / 100 / 100).String(); got != in {
				t.Fatalf("a stall share of %s prints as %q", in, got)
			}
		}
	}
}
