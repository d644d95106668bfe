// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/thresholds"
)

// memHighNode scripts the container cgroups of a simNode's running pods:
// each pod has one container, with memory.high set unless noHigh names
// it, whose memory.events high grows by highPerSec[pod] a second from t0.
type memHighNode struct {
	n          *simNode
	highPerSec map[string]uint64
	noHigh     map[string]bool
}

func (m *memHighNode) read(obs *pressure.Observation) ([]memhigh.Sample, []error) {
	secs := uint64(m.n.clk.Now().Sub(t0) / time.Second)
	var out []memhigh.Sample
	for _, ps := range obs.Summary.Pods {
		name := ps.PodRef.Name
		out = append(out, memhigh.Sample{PodUID: ps.PodRef.UID, ContainerID: "c-" + name, High: 256 * mi,
			HighSet: !m.noHigh[name], HighEvents: m.highPerSec[name] * secs, HasPSI: true})
	}
	return out, nil
}

// A container stuck at memory.high has its pod evicted once it has been
// over the threshold for the grace period, and not before, through the
// eviction path with its own (soft) grace; a pod without memory.high
// churning as hard and a quiet one are never evicted, and the node's
// memory, plentiful, plays no part.
func TestLoopMemoryHighEvictsAfterGrace(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "big", usage: 900 * mi, request: 10 * mi, grace: 30},
		&simPod{name: "jvm", usage: 300 * mi, request: 256 * mi, grace: 20, exitIn: 2 * time.Second},
		&simPod{name: "nohigh", usage: 300 * mi, request: 256 * mi, grace: 20},
	)
	mh := &memHighNode{n: n, highPerSec: map[string]uint64{"jvm": 200, "nohigh": 200}, noHigh: map[string]bool{"nohigh": true}}
	th := memhigh.Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: 10 * time.Second, Grace: 30 * time.Second}
	cfg := testLoopConfig(append(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}}),
		th.Threshold()))
	cfg.MemoryHigh = th
	n.runWithFamilies(t, cfg, 90*time.Second, family.NewMemHigh(th, mh.read, n.Pods, n.metrics, nil))

	if !eq(n.victims(), []string{"jvm"}) {
		t.Fatalf("eviction calls %v, want jvm alone", n.victims())
	}
	// Over once half a window of readings shows it (5 s after the first
	// at t0), evicted a grace period (30 s) later: not before.
	at := n.calls[0].at.Sub(t0)
	if at < 35*time.Second || at > 37*time.Second {
		t.Errorf("jvm evicted %v after it began hitting memory.high, want 35-37 s (half the window, then the 30 s grace)", at)
	}
	if c := n.calls[0]; c.hard || c.grace != nil && *c.grace != 20 {
		t.Errorf("evicted hard=%v with grace %v, want a soft eviction with the pod's own 20 s", c.hard, c.grace)
	}
}

// The same node without the memory.high settings: no family, no eviction.
func TestLoopMemoryHighOff(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "jvm", usage: 300 * mi, request: 256 * mi, grace: 20})
	n.run(t, testLoopConfig(mustThresholds(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})), 90*time.Second)
	for _, f := range n.loop.families {
		if strings.Contains(f.Name(), "memory-high") {
			t.Errorf("family %s built without memory.high settings", f.Name())
		}
	}
	if v := n.victims(); len(v) != 0 {
		t.Errorf("evicted %v", v)
	}
}

// Switched on where there is no cgroup v2 (the scripted node has no
// layout), the loop builds the family itself, and the family reads the
// host: the signal is reported unreadable, with why, and nothing is evicted.
func TestLoopMemoryHighWithoutV2(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "jvm", usage: 300 * mi, request: 256 * mi, grace: 20})
	th := memhigh.Thresholds{HighRate: 10, Window: 10 * time.Second, Grace: 30 * time.Second}
	cfg := testLoopConfig([]thresholds.Threshold{th.Threshold()})
	cfg.MemoryHigh = th
	n.run(t, cfg, 60*time.Second)
	if v := n.victims(); len(v) != 0 {
		t.Errorf("evicted %v", v)
	}
	want := "signal memory.highStuck unknown: (container cgroups): containers at memory.high need cgroup v2"
	if p := n.loop.Problem(); p == nil || !strings.Contains(p.Error(), want) {
		t.Errorf("Problem() = %v, want it to contain %q", p, want)
	}
}
