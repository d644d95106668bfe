// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/pressure"
)

// podReadingSim is the simulated node behind an observer that, like the
// real one, hands the loop's PodReads the node's figures first and, when it
// says no, carries the pods as the last read found them.
type podReadingSim struct {
	*simNode
	last     *pressure.Observation // the last observation that read the pods
	readStep map[int]bool          // the passes that read them
	oldest   time.Duration         // the oldest pod figures a pass carried
}

func (s *podReadingSim) ObserveWith(ctx context.Context, reads pressure.PodReads) (*pressure.Observation, error) {
	obs, err := s.simNode.Observe(ctx)
	if err != nil {
		return nil, err
	}
	node := &pressure.Observation{Time: obs.Time, Summary: &statsapi.Summary{Node: obs.Summary.Node}}
	if s.last == nil || reads(node, s.last.Time) {
		s.last = obs
		s.readStep[s.steps] = true
		return obs, nil
	}
	obs.Summary.Pods, obs.Pods, obs.PodsAge = s.last.Summary.Pods, s.last.Pods, obs.Time.Sub(s.last.Time)
	s.oldest = max(s.oldest, obs.PodsAge)
	return obs, nil
}

// Away from the threshold the loop reuses the pods' figures, reads them at
// least every 10 s, and reads them in every pass from the band above the
// threshold on: the pass that evicts ranks on pods read in that pass, and
// a victim in flight is followed pass by pass.
func TestLoopReadsPodsOnlyWhenNeeded(t *testing.T) {
	// 2246Mi available at first; the leak's 50Mi/s brings the node into the
	// band (300Mi, and as much again above it) after 33 s, past the threshold
	// after 39 s.
	n := newSimNode(t, 4096*mi, 250*mi,
		&simPod{name: "quiet", usage: 600 * mi, request: 1000 * mi, grace: 30, exitIn: time.Second},
		&simPod{name: "leak", usage: 200 * mi, request: 100 * mi, growth: 50 * mi, grace: 30, exitIn: 2 * time.Second},
		&simPod{name: "mid", usage: 800 * mi, grace: 30, exitIn: time.Second},
	)
	n.metrics = newMetrics(t)
	s := &podReadingSim{simNode: n, readStep: map[int]bool{}}
	w := &simWaker{n: n}
	l, err := NewLoop(testLoopConfig(mustThresholds(t, memSpec("300Mi", ""))), Deps{Observer: s, Waker: w, Pods: n, Evictor: n,
		Metrics: n.metrics, Clock: n.clk, Go: syncCall})
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, 60*time.Second, w)

	if !eq(n.victims(), []string{"leak"}) {
		t.Fatalf("eviction calls %v, want the leak", n.victims())
	}
	for _, c := range n.calls {
		if !s.readStep[c.step] {
			t.Errorf("%s was evicted in pass %d, on pod figures of an earlier pass", c.pod, c.step)
		}
	}
	if s.oldest == 0 || s.oldest >= 10*time.Second {
		t.Errorf("the oldest pod figures a pass carried were %v old; want some reuse, never 10 s", s.oldest)
	}
	t.Logf("%d passes, %d read the pods, the oldest figures carried %v", n.steps, len(s.readStep), s.oldest)
	// Every pass was counted, the first as read without asking, and each
	// way was taken.
	var counted float64
	for _, r := range []string{"reuse", "due", "near", "busy", "forced"} {
		v, err := metrictest.Lookup(n.metrics.Registry(), "evictd_observation_pod_reads_total", map[string]string{"reason": r})
		if err != nil || v == 0 {
			t.Errorf("no pass counted reason=%q", r)
		}
		counted += v
	}
	if want := float64(n.steps); counted != want {
		t.Errorf("%g passes counted, want %g", counted, want)
	}
	if reused := float64(n.steps - len(s.readStep)); reused < float64(n.steps)/2 {
		t.Errorf("%g of %d passes reused the pods' figures; want most of a minute far from the threshold", reused, n.steps)
	}
}

// A victim whose deletion the informer has just seen is settled by its
// cgroup in the pass that takes it (settleVictims): that pass reads the
// pods though no episode is open and nothing is left in flight.
func TestPodReadsWhileAVictimIsSettled(t *testing.T) {
	n := newSimNode(t, 4096*mi, 250*mi, &simPod{name: "quiet", usage: 600 * mi, request: 1000 * mi})
	l, err := NewLoop(testLoopConfig(mustThresholds(t, memSpec("300Mi", ""))), Deps{Observer: n, Waker: &simWaker{n: n}, Pods: n, Evictor: n,
		Clock: n.clk, Go: syncCall})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := n.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	node := &pressure.Observation{Time: obs.Time, Summary: &statsapi.Summary{Node: obs.Summary.Node}}
	decided := false
	if l.podReads(&decided)(node, obs.Time) || !decided {
		t.Fatalf("far from the threshold, read a moment ago: reads the pods (asked %v); want reuse", decided)
	}
	l.inbox.gone.push(goneItem{at: obs.Time})
	if !l.podReads(&decided)(node, obs.Time) {
		t.Error("a victim taken from the informer's deletions, to settle in this pass: the pods reused; want them read")
	}
}
