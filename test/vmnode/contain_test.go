// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"strings"
	"testing"
	"time"
)

func TestParseGrowerLog(t *testing.T) {
	log := `2026-11-25T06:00:00.000000001Z stdout F workload: holding 0 MiB
2026-11-25T06:00:10.5Z stdout F workload: growing: holding 300 MiB, asking for 310 MiB
2026-11-25T06:00:11Z stdout F workload: SIGTERM ignored (--ignore-term), holding 320 MiB
2026-11-25T06:00:11.2Z stdout F workload: growing: holding 320 MiB, asking for 330 MiB
2026-11-25T06:00:12.2Z stdout P workload: growing: holding 321 MiB, asking for 360 MiB
2026-11-25T06:00:13Z stdout F workload: SIGTERM ignored (--ignore-term), holding 322 MiB
not a CRI line
`
	g, err := parseGrowerLog(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 25, 6, 0, 11, 0, time.UTC); !g.IgnoredAt.Equal(want) {
		t.Errorf("IgnoredAt %s, want the first ignored SIGTERM %s", g.IgnoredAt, want)
	}
	if len(g.Reports) != 3 {
		t.Fatalf("%d reports, want 3: %+v", len(g.Reports), g.Reports)
	}
	if r := g.Reports[2]; r.HoldingMiB != 321 || r.AskMiB != 360 || !r.At.Equal(time.Date(2026, 11, 25, 6, 0, 12, 200e6, time.UTC)) {
		t.Errorf("last report %+v", r)
	}
	if _, err := parseGrowerLog("yesterday stdout F workload: SIGTERM ignored (--ignore-term), holding 1 MiB"); err == nil {
		t.Error("a bad time parsed")
	}
}

func TestCheckContainedSamples(t *testing.T) {
	const limit = 256 << 20
	at := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	read := func(after time.Duration, current, high, events, oomKill int64) containedSample {
		return containedSample{At: at.Add(after), Populated: true,
			Read: cgroupRead{Current: current, High: high, Events: map[string]int64{"high": events, "oom_kill": oomKill}}}
	}
	dead := read(25*time.Second, 0, -1, 90, 0)
	dead.Populated = false
	good := []containedSample{read(time.Second, 250<<20, limit, 0, 0), read(3*time.Second, limit, limit, 10, 0),
		read(5*time.Second, limit+8<<20, limit, 90, 0), read(7*time.Second, limit+9<<20, limit, 90, 0), dead}
	probs, live, rises, intervals := checkContainedSamples(good, limit, at)
	if len(probs) != 0 || live != 4 || rises != 2 || intervals != 3 {
		t.Errorf("good samples: %v, %d live, %d rises in %d intervals; want none, 4, 2 in 3", probs, live, rises, intervals)
	}
	if b := containBound(limit, 20*time.Second); b != limit+limit/16+40<<20 {
		t.Errorf("bound 20 s after: %d, want memory.high + 1/16 + 40 MiB", b)
	}
	if b := containBound(limit, -time.Second); b != limit+limit/16 {
		t.Errorf("bound before the containment (clocks): %d, want memory.high + 1/16", b)
	}
	bound := containBound(limit, 10*time.Second)
	for name, tc := range map[string]struct {
		s    containedSample
		want string
	}{
		"other memory.high":  {read(10*time.Second, 200<<20, limit+4096, 1, 0), "memory.high"},
		"no memory.high":     {read(10*time.Second, 200<<20, -1, 1, 0), "memory.high -1"},
		"over the bound":     {read(10*time.Second, bound+4096, limit, 1, 0), "above"},
		"at the bound":       {read(10*time.Second, bound, limit, 1, 0), ""},
		"OOM-killed":         {read(10*time.Second, 200<<20, limit, 1, 1), "oom_kill 1"},
		"dead, not counted":  {dead, ""},
		"growing as it asks": {read(10*time.Second, limit+300<<20, limit, 1, 0), "above"},
	} {
		probs, _, _, _ := checkContainedSamples([]containedSample{tc.s}, limit, at)
		if tc.want == "" && len(probs) != 0 || tc.want != "" && (len(probs) != 1 || !strings.Contains(probs[0], tc.want)) {
			t.Errorf("%s: %v, want one problem with %q", name, probs, tc.want)
		}
	}
}
