// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPUTicks(t *testing.T) {
	real, err := os.ReadFile("testdata/proc-stat")
	if err != nil {
		t.Fatal(err)
	}
	// The format of /proc/<pid>/stat; utime=995 stime=2315, and a command
	// name with spaces and parentheses that must not shift the fields.
	const line = "1 (a) b (c)) S 0 0 0 0 -1 4194560 177447 112324973 0 153853 995 2315 513273 184719 10 -10 13 0 18 43679744 3309 18446744073709551615 1 1 0\n"
	tests := []struct {
		name    string
		in      string
		want    uint64
		wantErr string
	}{
		{"real capture of cat", string(real), 0, ""},
		{"tricky command name", line, 995 + 2315, ""},
		{"no command name", "1 S 0 0", 0, "no command name"},
		{"truncated", "1 (x) S 0 0 0 0 -1 4194560 1 2 3 4 5", 0, "only 12 fields"},
		{"bad tick count", strings.Replace(line, " 995 ", " 9x5 ", 1), 0, `field 14 "9x5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatCPUTicks([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestParseStatusMemory(t *testing.T) {
	real, err := os.ReadFile("testdata/proc-status")
	if err != nil {
		t.Fatal(err)
	}
	kthread, err := os.ReadFile("testdata/proc-status-kthread")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		want    StatusMemory
		wantErr string
	}{
		{"real capture", string(real), StatusMemory{RSS: 1688 << 10, HWM: 1688 << 10, RSSAnon: 116 << 10, RSSFile: 1572 << 10}, ""},
		{"rss below peak, no split", "Name:\tx\nVmHWM:\t   30000 kB\nVmRSS:\t   21000 kB\n", StatusMemory{RSS: 21000 << 10, HWM: 30000 << 10}, ""},
		{"kernel thread has no Vm lines", string(kthread), StatusMemory{}, "no VmRSS or VmHWM"},
		{"unit missing", "VmHWM:\t1 kB\nVmRSS:\t21000\n", StatusMemory{}, `VmRSS: want "N kB"`},
		{"not a number", "VmHWM:\t1 kB\nVmRSS:\tlots kB\n", StatusMemory{}, `VmRSS: bad size "lots"`},
		{"bad split", "VmHWM:\t1 kB\nVmRSS:\t1 kB\nRssAnon:\t-3 kB\n", StatusMemory{}, `RssAnon: bad size "-3"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatusMemory([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	const text = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 1.2345e+07
evictd_evictions_total{result="evicted",signal="memory.available"} 3
`
	tests := []struct {
		name    string
		text    string
		names   []string
		want    map[string]float64
		wantErr string
	}{
		{"found and missing", text, []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes"},
			map[string]float64{"go_goroutines": 42, "go_memstats_heap_inuse_bytes": 12345000}, ""},
		{"labelled samples are not matched by name alone", text, []string{"evictd_evictions_total"}, map[string]float64{}, ""},
		{"bad value", "go_goroutines many\n", []string{"go_goroutines"}, nil, `metric go_goroutines: bad value "many"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMetrics([]byte(tt.text), tt.names...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("= %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestReadProcUsage(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		status  string
		want    ProcUsage
		wantErr string
	}{
		{
			name:   "ticks are hundredths of a second",
			stat:   "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 150 25 0 0 20 0 9 0 1 1 1\n",
			status: "VmHWM:\t 2048 kB\nVmRSS:\t 1024 kB\n",
			want:   ProcUsage{CPU: 1750 * time.Millisecond, RSS: 1 << 20, HWM: 2 << 20},
		},
		{
			name:   "split into anonymous and file pages",
			stat:   "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 9 0 1 1 1\n",
			status: "VmHWM:\t 3072 kB\nVmRSS:\t 3072 kB\nRssAnon:\t 1024 kB\nRssFile:\t 2048 kB\n",
			want:   ProcUsage{RSS: 3 << 20, HWM: 3 << 20, RSSAnon: 1 << 20, RSSFile: 2 << 20},
		},
		{name: "missing process", wantErr: "no such file"},
		{name: "malformed stat names the file", stat: "garbage", status: "VmHWM:\t1 kB\nVmRSS:\t1 kB\n", wantErr: filepath.Join("42", "stat")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.stat != "" {
				dir := filepath.Join(root, strconv.Itoa(42))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, content := range map[string]string{"stat": tt.stat, "status": tt.status} {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := ReadProcUsage(root, 42)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The live /proc of the test process itself parses.
func TestReadProcUsageSelf(t *testing.T) {
	u, err := ReadProcUsage("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS {
		t.Errorf("own usage %+v: want 0 < RSS <= HWM", u)
	}
}
