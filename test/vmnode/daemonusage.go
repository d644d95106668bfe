// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// A daemon's own cost beside the kubelet (issue 35's overhead section):
// its resident memory and CPU, read from the guest's /proc, idle and over
// a run of make bench-peers.

// userHZ is the unit of a /proc/PID/stat time: USER_HZ, 100 on Linux
// whatever the kernel's own HZ (the ABI fixes it).
const userHZ = 100

// DaemonSample is one reading of a daemon's process.
type DaemonSample struct {
	PID int
	// Uptime is the guest's, in seconds; CPUTicks utime + stime in userHZ.
	Uptime   float64
	CPUTicks int64
	// RSS is VmRSS, HWM VmHWM (the most resident since the process
	// started), Anon and File its RssAnon and RssFile; bytes.
	RSS, HWM, Anon, File int64
}

// ParseDaemonSample reads daemonSampleScript's output.
func ParseDaemonSample(out string) (DaemonSample, error) {
	var s DaemonSample
	sc := bufio.NewScanner(strings.NewReader(out))
	var lines []string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 3 {
		return s, fmt.Errorf("daemon sample: %d lines, want the PID, /proc/uptime and the stat line: %q", len(lines), out)
	}
	pid, ok := strings.CutPrefix(lines[0], "pid ")
	var err error
	if s.PID, err = strconv.Atoi(pid); !ok || err != nil {
		return s, fmt.Errorf("daemon sample: first line %q is not \"pid N\"", lines[0])
	}
	up := strings.Fields(lines[1])
	if len(up) != 2 {
		return s, fmt.Errorf("daemon sample: /proc/uptime %q", lines[1])
	}
	if s.Uptime, err = strconv.ParseFloat(up[0], 64); err != nil {
		return s, fmt.Errorf("daemon sample: /proc/uptime %q: %w", lines[1], err)
	}
	// The comm, in parentheses, may hold spaces and parentheses itself:
	// the fields start after the last ')'.
	i := strings.LastIndexByte(lines[2], ')')
	if i < 0 {
		return s, fmt.Errorf("daemon sample: stat line %q has no (comm)", lines[2])
	}
	f := strings.Fields(lines[2][i+1:])
	// f[0] is field 3 (state): utime and stime, fields 14 and 15, are
	// f[11] and f[12].
	if len(f) < 13 {
		return s, fmt.Errorf("daemon sample: stat line %q has %d fields after the comm, want at least 13", lines[2], len(f))
	}
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("daemon sample: stat line %q: utime/stime %q: %w", lines[2], v, err)
		}
		s.CPUTicks += n
	}
	found := map[string]bool{}
	for _, l := range lines[3:] {
		name, rest, ok := strings.Cut(l, ":")
		kb := strings.Fields(rest)
		if !ok || len(kb) != 2 || kb[1] != "kB" {
			return s, fmt.Errorf("daemon sample: status line %q", l)
		}
		v, err := strconv.ParseInt(kb[0], 10, 64)
		if err != nil {
			return s, fmt.Errorf("daemon sample: status line %q: %w", l, err)
		}
		switch name {
		case "VmRSS":
			s.RSS = v << 10
		case "VmHWM":
			s.HWM = v << 10
		case "RssAnon":
			s.Anon = v << 10
		case "RssFile":
			s.File = v << 10
		}
		found[name] = true
	}
	for _, name := range []string{"VmRSS", "VmHWM", "RssAnon", "RssFile"} {
		if !found[name] {
			return s, fmt.Errorf("daemon sample: no %s line in %q", name, out)
		}
	}
	return s, nil
}

// CPUShare is the share of one core the process used between a and b, in
// percent; false when they are not the same process or no time passed.
func CPUShare(a, b DaemonSample) (float64, bool) {
	if a.PID != b.PID || b.Uptime <= a.Uptime || b.CPUTicks < a.CPUTicks {
		return 0, false
	}
	return float64(b.CPUTicks-a.CPUTicks) / userHZ / (b.Uptime - a.Uptime) * 100, true
}

// DaemonUsage is a daemon's cost in one run: idle (Idle to IdleEnd, before
// the pressure) and over the run (IdleEnd to End, the pressure and its
// relief).
type DaemonUsage struct {
	Daemon             string
	Idle, IdleEnd, End DaemonSample
	Pods               int // the pods on the node when the idle window ended
	// Unreadable says why the idle window could not be read; EndUnreadable
	// why the run's end could not (a guest that stopped answering): the idle
	// figures stand without it.
	Unreadable, EndUnreadable string
}

// OverheadTable lays out each run's daemon cost: the configuration, the
// daemon, its RSS when idle (anon / file), its VmHWM at the run's end,
// and its CPU idle and over the run.
func OverheadTable(runs []PeerRun) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "scenario\tconfiguration\tdaemon\tpods\tidle VmRSS MiB (anon/file)\tVmHWM at end MiB\tidle CPU % of a core\trun CPU % of a core")
	for _, r := range runs {
		u := r.Usage
		if u == nil {
			continue
		}
		if u.Unreadable != "" {
			fmt.Fprintf(w, "%s\t%s\t%s\t-\tunreadable: %s\t\t\t\n", r.Scenario, r.Config, u.Daemon, u.Unreadable)
			continue
		}
		cpu := func(a, b DaemonSample) string {
			if c, ok := CPUShare(a, b); ok {
				return strconv.FormatFloat(c, 'f', 2, 64)
			}
			return "restarted"
		}
		hwm, run := "-", "unread: "+u.EndUnreadable
		switch {
		case u.EndUnreadable == "" && u.End.PID == 0:
			run = "-" // the idle figures, logged before the run's end
		case u.EndUnreadable == "":
			hwm, run = strconv.FormatFloat(mib(u.End.HWM), 'f', 1, 64), cpu(u.IdleEnd, u.End)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.1f (%.1f/%.1f)\t%s\t%s\t%s\n", r.Scenario, r.Config, u.Daemon, u.Pods,
			mib(u.IdleEnd.RSS), mib(u.IdleEnd.Anon), mib(u.IdleEnd.File), hwm, cpu(u.Idle, u.IdleEnd), run)
	}
	w.Flush()
	return b.String()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
