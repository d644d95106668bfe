// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The parsers below are pure functions over the bytes of one kernel file. They
// run for every pod on every pass, so they do not allocate: errors are
// sentinels, and the caller adds the file name and content when it reports one.

var (
	errEmpty      = errors.New("empty content")
	errNoNewline  = errors.New("content does not end with a newline (truncated read?)")
	errSyntax     = errors.New("unexpected syntax")
	errNotNumber  = errors.New("not a decimal number")
	errOverflow   = errors.New("number out of range")
	errMissingKey = errors.New("a required key is missing")
	errDirent     = errors.New("malformed directory entry")
)

// unlimited is what parseLimit returns for "max" (cgroup v2 memory.max).
const unlimited = math.MaxUint64

// trimNewline checks that b is one complete kernel line set: non-empty and
// ending in '\n' (every cgroupfs and procfs file the observer reads does), and
// drops that final newline. A missing newline is how a truncated read shows.
func trimNewline(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, errEmpty
	}
	if b[len(b)-1] != '\n' {
		return nil, errNoNewline
	}
	return b[:len(b)-1], nil
}

// atou parses an unsigned decimal number with no sign, space or newline.
func atou(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errNotNumber
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNotNumber
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, errOverflow
		}
		n = n*10 + d
	}
	return n, nil
}

// parseUint parses a single-value file such as memory.usage_in_bytes,
// memory.current, pids.current or /proc/sys/kernel/pid_max.
func parseUint(b []byte) (uint64, error) {
	b, err := trimNewline(b)
	if err != nil {
		return 0, err
	}
	return atou(b)
}

// parseLimit parses memory.max (v2, "max" when unlimited) or
// memory.limit_in_bytes (v1, a huge page-aligned number when unlimited, which
// the caller caps with MemTotal).
func parseLimit(b []byte) (uint64, error) {
	t, err := trimNewline(b)
	if err != nil {
		return 0, err
	}
	if string(t) == "max" {
		return unlimited, nil
	}
	return atou(t)
}

// The keys parseMeminfoSwap needs, as errors naming them: the kernel prints
// both on every kernel, with swap or without, so a missing one is a broken read.
var (
	errNoSwapTotal = fmt.Errorf("%w: SwapTotal", errMissingKey)
	errNoSwapFree  = fmt.Errorf("%w: SwapFree", errMissingKey)
)

// parseMeminfoSwap returns SwapTotal and SwapFree, in bytes, from
// /proc/meminfo, whose lines read "SwapTotal:     1048572 kB". Only those
// two lines are checked; it stops once it has both. On an error, line is
// what to show in the warning (a part of b): the malformed line, the
// partial last line of a truncated read, or nil when a key is missing.
func parseMeminfoSwap(b []byte) (total, free uint64, line []byte, err error) {
	body, err := trimNewline(b)
	if err != nil {
		if err == errNoNewline {
			return 0, 0, b[bytes.LastIndexByte(b, '\n')+1:], err
		}
		return 0, 0, b, err
	}
	var haveTotal, haveFree bool
	for len(body) > 0 && !(haveTotal && haveFree) {
		line, body, _ = bytes.Cut(body, []byte{'\n'})
		var dst *uint64
		var v []byte
		if rest, ok := bytes.CutPrefix(line, []byte("SwapTotal:")); ok && !haveTotal {
			dst, v, haveTotal = &total, rest, true
		} else if rest, ok := bytes.CutPrefix(line, []byte("SwapFree:")); ok && !haveFree {
			dst, v, haveFree = &free, rest, true
		} else {
			continue
		}
		if *dst, err = parseKB(v); err != nil {
			return 0, 0, line, err
		}
	}
	switch {
	case !haveTotal:
		return 0, 0, nil, errNoSwapTotal
	case !haveFree:
		return 0, 0, nil, errNoSwapFree
	}
	return total, free, nil, nil
}

// parseKB parses the value part of a /proc/meminfo line, the number
// right-aligned after the key's colon and then " kB", into bytes.
func parseKB(b []byte) (uint64, error) {
	b = bytes.TrimLeft(b, " ")
	num, ok := bytes.CutSuffix(b, []byte(" kB"))
	if !ok {
		return 0, errSyntax
	}
	n, err := atou(num)
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint64/1024 {
		return 0, errOverflow
	}
	return n * 1024, nil
}

// ScanFlatKeyed calls fn for every "key value" line of a flat-keyed cgroup file
// (memory.stat, memory.events, memory.events.local). Each line must be a key,
// one space and a decimal value, and the content must end with a newline;
// anything else is an error, so a garbled file is never half-read (fn may
// already have been called for the lines before the bad one: callers discard
// what they collected when an error is returned). It does not allocate.
//
// It is exported so that the wake-up sources (package wakeup, which reads
// memory.events on every notification) share the observer's parser.
func ScanFlatKeyed(b []byte, fn func(key []byte, v uint64)) error {
	b, err := trimNewline(b)
	if err != nil {
		return err
	}
	for {
		line, rest, more := bytes.Cut(b, []byte{'\n'})
		sp := bytes.IndexByte(line, ' ')
		if sp <= 0 {
			return errSyntax
		}
		v, err := atou(line[sp+1:])
		if err != nil {
			return err
		}
		fn(line[:sp], v)
		if !more {
			return nil
		}
		b = rest
	}
}

// memStat holds the memory.stat fields the observer uses. On cgroup v1 they
// come from the hierarchical total_* keys (a pod's processes live in its
// container children); on v2 every key is already hierarchical.
type memStat struct {
	InactiveFile uint64 // v1 total_inactive_file, v2 inactive_file: the kubelet's working set subtracts it
	RSS          uint64 // v1 total_rss, v2 anon (what cAdvisor reports as RSS on each)
	File         uint64 // v1 total_cache, v2 file: with anon, emulates usage of the v2 root cgroup
	PgFault      uint64
	PgMajFault   uint64
}

// parseMemoryStat parses memory.stat of cgroup v1 (v2 == false) or v2.
// inactive_file is required because the working set cannot be computed
// without it; it sits late in the file, so a truncated file is caught.
func parseMemoryStat(b []byte, v2 bool) (memStat, error) {
	var s memStat
	var seen bool
	err := ScanFlatKeyed(b, func(k []byte, v uint64) {
		if v2 {
			switch string(k) {
			case "inactive_file":
				s.InactiveFile, seen = v, true
			case "anon":
				s.RSS = v
			case "file":
				s.File = v
			case "pgfault":
				s.PgFault = v
			case "pgmajfault":
				s.PgMajFault = v
			}
			return
		}
		switch string(k) {
		case "total_inactive_file":
			s.InactiveFile, seen = v, true
		case "total_rss":
			s.RSS = v
		case "total_cache":
			s.File = v
		case "total_pgfault":
			s.PgFault = v
		case "total_pgmajfault":
			s.PgMajFault = v
		}
	})
	if err != nil {
		return memStat{}, err
	}
	if !seen {
		return memStat{}, errMissingKey
	}
	return s, nil
}

// MemoryEvents are the cgroup v2 memory.events counters of a pod: how often it
// hit memory.high and memory.max, and how often the OOM killer ran in it.
type MemoryEvents struct {
	Low     uint64 `json:"low"`
	High    uint64 `json:"high"`
	Max     uint64 `json:"max"`
	OOM     uint64 `json:"oom"`
	OOMKill uint64 `json:"oomKill"`
}

// parseMemoryEvents parses cgroup v2 memory.events. Newer kernels add keys
// (oom_group_kill, sock_throttled), which are ignored; oom_kill is required
// because it is the last key every kernel since 4.13 prints.
func parseMemoryEvents(b []byte) (MemoryEvents, error) {
	var e MemoryEvents
	var seen bool
	err := ScanFlatKeyed(b, func(k []byte, v uint64) {
		switch string(k) {
		case "low":
			e.Low = v
		case "high":
			e.High = v
		case "max":
			e.Max = v
		case "oom":
			e.OOM = v
		case "oom_kill":
			e.OOMKill, seen = v, true
		}
	})
	if err != nil {
		return MemoryEvents{}, err
	}
	if !seen {
		return MemoryEvents{}, errMissingKey
	}
	return e, nil
}

// parsePSI parses a pressure file (/proc/pressure/* or a cgroup's
// *.pressure): a "some" line and, except for system-wide cpu on kernels
// before 5.13, a "full" line, each "avg10=A avg60=B avg300=C total=T".
func parsePSI(b []byte) (statsv1alpha1.PSIStats, error) {
	var p statsv1alpha1.PSIStats
	b, err := trimNewline(b)
	if err != nil {
		return p, err
	}
	var haveSome, haveFull bool
	for {
		line, rest, more := bytes.Cut(b, []byte{'\n'})
		kind, fields, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return p, errSyntax
		}
		var dst *statsv1alpha1.PSIData
		switch {
		case string(kind) == "some" && !haveSome:
			dst, haveSome = &p.Some, true
		case string(kind) == "full" && !haveFull:
			dst, haveFull = &p.Full, true
		default:
			return p, errSyntax
		}
		if err := parsePSILine(fields, dst); err != nil {
			return p, err
		}
		if !more {
			break
		}
		b = rest
	}
	if !haveSome {
		return p, errMissingKey
	}
	return p, nil
}

// parsePSILine parses "avg10=A avg60=B avg300=C total=T" in that order.
func parsePSILine(b []byte, d *statsv1alpha1.PSIData) error {
	for i, key := range [...]string{"avg10=", "avg60=", "avg300=", "total="} {
		var field []byte
		if i < 3 {
			var ok bool
			field, b, ok = bytes.Cut(b, []byte{' '})
			if !ok {
				return errSyntax
			}
		} else {
			field = b
		}
		if len(field) < len(key) || string(field[:len(key)]) != key {
			return errSyntax
		}
		val := field[len(key):]
		var err error
		switch i {
		case 0:
			d.Avg10, err = parseDecimal(val)
		case 1:
			d.Avg60, err = parseDecimal(val)
		case 2:
			d.Avg300, err = parseDecimal(val)
		case 3:
			d.Total, err = atou(val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pow10 holds the powers of ten that are exact in a float64.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseDecimal parses the kernel's "%lu.%02lu" averages without allocating
// (strconv.ParseFloat needs a string). With at most 15 digits the mantissa
// and the power of ten are exact, so one division gives the correctly
// rounded value, the same as strconv would.
func parseDecimal(b []byte) (float64, error) {
	intPart, frac, hasDot := bytes.Cut(b, []byte{'.'})
	if len(intPart) == 0 || (hasDot && len(frac) == 0) || len(intPart)+len(frac) > 15 {
		return 0, errNotNumber
	}
	m, err := atou(intPart)
	if err != nil {
		return 0, err
	}
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, errNotNumber
		}
		m = m*10 + uint64(c-'0')
	}
	return float64(m) / pow10[len(frac)], nil
}

// parseLoadavgTasks returns the number of tasks (threads) on the system: the
// part after '/' in the fourth field of /proc/loadavg ("0.00 0.01 0.05 2/109 4242").
func parseLoadavgTasks(b []byte) (uint64, error) {
	b, err := trimNewline(b)
	if err != nil {
		return 0, err
	}
	for i := 0; i < 3; i++ {
		var ok bool
		if _, b, ok = bytes.Cut(b, []byte{' '}); !ok {
			return 0, errSyntax
		}
	}
	field, _, _ := bytes.Cut(b, []byte{' '})
	running, total, ok := bytes.Cut(field, []byte{'/'})
	if !ok {
		return 0, errSyntax
	}
	if _, err := atou(running); err != nil {
		return 0, err
	}
	return atou(total)
}

// hasController reports whether a cgroup.controllers file ("cpuset cpu io
// memory pids\n") lists the controller name.
func hasController(b []byte, name string) bool {
	for _, f := range bytes.Fields(b) {
		if string(f) == name {
			return true
		}
	}
	return false
}

// validUID reports whether s can be a pod UID as it appears in cgroup and log
// directory names: a UUID (36 characters) or, for static pods, a 32-character
// hex hash. Only hex digits and dashes are accepted, so names like "podman"
// or "pod.slice" are not mistaken for pods.
func validUID(s []byte) bool { return uidWithSeparator(s, '-') }

// uidWithSeparator is validUID with sep in place of the UID's dashes.
func uidWithSeparator(s []byte, sep byte) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == sep:
		default:
			return false
		}
	}
	return true
}

// kubepodsChild classifies one directory name found in the kubepods cgroup or
// in one of its QoS cgroups.
type childKind int

const (
	childOther childKind = iota
	childPod
	childBurstable
	childBestEffort
)

// classifyChild tells what a directory in kubepods (or in a QoS directory) is.
// prefix is the kubepods cgroup name without ".slice" for the systemd driver
// (usually "kubepods"): systemd names nest, e.g.
// kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice, while
// cgroupfs uses burstable/pod<uid>. For a pod it returns the UID bytes, with
// the systemd driver's underscores still in place (see podUID).
func classifyChild(d Driver, prefix, name []byte) (childKind, []byte) {
	if d == DriverSystemd {
		base, ok := bytes.CutSuffix(name, []byte(".slice"))
		if !ok || len(base) <= len(prefix)+1 || !bytes.HasPrefix(base, prefix) || base[len(prefix)] != '-' {
			return childOther, nil
		}
		rest := base[len(prefix)+1:]
		switch string(rest) {
		case "burstable":
			return childBurstable, nil
		case "besteffort":
			return childBestEffort, nil
		}
		// Pods of a QoS class are <prefix>-<qos>-pod<uid>.slice, Guaranteed
		// pods <prefix>-pod<uid>.slice: the UID follows the last "-pod".
		i := bytes.LastIndex(rest, []byte("pod"))
		if i < 0 || (i > 0 && rest[i-1] != '-') {
			return childOther, nil
		}
		if i > 0 && string(rest[:i-1]) != "burstable" && string(rest[:i-1]) != "besteffort" {
			return childOther, nil
		}
		uid := rest[i+3:]
		if !validSystemdUID(uid) {
			return childOther, nil
		}
		return childPod, uid
	}
	switch string(name) {
	case "burstable":
		return childBurstable, nil
	case "besteffort":
		return childBestEffort, nil
	}
	uid, ok := bytes.CutPrefix(name, []byte("pod"))
	if !ok || !validUID(uid) {
		return childOther, nil
	}
	return childPod, uid
}

// validSystemdUID is validUID for the systemd driver, which writes the
// UID's dashes as underscores because '-' separates slice names.
func validSystemdUID(s []byte) bool { return uidWithSeparator(s, '_') }

// podUID turns the UID bytes from a cgroup name into the pod's UID string.
// It allocates, so the observer calls it once per new pod.
func podUID(raw []byte) string {
	b := make([]byte, len(raw))
	for i, c := range raw {
		if c == '_' {
			c = '-'
		}
		b[i] = c
	}
	return string(b)
}

// parseLogDirName splits a /var/log/pods entry, "<namespace>_<name>_<uid>".
// Namespaces and pod names are DNS names and cannot hold '_', so the split is
// unambiguous.
func parseLogDirName(name []byte) (namespace, podName, uid []byte, ok bool) {
	namespace, rest, ok1 := bytes.Cut(name, []byte{'_'})
	podName, uid, ok2 := bytes.Cut(rest, []byte{'_'})
	if !ok1 || !ok2 || len(namespace) == 0 || len(podName) == 0 || !validUID(uid) {
		return nil, nil, nil, false
	}
	return namespace, podName, uid, true
}

// Directory entry types from getdents64 (d_type).
const (
	dtUnknown = 0
	dtDir     = 4
)

// direntHeader is the size of linux_dirent64 before d_name: d_ino (8),
// d_off (8), d_reclen (2), d_type (1).
const direntHeader = 19

// parseDirents calls fn for every entry of a getdents64 buffer, skipping "."
// and "..". The records are in the kernel's native byte order.
func parseDirents(buf []byte, fn func(name []byte, typ uint8)) error {
	for len(buf) > 0 {
		if len(buf) < direntHeader {
			return errDirent
		}
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < direntHeader || reclen > len(buf) {
			return errDirent
		}
		typ := buf[18]
		name := buf[direntHeader:reclen]
		end := bytes.IndexByte(name, 0)
		if end < 0 {
			return errDirent
		}
		name = name[:end]
		buf = buf[reclen:]
		if len(name) == 0 {
			return errDirent
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		fn(name, typ)
	}
	return nil
}

// ParseMemoryEvents parses a cgroup v2 memory.events file, for readers of
// cgroups other than the observer's own (a pod's containers).
func ParseMemoryEvents(b []byte) (MemoryEvents, error) { return parseMemoryEvents(b) }

// ParsePSI parses a pressure file, for readers of cgroups other than the
// observer's own (a pod's containers).
func ParsePSI(b []byte) (statsv1alpha1.PSIStats, error) { return parsePSI(b) }
