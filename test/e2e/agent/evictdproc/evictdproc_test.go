// SPDX-License-Identifier: Apache-2.0

package evictdproc

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		wantLevel string
		wantMsg   string
		wantPod   string
		wantTS    string
	}{
		{"eviction", `{"level":"info","ts":"2026-11-22T08:54:32.874307162Z","msg":"evicted pod","pod":"ns/a","signal":"memory.available","rank":1}`,
			"info", "evicted pod", "ns/a", "2026-11-22T08:54:32.874307162Z"},
		{"no pod", `{"level":"warn","ts":"2026-11-22T08:54:32Z","msg":"observation failed"}`, "warn", "observation failed", "", "2026-11-22T08:54:32Z"},
		{"not JSON", `panic: boom`, "unparsed", "panic: boom", "", ""},
		{"truncated JSON", `{"level":"info","msg":"evi`, "unparsed", `{"level":"info","msg":"evi`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ParseLine(tt.line)
			if l.Level != tt.wantLevel || l.Msg != tt.wantMsg || l.Pod != tt.wantPod || l.Raw != tt.line {
				t.Errorf("ParseLine = level %q msg %q pod %q raw %q", l.Level, l.Msg, l.Pod, l.Raw)
			}
			var want time.Time
			if tt.wantTS != "" {
				want, _ = time.Parse(time.RFC3339Nano, tt.wantTS)
			}
			if !l.TS.Equal(want) {
				t.Errorf("TS = %s, want %s", l.TS, want)
			}
		})
	}
	if r, ok := ParseLine(`{"rank":2}`).Num("rank"); !ok || r != 2 {
		t.Errorf("Num(rank) = %v, %v; want 2, true", r, ok)
	}
}

func TestReadEntriesLeavesPartialLine(t *testing.T) {
	in := "{\"msg\":\"a\"}\n\n{\"msg\":\"b\"}\n{\"msg\":\"c"
	var msgs []string
	n, err := ReadEntries(strings.NewReader(in), func(l Entry) { msgs = append(msgs, l.Msg) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(msgs, ",") != "a,b" {
		t.Errorf("messages %q, want a,b", msgs)
	}
	if want := int64(strings.LastIndex(in, "\n") + 1); n != want {
		t.Errorf("consumed %d bytes, want %d (up to the last newline)", n, want)
	}
}

const scrapeText = `# TYPE evictd_evictions_total counter
evictd_evictions_total{result="evicted",signal="memory.available"} 2
evictd_evictions_total{result="evicted",signal="nodefs.available"} 1
evictd_evictions_total{result="pdb_blocked",signal="memory.available"} 4
evictd_evictions_total{result="error",signal="memory.available"} 0
# TYPE evictd_threshold_met gauge
evictd_threshold_met{kind="hard",signal="memory.available"} 1
evictd_threshold_met{kind="soft",signal="memory.available"} 0
# TYPE evictd_eviction_latency_seconds histogram
evictd_eviction_latency_seconds_bucket{signal="memory.available",le="+Inf"} 3
evictd_eviction_latency_seconds_sum{signal="memory.available"} 0.4
evictd_eviction_latency_seconds_count{signal="memory.available"} 3
# TYPE go_goroutines gauge
go_goroutines 12
`

func TestMetricsLookup(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(scrapeText))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		metric  string
		labels  map[string]string
		want    float64
		wantErr []string // each in the error
	}{
		{"all evicted", "evictd_evictions_total", map[string]string{"result": "evicted"}, 3, nil},
		{"one series", "evictd_evictions_total", map[string]string{"result": "evicted", "signal": "nodefs.available"}, 1, nil},
		{"everything", "evictd_evictions_total", nil, 7, nil},
		{"a series at 0", "evictd_evictions_total", map[string]string{"result": "error"}, 0, nil},
		{"gauge", "evictd_threshold_met", map[string]string{"kind": "hard"}, 1, nil},
		{"gauge at 0", "evictd_threshold_met", map[string]string{"kind": "soft"}, 0, nil},
		{"histogram count", "evictd_eviction_latency_seconds", nil, 3, nil},
		// A renamed label value, a renamed label: no series, not a 0.
		{"no such label value", "evictd_evictions_total", map[string]string{"result": "refused"}, 0,
			[]string{`evictd_evictions_total: no series with labels {result="refused"}`, `evictd_evictions_total{result="pdb_blocked",signal="memory.available"}`}},
		{"no such label", "evictd_threshold_met", map[string]string{"type": "hard"}, 0,
			[]string{`evictd_threshold_met: no series with labels {type="hard"}`, `evictd_threshold_met{kind="soft",signal="memory.available"}`}},
		// A renamed family: the evictd_* families, not go_*.
		{"missing family", "evictd_eviction_total", nil, 0,
			[]string{"no metric family evictd_eviction_total", "evictd_eviction_latency_seconds, evictd_evictions_total, evictd_threshold_met"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.Lookup(tt.metric, tt.labels)
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Fatalf("Lookup(%s, %v) = %v, %v; want %v", tt.metric, tt.labels, got, err, tt.want)
				}
				if v := m.Value(t, tt.metric, tt.labels); v != tt.want {
					t.Errorf("Value = %v, want %v", v, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Lookup(%s, %v) = %v, nil; want an error", tt.metric, tt.labels, got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "go_goroutines") {
				t.Errorf("error %q lists families of other namespaces", err)
			}
			if s := m.Sum(tt.metric, tt.labels); !math.IsNaN(s) {
				t.Errorf("Sum(%s, %v) = %v, want NaN", tt.metric, tt.labels, s)
			}
		})
	}
	if got := m.Evictions("pdb_blocked"); got != 4 {
		t.Errorf("Evictions(pdb_blocked) = %v, want 4", got)
	}
	if got := m.Evictions("refused"); !math.IsNaN(got) {
		t.Errorf("Evictions(refused) = %v, want NaN: there is no such series", got)
	}
}

// TestMetricsValueFailsOnMissingSeries: Value fails the test, not reads 0.
func TestMetricsValueFailsOnMissingSeries(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(scrapeText))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		metric string
		labels map[string]string
	}{
		{"evictd_evictions_total", map[string]string{"result": "refused"}},
		{"evictd_nope", nil},
	} {
		ft := &fatalRecorder{TB: t}
		done := make(chan float64)
		go func() {
			defer close(done)
			done <- m.Value(ft, c.metric, c.labels)
		}()
		if v, ok := <-done; ok {
			t.Errorf("Value(%s, %v) = %v, want the test failed", c.metric, c.labels, v)
		}
		if !strings.Contains(ft.msg, c.metric) {
			t.Errorf("Value(%s, %v) failed with %q, want the family named", c.metric, c.labels, ft.msg)
		}
	}
}

// fatalRecorder records Fatal's message and ends the goroutine, as
// testing.T does, without failing the real test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestReadUsage(t *testing.T) {
	tests := []struct {
		name       string
		status     string
		stat       string
		wantRSS    float64
		wantLocked float64
		wantCPU    time.Duration
		wantErr    string
	}{
		{"plain", "Name:\tevictd\nVmLck:\t   20000 kB\nVmRSS:\t   31000 kB\n", "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 150 50 0 0 20 0 9 0",
			31000 * 1024, 20000 * 1024, 2 * time.Second, ""},
		{"name with spaces and parens", "VmLck:\t0 kB\nVmRSS:\t1 kB\n", "42 (a b) c)) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0", 1024, 0, 100 * time.Millisecond, ""},
		{"no VmRSS (a zombie)", "Name:\tevictd\n", "42 (evictd) Z 1 42 42 0 -1 0 0 0 0 0 1 1 0 0", 0, 0, 0, "no VmRSS"},
		{"no VmLck", "VmRSS:\t1 kB\n", "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 1 1 0 0", 0, 0, 0, "no VmLck"},
		{"VmRSS in MB", "VmLck:\t0 kB\nVmRSS:\t1 MB\n", "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 1 1", 0, 0, 0, "malformed"},
		{"short stat", "VmLck:\t0 kB\nVmRSS:\t1 kB\n", "42 (evictd) S 1 42", 0, 0, 0, "fields after the command name"},
		{"bad utime", "VmLck:\t0 kB\nVmRSS:\t1 kB\n", "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 x 1 0 0", 0, 0, 0, "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "42")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range map[string]string{"status": tt.status, "stat": tt.stat} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			u, err := ReadUsage(root, 42)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.RSS != tt.wantRSS || u.Locked != tt.wantLocked || u.CPU != tt.wantCPU {
				t.Errorf("ReadUsage = %+v, want RSS %v locked %v CPU %s", u, tt.wantRSS, tt.wantLocked, tt.wantCPU)
			}
		})
	}
	if _, err := ReadUsage(t.TempDir(), 1); err == nil {
		t.Error("ReadUsage of a missing process: want an error")
	}
}
