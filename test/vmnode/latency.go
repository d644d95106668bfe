// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/evictd/evictd/test/bench"
	"github.com/evictd/evictd/test/vmnode/vmapi"
)

// GuestCrossing is what `vmagent crossing` printed for one step: when the
// guest's memory.available was last seen at or above the level and first
// seen below it, on the guest's clock.
type GuestCrossing struct{ vmapi.Crossing }

// ParseGuestCrossing decodes vmagent crossing's output.
func ParseGuestCrossing(out string) (GuestCrossing, error) {
	var c GuestCrossing
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &c); err != nil {
		return c, fmt.Errorf("vmagent crossing printed %q: %w", firstLine(out), err)
	}
	if c.AtUnixNano == 0 {
		return c, fmt.Errorf("vmagent crossing printed no crossing time: %q", firstLine(out))
	}
	return c, nil
}

// Earliest is the earliest the crossing can have happened: the last read
// still at or above the level (the first read below when there was none).
func (c GuestCrossing) Earliest() time.Time {
	if c.LastAboveUnixNano == 0 {
		return time.Unix(0, c.AtUnixNano)
	}
	return time.Unix(0, c.LastAboveUnixNano)
}

// Resolution is how far apart the two reads around the crossing were.
func (c GuestCrossing) Resolution() time.Duration {
	if c.LastAboveUnixNano == 0 {
		return 0
	}
	return time.Duration(c.AtUnixNano - c.LastAboveUnixNano)
}

// CRILogLines parses a container log as the kubelet keeps it ("<time>
// <stream> <tag> <line>" per line) into evictd's JSON log lines, skipping
// lines that are not JSON objects.
func CRILogLines(log string) []bench.LogLine {
	var out []bench.LogLine
	s := bufio.NewScanner(strings.NewReader(log))
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		f := strings.SplitN(s.Text(), " ", 4)
		if len(f) < 4 || !strings.HasPrefix(f[3], "{") {
			continue
		}
		if l := bench.ParseLogLine([]byte(f[3])); l.Fields != nil {
			out = append(out, l)
		}
	}
	return out
}

// FirstLogAfter is the first line at or after from whose msg is msg and
// whose every field in match has that string value.
func FirstLogAfter(lines []bench.LogLine, from time.Time, msg string, match map[string]string) (bench.LogLine, bool) {
	for _, l := range lines {
		if l.Msg != msg || l.TS.Before(from) {
			continue
		}
		ok := true
		for k, v := range match {
			if l.Str(k) != v {
				ok = false
				break
			}
		}
		if ok {
			return l, true
		}
	}
	return bench.LogLine{}, false
}

// NodeLatencyTrial is one step on the VM node and evictd's reaction, every
// time on the guest's clock.
type NodeLatencyTrial struct {
	Crossing GuestCrossing
	// Detected is the ts of evictd's "threshold met" line; Evicted that of
	// its "evicted pod" line for the step pod (after the API server answered).
	Detected, Evicted time.Time
	// Victim is the pod evictd evicted first after the crossing.
	Victim string
	// WokenBy is the wake-up that found the threshold met ("threshold
	// met" line's wokenBy).
	WokenBy string
	// Miss says why the trial has no figure.
	Miss string
}

// Detection is from the crossing (its earliest possible time) to "threshold
// met": an upper bound, off by at most the crossing's resolution.
func (tr NodeLatencyTrial) Detection() time.Duration { return tr.Detected.Sub(tr.Crossing.Earliest()) }

// ToEviction is from the crossing to the "evicted pod" line.
func (tr NodeLatencyTrial) ToEviction() time.Duration { return tr.Evicted.Sub(tr.Crossing.Earliest()) }

// NodeLatencyTable summarizes the trials per configuration, in the order
// given, with each configuration's median detection against the first's
// (the timer-only baseline).
func NodeLatencyTable(title string, configs []string, trials map[string][]NodeLatencyTrial) *bench.Table {
	tab := &bench.Table{
		Title:  title,
		Header: []string{"config", "n", "detection median", "detection p99", "min", "max", "vs " + configs[0], "to eviction median", "to eviction p99", "found by", "no figure"},
	}
	var base time.Duration
	for i, name := range configs {
		var det, ev, res []time.Duration
		var wakes []string
		misses := 0
		for _, tr := range trials[name] {
			if tr.Miss != "" {
				misses++
				continue
			}
			det = append(det, tr.Detection())
			ev = append(ev, tr.ToEviction())
			res = append(res, tr.Crossing.Resolution())
			wakes = append(wakes, tr.WokenBy)
		}
		d, e := bench.Summarize(det), bench.Summarize(ev)
		if d.N == 0 {
			tab.Row(name, 0, "-", "-", "-", "-", "-", "-", "-", "-", misses)
			continue
		}
		if i == 0 {
			base = d.Median
		}
		tab.Row(name, d.N, bench.Ms(d.Median), bench.Ms(d.P99), bench.Ms(d.Min), bench.Ms(d.Max),
			bench.Ratio(float64(d.Median), float64(base)), bench.Ms(e.Median), bench.Ms(e.P99), bench.CountSame(wakes), misses)
		tab.Notes = append(tab.Notes, fmt.Sprintf("%s: crossing timed to within %s (median), %s (max)", name,
			bench.Summarize(res).Median.Round(time.Microsecond), bench.Summarize(res).Max.Round(time.Microsecond)))
	}
	return tab
}
