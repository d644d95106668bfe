// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/evictd/evictd/pkg/thresholds"
)

const msgProlonged = "victim still being torn down past its wait; its reclaim still counts while it moves"

// A disk victim on a slow node: its process exits at SIGTERM, but the
// kubelet takes 90 s to remove its files, its empty cgroup listed until
// they are gone (seen on the VM node: TestNodeDiskInodes's victim still
// terminating 37 s after its eviction). Its figure falls at every
// observation, and its object says its container stopped: reclaim on its
// way, so nothing more goes (it used to stop counting at grace + 30 s, and
// the next pod went for space that was coming back). Said once.
func TestLoopSlowTeardownStillCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  func(*simPod)
	}{
		{"its files going", func(*simPod) {}},
		{"its files going, its container stopped", func(p *simPod) { p.reportsExit = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const gi = 1 << 30
			many := &simPod{name: "many", usage: 10 * mi, grace: 30, exitIn: time.Second, disk: 10 * gi, volumeGoneIn: 90 * time.Second}
			tc.pod(many)
			few := &simPod{name: "few", usage: 10 * mi, grace: 30, disk: gi}
			n := newSimNode(t, 4096*mi, base250, many, few)
			// 80 GiB used outside the pods, 11 GiB by them: nodefs.available
			// 9 GiB, under the 15 GiB threshold; many's 10 GiB cover it.
			n.diskCapacity, n.diskBase = 100*gi, 80*gi
			core, logs := observer.New(zapcore.InfoLevel)
			n.log = zap.New(core)
			cfg := testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"nodefs.available": "15%"}}))
			cfg.ExpectImageGC = false
			n.run(t, cfg, 3*time.Minute)
			if !eq(n.victims(), []string{"many"}) {
				t.Errorf("eviction calls %v, want [many]: its files were on their way back", n.victims())
			}
			if len(n.stuck) != 0 {
				t.Errorf("EvictionStuck Events for %v, want none", n.stuck)
			}
			if got := logs.FilterMessage(msgProlonged).Len(); got != 1 {
				t.Errorf("%q logged %d times, want once", msgProlonged, got)
			}
			if got := logs.FilterMessage("evicted pod gone").Len(); got != 1 {
				t.Errorf("\"evicted pod gone\" logged %d times, want once: many gone once its files were", got)
			}
			if t.Failed() {
				for _, e := range logs.All() {
					t.Logf("%s %v", e.Message, e.ContextMap())
				}
			}
		})
	}
}
