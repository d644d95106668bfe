// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/test/bench"
)

// PSI is one memory pressure file (/proc/pressure/memory, a cgroup's
// memory.pressure): the time tasks stalled on memory since boot (or the
// cgroup's creation), in microseconds, and the kernel's 10 s averages, in
// percent. "some" is the time at least one task stalled, "full" the time
// all of them did.
type PSI struct {
	SomeTotal, FullTotal uint64
	SomeAvg10, FullAvg10 float64
}

// PressureRead is the guest's uptime and the pressure files read with it
// (in one `cat /proc/uptime FILE...`), in the order asked.
type PressureRead struct {
	Uptime float64 // seconds
	Files  []PSI
}

// ParsePressureRead parses the output of `cat /proc/uptime FILE...` for
// files pressure files: the uptime line, then a "some" and a "full" line
// for each.
func ParsePressureRead(out string, files int) (PressureRead, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+2*files {
		return PressureRead{}, fmt.Errorf("%d lines for the uptime and %d pressure files: %q", len(lines), files, out)
	}
	var r PressureRead
	up, _, _ := strings.Cut(lines[0], " ")
	var err error
	if r.Uptime, err = strconv.ParseFloat(up, 64); err != nil {
		return r, fmt.Errorf("uptime %q: %w", lines[0], err)
	}
	for i := range files {
		var p PSI
		for j, kind := range []string{"some", "full"} {
			line := lines[1+2*i+j]
			f := strings.Fields(line)
			if len(f) != 5 || f[0] != kind {
				return r, fmt.Errorf("pressure file %d: %q is not a %q line", i, line, kind)
			}
			var avg10 float64
			var total uint64
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "avg10":
					avg10, err = strconv.ParseFloat(v, 64)
				case "total":
					total, err = strconv.ParseUint(v, 10, 64)
				}
				if err != nil {
					return r, fmt.Errorf("pressure file %d: %q: %w", i, line, err)
				}
			}
			if kind == "some" {
				p.SomeTotal, p.SomeAvg10 = total, avg10
			} else {
				p.FullTotal, p.FullAvg10 = total, avg10
			}
		}
		r.Files = append(r.Files, p)
	}
	return r, nil
}

// StallShare is the share of the time from a to b, in percent, that file
// i's tasks stalled ("full" or "some"): what the stall signals measure over
// their window. 0 when no time passed.
func StallShare(a, b PressureRead, i int, full bool) float64 {
	dt := b.Uptime - a.Uptime
	if dt <= 0 || i >= len(a.Files) || i >= len(b.Files) {
		return 0
	}
	x, y := a.Files[i].SomeTotal, b.Files[i].SomeTotal
	if full {
		x, y = a.Files[i].FullTotal, b.Files[i].FullTotal
	}
	if y < x {
		return 0
	}
	return float64(y-x) / 1e6 / dt * 100
}

// StallRun is one stall-to-eviction trial on the VM node: from the
// thrasher's first reread (its log line's time) to evictd's "evicted pod"
// line for it, both on the guest's clock.
type StallRun struct {
	Config string
	// Start is the thrasher's "rereading it from now on" line, Evicted
	// evictd's "evicted pod" line.
	Start, Evicted time.Time
	// Detected is evictd's "threshold met" line when it wrote one (the
	// first of an episode), and WokenBy its wake-up.
	Detected time.Time
	WokenBy  string
	// Share is the thrasher pod's own stall share (some) over the run.
	Share float64
}

// ToEviction is the stall's start to the eviction.
func (r StallRun) ToEviction() time.Duration { return r.Evicted.Sub(r.Start) }

// StallLatencyTable lists the runs and, per configuration in the order
// given, the median time to eviction and its ratio to the last
// configuration's (the baseline).
func StallLatencyTable(title string, configs []string, runs []StallRun) *bench.Table {
	base := configs[len(configs)-1]
	tab := &bench.Table{Title: title, Header: []string{"config", "n", "to eviction median", "min", "max", "vs " + base, "each run", "found by"}}
	per := func(c string) (ds []time.Duration, each, woke []string) {
		for _, r := range runs {
			if r.Config != c {
				continue
			}
			ds = append(ds, r.ToEviction())
			each = append(each, seconds(r.ToEviction()))
			if r.WokenBy != "" {
				woke = append(woke, r.WokenBy)
			}
		}
		return ds, each, woke
	}
	baseDs, _, _ := per(base)
	baseMedian := bench.Summarize(baseDs).Median
	for _, c := range configs {
		ds, each, woke := per(c)
		s := bench.Summarize(ds)
		if s.N == 0 {
			tab.Row(c, 0, "-", "-", "-", "-", "-", "-")
			continue
		}
		found := "-"
		if len(woke) > 0 {
			found = bench.CountSame(woke)
		}
		tab.Row(c, s.N, seconds(s.Median), seconds(s.Min), seconds(s.Max),
			bench.Ratio(float64(s.Median), float64(baseMedian)), strings.Join(each, " "), found)
	}
	return tab
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
