// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHugepageAwareEvictionOff: NoHugepageAwareEviction (a kubelet with
// the gate off) gives exactly the figures of a node without hugepages:
// the pool is not read at all, so a broken pool file costs nothing. The
// pool is not taken off a node cgroup other than "/" either.
func TestHugepageAwareEvictionOff(t *testing.T) {
	tests := []struct {
		name                string
		base                string
		meminfoOnly, off    bool
		cgroup              string
		avail, ws, capacity uint64
		pool                uint64
	}{
		{name: "on (the default)", base: "v2-systemd", avail: 3 * gi, ws: 2 * gi, capacity: 5 * gi, pool: fixtureHugepagePool},
		{name: "on, from /proc/meminfo", base: "v2-systemd", meminfoOnly: true, avail: 3 * gi, ws: 2 * gi, capacity: 5 * gi, pool: fixtureHugepagePool},
		{name: "off", base: "v2-systemd", off: true, avail: 6 * gi, ws: 2 * gi, capacity: 8 * gi},
		{name: "off, v1", base: "v1-cgroupfs", off: true, avail: 6 * gi, ws: 2 * gi, capacity: 8 * gi},
		{name: "off, /proc/meminfo", base: "v2-systemd", meminfoOnly: true, off: true, avail: 6 * gi, ws: 2 * gi, capacity: 8 * gi},
		{
			// /node-a stands for a node: its 4 GiB limit is the capacity.
			name: "node cgroup other than /", base: "v2-cgroupfs", cgroup: "/node-a",
			avail: 4*gi - (3*gi - 512*mi), ws: 3*gi - 512*mi, capacity: 4 * gi,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := hugepageHostRoot(t, tc.base, tc.meminfoOnly)
			opts := Options{HostRoot: root, CgroupRoot: tc.cgroup, NodeCgroup: tc.cgroup, NoHugepageAwareEviction: tc.off}
			o := newTestObserver(t, opts, nil)
			var sysReads []string
			o.trace = func(p cpath, dir bool) {
				if s := p.String(); strings.Contains(s, "/sys/kernel/mm/") {
					sysReads = append(sysReads, s)
				}
			}
			obs, err := o.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m := obs.Summary.Node.Memory
			if m == nil || m.AvailableBytes == nil || *m.AvailableBytes != tc.avail || *m.WorkingSetBytes != tc.ws {
				t.Errorf("node memory %+v; want available %d, working set %d", m, tc.avail, tc.ws)
			}
			if obs.Node.MemoryCapacityBytes != tc.capacity || obs.Node.HugepagePoolBytes != tc.pool {
				t.Errorf("capacity %d, hugepage pool %d; want %d, %d", obs.Node.MemoryCapacityBytes, obs.Node.HugepagePoolBytes, tc.capacity, tc.pool)
			}
			if (tc.off || tc.cgroup != "") && len(sysReads) != 0 {
				t.Errorf("the pool is not taken off, yet read: %v", sysReads)
			}
			if !tc.off && tc.cgroup == "" && !tc.meminfoOnly && len(sysReads) != 2 {
				t.Errorf("read %v; want the two pools' nr_hugepages", sysReads)
			}
			b, err := json.Marshal(obs.Node)
			if err != nil || strings.Contains(string(b), "hugepagePoolBytes") != (tc.pool != 0) {
				t.Errorf("node extras JSON %s (%v); want hugepagePoolBytes when there is a pool", b, err)
			}
			if !tc.off {
				return
			}
			// Broken pool files change nothing when the pool is not read.
			replaceLine("Hugetlb:", "Hugetlb:         3145728 KB\n")(t, filepath.Join(root, "proc/meminfo"))
			if !tc.meminfoOnly {
				writeInPlace(t, filepath.Join(root, hugepages2M), "51x\n")
			}
			obs, err = newTestObserver(t, opts, nil).Observe(context.Background())
			if err != nil || len(obs.SignalErrors) != 0 {
				t.Errorf("with broken pool files, switched off: err %v, signal errors %v; want none", err, obs.SignalErrors)
			}
		})
	}
}

func TestParseHugepageDirName(t *testing.T) {
	tests := []struct {
		name string
		size uint64
		err  error
	}{
		{"hugepages-2048kB", 2 * mi, nil},
		{"hugepages-1048576kB", gi, nil},
		{"hugepages-64kB", 64 << 10, nil}, // arm64's contiguous PTE pages
		{"hugepages-16777216kB", 16 * gi, nil},
		{"hugepages-2MB", 0, errHugepageDirName},
		{"hugepages-kB", 0, errHugepageDirName},
		{"hugepages-0kB", 0, errHugepageDirName},
		{"hugepages--2048kB", 0, errHugepageDirName},
		{"hugepages-2048", 0, errHugepageDirName},
		{"hugepage-2048kB", 0, errHugepageDirName},
		{"hugepages-18014398509481984kB", 0, errOverflow}, // 2^54 KiB
	}
	for _, tc := range tests {
		size, err := parseHugepageDirName(tc.name)
		if size != tc.size || !errors.Is(err, tc.err) {
			t.Errorf("parseHugepageDirName(%q) = %d, %v; want %d, %v", tc.name, size, err, tc.size, tc.err)
		}
	}
	if _, err := poolBytes(math.MaxUint64/gi+1, gi); !errors.Is(err, errOverflow) {
		t.Errorf("poolBytes past 2^64: %v; want errOverflow", err)
	}
}

func TestParseMeminfoHugetlb(t *testing.T) {
	tests := []struct {
		name, in string
		pool     uint64
		err      error
		line     string
	}{
		{name: "pool", in: "MemTotal: 8388608 kB\nHugePages_Total:     512\nHugetlb:         3145728 kB\nDirectMap4k: 1 kB\n", pool: 3 * gi},
		{name: "no pool", in: "HugePages_Total:       0\nHugetlb:               0 kB\n"},
		{name: "kernel without hugetlb", in: "MemTotal: 8388608 kB\nSwapTotal: 0 kB\n"},
		{name: "kernel before 4.16, no pool", in: "HugePages_Total:       0\nHugepagesize:       2048 kB\n"},
		{name: "kernel before 4.16 with a pool", in: "HugePages_Total:     512\nHugepagesize:       2048 kB\n", err: errNoHugetlb},
		{name: "malformed", in: "Hugetlb:         3145728 KB\n", err: errSyntax, line: "Hugetlb:         3145728 KB"},
		{name: "malformed HugePages_Total", in: "HugePages_Total:     5l2\n", err: errNotNumber, line: "HugePages_Total:     5l2"},
		{name: "truncated", in: "MemTotal: 8388608 kB\nHugetl", err: errNoNewline, line: "Hugetl"},
		{name: "empty", in: "", err: errEmpty},
	}
	for _, tc := range tests {
		pool, line, err := parseMeminfoHugetlb([]byte(tc.in))
		if pool != tc.pool || !errors.Is(err, tc.err) || string(line) != tc.line {
			t.Errorf("%s: pool %d, line %q, err %v; want %d, %q, %v", tc.name, pool, line, err, tc.pool, tc.line, tc.err)
		}
	}
}

// FuzzParseMeminfoHugetlb checks parseMeminfoHugetlb against the obvious
// reading: the first Hugetlb: line, spaces, a decimal number and " kB";
// without one, 0 unless a HugePages_Total: line before says otherwise.
func FuzzParseMeminfoHugetlb(f *testing.F) {
	for _, p := range []string{"testdata/v1-cgroupfs/proc/meminfo", "testdata/hugepages/proc/meminfo"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("HugePages_Total:     512\nHugepagesize:       2048 kB\n"))
	f.Add([]byte("Hugetlb:         3145728 KB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pool, line, err := parseMeminfoHugetlb(b)
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
		var want, total uint64
		ok, found := true, false
		for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
			if rest, is := strings.CutPrefix(l, "Hugetlb:"); is {
				num, unit := strings.CutSuffix(strings.TrimLeft(rest, " "), " kB")
				n, perr := strconv.ParseUint(num, 10, 64)
				ok = unit && perr == nil && !strings.HasPrefix(num, "+") && n <= (1<<64-1)/1024
				want, found = n*1024, true
				break
			}
			if rest, is := strings.CutPrefix(l, "HugePages_Total:"); is {
				num := strings.TrimLeft(rest, " ")
				n, perr := strconv.ParseUint(num, 10, 64)
				if perr != nil || strings.HasPrefix(num, "+") {
					ok = false
					break
				}
				total = n
			}
		}
		ok = ok && (found || total == 0)
		if (err == nil) != ok || (ok && pool != want) {
			t.Fatalf("parseMeminfoHugetlb(%q) = %d, %v; reference %d, %v", s, pool, err, want, ok)
		}
	})
}

// FuzzParseHugepageDirName checks parseHugepageDirName against
// hugepages-%dkB read with strconv.
func FuzzParseHugepageDirName(f *testing.F) {
	for _, s := range []string{"hugepages-2048kB", "hugepages-1048576kB", "hugepages-2MB", "hugepages-0kB", "hugepages-+1kB", "hugepages-kB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		size, err := parseHugepageDirName(name)
		num, ok := strings.CutPrefix(name, "hugepages-")
		num, unit := strings.CutSuffix(num, "kB")
		n, perr := strconv.ParseUint(num, 10, 64)
		ok = ok && unit && perr == nil && !strings.HasPrefix(num, "+") && n > 0 && n <= (1<<64-1)/1024
		if (err == nil) != ok || (ok && size != n*1024) {
			t.Fatalf("parseHugepageDirName(%q) = %d, %v; reference %d, %v", name, size, err, n*1024, ok)
		}
	})
}
