// SPDX-License-Identifier: Apache-2.0

// Package decide is the agent's decision step: given the threshold state,
// the ranked pods and the reclaim already in flight, which pod to evict now,
// if any, and with what grace. It is pure (no I/O, no clock: the time is an
// input), so every rule below is table-tested.
//
// The rules:
//
//   - Targets are the active thresholds with a fresh observation, plus, with
//     ActEarly, every hard memory threshold whose crossing is predicted,
//     from a sustained fall (not a one-off step), within Lead (the time an eviction takes to give memory back). They are
//     taken in action order: memory, then disk, then PIDs; hard before soft.
//   - A predicted crossing is acted on only when a bet is needed and
//     bounded (EarlyMargin): the trend's fall over Lead is larger than
//     half the threshold, and available is within half the threshold of it.
//     A slower fall is met by the threshold itself; a crossing further off
//     waits, so a fill that stops (a load starting, a cache filling) costs
//     no pod unless it stopped that close.
//   - A target needs Reclaim = threshold + minimum reclaim − available.
//     For a predicted crossing it is the threshold minus the available
//     amount predicted Lead from now, never more than the trend's fall over
//     Lead: minimum reclaim applies once the threshold is met, and no bet
//     asks for more than the trend can take. Reclaim in flight is subtracted; a target
//     whose need is covered gets no eviction, so evictd never evicts more
//     than the pressure needs.
//   - Reclaim in flight is, per pod: its current usage of the signal's
//     resource while its cgroup is still there; for memory and PIDs nothing
//     once the cgroup is gone (what it held is already back in "available");
//     for disk its last known usage (the kubelet removes a pod's volumes and
//     logs before the pod object goes). For memory, what the pod gave back
//     since the previous observation counts too, for one observation: the
//     node is read before the pods, so a victim exiting in between is in
//     neither figure (seen on a real node: a second pod evicted while the
//     first one's 1.4 GiB was being freed). A pod whose object left the API
//     while its processes still ran (a force delete) counts what its cgroup
//     still holds, until its processes are gone.
//   - Node-level reclaim first: for a bytes signal of the filesystem that
//     holds the images (imagefs; nodefs too when it is the same filesystem),
//     the unused images count as reclaim the kubelet's image garbage
//     collection will make (NodeReclaim), so evictd evicts only for what
//     they cannot cover, and nothing when they cover it all.
//   - One early bet at a time: a predicted crossing gets no eviction while
//     a victim in flight still gives memory back toward it; only a met
//     threshold evicts past it.
//   - Escalation (kubernetes#123872): for a hard target, a pod in flight
//     counts only if its grace ends within HardHorizon. A soft eviction with a
//     long grace period therefore cannot hold back a hard threshold, and
//     pressure that keeps rising past what is in flight raises the need.
//     A soft call still under way (Pending: an EvictionRequest waiting for
//     its responders, for minutes) covers no hard target at all: nothing has
//     been evicted yet, and its deadline is only what the call would give.
//     A hard call under way is an Eviction API call, answered within a
//     round trip, and counts. Once accepted, a victim's deadline counts from
//     the acceptance (or the pod's own deletionTimestamp, pkg/agent/inflight).
//   - Under a hard threshold, a pod already terminating with a grace period
//     that ends past HardHorizon (a soft victim, a user's delete) goes first:
//     it is evicted again with the hard grace, as the kubelet kills
//     terminating pods with its own.
//   - The victim is the first eligible candidate of the ranking that is not
//     in flight, not blocked by a PodDisruptionBudget in this episode, not
//     refused by the API server (an admission policy or webhook) recently and
//     not already tried in this pass. When every eligible candidate is blocked,
//     the target is met now (not only held by minimum reclaim), is hard (not
//     only predicted), and the PDB policy is best-effort, the first blocked
//     one is deleted anyway (ForceDelete). Otherwise the next target is tried.
package decide

import (
	"fmt"
	"math"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Action is what to do now.
type Action string

const (
	// None: nothing to evict now; Decision.Reason says why.
	None Action = "none"
	// Evict: evict Decision.Candidate through the Eviction API.
	Evict Action = "evict"
	// ForceDelete: delete Decision.Candidate past its PodDisruptionBudget
	// (--pdb-policy=best-effort only).
	ForceDelete Action = "force-delete"
)

// Reasons for None, stable for logs and tests.
const (
	ReasonNoThreshold = "no threshold to act on"
	ReasonCovered     = "reclaim in flight covers the pressure"
	ReasonNoCandidate = "no eligible pod left to evict"
	ReasonAllBlocked  = "every eligible pod is blocked by a PodDisruptionBudget"
	ReasonAllRefused  = "the API server refused the eviction of every eligible pod not blocked by a PodDisruptionBudget"
	ReasonImageGC     = "the unused images the kubelet's image garbage collection deletes cover the pressure"
)

// Options are the decision's settings.
type Options struct {
	// Evict gives the grace periods evictions get (Options.GracePeriod) and
	// the PDB policy.
	Evict evict.Options
	// HardHorizon: a pod in flight counts toward a hard threshold only if
	// its grace ends within this long from now.
	HardHorizon time.Duration
	// ActEarly treats a hard memory threshold as met when its crossing is
	// predicted within Lead.
	ActEarly bool
	// Lead is the time from an eviction request to the pod's memory being
	// back.
	Lead time.Duration
	// FitGrace shortens the grace of memory evictions to the time left
	// before available memory runs out, with Grace.
	FitGrace bool
	Grace    predict.GracePolicy
}

// Input is everything one decision looks at.
type Input struct {
	Now    time.Time
	Status thresholds.Status
	// Thresholds are all tracked thresholds (for predicted crossings).
	Thresholds []thresholds.Threshold
	// Observations are the signals as last observed.
	Observations map[thresholds.Signal]thresholds.Observation
	// Rates are the fill rates of memory signals in bytes per second,
	// positive while available memory falls (predict.Estimator.Rate).
	Rates map[thresholds.Signal]float64
	// Sustained tells, per memory signal, whether the fall behind its rate
	// has lasted (predict.Estimator.Sustained); only a sustained fall is
	// extrapolated to act early.
	Sustained map[thresholds.Signal]bool
	// Rank returns the ranking for a signal, eligible pods first in
	// eviction order; ineligible pods (terminating ones included) follow,
	// with their usage, which is how in-flight reclaim is valued.
	Rank func(thresholds.Signal) []rank.Candidate
	// InFlight are the pods whose resources are on their way back.
	InFlight []inflight.Entry
	// Blocked are pods a PodDisruptionBudget protected recently.
	Blocked map[types.UID]bool
	// Refused are pods whose eviction the API server refused recently for
	// the pod itself (an admission policy or webhook, several PDBs): skipped
	// like Blocked ones, but never deleted past the refusal.
	Refused map[types.UID]bool
	// Tried are pods already tried in this pass without result.
	Tried map[types.UID]bool
	// NodeReclaim is what node-level reclaim will free per signal without
	// an eviction: the unused images on the image filesystem's signals.
	NodeReclaim map[thresholds.Signal]int64
	// StallSettling: a stall victim is on its way out, or went less than a
	// stall window ago, so the stall shares still hold the stall it caused
	// or suffered. The stall signals' need counts as covered meanwhile: one
	// victim per window (docs/stall.md).
	StallSettling bool
	// StallGoneRecently: the settling comes (also) from a victim that went
	// less than a stall window ago, whose effect a hard stall threshold
	// waits for too; a victim still in flight holds a hard one back only
	// within HardHorizon (SettlesStall).
	StallGoneRecently bool
}

// Target is one threshold considered, with its accounting.
type Target struct {
	Threshold   thresholds.Threshold
	Observation thresholds.Observation
	// Amount is the threshold resolved against capacity.
	Amount int64
	// Need is what must be reclaimed, before reclaim in flight.
	Need int64
	// InFlight is the reclaim in flight counted toward it.
	InFlight int64
	// NodeReclaim is what node-level reclaim (the kubelet's image garbage
	// collection) will free toward it.
	NodeReclaim int64
	// HeldByMinReclaim: only minimum reclaim keeps it active.
	HeldByMinReclaim bool
	// Early: not met yet, predicted to be within TimeLeft.
	Early    bool
	TimeLeft time.Duration
	// Since is when pressure on it was first noticed.
	Since time.Time
}

// Hard reports whether the target acts as a hard threshold.
func (t Target) Hard() bool { return t.Threshold.Hard() }

// Remaining is the need left after reclaim in flight and node-level reclaim.
func (t Target) Remaining() int64 { return t.Need - t.InFlight - t.NodeReclaim }

// Decision is the outcome.
type Decision struct {
	Action Action
	// Target is the threshold the action relieves (for None: the first one
	// considered, if any).
	Target Target
	// Candidate is the pod to evict, and Rank its 1-based place among the
	// eligible ones.
	Candidate rank.Candidate
	Rank      int
	// RunnerUp is the pod this decision would have named had Candidate not
	// been there (eligible, not in flight, refused or tried, and unblocked
	// unless the decision overrides the PodDisruptionBudgets), and
	// RunnerUpRank its place; 0 when no other pod could have been named.
	// The Event and the log name it: "why that pod, and not that one?"
	RunnerUp     rank.Candidate
	RunnerUpRank int
	// GraceOverride, when set, shortens the grace period (evict.Request),
	// and GraceReason says why.
	GraceOverride *int64
	GraceReason   string
	// Reason explains the action: why the pod ranks first, or why nothing
	// is evicted.
	Reason string
	// Targets are every target considered, in order, with their accounting.
	Targets []Target
}

// Decide picks the action.
func Decide(opts Options, in Input) Decision {
	targets := Targets(opts, in)
	if len(targets) == 0 {
		return Decision{Action: None, Reason: ReasonNoThreshold}
	}
	ranked := map[thresholds.Signal][]rank.Candidate{}
	rankFor := func(s thresholds.Signal) []rank.Candidate {
		if c, ok := ranked[s]; ok {
			return c
		}
		var c []rank.Candidate
		if in.Rank != nil {
			c = in.Rank(s)
		}
		ranked[s] = c
		return c
	}
	inFlight := make(map[types.UID]bool, len(in.InFlight))
	reclaimBy := make(map[types.UID]time.Time, len(in.InFlight))
	for _, e := range in.InFlight {
		inFlight[e.UID] = true
		if r, ok := reclaimBy[e.UID]; !ok || e.ReclaimBy.Before(r) {
			reclaimBy[e.UID] = e.ReclaimBy
		}
	}

	d := Decision{Action: None, Target: targets[0]}
	reason := ""
	for i := range targets {
		t := &targets[i]
		cands := rankFor(t.Threshold.Signal)
		switch {
		case !t.Threshold.Signal.Stall():
			t.InFlight = InFlightReclaim(opts, in.Now, *t, cands, in.InFlight)
		case in.StallSettling && (!t.Hard() || in.StallGoneRecently || stallHeldWithin(in.InFlight, in.Now.Add(opts.HardHorizon))):
			// A stall's need is in µs of stall, which no pod's usage
			// measures: a victim covers all of it until its effect shows.
			// For a hard threshold, only a victim whose grace ends within
			// HardHorizon does (the escalation rule), whichever signal it
			// went for: a soft victim, of memory.available as much as of a
			// stall, draining for ten minutes must not hold a hard stall
			// threshold back.
			t.InFlight = t.Need
		}
		t.NodeReclaim = in.NodeReclaim[t.Threshold.Signal]
		if t.Early && t.InFlight > 0 {
			// One early bet at a time: while a victim is still giving
			// memory back, a predicted crossing gets no second eviction,
			// whatever the trend extrapolates; its effect on the trend
			// shows first. A fill that stops (a load coming up, a first
			// allocation) reads as a fall that goes on, and two pods went
			// for a crossing that never came. A met threshold still evicts
			// past what is in flight.
			continue
		}
		if t.Remaining() <= 0 {
			if t.Need > t.InFlight && reason == "" {
				d.Target = *t
				reason = ReasonImageGC
			}
			continue
		}
		if t.Hard() {
			if pick, ok := pickTerminating(cands, reclaimBy, in.Refused, in.Tried, in.Now.Add(opts.HardHorizon)); ok {
				c := cands[pick]
				d = Decision{Action: Evict, Target: *t, Candidate: c, Rank: pick + 1,
					Reason: fmt.Sprintf("terminating with a grace period ending in %s, past what a hard threshold can wait: evicted again with the hard grace; %s",
						c.Pod.DeletionTimestamp.Sub(in.Now).Round(time.Second), RankReason(*t, c))}
				break
			}
		}
		if pick, ok := pickCandidate(cands, inFlight, in.Blocked, in.Refused, in.Tried); ok {
			d = Decision{Action: Evict, Target: *t, Candidate: cands[pick], Rank: pick + 1, Reason: RankReason(*t, cands[pick])}
			break
		}
		blocked := allBlocked(cands, inFlight, in.Blocked, in.Refused)
		if blocked && MayForce(opts, *t) {
			if pick, ok := firstBlocked(cands, inFlight, in.Refused, in.Tried); ok {
				d = Decision{Action: ForceDelete, Target: *t, Candidate: cands[pick], Rank: pick + 1,
					Reason: ReasonAllBlocked + "; " + RankReason(*t, cands[pick])}
				break
			}
		}
		if reason == "" {
			d.Target = *t
			switch {
			case anyRefused(cands, inFlight, in.Refused):
				reason = ReasonAllRefused
			case blocked:
				reason = ReasonAllBlocked
			default:
				reason = ReasonNoCandidate
			}
		}
	}
	d.Targets = targets
	if d.Action == None {
		if reason == "" {
			reason = ReasonCovered
		}
		d.Reason = reason
		return d
	}
	cands := rankFor(d.Target.Threshold.Signal)
	if j, ok := runnerUp(cands, d, inFlight, in.Blocked, in.Refused, in.Tried); ok {
		d.RunnerUp, d.RunnerUpRank = cands[j], j+1
	}
	if opts.FitGrace && isMemory(d.Target.Threshold.Signal) && d.Candidate.Pod != nil {
		d.GraceOverride, d.GraceReason = fitGrace(opts, in, d)
	}
	return d
}

// pickCandidate returns the index of the first eligible candidate that is
// not in flight, not blocked, not refused and not tried.
func pickCandidate(cands []rank.Candidate, inFlight, blocked, refused, tried map[types.UID]bool) (int, bool) {
	for j, c := range cands {
		if !c.Eligible {
			break // eligible ones come first
		}
		uid := types.UID(c.UID)
		if !inFlight[uid] && !blocked[uid] && !refused[uid] && !tried[uid] {
			return j, true
		}
	}
	return 0, false
}

// runnerUp returns the index of the pod d would have named in its
// Candidate's place: the first eligible candidate after it that is not in
// flight, refused or tried, and, unless d overrides the
// PodDisruptionBudgets, not blocked. A terminating pod evicted again is
// compared with the eligible ones.
func runnerUp(cands []rank.Candidate, d Decision, inFlight, blocked, refused, tried map[types.UID]bool) (int, bool) {
	for j, c := range cands {
		if !c.Eligible {
			break
		}
		uid := types.UID(c.UID)
		if c.UID == d.Candidate.UID || inFlight[uid] || refused[uid] || tried[uid] || (blocked[uid] && d.Action != ForceDelete) {
			continue
		}
		return j, true
	}
	return 0, false
}

// pickTerminating returns the first pod of the ranking that only its
// deletion makes ineligible, still holds some of the resource, and whose
// grace period ends after horizon: under a hard threshold it does not count
// as reclaim (the escalation rule), and evicting it again with the hard
// grace frees what it holds sooner than evicting anyone else. The kubelet
// does the same: it ranks terminating pods and kills them with its hard
// grace.
// A pod already evicted again (its in-flight entry's reclaimBy within
// horizon) is not picked while the pod object still shows its old deletion
// time.
func pickTerminating(cands []rank.Candidate, reclaimBy map[types.UID]time.Time, refused, tried map[types.UID]bool, horizon time.Time) (int, bool) {
	for j, c := range cands {
		if !c.OnlyTerminating() || !c.HasUsage || c.Usage <= 0 || c.Pod == nil || c.Pod.DeletionTimestamp == nil {
			continue
		}
		uid := types.UID(c.UID)
		if refused[uid] || tried[uid] || !c.Pod.DeletionTimestamp.Time.After(horizon) {
			continue
		}
		if r, ok := reclaimBy[uid]; ok && !r.After(horizon) {
			continue
		}
		return j, true
	}
	return 0, false
}

// firstBlocked returns the first eligible candidate not in flight, not
// refused and not tried (all of those are blocked when it is called): a
// refusal is someone's policy for the pod, which no PDB policy overrides.
func firstBlocked(cands []rank.Candidate, inFlight, refused, tried map[types.UID]bool) (int, bool) {
	for j, c := range cands {
		if !c.Eligible {
			break
		}
		uid := types.UID(c.UID)
		if !inFlight[uid] && !refused[uid] && !tried[uid] {
			return j, true
		}
	}
	return 0, false
}

// allBlocked reports whether every eligible candidate neither in flight nor
// refused is PDB-blocked (and there is at least one).
func allBlocked(cands []rank.Candidate, inFlight, blocked, refused map[types.UID]bool) bool {
	n := 0
	for _, c := range cands {
		if !c.Eligible {
			break
		}
		uid := types.UID(c.UID)
		if inFlight[uid] || refused[uid] {
			continue
		}
		if !blocked[uid] {
			return false
		}
		n++
	}
	return n > 0
}

// SettlesStall tells the victims whose going may end a stall: those evicted
// for a stall (in dry run too: one would-be victim per window), and those
// evicted for memory, which frees the memory whose shortage the stall is (a
// would-be victim of dry run frees nothing).
func SettlesStall(e inflight.Entry) bool {
	if e.Signal.Stall() {
		return true
	}
	return (isMemory(e.Signal) || e.Signal == thresholds.SwapAvailable) && e.Origin != inflight.DryRun
}

// waiting: a soft call under way, which may wait for minutes on an
// EvictionRequest's responders before anything is evicted.
func waiting(e inflight.Entry) bool { return e.Origin == inflight.Pending && !e.Hard }

// stallHeldWithin reports whether the stall settles for a hard threshold:
// no victim that settles it is in flight (it settles on one that went), or
// one of them was accepted and its grace ends by horizon.
func stallHeldWithin(entries []inflight.Entry, horizon time.Time) bool {
	n := 0
	for _, e := range entries {
		if !SettlesStall(e) {
			continue
		}
		n++
		if !waiting(e) && !e.ReclaimBy.After(horizon) {
			return true
		}
	}
	return n == 0
}

// anyRefused reports whether an eligible candidate not in flight was
// refused.
func anyRefused(cands []rank.Candidate, inFlight, refused map[types.UID]bool) bool {
	for _, c := range cands {
		if !c.Eligible {
			break
		}
		if uid := types.UID(c.UID); !inFlight[uid] && refused[uid] {
			return true
		}
	}
	return false
}

// EarlyMargin is the band above a hard memory threshold of amount bytes
// inside which act-early may evict: half the threshold. It bounds a losing
// bet (a fill that stops short of the threshold) to one that stopped within
// half the threshold of it, and it says when a bet is needed at all: a
// reactive eviction at the crossing lets available fall by the trend's fall
// over the lead before memory is back, and while that fall is within the
// margin, available stays above half the threshold with no bet. With
// evictd's default of 300Mi against the kubelet's 100Mi, that half (150Mi)
// still keeps evictd ahead of the kubelet. Past it, evicting at the top of
// the band gives the node the margin's worth of headroom over reacting at
// the crossing.
func EarlyMargin(amount int64) int64 { return amount / 2 }

// MayForce reports whether, every eligible pod of t blocked by a
// PodDisruptionBudget, the first one is deleted anyway: under
// --pdb-policy=best-effort, for a hard threshold met now.
func MayForce(opts Options, t Target) bool {
	return opts.Evict.PDBPolicy == evict.PDBBestEffort && t.Hard() && !t.Early && !t.HeldByMinReclaim
}

// Targets lists the thresholds to act on, in action order, with their need
// (in-flight reclaim not yet counted).
func Targets(opts Options, in Input) []Target {
	var out []Target
	hardActive := map[thresholds.Signal]bool{}
	for _, a := range in.Status.Active {
		if a.Stale {
			continue
		}
		if a.Hard() {
			hardActive[a.Signal] = true
		}
		out = append(out, Target{
			Threshold:        a.Threshold,
			Observation:      a.Observation,
			Amount:           a.Value.Amount(a.Observation.Capacity),
			Need:             a.Reclaim,
			HeldByMinReclaim: a.HeldByMinReclaim,
			Since:            a.Since,
		})
	}
	if opts.ActEarly && opts.Lead > 0 {
		for _, th := range in.Thresholds {
			if !th.Hard() || !isMemory(th.Signal) || hardActive[th.Signal] || !in.Sustained[th.Signal] {
				continue
			}
			o, ok := in.Observations[th.Signal]
			if !ok {
				continue
			}
			rate := in.Rates[th.Signal]
			amount := th.Value.Amount(o.Capacity)
			left := predict.TimeLeft(o.Available, amount, rate)
			if left > opts.Lead {
				continue
			}
			fall := rate * opts.Lead.Seconds() // what the trend takes before an eviction's memory is back
			margin := EarlyMargin(amount)
			if !(fall > float64(margin)) || o.Available > satAdd(amount, margin) {
				// The threshold itself holds this fall (a reactive eviction
				// at the crossing keeps available above amount-margin), or
				// the crossing is still more than margin away: either way a
				// bet now could only lose. See EarlyMargin.
				continue
			}
			// The shortfall predicted Lead from now, never more than the
			// trend itself can take in that time: minimum reclaim is for a
			// threshold met, not for a bet (see the package rules).
			predicted := float64(o.Available) - fall
			need := int64(math.Ceil(math.Min(float64(amount)-predicted, math.Min(fall, math.MaxInt64/2))))
			out = append(out, Target{
				Threshold: th, Observation: o, Amount: amount, Need: max(need, 1),
				Early: true, TimeLeft: left, Since: in.Now,
			})
		}
	}
	order := map[thresholds.Signal]int{}
	for i, s := range thresholds.Signals() {
		order[s] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Threshold.Signal != b.Threshold.Signal {
			return order[a.Threshold.Signal] < order[b.Threshold.Signal]
		}
		return a.Hard() && !b.Hard()
	})
	return out
}

// InFlightReclaim is what the pods in flight will give back toward t (see
// the package rules).
func InFlightReclaim(opts Options, now time.Time, t Target, cands []rank.Candidate, entries []inflight.Entry) int64 {
	if len(entries) == 0 {
		return 0
	}
	type usage struct {
		v  int64
		ok bool
	}
	sig := t.Threshold.Signal
	current := make(map[types.UID]usage, len(cands))
	for _, c := range cands {
		u := c.Usage
		if isMemory(sig) {
			// What goes back to available memory is the working set; the
			// swap in the footprint the ranking uses comes back as swap.
			u -= c.Swap
		}
		current[types.UID(c.UID)] = usage{u, c.HasUsage}
	}
	horizon := now.Add(opts.HardHorizon)
	var sum int64
	for _, e := range entries {
		if isMemory(sig) {
			// Already freed, whatever its grace: only this observation's
			// node figure may not show it yet.
			sum = satAdd(sum, max(e.MemoryReleased, 0))
		}
		if t.Hard() && (waiting(e) || e.ReclaimBy.After(horizon)) {
			continue // not evicted yet, or its grace outlasts what a hard threshold can wait
		}
		var v int64
		if u, ok := current[e.UID]; ok && u.ok {
			v = u.v
		} else if isMemory(sig) && e.ObjectGone {
			v = e.MemorySeen // what its cgroup still holds
		}
		if sig.Condition() == v1.NodeDiskPressure {
			// A disk victim's space comes back as the kubelet removes its
			// volumes, after it stopped; a smaller figure before it is gone
			// is a walk cut short or racing the removal (LastUsage keeps the
			// largest seen). Errs toward evicting less, until it is gone.
			v = max(v, e.LastUsage[sig])
		}
		sum = satAdd(sum, max(v, 0))
	}
	return sum
}

func fitGrace(opts Options, in Input, d Decision) (*int64, string) {
	sig := d.Target.Threshold.Signal
	o, ok := in.Observations[sig]
	if !ok {
		o = d.Target.Observation
	}
	// Only a sustained fall is extrapolated: a rate made of one burst or
	// one noisy sample would cut a grace for pressure that never comes.
	if !in.Sustained[sig] || opts.Grace.Validate() != nil {
		return nil, ""
	}
	rate := in.Rates[sig]
	// The race is against available memory running out, when the kernel's
	// OOM killer (or the kubelet's own hard eviction) takes over.
	left := predict.TimeLeft(o.Available, 0, rate)
	hard := d.Target.Hard()
	own := opts.Evict.GracePeriod(d.Candidate.Pod, hard, nil)
	policy := opts.Grace
	if !hard {
		// A soft eviction never gets less than a hard one would (the hard
		// cap), nor less than predict.MinSoftGrace: should memory really
		// run out first, the hard threshold is crossed and acts on its own.
		policy.Floor = predict.SoftGraceFloor(policy.Floor, opts.Evict.HardGracePeriod)
	}
	g, err := policy.Fit(own, predict.Crossing{Signal: string(sig), Threshold: 0, TimeLeft: left, Rate: rate})
	if err != nil || !g.Shortened {
		return nil, ""
	}
	s := g.Seconds
	return &s, g.Reason
}

// RankReason says why c is evicted for t, for logs and Events: its rank's
// reason, and for an early target the crossing predicted.
func RankReason(t Target, c rank.Candidate) string {
	why := rank.Why(t.Threshold.Signal, c)
	if t.Early {
		sig := t.Threshold.Signal
		if sig.Stall() {
			sig = thresholds.MemoryAvailable
		}
		why += fmt.Sprintf("; %s predicted below %s in %s", sig, rank.Amount(sig, t.Amount), t.TimeLeft.Round(time.Millisecond))
	}
	return why
}

func isMemory(s thresholds.Signal) bool {
	return s == thresholds.MemoryAvailable || s == thresholds.AllocatableMemoryAvailable
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
