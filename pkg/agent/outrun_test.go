// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A node whose evictions take 10 s to give memory back (a loaded host, a
// slow runtime) and a pod filling 200 Mi/s: the 300Mi threshold and its
// act-early band (450Mi) last 2.25 s. evictd still evicts the filler (the
// call is no different), and says once, in the log and the counter, that
// the threshold is too thin for this node. At 20 Mi/s the room lasts 22.5 s:
// no word.
func TestLoopTellsWhenTheFallOutrunsTheThreshold(t *testing.T) {
	for _, tc := range []struct {
		growth float64
		want   float64
	}{{200 * mi, 1}, {20 * mi, 0}} {
		pods := []*simPod{
			{name: "g", usage: 100 * mi, growth: tc.growth, grace: 30, exitIn: time.Second},
			{name: "b", usage: 800 * mi, request: 1000 * mi, grace: 30, exitIn: time.Second},
		}
		n := newSimNode(t, 4096*mi, 4096*mi-1000*mi-900*mi, pods...)
		n.metrics = newMetrics(t)
		core, logs := observer.New(zapcore.WarnLevel)
		n.log = zap.New(core)
		cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
		cfg.Adaptive = true
		cfg.Decide.ActEarly = true
		cfg.Decide.Lead = 10 * time.Second
		n.run(t, cfg, 60*time.Second)
		if len(n.calls) == 0 || n.calls[0].pod != "g" {
			t.Fatalf("%d Mi/s: calls %+v, want g evicted as ever", int64(tc.growth/mi), n.calls)
		}
		assertValue(t, n.metrics, "evictd_threshold_outrun_total", map[string]string{"signal": "memory.available"}, tc.want)
		assertValue(t, n.metrics, "evictd_eviction_lead_seconds", nil, n.loop.lead.get().Seconds())
		told := logs.FilterMessageSnippet("faster than the threshold covers").All()
		if len(told) != int(tc.want) {
			t.Errorf("%d Mi/s: %d warnings of the outrun, want %v: %v", int64(tc.growth/mi), len(told), tc.want, told)
		}
		for _, e := range told {
			if got := e.ContextMap()["evictionLead"]; got != "10s" && got != 10*time.Second {
				t.Errorf("warning's evictionLead = %v, want the measured 10s", got)
			}
		}
	}
}
