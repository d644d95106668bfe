// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestParseUint(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr error
	}{
		{"2822156288\n", 2822156288, nil},
		{"0\n", 0, nil},
		{"18446744073709551615\n", 18446744073709551615, nil},
		{"18446744073709551616\n", 0, errOverflow},
		{"", 0, errEmpty},
		{"6710", 0, errNoNewline}, // truncated
		{"\n", 0, errNotNumber},
		{"-1\n", 0, errNotNumber},
		{"12 \n", 0, errNotNumber},
		{"max\n", 0, errNotNumber},
		{"1\n2\n", 0, errNotNumber},
	}
	for _, tc := range tests {
		got, err := parseUint([]byte(tc.in))
		if !errors.Is(err, tc.wantErr) || got != tc.want {
			t.Errorf("parseUint(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr error
	}{
		{"max\n", unlimited, nil},
		{"9223372036854771712\n", 9223372036854771712, nil},
		{"4294967296\n", 4294967296, nil},
		{"max", 0, errNoNewline},
		{"maxi\n", 0, errNotNumber},
	}
	for _, tc := range tests {
		got, err := parseLimit([]byte(tc.in))
		if !errors.Is(err, tc.wantErr) || got != tc.want {
			t.Errorf("parseLimit(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseMemoryStat(t *testing.T) {
	// The v1 root memory.stat of this project's machines, verbatim.
	v1Root := "cache 14008320\nrss 8929280\nrss_huge 0\nshmem 9097216\nmapped_file 7651328\ndirty 442368\nwriteback 0\n" +
		"workingset_refault_anon 0\nworkingset_refault_file 628\nswap 0\nswapcached 0\npgpgin 35647\npgpgout 30047\n" +
		"pgfault 39069\npgmajfault 0\ninactive_anon 0\nactive_anon 1531904\ninactive_file 1380352\nactive_file 3530752\n" +
		"unevictable 16494592\nhierarchical_memory_limit 9223372036854771712\nhierarchical_memsw_limit 9223372036854771712\n" +
		"total_cache 2668392448\ntotal_rss 151142400\ntotal_rss_huge 0\ntotal_shmem 9097216\ntotal_mapped_file 52965376\n" +
		"total_dirty 271466496\ntotal_writeback 0\ntotal_workingset_refault_anon 0\ntotal_workingset_refault_file 24799\n" +
		"total_swap 0\ntotal_swapcached 0\ntotal_pgpgin 14872158\ntotal_pgpgout 14537368\ntotal_pgfault 15176776\n" +
		"total_pgmajfault 454\ntotal_inactive_anon 141971456\ntotal_active_anon 1605632\ntotal_inactive_file 1394278400\n" +
		"total_active_file 1265020928\ntotal_unevictable 16494592\n"
	v2 := v2StatContent(200*mi, 56*mi, 16*mi, 70000, 41)
	tests := []struct {
		name    string
		in      string
		v2      bool
		want    memStat
		wantErr error
	}{
		{"v1 root, hierarchical totals", v1Root, false,
			memStat{InactiveFile: 1394278400, RSS: 151142400, File: 2668392448, PgFault: 15176776, PgMajFault: 454}, nil},
		{"v1 file read as v2 takes the local keys", v1Root, true,
			memStat{InactiveFile: 1380352, PgFault: 39069}, nil},
		{"v2", v2, true, memStat{InactiveFile: 16 * mi, RSS: 200 * mi, File: 56 * mi, PgFault: 70000, PgMajFault: 41}, nil},
		{"v2 file read as v1 lacks total_inactive_file", v2, false, memStat{}, errMissingKey},
		{"truncated mid-line", v1Root[:len(v1Root)-5], false, memStat{}, errNoNewline},
		{"truncated before the key", v1Root[:700], false, memStat{}, errNoNewline},
		{"garbled value", "total_inactive_file 12x\n", false, memStat{}, errNotNumber},
		{"no value", "total_inactive_file\n", false, memStat{}, errSyntax},
		{"empty line", "anon 1\n\ninactive_file 2\n", true, memStat{}, errSyntax},
		{"leading space", " inactive_file 2\n", true, memStat{}, errSyntax},
		{"two spaces", "inactive_file  2\n", true, memStat{}, errNotNumber},
		{"empty", "", true, memStat{}, errEmpty},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemoryStat([]byte(tc.in), tc.v2)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseMeminfoSwap(t *testing.T) {
	// The fixtures' /proc/meminfo: a 2 GiB swap file, 256 MiB of it in use.
	withSwap, err := os.ReadFile("testdata/v1-cgroupfs/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	// A node without swap prints the lines with 0 (v2-nopsi's meminfo).
	noSwap, err := os.ReadFile("testdata/v2-nopsi/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	const head = "MemTotal:        8388608 kB\nMemFree:         4194304 kB\n"
	tests := []struct {
		name        string
		in          string
		total, free uint64
		line        string // the line the warning quotes
		wantErr     error
	}{
		{"with swap", string(withSwap), 2097148 << 10, 1835004 << 10, "", nil},
		{"without swap", string(noSwap), 0, 0, "", nil},
		{"SwapFree before SwapTotal", "SwapFree:        1835004 kB\nSwapTotal:       2097148 kB\n", 2097148 << 10, 1835004 << 10, "", nil},
		{"no padding", "SwapTotal:1 kB\nSwapFree:0 kB\n", 1024, 0, "", nil},
		{"largest", "SwapTotal:       18014398509481983 kB\nSwapFree:              0 kB\n", 18014398509481983 << 10, 0, "", nil},
		{"overflow in bytes", "SwapTotal:       18014398509481984 kB\nSwapFree:              0 kB\n", 0, 0, "SwapTotal:       18014398509481984 kB", errOverflow},
		{"letter in value", head + "SwapTotal:       2097148 kB\nSwapFree:        18350O4 kB\n", 0, 0, "SwapFree:        18350O4 kB", errNotNumber},
		{"negative", head + "SwapTotal:            -1 kB\nSwapFree:              0 kB\n", 0, 0, "SwapTotal:            -1 kB", errNotNumber},
		{"no unit", head + "SwapTotal:       2097148\nSwapFree:        1835004 kB\n", 0, 0, "SwapTotal:       2097148", errSyntax},
		{"other unit", head + "SwapTotal:       2097148 KB\nSwapFree:        1835004 kB\n", 0, 0, "SwapTotal:       2097148 KB", errSyntax},
		{"no value", head + "SwapTotal:\nSwapFree:        1835004 kB\n", 0, 0, "SwapTotal:", errSyntax},
		{"no number", head + "SwapTotal:       kB\nSwapFree:        1835004 kB\n", 0, 0, "SwapTotal:       kB", errSyntax},
		{"no SwapTotal", head + "SwapFree:        1835004 kB\n", 0, 0, "", errNoSwapTotal},
		{"no SwapFree", head + "SwapTotal:       2097148 kB\n", 0, 0, "", errNoSwapFree},
		{"a longer key is another key", "SwapTotalX:      1 kB\nSwapTotal:       2 kB\nSwapFree:        1 kB\n", 2048, 1024, "", nil},
		{"truncated", head + "SwapTotal:       2097148 kB\nSwapFr", 0, 0, "SwapFr", errNoNewline},
		{"empty", "", 0, 0, "", errEmpty},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			total, free, line, err := parseMeminfoSwap([]byte(tc.in))
			if !errors.Is(err, tc.wantErr) || total != tc.total || free != tc.free || string(line) != tc.line {
				t.Errorf("got %d, %d, line %q, %v; want %d, %d, line %q, %v", total, free, line, err, tc.total, tc.free, tc.line, tc.wantErr)
			}
			if errors.Is(err, errMissingKey) && !strings.Contains(err.Error(), "Swap") {
				t.Errorf("error %q does not name the missing key", err)
			}
		})
	}
}

func TestParseMemoryEvents(t *testing.T) {
	tests := []struct {
		in      string
		want    MemoryEvents
		wantErr error
	}{
		{"low 0\nhigh 12\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n", MemoryEvents{High: 12, Max: 3, OOM: 1, OOMKill: 1}, nil},
		{"low 1\nhigh 2\nmax 3\noom 4\noom_kill 5\n", MemoryEvents{Low: 1, High: 2, Max: 3, OOM: 4, OOMKill: 5}, nil},
		{"low 0\nhigh 12\nmax 3\noom 1\n", MemoryEvents{}, errMissingKey},
		{"low 0\nhigh 12\nmax 3\noom 1\noom_kill 1", MemoryEvents{}, errNoNewline},
	}
	for _, tc := range tests {
		got, err := parseMemoryEvents([]byte(tc.in))
		if !errors.Is(err, tc.wantErr) || got != tc.want {
			t.Errorf("parseMemoryEvents(%q) = %+v, %v; want %+v, %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParsePSI(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    statsv1alpha1.PSIStats
		wantErr error
	}{
		{"proc memory", "some avg10=74.03 avg60=60.75 avg300=36.66 total=166243214\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
			statsv1alpha1.PSIStats{Some: statsv1alpha1.PSIData{Avg10: 74.03, Avg60: 60.75, Avg300: 36.66, Total: 166243214}}, nil},
		{"cpu before 5.13: no full line", "some avg10=0.31 avg60=0.15 avg300=0.14 total=2049707\n",
			statsv1alpha1.PSIStats{Some: statsv1alpha1.PSIData{Avg10: 0.31, Avg60: 0.15, Avg300: 0.14, Total: 2049707}}, nil},
		{"full hundred", "some avg10=100.00 avg60=99.99 avg300=0.01 total=1\nfull avg10=100.00 avg60=1.00 avg300=0.10 total=2\n",
			statsv1alpha1.PSIStats{Some: statsv1alpha1.PSIData{Avg10: 100, Avg60: 99.99, Avg300: 0.01, Total: 1},
				Full: statsv1alpha1.PSIData{Avg10: 100, Avg60: 1, Avg300: 0.1, Total: 2}}, nil},
		{"only full", "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", statsv1alpha1.PSIStats{}, errMissingKey},
		{"two some lines", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
			statsv1alpha1.PSIStats{}, errSyntax},
		{"fields out of order", "some avg60=0.00 avg10=0.00 avg300=0.00 total=0\n", statsv1alpha1.PSIStats{}, errSyntax},
		{"missing total", "some avg10=0.00 avg60=0.00 avg300=0.00\n", statsv1alpha1.PSIStats{}, errSyntax},
		{"bad number", "some avg10=0.0x avg60=0.00 avg300=0.00 total=0\n", statsv1alpha1.PSIStats{}, errNotNumber},
		{"dot without digits", "some avg10=1. avg60=0.00 avg300=0.00 total=0\n", statsv1alpha1.PSIStats{}, errNotNumber},
		{"truncated", "some avg10=0.00 avg60=0.00 avg300=0.00 total=12", statsv1alpha1.PSIStats{}, errNoNewline},
		{"unknown kind", "most avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", statsv1alpha1.PSIStats{}, errSyntax},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePSI([]byte(tc.in))
			if !errors.Is(err, tc.wantErr) || (err == nil && got != tc.want) {
				t.Errorf("got %+v, %v; want %+v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestParseDecimalMatchesStrconv: the allocation-free decimal parser agrees
// with strconv on the kernel's formats.
func TestParseDecimalMatchesStrconv(t *testing.T) {
	for _, s := range []string{"0.00", "74.03", "0.01", "99.99", "100.00", "5", "123456789.123456", "0.1", "36.66"} {
		got, err := parseDecimal([]byte(s))
		want, _ := strconv.ParseFloat(s, 64)
		if err != nil || got != want {
			t.Errorf("parseDecimal(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", ".", "1.", ".5", "1.2.3", "1e5", "-1.0", "1234567890.1234567"} {
		if _, err := parseDecimal([]byte(s)); err == nil {
			t.Errorf("parseDecimal(%q) succeeded", s)
		}
	}
}

func TestParseLoadavgTasks(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"4.70 2.53 1.06 5/109 11551\n", 109, false},
		{"0.00 0.00 0.00 1/70000 1\n", 70000, false},
		{"4.70 2.53 1.06 5-109 11551\n", 0, true},
		{"4.70 2.53 1.06\n", 0, true},
		{"4.70 2.53 1.06 x/109 11551\n", 0, true},
		{"4.70 2.53 1.06 5/ 11551\n", 0, true},
		{"4.70 2.53 1.06 5/109 11551", 0, true},
	}
	for _, tc := range tests {
		got, err := parseLoadavgTasks([]byte(tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseLoadavgTasks(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestHasController(t *testing.T) {
	tests := []struct {
		in, name string
		want     bool
	}{
		{"cpuset cpu io memory hugetlb pids rdma misc\n", "memory", true},
		{"cpuset cpu io memory hugetlb pids rdma misc\n", "pids", true},
		{"hugetlb\n", "memory", false}, // the hybrid unified mount of this project's machines
		{"", "memory", false},
		{"memoryx\n", "memory", false},
	}
	for _, tc := range tests {
		if got := hasController([]byte(tc.in), tc.name); got != tc.want {
			t.Errorf("hasController(%q, %q) = %v; want %v", tc.in, tc.name, got, tc.want)
		}
	}
}

func TestClassifyChild(t *testing.T) {
	const uid = "7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70"
	const su = "7d3f3c2a_9b1e_4c5d_8f6a_2b3c4d5e6f70"
	tests := []struct {
		driver  Driver
		prefix  string
		name    string
		kind    childKind
		wantUID string
	}{
		{DriverCgroupfs, "", "pod" + uid, childPod, uid},
		{DriverCgroupfs, "", "pod0123456789abcdef0123456789abcdef", childPod, "0123456789abcdef0123456789abcdef"}, // static pod hash
		{DriverCgroupfs, "", "burstable", childBurstable, ""},
		{DriverCgroupfs, "", "besteffort", childBestEffort, ""},
		{DriverCgroupfs, "", "podman", childOther, ""},
		{DriverCgroupfs, "", "pod", childOther, ""},
		{DriverCgroupfs, "", "memory.stat", childOther, ""},
		{DriverSystemd, "kubepods", "kubepods-pod" + su + ".slice", childPod, uid},
		{DriverSystemd, "kubepods", "kubepods-burstable-pod" + su + ".slice", childPod, uid},
		{DriverSystemd, "kubepods", "kubepods-besteffort-pod" + su + ".slice", childPod, uid},
		{DriverSystemd, "kubepods", "kubepods-burstable.slice", childBurstable, ""},
		{DriverSystemd, "kubepods", "kubepods-besteffort.slice", childBestEffort, ""},
		{DriverSystemd, "node-kubepods", "node-kubepods-burstable-pod" + su + ".slice", childPod, uid},
		{DriverSystemd, "kubepods", "kubepods-pod" + uid + ".slice", childOther, ""}, // systemd never keeps dashes
		{DriverSystemd, "kubepods", "kubepods-other-pod" + su + ".slice", childOther, ""},
		{DriverSystemd, "kubepods", "kubepods-pod" + su + ".scope", childOther, ""},
		{DriverSystemd, "kubepods", "cri-containerd-3b8f1c2d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c.scope", childOther, ""},
		{DriverSystemd, "kubepods", "kubepods.slice", childOther, ""},
		{DriverSystemd, "kubepods", "kubepods-.slice", childOther, ""},
	}
	for _, tc := range tests {
		kind, raw := classifyChild(tc.driver, []byte(tc.prefix), []byte(tc.name))
		got := ""
		if raw != nil {
			got = podUID(raw)
		}
		if kind != tc.kind || got != tc.wantUID {
			t.Errorf("classifyChild(%s, %q) = %v, %q; want %v, %q", tc.driver, tc.name, kind, got, tc.kind, tc.wantUID)
		}
	}
}

func TestParseLogDirName(t *testing.T) {
	tests := []struct {
		in            string
		ns, name, uid string
		ok            bool
	}{
		{"default_web-0_7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70", "default", "web-0", "7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70", true},
		{"kube-system_kube-apiserver-node-a_0123456789abcdef0123456789abcdef", "kube-system", "kube-apiserver-node-a", "0123456789abcdef0123456789abcdef", true},
		{"default_web-0", "", "", "", false},
		{"_web-0_7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70", "", "", "", false},
		{"default_web_0_7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70", "", "", "", false},
	}
	for _, tc := range tests {
		ns, name, uid, ok := parseLogDirName([]byte(tc.in))
		if ok != tc.ok || string(ns) != tc.ns || string(name) != tc.name || string(uid) != tc.uid {
			t.Errorf("parseLogDirName(%q) = %q %q %q %v", tc.in, ns, name, uid, ok)
		}
	}
}

// dirent builds one linux_dirent64 record.
func dirent(name string, typ uint8) []byte {
	reclen := (direntHeader + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b[0:], 42)
	binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
	b[18] = typ
	copy(b[direntHeader:], name)
	return b
}

func TestParseDirents(t *testing.T) {
	var buf []byte
	for _, d := range []struct {
		name string
		typ  uint8
	}{{".", dtDir}, {"..", dtDir}, {"burstable", dtDir}, {"memory.stat", 8}, {"pod" + uidB, dtDir}} {
		buf = append(buf, dirent(d.name, d.typ)...)
	}
	var got []string
	if err := parseDirents(buf, func(name []byte, typ uint8) { got = append(got, string(name)+":"+strconv.Itoa(int(typ))) }); err != nil {
		t.Fatal(err)
	}
	want := []string{"burstable:4", "memory.stat:8", "pod" + uidB + ":4"}
	if len(got) != len(want) {
		t.Fatalf("got %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %q; want %q", i, got[i], want[i])
		}
	}
	for name, bad := range map[string][]byte{
		"short header":    buf[:10],
		"reclen too long": append(dirent("x", dtDir)[:16], 0xff, 0x00, 4, 'x', 0),
		"no NUL": func() []byte {
			b := dirent("abcdefg", dtDir)
			for i := direntHeader; i < len(b); i++ {
				b[i] = 'z'
			}
			return b
		}(),
	} {
		if err := parseDirents(bad, func([]byte, uint8) {}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestListDirMatchesOS: the raw getdents reader lists what os.ReadDir lists.
func TestListDirMatchesOS(t *testing.T) {
	dir := t.TempDir()
	want := map[string]bool{}
	for i := 0; i < 700; i++ { // more than one getdents buffer of 4 KiB
		name := "pod" + strconv.Itoa(i)
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		want[name] = true
	}
	got := map[string]bool{}
	if err := listDirC(newCPath(dir), make([]byte, 4096), func(name []byte, typ uint8) {
		if typ != dtDir {
			t.Errorf("%s: type %d", name, typ)
		}
		got[string(name)] = true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("listed %d entries; want %d", len(got), len(want))
	}
	if err := listDirC(newCPath(filepath.Join(dir, "nope")), make([]byte, 4096), func([]byte, uint8) {}); err != unix.ENOENT {
		t.Errorf("listing a missing directory: %v; want ENOENT", err)
	}
}

func TestAtFDCWD(t *testing.T) {
	v := atFDCWD
	if int(v) != unix.AT_FDCWD {
		t.Errorf("atFDCWD is %d; want %d", int(v), unix.AT_FDCWD)
	}
}

func TestReadFileTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readC(newCPath(p), make([]byte, 64)); !errors.Is(err, errTooLarge) {
		t.Errorf("reading 100 bytes into 64: %v; want errTooLarge", err)
	}
	n, err := readC(newCPath(p), make([]byte, 100))
	if !errors.Is(err, errTooLarge) {
		t.Errorf("reading 100 bytes into exactly 100: %d, %v; want errTooLarge (EOF cannot be told)", n, err)
	}
	if n, err := readC(newCPath(p), make([]byte, 101)); err != nil || n != 100 {
		t.Errorf("reading 100 bytes into 101: %d, %v", n, err)
	}
}
