// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/evictd/evictd/pkg/thresholds"
)

// BenchmarkRank ranks a node's worth of pods for memory: 110 (the kubelet's
// default max pods), 1000 and 10,000. The goal is under 1 ms at 1000.
func BenchmarkRank(b *testing.B) {
	opts := propertyOptions()
	for _, n := range []int{110, 1000, 10000} {
		r := rand.New(rand.NewPCG(uint64(n), 7))
		pods, summary := randomNode(r, n)
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := Rank(thresholds.MemoryAvailable, summary, pods, opts)
				if len(res.Candidates) != n {
					b.Fatalf("got %d candidates", len(res.Candidates))
				}
			}
		})
	}
}
