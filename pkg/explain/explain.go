// SPDX-License-Identifier: Apache-2.0

// Package explain says in words what evictd sees on a node and what it would
// do there: every signal against its thresholds, every pod's place in that
// signal's eviction order and why, the pods that cannot be chosen and why,
// and who would go next, with what each would free. It answers the
// operator's "why that pod?", "why not that one?" before or after the fact.
//
// The package is pure: the agent (pkg/agent) observes the node, or reads a
// capture of it, ranks the pods and decides what it would do next with its
// own decision code; Explain only puts the pieces together.
package explain

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Input is what a report is made from.
type Input struct {
	// Thresholds are evictd's, as parsed from its configuration.
	Thresholds []thresholds.Threshold
	// Signals are the node's signals as observed (thresholds.Observe).
	Signals map[thresholds.Signal]thresholds.Observation
	// Rank ranks the node's pods for a signal (rank.Rank on the same
	// observation).
	Rank func(thresholds.Signal) []rank.Candidate
	// Held are pods the ranking admits that a running agent will not choose
	// now, with why: in flight (evicted, on their way out), refused by a
	// PodDisruptionBudget until a time, refused by the API server. Only a
	// running agent knows them; a capture has none.
	Held map[types.UID]string
	// Decisions are the agent's own decisions, per signal: what it would do
	// next for it, or what it waits for. A signal without one is explained
	// from its thresholds alone.
	Decisions map[thresholds.Signal]Decision
	// States are how long each threshold has been met, by its String().
	States map[string]ThresholdState
}

// ThresholdState is what the agent's threshold tracker says of a threshold.
type ThresholdState struct {
	// Since is when it was first met in the current episode.
	Since time.Time
	// HeldFor is how long it has been met, Grace its grace period (0 for
	// a hard one), GraceLeft what is left of it.
	HeldFor, Grace, GraceLeft time.Duration
	// Active: acted on (hard and met, soft past its grace, or held by its
	// minimum reclaim); HeldByMinReclaim: only its minimum reclaim keeps it
	// so.
	Active, HeldByMinReclaim bool
}

// Decision is what the agent would do next for a signal, as its own
// decision code decided it at the end of its last pass.
type Decision struct {
	// Action is "evict" or "force-delete" (Pod goes next), "wait" (Why
	// says for what) or "none" (nothing to act on).
	Action string `json:"action"`
	// Pod is the pod the action evicts, namespace/name.
	Pod string `json:"pod,omitempty"`
	// Threshold is the threshold acted on or waited for.
	Threshold string `json:"threshold,omitempty"`
	// Why says it in words: why this pod, or what the agent waits for.
	Why string `json:"why"`
	// Need is what the threshold needs freed (its minimum reclaim
	// included); InFlight what pods on their way out give back toward it;
	// NodeReclaim what the kubelet's image garbage collection frees toward
	// it. Evictions cover Need − InFlight − NodeReclaim.
	Need        int64 `json:"need,omitempty"`
	InFlight    int64 `json:"inFlight,omitempty"`
	NodeReclaim int64 `json:"nodeReclaim,omitempty"`
	// HeldByMinReclaim: the threshold is no longer crossed; only its
	// minimum reclaim keeps it acted on.
	HeldByMinReclaim bool `json:"heldByMinReclaim,omitempty"`
	// Early: the threshold is not met; its crossing is predicted within
	// TimeLeft (act-early).
	Early    bool   `json:"early,omitempty"`
	TimeLeft string `json:"timeLeft,omitempty"`
}

// Actions of a Decision.
const (
	ActionEvict       = "evict"
	ActionForceDelete = "force-delete"
	ActionWait        = "wait"
	ActionNone        = "none"
)

// Report is the explanation of one observation.
type Report struct {
	Signals []Signal `json:"signals"`
}

// Signal is one signal against its thresholds, with its pods.
type Signal struct {
	Signal thresholds.Signal `json:"signal"`
	// Measured is false when the observation lacks the signal's inputs:
	// its thresholds can then never be met, and nothing below is given.
	Measured   bool        `json:"measured"`
	Available  int64       `json:"available,omitempty"`
	Capacity   int64       `json:"capacity,omitempty"`
	Thresholds []Threshold `json:"thresholds"`
	// Need is what must be freed to bring the signal back above every met
	// hard threshold, its minimum reclaim included: what evictd acts on at
	// once. With no hard threshold met it is the met soft thresholds' need,
	// acted on once they have held for their grace period (NeedAfterGrace);
	// 0 when none is met.
	Need           int64 `json:"need"`
	NeedAfterGrace bool  `json:"needAfterGrace,omitempty"`
	// Pods are the node's pods in the signal's eviction order: the
	// eligible ones first, numbered, then those that cannot be chosen.
	Pods []Pod `json:"pods"`
	// Next are the pods that would be evicted, in order, until Need is
	// covered; with no threshold met, the one that would go first.
	Next []Step `json:"next"`
	// Short is what Need leaves uncovered once every eligible pod is gone.
	Short int64 `json:"short,omitempty"`
	// Decision is what the agent would do next for the signal, or what it
	// waits for; nil when no agent decided (a signal without thresholds).
	Decision *Decision `json:"decision,omitempty"`
}

// Threshold is one threshold of a signal.
type Threshold struct {
	Threshold string `json:"threshold"`
	Hard      bool   `json:"hard"`
	// Amount is the threshold in the signal's unit (a percentage taken of
	// the capacity), and Reclaim its minimum reclaim (0 when unset).
	Amount  int64 `json:"amount"`
	Reclaim int64 `json:"reclaim,omitempty"`
	// Met: the signal's available amount is below Amount. A soft threshold
	// met acts once it has held for its grace period, which one
	// observation cannot tell.
	Met bool `json:"met"`
	// Active: the agent acts on it (hard and met, soft past its grace
	// period, or held by its minimum reclaim once acted on).
	Active           bool `json:"active,omitempty"`
	HeldByMinReclaim bool `json:"heldByMinReclaim,omitempty"`
	// Since is when it was first met in the current episode, HeldFor how
	// long it has been, and for a soft one Grace its grace period and
	// GraceLeft what is left of it (Go durations, "1m30s").
	Since     *time.Time `json:"since,omitempty"`
	HeldFor   string     `json:"heldFor,omitempty"`
	Grace     string     `json:"grace,omitempty"`
	GraceLeft string     `json:"graceLeft,omitempty"`
}

// Pod is one pod's place in a signal's order.
type Pod struct {
	// Rank is the 1-based place among the eligible pods; 0 for a pod that
	// cannot be chosen. A held pod keeps its place (Held set, Eligible
	// false): it would rank there once free again.
	Rank      int    `json:"rank"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Eligible  bool   `json:"eligible"`
	Held      bool   `json:"held,omitempty"`
	// Why is, for an eligible pod, why it ranks where it does (over or
	// within its request, by how much, its effective priority); for any
	// other, why it cannot be chosen.
	Why string `json:"why"`
	// NotTaken lists the claims to be spared the pod's author made and
	// evictd did not take (rank.Candidate.NotTaken); Why ends with it.
	NotTaken          string `json:"notTaken,omitempty"`
	Usage             int64  `json:"usage"`
	Request           int64  `json:"request"`
	HasUsage          bool   `json:"hasUsage"`
	ExceedsRequest    bool   `json:"exceedsRequest"`
	Priority          int32  `json:"priority"`
	EffectivePriority int32  `json:"effectivePriority"`
}

// Step is one eviction that would be made.
type Step struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Rank      int    `json:"rank"`
	// Frees is the pod's usage of the signal's resource, what its going
	// gives back; AvailableAfter the signal's available amount once it and
	// the steps before it are gone.
	Frees          int64 `json:"frees"`
	AvailableAfter int64 `json:"availableAfter"`
	// Unknown: the pod has no usage figure, so what it frees is unknown;
	// evictd waits until it is gone and looks again, and so the steps end
	// with it.
	Unknown bool `json:"unknown,omitempty"`
}

// Explain builds the report: one entry per signal evictd has a threshold
// for, in the thresholds' action order.
func Explain(in Input) Report {
	var r Report
	index := map[thresholds.Signal]int{}
	for _, th := range in.Thresholds {
		i, ok := index[th.Signal]
		if !ok {
			o, measured := in.Signals[th.Signal]
			r.Signals = append(r.Signals, Signal{Signal: th.Signal, Measured: measured, Available: o.Available, Capacity: o.Capacity})
			i = len(r.Signals) - 1
			index[th.Signal] = i
		}
		s := &r.Signals[i]
		t := Threshold{Threshold: th.String(), Hard: th.Hard()}
		if !th.Hard() {
			t.Grace = th.GracePeriod.String()
		}
		if s.Measured {
			t.Amount = th.Value.Amount(s.Capacity)
			if th.MinReclaim != nil {
				t.Reclaim = th.MinReclaim.Amount(s.Capacity)
			}
			t.Met = s.Available < t.Amount
		}
		if st, ok := in.States[t.Threshold]; ok {
			since := st.Since
			t.Since, t.HeldFor = &since, st.HeldFor.Round(time.Millisecond).String()
			t.Active, t.HeldByMinReclaim = st.Active, st.HeldByMinReclaim
			if !th.Hard() && !st.Active {
				t.GraceLeft = st.GraceLeft.Round(time.Millisecond).String()
			}
		}
		s.Thresholds = append(s.Thresholds, t)
	}
	for i := range r.Signals {
		s := &r.Signals[i]
		s.need()
		if d, ok := in.Decisions[s.Signal]; ok {
			s.Decision = &d
			if d.Need > 0 {
				// The agent's own need: its minimum reclaim held after the
				// threshold cleared, a predicted crossing's.
				s.Need, s.NeedAfterGrace = d.Need, false
			}
		}
	}
	for i := range r.Signals {
		s := &r.Signals[i]
		if !s.Measured || in.Rank == nil {
			continue
		}
		explainPods(s, in.Rank(s.Signal), in.Held)
	}
	return r
}

// need sets Need from the hard thresholds met or, with none, the soft ones.
func (s *Signal) need() {
	var hard, soft int64
	for _, t := range s.Thresholds {
		if !t.Met {
			continue
		}
		n := t.Amount + t.Reclaim - s.Available
		if t.Hard {
			hard = max(hard, n)
		} else {
			soft = max(soft, n)
		}
	}
	s.Need, s.NeedAfterGrace = hard, false
	if hard == 0 && soft > 0 {
		s.Need, s.NeedAfterGrace = soft, true
	}
}

// explainPods fills the signal's pods and the evictions its need calls for.
func explainPods(s *Signal, cands []rank.Candidate, held map[types.UID]string) {
	n := 0
	for _, c := range cands {
		p := Pod{Namespace: c.Namespace, Name: c.Name, Eligible: c.Eligible, Usage: c.Usage, Request: c.Request,
			HasUsage: c.HasUsage, ExceedsRequest: c.ExceedsRequest, Priority: c.Priority, EffectivePriority: c.EffectivePriority}
		why, isHeld := held[types.UID(c.UID)]
		switch {
		case c.Eligible && isHeld:
			n++
			p.Rank, p.Eligible, p.Held, p.Why = n, false, true, why
		case c.Eligible:
			n++
			p.Rank, p.Why = n, rank.Why(s.Signal, c)
		default:
			p.Why = c.SkipReason
		}
		if c.NotTaken != "" {
			p.NotTaken = c.NotTaken
			p.Why += "; " + c.NotTaken
		}
		s.Pods = append(s.Pods, p)
	}
	left, avail := s.Need, s.Available
	if d := s.Decision; d != nil {
		left -= d.InFlight + d.NodeReclaim
		avail += d.InFlight + d.NodeReclaim
	}
	first := ""
	if d := s.Decision; d != nil && (d.Action == ActionEvict || d.Action == ActionForceDelete) {
		first = d.Pod // the agent's pick: a pod terminating too slowly, one past its PDB
	}
	// A stall's need is in µs of stall and memory.high's is a container's:
	// no pod's usage covers it, and one victim goes at a time.
	oneAtATime := s.Signal.Stall() || s.Signal.MemoryHigh()
	steps := make([]Pod, 0, len(s.Pods))
	if first != "" {
		for _, p := range s.Pods {
			if p.Namespace+"/"+p.Name == first {
				p.Eligible = true
				steps = append(steps, p)
			}
		}
	}
	for _, p := range s.Pods {
		if p.Namespace+"/"+p.Name != first {
			steps = append(steps, p)
		}
	}
	for _, p := range steps {
		if !p.Eligible {
			continue // held, or (after the eligible ones) never to be chosen
		}
		if oneAtATime {
			s.Next = append(s.Next, Step{Namespace: p.Namespace, Name: p.Name, Rank: p.Rank, Frees: p.Usage, AvailableAfter: avail})
			return
		}
		if !p.HasUsage {
			s.Next = append(s.Next, Step{Namespace: p.Namespace, Name: p.Name, Rank: p.Rank, AvailableAfter: avail, Unknown: true})
			return // Short unknown too: the pod may free anything
		}
		avail += p.Usage
		left -= p.Usage
		s.Next = append(s.Next, Step{Namespace: p.Namespace, Name: p.Name, Rank: p.Rank, Frees: p.Usage, AvailableAfter: avail})
		if left <= 0 {
			break // with nothing left to free, only the one that would go first
		}
	}
	s.Short = max(left, 0)
}

// Only is the report narrowed to one signal: its entry alone, or no entry
// when evictd has no threshold for it (a report lists only the signals
// evictd has thresholds for). The report itself is left as it was.
func (r Report) Only(s thresholds.Signal) Report {
	out := Report{Signals: []Signal{}}
	for _, sig := range r.Signals {
		if sig.Signal == s {
			out.Signals = append(out.Signals, sig)
		}
	}
	return out
}
