// SPDX-License-Identifier: Apache-2.0

package logging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"k8s.io/klog/v2"
)

func TestNewRejectsBadValues(t *testing.T) {
	tests := []struct {
		name, format, level string
		wantErr             []string // substrings the error must contain
	}{
		{name: "bad format", format: "yaml", level: "info", wantErr: []string{`"yaml"`, "json", "console"}},
		{name: "bad level", format: "json", level: "verbose", wantErr: []string{`"verbose"`, "debug", "error"}},
		{name: "numeric level", format: "", level: "4", wantErr: []string{`"4"`}},
		{name: "defaults", format: "", level: ""},
		{name: "console debug", format: "console", level: "debug"},
		{name: "case and spaces", format: " JSON", level: "Warn "},
		{name: "warning alias", format: "json", level: "warning"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := NewTo(&buf, tt.format, tt.level)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("NewTo(%q, %q): unexpected error %v", tt.format, tt.level, err)
				}
				if l == nil {
					t.Fatal("nil logger without error")
				}
				return
			}
			if err == nil {
				t.Fatalf("NewTo(%q, %q): want an error, got none", tt.format, tt.level)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %s", err, s)
				}
			}
		})
	}
}

func TestLevelsFilter(t *testing.T) {
	tests := []struct {
		level string
		want  []string // messages that must appear, in order
	}{
		{"debug", []string{"d", "i", "w", "e"}},
		{"info", []string{"i", "w", "e"}},
		{"", []string{"i", "w", "e"}},
		{"warn", []string{"w", "e"}},
		{"error", []string{"e"}},
	}
	for _, tt := range tests {
		t.Run("level="+tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := NewTo(&buf, "json", tt.level)
			if err != nil {
				t.Fatal(err)
			}
			l.Debug("d")
			l.Info("i")
			l.Warn("w")
			l.Error("e")
			var got []string
			for _, rec := range decodeLines(t, &buf) {
				got = append(got, rec["msg"].(string))
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("level %q logged %v, want %v", tt.level, got, tt.want)
			}
		})
	}
}

func TestJSONFields(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewTo(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("evicted pod", zap.String("pod", "default/web-1"), zap.String("signal", "memory.available"), Err(errors.New("boom")))
	recs := decodeLines(t, &buf)
	if len(recs) != 1 {
		t.Fatalf("want 1 JSON line, got %d: %s", len(recs), buf.String())
	}
	r := recs[0]
	for k, want := range map[string]string{"level": "info", "msg": "evicted pod", "pod": "default/web-1", "signal": "memory.available", "err": "boom"} {
		if got, _ := r[k].(string); got != want {
			t.Errorf("field %q = %q, want %q (line %v)", k, got, want, r)
		}
	}
	for _, k := range []string{"ts", "caller"} {
		if _, ok := r[k]; !ok {
			t.Errorf("field %q missing from %v", k, r)
		}
	}
}

func TestConsoleIsNotJSON(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewTo(&buf, "console", "info")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", zap.String("node", "n1"))
	line := buf.String()
	if json.Valid([]byte(strings.TrimSpace(line))) {
		t.Fatalf("console output is JSON: %q", line)
	}
	for _, s := range []string{"INFO", "hello", `"node": "n1"`} {
		if !strings.Contains(line, s) {
			t.Errorf("console line %q lacks %q", line, s)
		}
	}
}

// klog is process-wide, so this test must not run in parallel with others
// that log through klog.
func TestRouteKlog(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewTo(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	restore := RouteKlog(l)
	t.Cleanup(restore)

	klog.InfoS("reflector started", "pod", "kube-system/x")
	klog.ErrorS(errors.New("connection refused"), "watch failed", "resource", "pods")
	klog.V(5).InfoS("too verbose for the default klog -v")
	// evictd's own shutdown cancels requests in flight: not an error line.
	klog.ErrorS(fmt.Errorf("read body: %w", context.Canceled), "Unexpected error when reading response body")
	klog.Flush()

	recs := decodeLines(t, &buf)
	if len(recs) != 2 {
		t.Fatalf("want 2 routed lines, got %d:\n%s", len(recs), buf.String())
	}
	if recs[0]["msg"] != "reflector started" || recs[0]["logger"] != "klog" || recs[0]["pod"] != "kube-system/x" || recs[0]["level"] != "info" {
		t.Errorf("info line not routed as expected: %v", recs[0])
	}
	if recs[1]["msg"] != "watch failed" || recs[1]["err"] != "connection refused" || recs[1]["level"] != "error" {
		t.Errorf("error line not routed as expected: %v", recs[1])
	}

	// After restore, klog no longer writes into our logger.
	restore()
	before := buf.Len()
	klog.SetOutput(&bytes.Buffer{}) // keep klog's default text out of the test output
	klog.LogToStderr(false)
	t.Cleanup(func() { klog.LogToStderr(true) })
	klog.InfoS("after restore")
	klog.Flush()
	if buf.Len() != before {
		t.Errorf("klog still routed after restore: %s", buf.String()[before:])
	}
}

func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestAddFlags(t *testing.T) {
	tests := []struct {
		args                  []string
		wantFormat, wantLevel string
		wantNewErr            bool
	}{
		{nil, "json", "info", false},
		{[]string{"--log-format=console", "--log-level=debug"}, "console", "debug", false},
		{[]string{"--log-level=loud"}, "json", "loud", true},
	}
	for _, tt := range tests {
		var format, level string
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		AddFlags(fs, &format, &level)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if format != tt.wantFormat || level != tt.wantLevel {
			t.Errorf("%v: format %q level %q, want %q %q", tt.args, format, level, tt.wantFormat, tt.wantLevel)
		}
		if _, err := NewTo(io.Discard, format, level); (err != nil) != tt.wantNewErr {
			t.Errorf("%v: New error %v, want error %v", tt.args, err, tt.wantNewErr)
		}
	}
}
