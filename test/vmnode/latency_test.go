// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/vmnode/vmapi"
)

func TestParseGuestCrossing(t *testing.T) {
	c, err := ParseGuestCrossing(`{"lastAboveUnixNano":1000000000,"atUnixNano":1002000000,"available":300,"before":500,"reads":9,"trigger":""}` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Earliest().Equal(time.Unix(1, 0)) || c.Resolution() != 2*time.Millisecond {
		t.Errorf("earliest %v, resolution %v", c.Earliest(), c.Resolution())
	}
	if c, _ := ParseGuestCrossing(`{"atUnixNano":5}`); !c.Earliest().Equal(time.Unix(0, 5)) || c.Resolution() != 0 {
		t.Errorf("first read already below: earliest %v, resolution %v", c.Earliest(), c.Resolution())
	}
	for _, bad := range []string{"", "vmagent crossing: nope", `{"reads":3}`} {
		if _, err := ParseGuestCrossing(bad); err == nil {
			t.Errorf("ParseGuestCrossing(%q) accepted", bad)
		}
	}
}

func TestCRILogLinesAndFirstLogAfter(t *testing.T) {
	log := `2026-11-22T20:40:26.02943586Z stderr F {"level":"info","ts":"2026-11-22T20:40:26.02761689Z","msg":"threshold met","signal":"memory.available","wokenBy":"poll"}
2026-11-22T20:40:26.5Z stderr F not json
2026-11-22T20:40:26.71411564Z stderr F {"level":"info","ts":"2026-11-22T20:40:26.71248337Z","msg":"evicted pod","pod":"ns/other"}
2026-11-22T20:40:27.1Z stderr F {"level":"info","ts":"2026-11-22T20:40:27.0Z","msg":"evicted pod","pod":"ns/step-1"}
`
	lines := CRILogLines(log)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want the 3 JSON ones", len(lines))
	}
	from := time.Date(2026, 11, 22, 20, 40, 26, 0, time.UTC)
	if l, ok := FirstLogAfter(lines, from, "threshold met", nil); !ok || l.Str("wokenBy") != "poll" {
		t.Errorf("threshold met: %+v %v", l, ok)
	}
	if l, ok := FirstLogAfter(lines, from, "evicted pod", map[string]string{"pod": "ns/step-1"}); !ok || !l.TS.Equal(from.Add(time.Second)) {
		t.Errorf("evicted step-1: %+v %v", l, ok)
	}
	if _, ok := FirstLogAfter(lines, from.Add(2*time.Second), "evicted pod", nil); ok {
		t.Error("a line before from was taken")
	}
}

func TestNodeLatencyTable(t *testing.T) {
	at := time.Unix(100, 0)
	trial := func(det, ev time.Duration, by string) NodeLatencyTrial {
		return NodeLatencyTrial{Crossing: GuestCrossing{vmapi.Crossing{LastAboveUnixNano: at.UnixNano(), AtUnixNano: at.Add(time.Millisecond).UnixNano()}},
			Detected: at.Add(det), Evicted: at.Add(ev), WokenBy: by}
	}
	trials := map[string][]NodeLatencyTrial{
		"polling-1s": {trial(400*time.Millisecond, 600*time.Millisecond, "poll"), trial(600*time.Millisecond, 800*time.Millisecond, "poll"), {Miss: "no line"}},
		"adaptive":   {trial(100*time.Millisecond, 300*time.Millisecond, "poll"), trial(150*time.Millisecond, 350*time.Millisecond, "poll")},
		"psi":        nil,
	}
	out := NodeLatencyTable("t", []string{"polling-1s", "adaptive", "psi"}, trials).String()
	for _, want := range []string{"vs polling-1s", "400.0ms", "600.0ms", "0.25", "poll ×2", "within 1ms (median)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
