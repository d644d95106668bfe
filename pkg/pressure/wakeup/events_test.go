// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"testing"
	"time"
)

func TestParseEventCounters(t *testing.T) {
	all := func(v ...uint64) eventCounters {
		var c eventCounters
		for k, x := range v {
			c.v[k], c.has[k] = x, true
		}
		return c
	}
	tests := []struct {
		name string
		in   string
		want eventCounters
	}{
		{"the kernel's format", "low 0\nhigh 12\nmax 3\noom 0\noom_kill 0\noom_group_kill 0\n", all(0, 12, 3, 0, 0, 0)},
		{"an older kernel without oom_group_kill", "low 1\nhigh 2\nmax 3\noom 4\noom_kill 5\n", all(1, 2, 3, 4, 5)},
		{"a newer key is skipped", "low 0\nhigh 1\nmax 2\noom 3\noom_kill 4\noom_group_kill 5\nsock_throttled 9\n", all(0, 1, 2, 3, 4, 5)},
		{"a partial but well-formed read", "low 0\nhigh 7\n", all(0, 7)},
		{"cgroup.events holds none", "populated 1\nfrozen 0\n", eventCounters{}},
		// The parser is strict (pressure.ScanFlatKeyed): a read that does
		// not parse as a whole yields no counters, not the lines before or
		// after the bad one.
		{"no trailing newline (a truncated read)", "low 0\nhigh 7", eventCounters{}},
		{"empty (a file caught mid-write)", "", eventCounters{}},
		{"a bare newline", "\n", eventCounters{}},
		{"a value that is not a number", "low 0\nhigh 12\nmax x\noom 0\noom_kill 0\n", eventCounters{}},
		{"a key without a value", "low 0\nhigh\nmax 3\n", eventCounters{}},
		{"a line without a key", "low 0\n max 3\n", eventCounters{}},
		{"a negative value", "low 0\nmax -1\n", eventCounters{}},
		{"two spaces", "low 0\nmax  3\n", eventCounters{}},
		{"an empty line", "low 0\n\nmax 3\n", eventCounters{}},
		{"a malformed unknown key", "low 0\nhigh 1\nsock_throttled ?\n", eventCounters{}},
		{"the previous parser's skipped lines", "low x\nhigh\n max 3\nmax -1\nmax 4\n", eventCounters{}},
		{"a value too large", "high 123456789012345678901\n", eventCounters{}},
		{"a value too large among good lines", "low 1\nhigh 18446744073709551616\nmax 3\n", eventCounters{}},
		{"the largest counter", "oom_kill 18446744073709551615\n", func() eventCounters {
			var c eventCounters
			c.v[evOOMKill], c.has[evOOMKill] = 18446744073709551615, true
			return c
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseEventCounters([]byte(tc.in)); got != tc.want {
				t.Errorf("parseEventCounters(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestEventJudge(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type read struct {
		at   time.Duration
		file string
		want string // the counter that wakes, "" for none
	}
	const base = "low 0\nhigh 10\nmax 10\noom 10\noom_kill 10\noom_group_kill 10\n"
	tests := []struct {
		name  string
		local bool
		reads []read
	}{
		{"local: each own counter wakes", true, []read{
			{0, base, ""},
			{1, "low 1\nhigh 10\nmax 10\noom 10\noom_kill 10\noom_group_kill 10\n", "low"},
			{2, "low 1\nhigh 11\nmax 10\noom 10\noom_kill 10\noom_group_kill 10\n", "high"},
			{3, "low 1\nhigh 11\nmax 11\noom 10\noom_kill 10\noom_group_kill 10\n", "max"},
			{4, "low 1\nhigh 11\nmax 11\noom 11\noom_kill 10\noom_group_kill 10\n", "oom"},
			{5, "low 1\nhigh 11\nmax 11\noom 11\noom_kill 11\noom_group_kill 10\n", "oom_kill"},
			{6, "low 1\nhigh 11\nmax 11\noom 11\noom_kill 11\noom_group_kill 11\n", "oom_group_kill"},
			{7, "low 1\nhigh 11\nmax 11\noom 11\noom_kill 11\noom_group_kill 11\nsock_throttled 5\n", ""},
		}},
		{"local: a truncated read is no rise, and no reset", true, []read{
			{0, base, ""},
			{1, "", ""},
			{2, "low 0\nhigh 10\n", ""},
			{3, base, ""},
			{4, "low 0\nhigh 10\nmax 12\n", "max"},
		}},
		{"local: a garbled read is no rise, and no new baseline", true, []read{
			{0, base, ""},
			{1, "low 0\nhigh 10\nmax 12\noom x\noom_kill 10\noom_group_kill 10\n", ""},
			{2, "low 0\nhigh 10\nmax 13\noom 10\noom_kill 10", ""},
			{3, "low 0\nhigh 10\nmax 12\noom 10\noom_kill 10\noom_group_kill 10\n", "max"},
		}},
		{"hierarchical: a garbled read is no rise, and no new baseline", false, []read{
			{0, base, ""},
			{60, "low 0\nhigh 10\nmax 10\noom 10\noom_kill 11\noom_group_kill\n", ""},
			{61, "low 0\nhigh 10\nmax 10\noom 10\noom_kill 11\noom_group_kill 10\n", "oom_kill"},
		}},
		{"local: a counter going down is a new baseline", true, []read{
			{0, base, ""},
			{1, "low 0\nhigh 1\nmax 1\noom 1\noom_kill 1\noom_group_kill 1\n", ""},
			{2, "low 0\nhigh 2\nmax 1\noom 1\noom_kill 1\noom_group_kill 1\n", "high"},
		}},
		{"local: the first read is the baseline", true, []read{
			{0, "low 5\nhigh 500\nmax 50\noom 5\noom_kill 5\noom_group_kill 5\n", ""},
		}},
		{"hierarchical: pods' high, max and OOMs never wake", false, []read{
			{0, base, ""},
			{1, "low 0\nhigh 90\nmax 40\noom 10\noom_kill 10\noom_group_kill 10\n", ""},
			{2, "low 0\nhigh 90\nmax 41\noom 11\noom_kill 14\noom_group_kill 11\n", ""},
			{3, "low 3\nhigh 90\nmax 41\noom 11\noom_kill 14\noom_group_kill 11\n", ""},
		}},
		{"hierarchical: a kill without a memcg OOM wakes", false, []read{
			{0, base, ""},
			{60, "low 0\nhigh 10\nmax 10\noom 10\noom_kill 11\noom_group_kill 11\n", "oom_kill"},
		}},
		{"hierarchical: a kill counted within a second of a memcg OOM is that OOM's", false, []read{
			{0, base, ""},
			{60, "low 0\nhigh 10\nmax 11\noom 11\noom_kill 10\noom_group_kill 10\n", ""},
			{60, "low 0\nhigh 10\nmax 11\noom 11\noom_kill 12\noom_group_kill 11\n", ""},
		}},
		{"hierarchical: a kill over a second after the last memcg OOM wakes", false, []read{
			{0, base, ""},
			{60, "low 0\nhigh 10\nmax 11\noom 11\noom_kill 11\noom_group_kill 10\n", ""},
			{61, "low 0\nhigh 10\nmax 11\noom 11\noom_kill 12\noom_group_kill 10\n", "oom_kill"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := eventJudge{local: tc.local}
			for i, r := range tc.reads {
				k, rose := j.observe(parseEventCounters([]byte(r.file)), t0.Add(r.at*time.Second))
				got := ""
				if rose {
					got = k.String()
				}
				if got != r.want {
					t.Errorf("read %d (%q): woke for %q, want %q", i, r.file, got, r.want)
				}
			}
		})
	}
}

func TestParseEventCountersDoesNotAllocate(t *testing.T) {
	b := []byte("low 0\nhigh 12\nmax 3\noom 0\noom_kill 0\noom_group_kill 0\nsock_throttled 0\n")
	var c eventCounters
	if n := testing.AllocsPerRun(100, func() { c = parseEventCounters(b) }); n != 0 {
		t.Errorf("parseEventCounters allocates %v times per call", n)
	}
	if !c.has[evHigh] || c.v[evHigh] != 12 {
		t.Errorf("parsed %+v", c)
	}
}
