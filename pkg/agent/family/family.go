// SPDX-License-Identifier: Apache-2.0

// Package family gives the agent's signal families one shape. A family is a
// kind of pressure the loop evaluates beside the Summary's own signals
// (memory.available, the filesystems, PIDs): memory stall today. The loop
// calls every family at the same four points of a pass, so that adding one
// adds a type here and leaves the loop's pass as it is:
//
//   - observe: take in the pass's observation (and read what else the
//     family measures); an error names the signals it cannot evaluate;
//   - assess: put the family's signals beside the others, where the
//     thresholds tell whether each is in pressure and how much is needed;
//   - targets: rank the pods for the family's signals;
//   - settle: learn of its victims in flight and gone, and say what they
//     cover of the family's need while their effect is not yet seen.
//
// Settling only reads. The explanation (/explain) plans every resource
// through the same steps a decision takes, after the pass's calls went
// out; what a decision must remember of its input (the victims it saw in
// flight) the loop hands the family apart, from the decisions alone
// (Note), so that explaining a pass never moves a later one.
package family

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Family is one signal family, called by the loop from one goroutine.
type Family interface {
	// Name names the family in the loop's warnings ("stall").
	Name() string
	// Observe takes in a successful observation, taken at now. A non-nil
	// error means the family is blind to some of its signals in this
	// pass: the loop reports them as it reports the observer's unreadable
	// signals (the signal read error metric, readiness, a rate-limited
	// Warn) rather than take them for no pressure. Return an *Unreadable
	// to name the signals; any other error stands for the whole family.
	Observe(obs *pressure.Observation, now time.Time) error
	// Assess adds the family's signals, as the thresholds read them, to
	// the pass's signals. The loop's threshold tracker and decision then
	// say whether each is in pressure and how much is needed, grace
	// periods and pressure episodes included, as for every other signal.
	Assess(signals map[thresholds.Signal]thresholds.Observation)
	// Targets ranks the pods for s, eligible pods first in eviction
	// order, when s is one of the family's signals; ok false leaves s to
	// the loop's own ranking. opts is the pass's ranking options.
	Targets(s thresholds.Signal, summary *statsapi.Summary, pods []*v1.Pod, opts rank.Options) (c []rank.Candidate, ok bool)
	// Settle writes into in what the victims in flight at in.Now, still
	// on their way out, and those gone (Gone) cover of the family's need.
	// It changes nothing: the explanation settles its plans with it too.
	Settle(in *decide.Input)
	// Note records what a decision made on in (settled by Settle) saw of
	// the victims in flight at in.Now. The loop calls it for its
	// decisions only (the pass's assessment, each episode's act), never
	// for the explanation's plans.
	Note(in decide.Input)
	// Gone notes a victim in flight gone at at (its cgroup is empty).
	Gone(e inflight.Entry, at time.Time)
}

// Unreadable is an Observe error naming the signals a family cannot
// evaluate in an observation.
type Unreadable struct {
	// Why is the warning the loop logs: what cannot be evaluated, and why.
	Why     string
	Signals []pressure.SignalError
}

func (u *Unreadable) Error() string { return u.Why }

// Lost is what the loop reports for family name's Observe error err: the
// warning and the signals it cannot evaluate, at least one.
func Lost(name string, err error) (why string, lost []pressure.SignalError) {
	if u, ok := errors.AsType[*Unreadable](err); ok && len(u.Signals) > 0 {
		return u.Why, u.Signals
	}
	return "a signal family cannot be evaluated: " + err.Error(),
		[]pressure.SignalError{{Signal: name, Path: "(family " + name + ")", Err: err}}
}
