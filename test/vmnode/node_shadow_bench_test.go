// SPDX-License-Identifier: Apache-2.0

//go:build vmnode && vmnodebench

package vmnode

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/shadow"
)

// TestNodeShadow: evictd in shadow mode (--shadow, a dry run) beside the
// real kubelet, which alone evicts, during a leak at 100 MiB/s: the report
// docs/shadow.md shows, from the real node. A benchmark (make
// bench-shadow-node), not a test of make test: the kubelet alone can leave
// the guest in a reclaim livelock for minutes (TestNodeHeadToHead). It
// checks that the report came and lines up with what the pods' fates say.
func TestNodeShadow(t *testing.T) {
	n := sharedNode(t)
	// No grant beyond the chart's default: shadow mode reads the kubelet's
	// evictions from the pods of the node.
	ev := evictdPodWith(t, n, "--shadow", "--eviction-pressure-transition-period=30s")
	run := raceOnce(t, n, "kubelet + evictd --shadow", 100)
	t.Logf("the run:\n%s", RaceTable([]RaceRun{run}))

	// The report comes at the episode's end: the transition period after
	// the last pressure, on a guest that may still be slow to answer.
	var reports []map[string]any
	deadline := time.Now().Add(3 * time.Minute)
	for len(reports) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Second)
		for _, line := range strings.Split(evictdLogSince(t, n, ev, run.Start), "\n") {
			// CRI log line: time, stream, tag, then evictd's JSON.
			_, js, ok := strings.Cut(line, "{")
			if !ok || !strings.Contains(line, `"msg":"shadow report"`) {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte("{"+js), &m); err == nil {
				reports = append(reports, m)
				t.Logf("shadow report from the node:\n%s", "{"+js)
			}
		}
	}
	if len(reports) == 0 {
		lines := strings.Split(evictdLog(t, n, ev), "\n")
		t.Fatalf("no shadow report in evictd's log 3 minutes after the run; its last lines:\n%s",
			strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	var kubelet []shadow.Action
	raw, _ := json.Marshal(reports[0]["kubeletEvicted"])
	_ = json.Unmarshal(raw, &kubelet)
	for _, f := range run.Fates {
		if f.By != ByKubelet {
			continue
		}
		found := false
		for _, k := range kubelet {
			if !strings.HasSuffix(k.Pod, "/"+f.Pod) {
				continue
			}
			found = true
			// The real kubelet (1.26 and later) dates its eviction with the
			// pod's DisruptionTarget condition.
			if k.AtFrom != shadow.AtCondition {
				t.Errorf("the kubelet's eviction of %s is dated from %q; want %q (its DisruptionTarget condition)", f.Pod, k.AtFrom, shadow.AtCondition)
			}
		}
		if !found {
			t.Errorf("the kubelet evicted %s, which the report's kubeletEvicted %+v lacks", f.Pod, kubelet)
		}
	}
}
