// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"context"
	"testing"
	"time"
)

func TestParseLogLine(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		msg, pod  string
		grace     float64
		wantTS    time.Time
		structure bool
	}{
		{
			name: "evictd JSON line",
			in:   `{"level":"info","ts":"2026-11-22T09:04:38.7378981Z","logger":"evict","msg":"evicted pod","pod":"ns/step-0","gracePeriodSeconds":1}`,
			msg:  "evicted pod", pod: "ns/step-0", grace: 1,
			wantTS: time.Date(2026, 11, 22, 9, 4, 38, 737898100, time.UTC), structure: true,
		},
		{name: "not JSON (a panic)", in: "panic: runtime error", structure: false},
		{name: "no ts", in: `{"msg":"x"}`, msg: "x", structure: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ParseLogLine([]byte(tt.in))
			if l.Raw != tt.in || l.Msg != tt.msg || l.Str("pod") != tt.pod || !l.TS.Equal(tt.wantTS) || (l.Fields != nil) != tt.structure {
				t.Fatalf("ParseLogLine = %+v", l)
			}
			if g, ok := l.Num("gracePeriodSeconds"); ok != (tt.grace != 0) || g != tt.grace {
				t.Errorf("Num(gracePeriodSeconds) = %g, %v; want %g", g, ok, tt.grace)
			}
		})
	}
}

func TestLogSink(t *testing.T) {
	var copied bytes.Buffer
	s := NewLogSink(&copied)
	// Lines split across writes, and an empty line, come out whole.
	for _, w := range []string{`{"msg":"a"}` + "\n" + `{"msg":`, `"b"}` + "\n\n", `{"msg":"c"}`} {
		if _, err := s.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2 complete lines", s.Len())
	}
	if got := s.Since(1, nil); len(got) != 1 || got[0].Msg != "b" {
		t.Errorf("Since(1) = %+v, want [b]", got)
	}
	if got := s.Since(0, MsgIs("a")); len(got) != 1 {
		t.Errorf("Since(0, msg a) = %+v", got)
	}
	if copied.String() != `{"msg":"a"}`+"\n"+`{"msg":"b"}`+"\n\n"+`{"msg":"c"}` {
		t.Errorf("copy = %q", copied.String())
	}
	if got := s.Tail(1); got != `{"msg":"b"}`+"\n" {
		t.Errorf("Tail(1) = %q", got)
	}

	// Wait sees a line that arrives later, and only from the mark on.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = s.Write([]byte("\n" + `{"msg":"a","n":2}` + "\n"))
	}()
	l, err := s.Wait(ctx, 1, MsgIs("a"))
	if err != nil || l.Fields["n"] != float64(2) {
		t.Fatalf("Wait = %+v, %v; want the second a", l, err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if _, err := s.Wait(short, 0, MsgIs("never")); err == nil {
		t.Error("Wait for a line that never comes must end with the context's error")
	}
}
