// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"time"
)

// OwnNodeRound is one measurement of the own-node policy's cost: the same
// figure read with the policy off and with it on, back to back on the same
// API server, so that the machine's load moves both alike.
type OwnNodeRound struct {
	Off, On float64
}

// OwnNodeFigure is one figure (an eviction's median latency, the API
// server's heap or RSS) over the rounds of one pod count.
type OwnNodeFigure struct {
	Rounds []OwnNodeRound
}

// Add records one round.
func (f *OwnNodeFigure) Add(off, on float64) {
	f.Rounds = append(f.Rounds, OwnNodeRound{Off: off, On: on})
}

// Off and On are the medians over the rounds of each state.
func (f OwnNodeFigure) Off() float64 {
	return MedianOf(f.Rounds, func(r OwnNodeRound) float64 { return r.Off })
}
func (f OwnNodeFigure) On() float64 {
	return MedianOf(f.Rounds, func(r OwnNodeRound) float64 { return r.On })
}

// Ratio is the median over the rounds of on/off, each round against its
// own baseline; 0 when no round has a baseline.
func (f OwnNodeFigure) Ratio() float64 {
	var rs []OwnNodeRound
	for _, r := range f.Rounds {
		if r.Off > 0 {
			rs = append(rs, r)
		}
	}
	return MedianOf(rs, func(r OwnNodeRound) float64 { return r.On / r.Off })
}

// Added is the median over the rounds of on - off.
func (f OwnNodeFigure) Added() float64 {
	return MedianOf(f.Rounds, func(r OwnNodeRound) float64 { return r.On - r.Off })
}

// PerParam is what the policy adds per param it evaluates (per pod of the
// Eviction's namespace): Added divided by the params, as a duration when
// the figure is one (in seconds). 0 for no params.
func PerParam(f OwnNodeFigure, params int) time.Duration {
	if params <= 0 {
		return 0
	}
	return time.Duration(f.Added() / float64(params) * float64(time.Second))
}

// ProjectAdded is the latency the policy would add to one eviction in a
// namespace of pods pods, at perParam each: the policy evaluates its
// matchConditions (and, for evictd's own requests, its validation) once
// per pod of the namespace, so the cost is linear in it.
func ProjectAdded(perParam time.Duration, pods int) time.Duration {
	return perParam * time.Duration(pods)
}

// Micros formats d in microseconds with one decimal.
func Micros(d time.Duration) string {
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}
