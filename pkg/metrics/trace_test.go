// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/buildinfo"
)

type fakeTrace struct {
	size   int
	oldest time.Time
}

func (f *fakeTrace) Size() int         { return f.size }
func (f *fakeTrace) Oldest() time.Time { return f.oldest }

// The trace's gauges read the recorder at each scrape: 0 without one,
// then its figures as they change.
func TestTraceGauges(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"evictd_trace_bytes", "evictd_trace_oldest_pass_timestamp_seconds"}
	want := func(size, oldest string) string {
		return `# HELP evictd_trace_bytes Compressed bytes the trace of passes holds for evictd replay, within --trace-size; 0 with --trace-size=0.
# TYPE evictd_trace_bytes gauge
evictd_trace_bytes ` + size + `
# HELP evictd_trace_oldest_pass_timestamp_seconds Unix time of the oldest pass the trace holds: how far back an export of it reaches (time() minus this is the trace's span); 0 while it holds none or with --trace-size=0.
# TYPE evictd_trace_oldest_pass_timestamp_seconds gauge
evictd_trace_oldest_pass_timestamp_seconds ` + oldest + "\n"
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want("0", "0")), names...); err != nil {
		t.Errorf("without a trace: %v", err)
	}
	tr := &fakeTrace{}
	m.SetTrace(tr)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want("0", "0")), names...); err != nil {
		t.Errorf("an empty trace: %v", err)
	}
	tr.size, tr.oldest = 3<<20, time.Unix(1795689085, 500e6)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want("3.145728e+06", "1.7956890855e+09")), names...); err != nil {
		t.Errorf("a trace of 3 MiB: %v", err)
	}
	var nilMetrics *Metrics
	nilMetrics.SetTrace(tr) // no panic
}
