// SPDX-License-Identifier: Apache-2.0

package play

import (
	"maps"
	"slices"

	"github.com/evictd/evictd/pkg/trace"
)

// Call is an eviction call a replay made (or the recorded agent):
// when, of which pod, why, and the answer.
type Call struct {
	trace.Decision
	// Result is the answer the loop got: the recorded one when the
	// recorded agent made the same call (Recorded), else an accepted
	// eviction (a dry run's verdict in dry run).
	Result   string `json:"result"`
	Recorded bool   `json:"recorded"`
}

// Same reports whether c and r are the same decision: the same pass, pod,
// signal, kind, rank and reasons.
func (c Call) Same(r Call) bool {
	return c.Pass == r.Pass && c.Pod == r.Pod && c.Signal == r.Signal && c.Hard == r.Hard && c.Force == r.Force &&
		c.Rank == r.Rank && c.Reason == r.Reason && c.RunnerUp == r.RunnerUp
}

// RecordedCalls are the calls the trace's agent made, in the order it
// made them, with their answers (Result "" for a call still under way at
// the trace's end).
func RecordedCalls(tr *trace.Trace) []Call {
	bySeq := map[uint64]Call{}
	for _, p := range tr.Passes {
		for _, c := range p.Launched {
			bySeq[c.Seq] = Call{Decision: c.Decision, Recorded: true}
		}
		// A call made before the trace began is known by its answer.
		for _, d := range p.Drains {
			for _, c := range d.Calls {
				bySeq[c.Seq] = Call{Decision: c.Decision, Result: c.Result, Recorded: true}
			}
		}
	}
	out := make([]Call, 0, len(bySeq))
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		out = append(out, bySeq[seq])
	}
	return out
}
