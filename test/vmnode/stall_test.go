// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParsePressureRead(t *testing.T) {
	out := `1234.56 2000.00
some avg10=41.50 avg60=20.00 avg300=5.00 total=9000000
full avg10=30.25 avg60=10.00 avg300=2.00 total=4000000
some avg10=0.00 avg60=0.00 avg300=0.00 total=17
full avg10=0.00 avg60=0.00 avg300=0.00 total=3
`
	r, err := ParsePressureRead(out, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := PressureRead{Uptime: 1234.56, Files: []PSI{
		{SomeTotal: 9000000, FullTotal: 4000000, SomeAvg10: 41.5, FullAvg10: 30.25},
		{SomeTotal: 17, FullTotal: 3},
	}}
	if r.Uptime != want.Uptime || len(r.Files) != 2 || r.Files[0] != want.Files[0] || r.Files[1] != want.Files[1] {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	for _, bad := range []struct{ out, err string }{
		{out: "12.0 1.0\n", err: "2 pressure files"},
		{out: "x 1\nsome avg10=0 total=1\nfull avg10=0 total=1\n", err: "uptime"},
		{out: "1 1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=1\n", err: `not a "some" line`},
		{out: "1 1\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=x\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n", err: "total=x"},
	} {
		files := 1
		if bad.err == "2 pressure files" {
			files = 2
		}
		if _, err := ParsePressureRead(bad.out, files); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("ParsePressureRead(%q): %v, want an error containing %q", bad.out, err, bad.err)
		}
	}
}

func TestStallShare(t *testing.T) {
	a := PressureRead{Uptime: 100, Files: []PSI{{SomeTotal: 1_000_000, FullTotal: 500_000}}}
	b := PressureRead{Uptime: 110, Files: []PSI{{SomeTotal: 5_000_000, FullTotal: 1_500_000}}}
	if got := StallShare(a, b, 0, false); math.Abs(got-40) > 1e-9 {
		t.Errorf("some share %v, want 40", got)
	}
	if got := StallShare(a, b, 0, true); math.Abs(got-10) > 1e-9 {
		t.Errorf("full share %v, want 10", got)
	}
	if got := StallShare(a, a, 0, false); got != 0 {
		t.Errorf("no time passed: %v, want 0", got)
	}
	if got := StallShare(b, PressureRead{Uptime: 120, Files: []PSI{{}}}, 0, false); got != 0 {
		t.Errorf("a counter that went back (a new cgroup): %v, want 0", got)
	}
	if got := StallShare(a, b, 1, false); got != 0 {
		t.Errorf("no such file: %v, want 0", got)
	}
}

func TestStallLatencyTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	runs := []StallRun{
		{Config: "psi", Start: t0, Evicted: t0.Add(6 * time.Second), WokenBy: "psi/node"},
		{Config: "psi", Start: t0, Evicted: t0.Add(8 * time.Second), WokenBy: "psi/node"},
		{Config: "polling", Start: t0, Evicted: t0.Add(12 * time.Second)},
		{Config: "polling", Start: t0, Evicted: t0.Add(16 * time.Second), WokenBy: "poll"},
	}
	got := StallLatencyTable("title", []string{"psi", "polling", "none"}, runs).String()
	for _, want := range []string{"title", "vs none", "6.0s 8.0s", "12.0s 16.0s", "psi/node", "poll"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	got = StallLatencyTable("t", []string{"psi", "polling"}, runs).String()
	var psiRow string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "psi ") {
			psiRow = l
		}
	}
	// Nearest-rank medians: 6 s against 12 s.
	if !strings.Contains(psiRow, "0.50") {
		t.Errorf("psi row %q lacks the ratio 0.50 to polling:\n%s", psiRow, got)
	}
}
