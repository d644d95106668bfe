// SPDX-License-Identifier: Apache-2.0

package evictdproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

func TestMetricsSum(t *testing.T) {
	text := `# TYPE evictd_evictions_total counter
evictd_evictions_total{result="evicted",signal="memory.available"} 2
evictd_evictions_total{result="evicted",signal="nodefs.available"} 1
evictd_evictions_total{result="pdb_blocked",signal="memory.available"} 4
# TYPE evictd_threshold_met gauge
evictd_threshold_met{kind="hard",signal="memory.available"} 1
# TYPE evictd_eviction_latency_seconds histogram
evictd_eviction_latency_seconds_bucket{signal="memory.available",le="+Inf"} 3
evictd_eviction_latency_seconds_sum{signal="memory.available"} 0.4
evictd_eviction_latency_seconds_count{signal="memory.available"} 3
`
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	m := Metrics(mfs)
	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"all evicted", "evictd_evictions_total", map[string]string{"result": "evicted"}, 3},
		{"one series", "evictd_evictions_total", map[string]string{"result": "evicted", "signal": "nodefs.available"}, 1},
		{"everything", "evictd_evictions_total", nil, 7},
		{"no match", "evictd_evictions_total", map[string]string{"result": "error"}, 0},
		{"gauge", "evictd_threshold_met", map[string]string{"kind": "hard"}, 1},
		{"histogram count", "evictd_eviction_latency_seconds", nil, 3},
		{"missing family", "evictd_nope", nil, 0},
	}
	for _, tt := range tests {
		if got := m.Sum(tt.metric, tt.labels); got != tt.want {
			t.Errorf("%s: Sum = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := m.Evictions("pdb_blocked"); got != 4 {
		t.Errorf("Evictions(pdb_blocked) = %v, want 4", got)
	}
}

func TestReadUsage(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		stat    string
		wantRSS float64
		wantCPU time.Duration
		wantErr string
	}{
		{"plain", "Name:\tevictd\nVmRSS:\t   31000 kB\n", "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 150 50 0 0 20 0 9 0",
			31000 * 1024, 2 * time.Second, ""},
		{"name with spaces and parens", "VmRSS:\t1 kB\n", "42 (a b) c)) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0", 1024, 100 * time.Millisecond, ""},
		{"no VmRSS (a zombie)", "Name:\tevictd\n", "42 (evictd) Z 1 42 42 0 -1 0 0 0 0 0 1 1 0 0", 0, 0, "no VmRSS"},
		{"VmRSS in MB", "VmRSS:\t1 MB\n", "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 1 1", 0, 0, "malformed"},
		{"short stat", "VmRSS:\t1 kB\n", "42 (evictd) S 1 42", 0, 0, "fields after the command name"},
		{"bad utime", "VmRSS:\t1 kB\n", "42 (evictd) S 1 42 42 0 -1 0 0 0 0 0 x 1 0 0", 0, 0, "not a number"},
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
			if u.RSS != tt.wantRSS || u.CPU != tt.wantCPU {
				t.Errorf("ReadUsage = %+v, want RSS %v CPU %s", u, tt.wantRSS, tt.wantCPU)
			}
		})
	}
	if _, err := ReadUsage(t.TempDir(), 1); err == nil {
		t.Error("ReadUsage of a missing process: want an error")
	}
}
