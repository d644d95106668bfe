// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The pieces of TestNodeContainHardVictim (node_12_contain_test.go, build
// tag vmnode) that need no VM, tested on every run.

// growerLog is what a workload started with --ignore-term said in its
// container log (the kubelet's CRI format): when it ignored its SIGTERM,
// and what it held and asked for after that.
type growerLog struct {
	// IgnoredAt is its "SIGTERM ignored" line's time (the guest's clock),
	// zero when there is none.
	IgnoredAt time.Time
	// Reports are its "growing" lines, in order.
	Reports []growReport
}

// growReport is one "workload: growing: holding N MiB, asking for M MiB"
// line: while it touches pages, the workload says every second how much it
// holds and how much its growth asks for by now.
type growReport struct {
	At                 time.Time
	HoldingMiB, AskMiB int64
}

var growReportLine = regexp.MustCompile(`^workload: growing: holding (\d+) MiB, asking for (\d+) MiB$`)

// parseGrowerLog reads a workload's container log.
func parseGrowerLog(log string) (growerLog, error) {
	var g growerLog
	for _, line := range strings.Split(log, "\n") {
		// "<RFC 3339 time> stdout F <text>"
		f := strings.SplitN(line, " ", 4)
		if len(f) < 4 {
			continue
		}
		text := f[3]
		ignored := strings.HasPrefix(text, "workload: SIGTERM ignored")
		m := growReportLine.FindStringSubmatch(text)
		if !ignored && m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if err != nil {
			return g, fmt.Errorf("log line %q: %w", line, err)
		}
		if ignored {
			if g.IgnoredAt.IsZero() {
				g.IgnoredAt = at
			}
			continue
		}
		r := growReport{At: at}
		r.HoldingMiB, _ = strconv.ParseInt(m[1], 10, 64)
		r.AskMiB, _ = strconv.ParseInt(m[2], 10, 64)
		g.Reports = append(g.Reports, r)
	}
	return g, nil
}

// containedSample is one reading of a contained victim's pod cgroup.
type containedSample struct {
	// At is the guest's clock when it was read, the clock of evictd's
	// log lines.
	At   time.Time
	Read cgroupRead
	// Populated: the victim's container cgroup still has processes
	// (cgroup.events populated). Only those readings are its grace period.
	Populated bool
}

// containCreep is how fast a contained victim may still grow above its
// memory.high, in bytes a second.
//
// memory.high throttles, it does not cap. A charge over it is allowed, and
// the task then sleeps on its way back to user space for a time that grows
// with the square of the overage and with the size of the charge, at most
// 2 s a return (mem_cgroup_handle_over_high, calculate_high_delay: with
// HZ 250, overage² × 250 × pages jiffies, the overage as a share of
// memory.high). With transparent huge pages (this kernel's default: always)
// a fault charges 2 MiB (512 pages), whose sleep reaches the 2 s cap once
// the overage passes 1/16 of memory.high; from there a single-threaded
// grower gains at most 2 MiB every 2 s, 1 MiB/s, whatever it asks for.
// Twice that, for the 4 KiB faults between huge pages and the scheduler.
const containCreep = 2 << 20

// containBound is the most memory.current a victim contained at limit may
// show elapsed after its containment: limit, the overage at which the
// kernel's sleep reaches its cap (limit/16, above), and containCreep since.
func containBound(limit int64, elapsed time.Duration) int64 {
	return limit + limit/16 + int64(max(elapsed, 0).Seconds()*containCreep)
}

// checkContainedSamples returns what is wrong with the readings of a
// victim contained at limit at containedAt (the guest's clock), while it
// still had processes: memory.high other than limit, memory.current above
// containBound, an OOM kill; how many readings that was (live), and how
// often memory.events high rose from one such reading to the next (rises)
// out of how many intervals.
func checkContainedSamples(samples []containedSample, limit int64, containedAt time.Time) (problems []string, live, rises, intervals int) {
	var prev *cgroupRead
	for i, s := range samples {
		if !s.Populated {
			continue
		}
		live++
		r := s.Read
		if r.High != limit {
			problems = append(problems, fmt.Sprintf("reading %d: memory.high %d, want the logged limit %d", i, r.High, limit))
		}
		elapsed := s.At.Sub(containedAt)
		if bound := containBound(limit, elapsed); r.Current > bound {
			problems = append(problems, fmt.Sprintf("reading %d, %.1f s after the containment: memory.current %d (%.1f MiB) above %.1f MiB (memory.high %.1f MiB + 1/16 + %d MiB/s)",
				i, elapsed.Seconds(), r.Current, float64(r.Current)/(1<<20), float64(bound)/(1<<20), float64(limit)/(1<<20), containCreep>>20))
		}
		if k := r.Events["oom_kill"]; k != 0 {
			problems = append(problems, fmt.Sprintf("reading %d: memory.events oom_kill %d", i, k))
		}
		if prev != nil {
			intervals++
			if r.Events["high"] > prev.Events["high"] {
				rises++
			}
		}
		prev = &samples[i].Read
	}
	return problems, live, rises, intervals
}
