// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"strings"
	"testing"
	"time"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestSummarize(t *testing.T) {
	twenty := ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
	hundredOne := make([]time.Duration, 0, 101)
	for i := 1; i <= 101; i++ {
		hundredOne = append(hundredOne, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name                  string
		in                    []time.Duration
		n                     int
		min, median, p99, max time.Duration
		mean                  time.Duration
	}{
		{"one sample", ms(7), 1, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"even count takes the lower middle", ms(4, 1, 3, 2), 4, 1 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 2500 * time.Microsecond},
		{"twenty: p99 is the maximum", twenty, 20, 1 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond, 10500 * time.Microsecond},
		{"101: p99 is the 100th", hundredOne, 101, 1 * time.Millisecond, 51 * time.Millisecond, 100 * time.Millisecond, 101 * time.Millisecond, 51 * time.Millisecond},
		{"negative values sort first", ms(-5, 10, 0), 3, -5 * time.Millisecond, 0, 10 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond / 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tt.in...)
			s := Summarize(tt.in)
			if s.N != tt.n || s.Min != tt.min || s.Median != tt.median || s.P99 != tt.p99 || s.Max != tt.max || s.Mean != tt.mean {
				t.Errorf("Summarize = %+v, want n=%d min=%s median=%s p99=%s max=%s mean=%s", s, tt.n, tt.min, tt.median, tt.p99, tt.max, tt.mean)
			}
			for i := range in {
				if in[i] != tt.in[i] {
					t.Fatalf("Summarize reordered its input: %v, was %v", tt.in, in)
				}
			}
		})
	}
}

func TestSummaryString(t *testing.T) {
	tests := []struct {
		in   []time.Duration
		want string
	}{
		{nil, "no samples"},
		{ms(3, 1, 2), "n=3 median=2.0ms p99=3.0ms min=1.0ms max=3.0ms"},
	}
	for _, tt := range tests {
		if got := Summarize(tt.in).String(); got != tt.want {
			t.Errorf("Summarize(%v).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{1, 4, "0.25"},
		{0, 5, "0.00"},
		{3, 0, "n/a"},
	}
	for _, tt := range tests {
		if got := Ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("Ratio(%g, %g) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestTable(t *testing.T) {
	tab := Table{Title: "T", Header: []string{"config", "median", "note"}, Notes: []string{"n1"}}
	tab.Row("memcg", "1.0ms", "ok")
	tab.Row("polling-1s", "480.2ms", "")
	want := strings.Join([]string{
		"T",
		"config      median   note",
		"-------------------------",
		"memcg       1.0ms    ok",
		"polling-1s  480.2ms  ",
		"n1",
		"",
	}, "\n")
	if got := tab.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	if tab.Rows() != 2 {
		t.Errorf("Rows() = %d, want 2", tab.Rows())
	}
}

func TestFillRate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name     string
		in       []Sample
		from, to int64
		want     float64
	}{
		{"empty", nil, 10, 100, 0},
		{"never reaches from", []Sample{{at(0), 1}, {at(10), 5}}, 10, 100, 0},
		{"only one sample above from", []Sample{{at(0), 1}, {at(10), 20}}, 10, 100, 0},
		{"from first sample at or above from to first at or above to",
			[]Sample{{at(0), 0}, {at(100), 10}, {at(200), 60}, {at(600), 110}, {at(700), 500}}, 10, 100, 200},
		{"peak when to is never reached, then a fall ignored",
			[]Sample{{at(0), 20}, {at(500), 70}, {at(1000), 120}, {at(1100), 5}}, 10, 1000, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FillRate(tt.in, tt.from, tt.to); got != tt.want {
				t.Errorf("FillRate = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestCountSame(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, "a ×1"},
		{[]string{"b", "a", "b", "b"}, "b ×3, a ×1"},
	}
	for _, tt := range tests {
		if got := CountSame(tt.in); got != tt.want {
			t.Errorf("CountSame(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
