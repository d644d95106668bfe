// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/pressure"
)

// BenchmarkRecordPass is the recorder's cost per pass of the loop: Begin,
// Observed, PodState with the informer's same objects (no pod list
// recorded) and End, on an observation of the node and each pod (memory,
// CPU, ephemeral storage, a container, with their times). B/pass is what a
// pass adds to the open chunk (JSON, before gzip), the pod list of a
// chunk's first pass aside; gzB/pass what it takes once sealed. B/op is
// the garbage a pass leaves.
func BenchmarkRecordPass(b *testing.B) {
	for _, pods := range []int{30, 110} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			f := newFigures(uint64(pods))
			// A few observations of distinct figures, in turn, so that a
			// chunk's gzip sees figures change from pass to pass.
			obs := make([]*pressure.Observation, 8)
			for i := range obs {
				obs[i] = makeObs(t0.Add(time.Duration(i)*time.Second), pods, f)
			}
			list := makePods(pods)
			classes := map[string]int32{"standard": 1000}
			nsLabels := map[string]map[string]string{"ns-0": {"team": "a"}}
			node := testNode("1")

			rawPerPass, gzPerPass := measurePass(b, obs, list, classes, nsLabels)

			r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
			n := uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				n++
				at := t0.Add(time.Duration(n) * time.Second)
				r.Begin(n, 0, at, Wakeup{Source: "timer"})
				r.Observed(obs[n%uint64(len(obs))], nil, at, true)
				r.PodState(list, classes, nsLabels, node)
				r.End()
			}
			b.ReportMetric(rawPerPass, "B/pass")
			b.ReportMetric(gzPerPass, "gzB/pass")
		})
	}
}

// measurePass records passes until the first chunk is sealed: the JSON a
// pass after the first (which holds the pod list) writes, and the sealed
// chunk's size per pass.
func measurePass(b *testing.B, obs []*pressure.Observation, list []*v1.Pod, classes map[string]int32, nsLabels map[string]map[string]string) (raw, zipped float64) {
	b.Helper()
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	for n := uint64(1); n < 10000; n++ {
		at := t0.Add(time.Duration(n) * time.Second)
		r.Begin(n, 0, at, Wakeup{Source: "timer"})
		r.Observed(obs[n%uint64(len(obs))], nil, at, true)
		r.PodState(list, classes, nsLabels, nil)
		r.End()
		if len(r.sealed) == 0 {
			continue
		}
		passes := bytes.SplitAfter(gunzip(b, r.sealed[0].b), []byte("\n"))
		passes = passes[:len(passes)-1] // after the last newline
		if len(passes) < 2 {
			b.Fatalf("a chunk sealed after %d passes", len(passes))
		}
		rest := 0
		for _, p := range passes[1:] {
			rest += len(p)
		}
		return float64(rest) / float64(len(passes)-1), float64(len(r.sealed[0].b)) / float64(len(passes))
	}
	b.Fatal("no chunk sealed")
	return 0, 0
}
