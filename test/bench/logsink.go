// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// LogLine is one of evictd's JSON log lines (docs/run.md, "Log messages").
type LogLine struct {
	// TS is the "ts" field; zero when missing or unparsable.
	TS time.Time
	// Msg and Level are "msg" and "level".
	Msg, Level string
	// Fields holds every field as decoded JSON.
	Fields map[string]any
	// Raw is the line as written.
	Raw string
}

// Str returns a string field, or "".
func (l LogLine) Str(key string) string {
	s, _ := l.Fields[key].(string)
	return s
}

// Num returns a numeric field, and whether it is one.
func (l LogLine) Num(key string) (float64, bool) {
	f, ok := l.Fields[key].(float64)
	return f, ok
}

// ParseLogLine decodes one JSON log line. A line that is not a JSON object
// (a Go runtime panic, say) is kept with only Raw set.
func ParseLogLine(line []byte) LogLine {
	l := LogLine{Raw: string(line)}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return l
	}
	l.Fields = m
	l.Msg, _ = m["msg"].(string)
	l.Level, _ = m["level"].(string)
	if ts, ok := m["ts"].(string); ok {
		l.TS, _ = time.Parse(time.RFC3339Nano, ts)
	}
	return l
}

// LogSink is an io.Writer for a process's output that splits it into lines,
// keeps them parsed, and copies the raw bytes to an optional file. It is safe
// for concurrent use.
type LogSink struct {
	mu      sync.Mutex
	partial []byte
	lines   []LogLine
	copyTo  io.Writer
	changed chan struct{}
}

// NewLogSink returns a sink that also writes everything to copyTo, if not
// nil.
func NewLogSink(copyTo io.Writer) *LogSink {
	return &LogSink{copyTo: copyTo, changed: make(chan struct{})}
}

// Write implements io.Writer.
func (s *LogSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copyTo != nil {
		// The copy is for people reading it later; failing to write it
		// must not make the process under test block or die.
		_, _ = s.copyTo.Write(p)
	}
	s.partial = append(s.partial, p...)
	added := false
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(s.partial[:i]); len(line) > 0 {
			s.lines = append(s.lines, ParseLogLine(line))
			added = true
		}
		s.partial = s.partial[i+1:]
	}
	if added {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return len(p), nil
}

// Len is the number of complete lines so far; pass it to Since or Wait to
// look only at what came after.
func (s *LogSink) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

// Since returns the lines from index from on that match (all when match is
// nil).
func (s *LogSink) Since(from int, match func(LogLine) bool) []LogLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LogLine
	for _, l := range s.lines[min(from, len(s.lines)):] {
		if match == nil || match(l) {
			out = append(out, l)
		}
	}
	return out
}

// Wait returns the first line from index from on that matches, waiting for
// it until ctx ends.
func (s *LogSink) Wait(ctx context.Context, from int, match func(LogLine) bool) (LogLine, error) {
	for {
		s.mu.Lock()
		for _, l := range s.lines[min(from, len(s.lines)):] {
			if match(l) {
				s.mu.Unlock()
				return l, nil
			}
		}
		from = len(s.lines)
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return LogLine{}, ctx.Err()
		case <-changed:
		}
	}
}

// Tail returns the last n raw lines, for failure messages.
func (s *LogSink) Tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	for _, l := range s.lines[max(len(s.lines)-n, 0):] {
		b.WriteString(l.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// MsgIs matches lines whose msg is m.
func MsgIs(m string) func(LogLine) bool {
	return func(l LogLine) bool { return l.Msg == m }
}
