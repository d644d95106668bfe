// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The fuzz targets check each parser against a plain strings/strconv
// reference where one is simple to write, and otherwise that it never panics
// and only accepts well-formed input. hack/fuzz.sh runs each for a while.

func FuzzParseUint(f *testing.F) {
	for _, s := range []string{"0\n", "2822156288\n", "18446744073709551615\n", "18446744073709551616\n", "", "6710", "max\n", "-1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseUint(b)
		s := string(b)
		if !strings.HasSuffix(s, "\n") {
			if err == nil {
				t.Fatalf("accepted %q without a newline", s)
			}
			return
		}
		want, werr := strconv.ParseUint(strings.TrimSuffix(s, "\n"), 10, 64)
		if (err == nil) != (werr == nil) || (err == nil && got != want) {
			t.Fatalf("parseUint(%q) = %d, %v; strconv says %d, %v", s, got, err, want, werr)
		}
		lim, lerr := parseLimit(b)
		if s == "max\n" {
			if lerr != nil || lim != unlimited {
				t.Fatalf("parseLimit(max) = %d, %v", lim, lerr)
			}
		} else if lim != got || (lerr == nil) != (err == nil) {
			t.Fatalf("parseLimit(%q) = %d, %v; parseUint says %d, %v", s, lim, lerr, got, err)
		}
	})
}

// refFlatKeyed is the obvious, allocating reading of a flat-keyed file.
func refFlatKeyed(s string) (map[string]uint64, bool) {
	if !strings.HasSuffix(s, "\n") {
		return nil, false
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok || k == "" {
			return nil, false
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, false
		}
		m[k] = n
	}
	return m, true
}

func FuzzParseMemoryStat(f *testing.F) {
	f.Add([]byte(v1StatContent(4*mi, 60*mi, mi, 100, 1, false)), false)
	f.Add([]byte(v2StatContent(60*mi, 4*mi, mi, 100, 1)), true)
	f.Add([]byte("total_inactive_file 1\n"), false)
	f.Add([]byte("inactive_file 1\nanon 2\n"), true)
	f.Fuzz(func(t *testing.T, b []byte, v2 bool) {
		got, err := parseMemoryStat(b, v2)
		ref, ok := refFlatKeyed(string(b))
		prefix := "total_"
		rss, file := "total_rss", "total_cache"
		if v2 {
			prefix, rss, file = "", "anon", "file"
		}
		if ok {
			if _, has := ref[prefix+"inactive_file"]; !has {
				ok = false
			}
		}
		if ok != (err == nil) {
			t.Fatalf("parseMemoryStat(%q, v2=%v) error %v; reference ok %v", b, v2, err, ok)
		}
		if !ok {
			return
		}
		want := memStat{InactiveFile: ref[prefix+"inactive_file"], RSS: ref[rss], File: ref[file],
			PgFault: ref[prefix+"pgfault"], PgMajFault: ref[prefix+"pgmajfault"]}
		if got != want {
			t.Fatalf("parseMemoryStat(%q, v2=%v) = %+v; reference %+v", b, v2, got, want)
		}
	})
}

func FuzzParseMemoryEvents(f *testing.F) {
	f.Add([]byte(eventsContent))
	f.Add([]byte("low 1\nhigh 2\nmax 3\noom 4\noom_kill 5\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseMemoryEvents(b)
		ref, ok := refFlatKeyed(string(b))
		if ok {
			_, ok = ref["oom_kill"]
		}
		if ok != (err == nil) {
			t.Fatalf("parseMemoryEvents(%q) error %v; reference ok %v", b, err, ok)
		}
		if ok && got != (MemoryEvents{Low: ref["low"], High: ref["high"], Max: ref["max"], OOM: ref["oom"], OOMKill: ref["oom_kill"]}) {
			t.Fatalf("parseMemoryEvents(%q) = %+v; reference %v", b, got, ref)
		}
	})
}

func FuzzParsePSI(f *testing.F) {
	f.Add([]byte("some avg10=74.03 avg60=60.75 avg300=36.66 total=166243214\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Add([]byte("some avg10=0.31 avg60=0.15 avg300=0.14 total=2049707\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parsePSI(b)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(b, []byte("some ")) && !bytes.HasPrefix(b, []byte("full ")) {
			t.Fatalf("accepted %q", b)
		}
		// Every accepted average must be what strconv reads from the same text.
		s := string(b)
		for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
			kind, rest, _ := strings.Cut(line, " ")
			d := got.Some
			if kind == "full" {
				d = got.Full
			}
			fields := strings.Split(rest, " ")
			if len(fields) != 4 {
				t.Fatalf("accepted %q with %d fields", line, len(fields))
			}
			for i, want := range []float64{d.Avg10, d.Avg60, d.Avg300} {
				_, v, _ := strings.Cut(fields[i], "=")
				ref, err := strconv.ParseFloat(v, 64)
				if err != nil || ref != want {
					t.Fatalf("%q: field %d parsed %v; strconv %v, %v", line, i, want, ref, err)
				}
			}
			_, v, _ := strings.Cut(fields[3], "=")
			if ref, err := strconv.ParseUint(v, 10, 64); err != nil || ref != d.Total {
				t.Fatalf("%q: total %d; strconv %d, %v", line, d.Total, ref, err)
			}
		}
	})
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0.00", "74.03", "100", "1.", ".5", "123456789012345"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseDecimal([]byte(s))
		if err != nil {
			return
		}
		want, werr := strconv.ParseFloat(s, 64)
		if werr != nil || got != want {
			t.Fatalf("parseDecimal(%q) = %v; strconv %v, %v", s, got, want, werr)
		}
	})
}

func FuzzParseLoadavgTasks(f *testing.F) {
	f.Add([]byte("4.70 2.53 1.06 5/109 11551\n"))
	f.Add([]byte("0.00 0.00 0.00 1/1 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseLoadavgTasks(b)
		if err != nil {
			return
		}
		fields := strings.Split(strings.TrimSuffix(string(b), "\n"), " ")
		if len(fields) < 4 {
			t.Fatalf("accepted %q with %d fields", b, len(fields))
		}
		_, total, _ := strings.Cut(fields[3], "/")
		if want, err := strconv.ParseUint(total, 10, 64); err != nil || want != got {
			t.Fatalf("parseLoadavgTasks(%q) = %d; strconv %d, %v", b, got, want, err)
		}
	})
}

// FuzzParseMeminfoSwap checks parseMeminfoSwap against the obvious reading
// with strings and strconv: the first SwapTotal: and SwapFree: lines, each
// spaces, a decimal number and " kB".
func FuzzParseMeminfoSwap(f *testing.F) {
	for _, p := range []string{"testdata/v1-cgroupfs/proc/meminfo", "testdata/v2-nopsi/proc/meminfo"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("SwapTotal:       2097148 kB\nSwapFree:        18350O4 kB\n"))
	f.Add([]byte("SwapFree:0 kB\nSwapTotal: 1 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		total, free, line, err := parseMeminfoSwap(b)
		if line != nil && !bytes.Contains(b, line) {
			t.Fatalf("line %q is not part of the input %q", line, b)
		}
		s := string(b)
		if !strings.HasSuffix(s, "\n") {
			if err == nil {
				t.Fatalf("accepted %q without a newline", s)
			}
			return
		}
		var want [2]uint64
		var seen [2]bool
		ok := true
		for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
			if seen[0] && seen[1] {
				break
			}
			i := -1
			for j, key := range []string{"SwapTotal:", "SwapFree:"} {
				if strings.HasPrefix(l, key) && !seen[j] {
					i, l = j, strings.TrimPrefix(l, key)
				}
			}
			if i < 0 {
				continue
			}
			seen[i] = true
			num, unit := strings.CutSuffix(strings.TrimLeft(l, " "), " kB")
			n, perr := strconv.ParseUint(num, 10, 64)
			if !unit || perr != nil || strings.HasPrefix(num, "+") || n > (1<<64-1)/1024 {
				ok = false
				break
			}
			want[i] = n * 1024
		}
		ok = ok && seen[0] && seen[1]
		if (err == nil) != ok || (ok && (total != want[0] || free != want[1])) {
			t.Fatalf("parseMeminfoSwap(%q) = %d, %d, %v; reference %v, %v", s, total, free, err, want, ok)
		}
	})
}

func FuzzClassifyChild(f *testing.F) {
	f.Add("kubepods", "kubepods-burstable-pod7d3f3c2a_9b1e_4c5d_8f6a_2b3c4d5e6f70.slice", true)
	f.Add("", "pod7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70", false)
	f.Add("kubepods", "kubepods-burstable.slice", true)
	f.Fuzz(func(t *testing.T, prefix, name string, systemd bool) {
		d := DriverCgroupfs
		if systemd {
			d = DriverSystemd
		}
		kind, raw := classifyChild(d, []byte(prefix), []byte(name))
		if kind != childPod {
			if raw != nil {
				t.Fatalf("non-pod %q returned a UID", name)
			}
			return
		}
		uid := podUID(raw)
		if !validUID([]byte(uid)) || !strings.Contains(name, string(raw)) {
			t.Fatalf("pod %q gave UID %q", name, uid)
		}
	})
}

func FuzzParseLogDirName(f *testing.F) {
	f.Add("default_web-0_7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70")
	f.Add("a_b_c")
	f.Fuzz(func(t *testing.T, s string) {
		ns, name, uid, ok := parseLogDirName([]byte(s))
		if !ok {
			return
		}
		if string(ns)+"_"+string(name)+"_"+string(uid) != s || bytes.IndexByte(ns, '_') >= 0 || !validUID(uid) {
			t.Fatalf("parseLogDirName(%q) = %q %q %q", s, ns, name, uid)
		}
	})
}

func FuzzParseDirents(f *testing.F) {
	f.Add(append(dirent(".", dtDir), dirent("kubepods", dtDir)...))
	f.Add(dirent("memory.stat", 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = parseDirents(b, func(name []byte, typ uint8) {
			if len(name) == 0 || bytes.IndexByte(name, 0) >= 0 || string(name) == "." || string(name) == ".." {
				t.Fatalf("bad name %q from %x", name, b)
			}
		})
	})
}

func FuzzHasController(f *testing.F) {
	f.Add("cpuset cpu io memory hugetlb pids rdma misc\n", "memory")
	f.Fuzz(func(t *testing.T, s, name string) {
		want := false
		for _, w := range strings.Fields(s) {
			if w == name {
				want = true
			}
		}
		if got := hasController([]byte(s), name); got != want {
			t.Fatalf("hasController(%q, %q) = %v; want %v", s, name, got, want)
		}
	})
}

func FuzzParseRootfsMounts(f *testing.F) {
	b, err := os.ReadFile("testdata/v2-cgroupfs/proc/1/mountinfo")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`1 2 0:3 / /x\040y/` + strings.Repeat("b", 64) + `/rootfs rw - overlay overlay upperdir=/u\134v`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]string{}
		parseRootfsMounts(b, got)
		for id, up := range got {
			if !isContainerID(id) || !bytes.Contains(b, []byte(id)) {
				t.Fatalf("%q -> %q from %q: not a container ID from the input", id, up, b)
			}
		}
	})
}
