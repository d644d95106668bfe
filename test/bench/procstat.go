// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (the kernel's
// USER_HZ, what sysconf(_SC_CLK_TCK) returns). It is 100 on every
// architecture Linux exports to user space with a fixed value, and reading it
// from sysconf would need cgo.
const userHZ = 100

// ProcUsage is one reading of a process's CPU time and memory.
type ProcUsage struct {
	// CPU is user + system time (utime + stime).
	CPU time.Duration
	// RSS is VmRSS and HWM is VmHWM (peak RSS), in bytes.
	RSS, HWM int64
	// RSSAnon and RSSFile split RSS into anonymous memory (heap, stacks)
	// and file pages (mostly the binary's own text, shared and clean).
	RSSAnon, RSSFile int64
}

// ReadProcUsage reads /proc/<pid>/stat and /proc/<pid>/status under
// procRoot (normally "/proc").
func ReadProcUsage(procRoot string, pid int) (ProcUsage, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return ProcUsage{}, err
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return ProcUsage{}, err
	}
	ticks, err := ParseStatCPUTicks(stat)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("%s: %w", filepath.Join(dir, "stat"), err)
	}
	m, err := ParseStatusMemory(status)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("%s: %w", filepath.Join(dir, "status"), err)
	}
	return ProcUsage{CPU: time.Duration(ticks) * time.Second / userHZ, RSS: m.RSS, HWM: m.HWM, RSSAnon: m.RSSAnon, RSSFile: m.RSSFile}, nil
}

// ParseStatCPUTicks returns utime + stime (fields 14 and 15 of
// /proc/<pid>/stat, in USER_HZ ticks). The command name in field 2 may hold
// spaces and parentheses, so fields are counted from the last ')'.
func ParseStatCPUTicks(b []byte) (uint64, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in %q", abbreviate(b))
	}
	// After ")": state(3) ppid(4) ... utime(14) stime(15).
	fields := bytes.Fields(b[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("only %d fields after the command name in %q", len(fields), abbreviate(b))
	}
	var total uint64
	for _, i := range []int{utime, stime} {
		v, err := strconv.ParseUint(string(fields[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("field %d %q: not a tick count", i+3, fields[i])
		}
		total += v
	}
	return total, nil
}

// StatusMemory is the memory part of /proc/<pid>/status, in bytes.
type StatusMemory struct {
	RSS, HWM, RSSAnon, RSSFile int64
}

// ParseStatusMemory reads VmRSS, VmHWM, RssAnon and RssFile from
// /proc/<pid>/status. VmRSS and VmHWM are required; the split (Linux 4.5+)
// is zero when missing.
func ParseStatusMemory(b []byte) (StatusMemory, error) {
	var m StatusMemory
	var haveRSS, haveHWM bool
	for line := range bytes.Lines(b) {
		key, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(key) {
		case "VmRSS":
			dst, haveRSS = &m.RSS, true
		case "VmHWM":
			dst, haveHWM = &m.HWM, true
		case "RssAnon":
			dst = &m.RSSAnon
		case "RssFile":
			dst = &m.RSSFile
		default:
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return StatusMemory{}, fmt.Errorf("%s: want \"N kB\", got %q", key, bytes.TrimSpace(rest))
		}
		kib, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kib < 0 {
			return StatusMemory{}, fmt.Errorf("%s: bad size %q", key, f[0])
		}
		*dst = kib << 10
	}
	if !haveRSS || !haveHWM {
		return StatusMemory{}, fmt.Errorf("no VmRSS or VmHWM line (a kernel thread or a zombie?)")
	}
	return m, nil
}

// ParseMetrics returns the values of the named unlabelled samples in a
// Prometheus text exposition; names not present are left out.
func ParseMetrics(text []byte, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	for line := range bytes.Lines(text) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f := bytes.Fields(line)
		if len(f) < 2 || !want[string(f[0])] {
			continue
		}
		v, err := strconv.ParseFloat(string(f[1]), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: bad value %q", f[0], f[1])
		}
		out[string(f[0])] = v
	}
	return out, nil
}

func abbreviate(b []byte) string {
	const n = 80
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
