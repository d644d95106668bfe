// SPDX-License-Identifier: Apache-2.0

package metrictest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// registry: evictd_x_total{a,b} with two series, the gauge evictd_y, the
// untyped evictd_u and the histogram evictd_h_seconds.
func registry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evictd_x_total", Help: "x"}, []string{"a", "b"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "evictd_y", Help: "y"})
	u := prometheus.NewUntypedFunc(prometheus.UntypedOpts{Name: "evictd_u", Help: "u"}, func() float64 { return 11 })
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "evictd_h_seconds", Help: "h"})
	reg.MustRegister(c, g, u, h)
	c.WithLabelValues("1", "2").Add(3)
	c.WithLabelValues("1", "4").Add(5)
	g.Set(7)
	h.Observe(1)
	return reg
}

func TestValue(t *testing.T) {
	reg := registry(t)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"evictd_x_total", map[string]string{"a": "1", "b": "4"}, 5},
		{"evictd_x_total", map[string]string{"b": "2"}, 3},
		{"evictd_y", nil, 7},
		{"evictd_u", nil, 11},
	} {
		if got := Value(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Value(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

// recorder is a testing.TB that records failures; Fatal ends the goroutine
// as testing's does.
type recorder struct {
	testing.TB
	fatal  bool
	failed bool
	msgs   []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.fatal = true, true
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

// record runs f on a recorder in a goroutine of its own, so that its Fatal
// can end it.
func record(f func(tb testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// TestValueFailsWithoutTheSeries: a series or a family that is not there
// fails the test, naming what was asked for and listing what there is,
// where it used to read as 0.
func TestValueFailsWithoutTheSeries(t *testing.T) {
	reg := registry(t)
	for _, tc := range []struct {
		what   string
		name   string
		labels map[string]string
		// wantMsg: the failure message holds each of these.
		wantMsg []string
	}{
		{"no such series", "evictd_x_total", map[string]string{"a": "1", "b": "9"},
			[]string{`evictd_x_total: no series with labels {a="1",b="9"}`, `evictd_x_total{a="1",b="2"}`, `evictd_x_total{a="1",b="4"}`}},
		{"a label it does not have", "evictd_y", map[string]string{"signal": "memory.available"},
			[]string{`evictd_y: no series with labels {signal="memory.available"}`, "evictd_y{}"}},
		{"no such family (renamed)", "evictd_renamed_total", map[string]string{"a": "1"},
			[]string{"no metric family evictd_renamed_total", "evictd_x_total", "evictd_y"}},
		{"no such namespace", "other_total", nil, []string{"no metric family other_total", "none named other_*"}},
		{"more than one series", "evictd_x_total", map[string]string{"a": "1"},
			[]string{`evictd_x_total: 2 series with labels {a="1"}, want one`}},
		{"a histogram", "evictd_h_seconds", nil, []string{"evictd_h_seconds is a histogram"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var got float64
			r := record(func(tb testing.TB) { got = Value(tb, reg, tc.name, tc.labels) })
			if !r.fatal {
				t.Fatalf("Value(%s, %v) = %v and did not fail the test", tc.name, tc.labels, got)
			}
			msg := strings.Join(r.msgs, "\n")
			for _, w := range tc.wantMsg {
				if !strings.Contains(msg, w) {
					t.Errorf("failure message %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestAbsent(t *testing.T) {
	reg := registry(t)
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		wantFail bool
	}{
		{"evictd_x_total", map[string]string{"b": "9"}, false},
		{"evictd_none_total", nil, false},
		{"evictd_x_total", map[string]string{"b": "2"}, true},
		{"evictd_x_total", map[string]string{"a": "1"}, true},
		{"evictd_y", nil, true},
	} {
		r := record(func(tb testing.TB) { Absent(tb, reg, tc.name, tc.labels) })
		if r.failed != tc.wantFail {
			t.Errorf("Absent(%s, %v) failed: %v (%q), want %v", tc.name, tc.labels, r.failed, r.msgs, tc.wantFail)
		}
		if r.fatal {
			t.Errorf("Absent(%s, %v) stopped the test; it should only mark it failed", tc.name, tc.labels)
		}
	}
}
