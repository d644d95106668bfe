// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/evictd/evictd/internal/metrictest"
)

// A node whose pods take 4 s to stop (a loaded host, a slow runtime). The
// first fill, 100 Mi/s, gets no word though its room (the 300Mi threshold
// and act-early's 150Mi band) lasts 4.5 s: nothing is measured yet, and the
// 2 s act-early assumes is no evidence. Its victim's 4 s is. A second fill
// at 150 Mi/s uses the room up in 3 s: evictd evicts it as ever and says
// once, in the log and the counter, that the threshold is too thin for this
// node. At 50 Mi/s the room lasts 9 s: no word.
func TestLoopTellsWhenTheFallOutrunsTheThreshold(t *testing.T) {
	for _, tc := range []struct {
		growth float64
		want   float64
	}{{150 * mi, 1}, {50 * mi, 0}} {
		first := &simPod{name: "first", usage: 100 * mi, growth: 100 * mi, grace: 30, exitIn: 4 * time.Second}
		quiet := &simPod{name: "quiet", usage: 300 * mi, request: 1000 * mi, grace: 30, exitIn: time.Second}
		n := newSimNode(t, 4096*mi, 4096*mi-1200*mi-400*mi, first, quiet)
		n.metrics = newMetrics(t)
		core, logs := observer.New(zapcore.WarnLevel)
		n.log = zap.New(core)
		cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "")))
		cfg.Adaptive = true
		cfg.Decide.ActEarly = true
		w := n.run(t, cfg, 30*time.Second)
		if !eq(n.victims(), []string{"first"}) {
			t.Fatalf("first fill: calls %v, want [first]", n.victims())
		}
		if took := n.loop.learned.lead.LastTook(); took < 4*time.Second || took > 5*time.Second {
			t.Fatalf("first victim's memory back after %v, want the 4 s it took to stop", took)
		}
		if got := metrictest.Count(t, n.metrics.Registry(), "evictd_eviction_memory_back_seconds", map[string]string{"signal": "memory.available"}); got != 1 {
			t.Errorf("evictd_eviction_memory_back_seconds counts %d, want 1", got)
		}
		if got := metrictest.Value(t, n.metrics.Registry(), "evictd_threshold_outrun_total", map[string]string{"signal": "memory.available"}); got != 0 {
			t.Errorf("evictd_threshold_outrun_total = %g, want %v", got, 0)
		}

		n.mu.Lock()
		n.pods = append(n.pods, &simPod{name: "second", usage: 100 * mi, growth: tc.growth, grace: 30, exitIn: 4 * time.Second, started: n.clk.Now()})
		n.mu.Unlock()
		n.runMore(t, 60*time.Second, w)
		if !eq(n.victims(), []string{"first", "second"}) {
			t.Fatalf("%d Mi/s: calls %v, want [first second]: the second fill evicted as ever", int64(tc.growth/mi), n.victims())
		}
		if got := metrictest.Value(t, n.metrics.Registry(), "evictd_threshold_outrun_total", map[string]string{"signal": "memory.available"}); got != float64(tc.want) {
			t.Errorf("evictd_threshold_outrun_total = %g, want %v", got, tc.want)
		}
		told := logs.FilterMessageSnippet("faster than the threshold covers").All()
		if len(told) != int(tc.want) {
			t.Errorf("%d Mi/s: %d warnings of the outrun, want %v: %v", int64(tc.growth/mi), len(told), tc.want, told)
		}
		for _, e := range told {
			if got, ok := e.ContextMap()["lastEvictionTook"].(time.Duration); !ok || got < 4*time.Second {
				t.Errorf("warning's lastEvictionTook = %v, want the first victim's measured 4 s and more", e.ContextMap()["lastEvictionTook"])
			}
		}
	}
}
