// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"testing"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// TestDecideNamesTheRunnerUp: the pod that would have gone in the victim's
// place is the next one the same decision could have named, with its place
// in the order; never a pod refused, tried or (unless the
// decision overrides the budgets) PDB-blocked, and never an ineligible one.
func TestDecideNamesTheRunnerUp(t *testing.T) {
	ths := parse(t, thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	hard := thresholds.Status{Active: []thresholds.ActiveThreshold{active(find(t, ths, thresholds.MemoryAvailable, true), 250*mi, 4096*mi, false)}}
	ranking := []rank.Candidate{cand("a", 400*mi, 100*mi, true), cand("b", 300*mi, 100*mi, true), cand("c", 200*mi, 100*mi, true), cand("z", 900*mi, 0, false)}
	bestEffort := baseOptions()
	bestEffort.Evict.PDBPolicy = evict.PDBBestEffort
	for _, tc := range []struct {
		name           string
		opts           Options
		ranking        []rank.Candidate
		in             Input
		action         Action
		victim, runner string
		runnerRank     int
	}{
		{name: "the next in the order", in: Input{}, action: Evict, victim: "a", runner: "b", runnerRank: 2},
		{name: "past a pod already tried in this pass", in: Input{Tried: uids("b")}, action: Evict, victim: "a", runner: "c", runnerRank: 3},
		{name: "past a PDB-blocked pod", in: Input{Blocked: uids("b")}, action: Evict, victim: "a", runner: "c", runnerRank: 3},
		{name: "past a refused pod, before the victim", in: Input{Refused: uids("a")}, action: Evict, victim: "b", runner: "c", runnerRank: 3},
		{name: "never an ineligible pod", ranking: ranking[2:], in: Input{}, action: Evict, victim: "c"},
		{name: "budgets overridden: a blocked pod is next", opts: bestEffort, in: Input{Blocked: uids("a", "b", "c")},
			action: ForceDelete, victim: "a", runner: "b", runnerRank: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts.HardHorizon == 0 {
				opts = baseOptions()
			}
			r := ranking
			if tc.ranking != nil {
				r = tc.ranking
			}
			in := tc.in
			in.Now, in.Status = t0, hard
			in.Rank = func(thresholds.Signal) []rank.Candidate { return r }
			d := Decide(opts, in)
			if d.Action != tc.action || d.Candidate.Name != tc.victim {
				t.Fatalf("decision %s %q (%s), want %s %q", d.Action, d.Candidate.Name, d.Reason, tc.action, tc.victim)
			}
			if d.RunnerUp.Name != tc.runner || d.RunnerUpRank != tc.runnerRank {
				t.Errorf("runner-up %q at rank %d, want %q at rank %d", d.RunnerUp.Name, d.RunnerUpRank, tc.runner, tc.runnerRank)
			}
		})
	}
}
