// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/explain"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Live is the running agent's explanation of its last pass: what GET
// /explain on the secure port answers, and `evictd explain --node` prints.
type Live struct {
	Node string `json:"node"`
	// ObservedAt is the time of the observation explained; zero before the
	// first one.
	ObservedAt time.Time `json:"observedAt"`
	DryRun     bool      `json:"dryRun"`
	// StandingBy: another agent holds the node's lease; this one observes
	// and does not act, so nothing below is its decision.
	StandingBy bool `json:"standingBy,omitempty"`
	explain.Report
}

// explainState is one pass's explanation, kept by the loop for the
// serving goroutine; never changed once published.
type explainState struct {
	obs *pressure.Observation
	// thresholds are those the pass decided with (they change when the
	// kubelet restarts with others: retune.go).
	thresholds []thresholds.Threshold
	signals    map[thresholds.Signal]thresholds.Observation
	pods       []*v1.Pod
	rank       rank.Options
	// ranked are the pass's own rankings (its families' among them);
	// others are ranked on request.
	ranked    map[thresholds.Signal][]rank.Candidate
	held      map[types.UID]string
	decisions map[thresholds.Signal]explain.Decision
	states    map[string]explain.ThresholdState
	standby   bool
}

// publishExplanation keeps the pass's explanation for /explain: what act
// would do first for each resource now (its plan, the same function act
// decides with), and what only the running agent knows of each pod. The
// pods' ranking for a signal the pass did not rank waits for a request: a
// pass must not pay for an explanation nobody reads.
func (l *Loop) publishExplanation(v *view) {
	held := map[types.UID]string{}
	for _, e := range l.inFlightView() {
		held[e.UID] = heldInFlight(e)
	}
	for _, ep := range l.episodes.All() {
		for uid, b := range ep.Blocked {
			switch {
			case v.now.Before(b.Until) && b.Sweep == ep.Sweep:
				held[uid] = fmt.Sprintf("blocked by a PodDisruptionBudget (%d refusals in this episode); asked again after %s, once the other candidates were asked",
					b.Refusals, b.Until.UTC().Format(time.RFC3339))
			case v.now.Before(b.Until):
				held[uid] = fmt.Sprintf("blocked by a PodDisruptionBudget (%d refusals in this episode); asked again after %s",
					b.Refusals, b.Until.UTC().Format(time.RFC3339))
			case b.Sweep == ep.Sweep:
				held[uid] = fmt.Sprintf("blocked by a PodDisruptionBudget (%d refusals in this episode); asked again once the other candidates were asked",
					b.Refusals)
			}
		}
	}
	for uid, at := range l.held.refused {
		if v.now.Sub(at) < l.cfg.RefusedRecheck {
			held[uid] = fmt.Sprintf("its eviction was refused by the API server at %s; asked again after %s",
				at.UTC().Format(time.RFC3339), at.Add(l.cfg.RefusedRecheck).UTC().Format(time.RFC3339))
		}
	}
	decisions := l.explainDecisions(v)
	for s := range decisions {
		if s.Stall() || s.MemoryHigh() {
			// Its family's ranking is this pass's: made now, or never.
			v.rankFor(s)
		}
	}
	l.published.explained.Store(&explainState{obs: v.obs, thresholds: l.cfg.Thresholds, signals: v.signals, pods: v.pods, rank: v.rank, ranked: maps.Clone(v.ranked),
		held: held, decisions: decisions, states: thresholdStates(v.status, v.now)})
	if l.deps.Log.Core().Enabled(zap.DebugLevel) {
		l.logExplained()
	}
}

// logExplained leaves at debug level, each time it changes, what the
// explanation of the pass says the agent does next: per signal the pod
// that goes next or what the agent waits for, and the pods on their way
// out (under way or in flight). A test can hold each eviction against the
// last explanation before it; ranking every signal is paid for only when
// debug is on.
func (l *Loop) logExplained() {
	live := l.Explain("", false)
	var next, waits, held []string
	for _, s := range live.Signals {
		d := s.Decision
		switch {
		case d != nil && d.Pod != "":
			next = append(next, string(s.Signal)+"="+d.Pod)
		case len(s.Next) > 0:
			next = append(next, string(s.Signal)+"="+s.Next[0].Namespace+"/"+s.Next[0].Name)
		}
		if d != nil && d.Action == explain.ActionWait {
			waits = append(waits, string(s.Signal)+": "+d.Why)
		}
	}
	for _, e := range l.inFlightView() {
		held = append(held, e.Pod)
	}
	slices.Sort(held)
	line := fmt.Sprint(next, waits, held)
	if line == l.published.explainedLine {
		return
	}
	l.published.explainedLine = line
	l.deps.Log.Debug("explained", zap.Strings("next", next), zap.Strings("waits", waits), zap.Strings("held", held))
}

// explainDecisions is, per signal with a threshold, what act would do
// next for it: each resource's plan (with its episode, or a fresh one when
// there is none) in words.
func (l *Loop) explainDecisions(v *view) map[thresholds.Signal]explain.Decision {
	out := map[thresholds.Signal]explain.Decision{}
	for _, r := range episode.Resources() {
		var sigs []thresholds.Signal
		for _, th := range l.cfg.Thresholds {
			if episode.Of(th.Signal) == r && !slices.Contains(sigs, th.Signal) {
				sigs = append(sigs, th.Signal)
			}
		}
		if len(sigs) == 0 {
			continue
		}
		ep := l.episodes.Get(r)
		if ep == nil {
			ep = &episode.Episode{Resource: r}
		}
		p := l.planNow(ep, v)
		for _, s := range sigs {
			out[s] = describePlan(p, s, v)
		}
	}
	return out
}

// describePlan says what plan p means for signal s, in words.
func describePlan(p plan, s thresholds.Signal, v *view) explain.Decision {
	if c := p.Busy; c != nil {
		return explain.Decision{Action: explain.ActionWait, Why: fmt.Sprintf("waits for the answer to the eviction call for %s (%s, %s) under way since %s: nothing more is asked for %s until it comes",
			c.Key, c.Signal, hardness(c.Hard), c.Start.UTC().Format(time.RFC3339Nano), episode.Of(s))}
	}
	d := p.Decision
	if d.Action != decide.None && d.Target.Threshold.Signal == s {
		t := d.Target
		out := targetDecision(t)
		pod := podKey(d.Candidate)
		switch {
		case p.Stale != nil:
			out.Action, out.Why = explain.ActionWait, fmt.Sprintf("waits: %s (%d pods); then it decides again", ReasonStaleDiskFigures, len(p.Stale))
		case p.Deferred != "":
			out.Action, out.Why = explain.ActionWait, fmt.Sprintf("waits: %s; %s would go next", p.Deferred, pod)
		default:
			out.Action, out.Pod = explain.ActionEvict, pod
			if d.Action == decide.ForceDelete {
				out.Action = explain.ActionForceDelete
			}
			out.Why = fmt.Sprintf("evicts %s (rank %d) for %s: %s", pod, d.Rank, t.Threshold, d.Reason)
			if t.InFlight > 0 || t.NodeReclaim > 0 {
				out.Why += "; " + coverage(t)
			}
		}
		out.Why += heldByMinReclaim(t)
		return out
	}
	for _, t := range d.Targets {
		if t.Threshold.Signal != s {
			continue
		}
		out := targetDecision(t)
		out.Action = explain.ActionWait
		switch {
		case d.Action != decide.None:
			out.Why = fmt.Sprintf("acts for %s first", d.Target.Threshold)
		case t.Early && t.InFlight > 0:
			out.Why = fmt.Sprintf("waits: %s is predicted to cross in %s, but a victim in flight still gives memory back (%s of it counted): one early bet at a time",
				t.Threshold, t.TimeLeft.Round(time.Millisecond), amountOf(s, t.InFlight))
		case t.Remaining() <= 0 && t.Need > t.InFlight:
			out.Why = "waits: " + decide.ReasonImageGC + "; " + coverage(t)
		case t.Remaining() <= 0:
			out.Why = "waits for the reclaim in flight: " + coverage(t)
		case d.Target.Threshold.Signal == s && d.Reason != "":
			out.Why = "cannot act: " + d.Reason
		default:
			out.Why = fmt.Sprintf("acts for %s first", d.Target.Threshold)
		}
		out.Why += heldByMinReclaim(t)
		return out
	}
	return quietSignal(p, s, v)
}

// quietSignal says why nothing is acted on for s: no threshold met, a soft
// one waiting out its grace period, a stale observation, a soft call under
// way.
func quietSignal(p plan, s thresholds.Signal, v *view) explain.Decision {
	for _, a := range v.status.Active {
		if a.Signal != s {
			continue
		}
		if c := p.SoftBusy; c != nil && !a.Hard() {
			return explain.Decision{Action: explain.ActionWait, Threshold: a.Threshold.String(),
				Why: fmt.Sprintf("waits for the answer to the soft eviction call for %s under way since %s; until it comes only hard thresholds are acted on",
					c.Key, c.Start.UTC().Format(time.RFC3339Nano))}
		}
		if a.Stale {
			return explain.Decision{Action: explain.ActionWait, Threshold: a.Threshold.String(),
				Why: "waits for an observation newer than the one last acted on"}
		}
	}
	for _, pt := range v.status.Pending {
		if pt.Signal == s {
			return explain.Decision{Action: explain.ActionNone, Threshold: pt.Threshold.String(),
				Why: fmt.Sprintf("waits out the grace period: soft threshold %s met for %s of its %s grace period; it acts in %s if it holds",
					pt.Threshold, v.now.Sub(pt.Since).Round(time.Millisecond), pt.GracePeriod, pt.Remaining.Round(time.Millisecond))}
		}
	}
	return explain.Decision{Action: explain.ActionNone, Why: "has nothing to do: no threshold met"}
}

// heldByMinReclaim says, for a target only its minimum reclaim keeps
// active, until when.
func heldByMinReclaim(t decide.Target) string {
	if !t.HeldByMinReclaim {
		return ""
	}
	return fmt.Sprintf(" (the threshold has cleared; its minimum reclaim holds it until %s are available)",
		amountOf(t.Threshold.Signal, t.Need+t.Observation.Available))
}

func targetDecision(t decide.Target) explain.Decision {
	out := explain.Decision{Threshold: t.Threshold.String(), Need: t.Need, InFlight: t.InFlight, NodeReclaim: t.NodeReclaim,
		HeldByMinReclaim: t.HeldByMinReclaim, Early: t.Early}
	if t.Early {
		out.TimeLeft = t.TimeLeft.Round(time.Millisecond).String()
	}
	return out
}

// coverage says what covers t's need without another eviction.
func coverage(t decide.Target) string {
	s := t.Threshold.Signal
	if s.Stall() {
		return "a victim on its way out, or gone less than a stall window ago, covers the stall: one victim per window"
	}
	out := fmt.Sprintf("%s to free, %s coming back from pods on their way out", amountOf(s, t.Need), amountOf(s, t.InFlight))
	if t.NodeReclaim > 0 {
		out += fmt.Sprintf(", %s from the unused images the kubelet deletes", amountOf(s, t.NodeReclaim))
	}
	return out
}

func hardness(hard bool) string {
	if hard {
		return "hard"
	}
	return "soft"
}

// amountOf prints v in s's unit, as Events and the log do.
func amountOf(s thresholds.Signal, v int64) string {
	return rank.Amount(s, v)
}

// thresholdStates is how long each threshold of st has been met.
func thresholdStates(st thresholds.Status, now time.Time) map[string]explain.ThresholdState {
	out := map[string]explain.ThresholdState{}
	for _, a := range st.Active {
		out[a.Threshold.String()] = explain.ThresholdState{Since: a.Since, HeldFor: now.Sub(a.Since), Grace: a.GracePeriod,
			Active: true, HeldByMinReclaim: a.HeldByMinReclaim}
	}
	for _, p := range st.Pending {
		out[p.Threshold.String()] = explain.ThresholdState{Since: p.Since, HeldFor: now.Sub(p.Since), Grace: p.GracePeriod, GraceLeft: p.Remaining}
	}
	return out
}

func heldInFlight(e inflight.Entry) string {
	at := e.Start.UTC().Format(time.RFC3339)
	switch e.Origin {
	case inflight.Pending:
		return "in flight: its eviction call is under way since " + at
	case inflight.DryRun:
		return "in flight (dry run): evictd would have evicted it at " + at
	case inflight.Terminating:
		return "in flight: already terminating when seen at " + at
	}
	s := fmt.Sprintf("in flight (%s at %s)", e.Origin, at)
	if !e.ReclaimBy.IsZero() {
		s += ", its grace period ends by " + e.ReclaimBy.UTC().Format(time.RFC3339)
	}
	return s
}

// publishStandingBy keeps a standing-by agent's observation: its signals
// are worth reading, its pods' ranks are not decisions.
func (l *Loop) publishStandingBy(obs *pressure.Observation) {
	l.published.explained.Store(&explainState{obs: obs, thresholds: l.cfg.Thresholds, signals: thresholds.Observe(obs.Summary), standby: true})
}

// Explain builds the explanation of the last pass for node.
func (l *Loop) Explain(node string, dryRun bool) Live {
	out := Live{Node: node, DryRun: dryRun}
	st := l.published.explained.Load()
	if st == nil || st.obs == nil {
		return out
	}
	out.ObservedAt, out.StandingBy = st.obs.Time, st.standby
	in := explain.Input{Thresholds: st.thresholds, Signals: st.signals, Held: st.held, Decisions: st.decisions, States: st.states}
	if !st.standby {
		in.Rank = func(s thresholds.Signal) []rank.Candidate {
			if c, ok := st.ranked[s]; ok {
				return c
			}
			if s.Stall() || s.MemoryHigh() {
				return nil // its family's ranking is the pass's, gone with it
			}
			opts := st.rank
			if s.Condition() == v1.NodeDiskPressure && opts.DiskParts == nil {
				opts.DiskLayout = st.obs.Node.DiskLayout
				opts.DiskParts = rank.DiskPartsOf(st.obs)
			}
			return rank.Rank(s, st.obs.Summary, st.pods, opts).Candidates
		}
	}
	out.Report = explain.Explain(in)
	return out
}

// ExplainHandler serves the explanation as JSON (GET /explain).
func ExplainHandler(l *Loop, node string, dryRun bool) http.Handler {
	return JSONHandler("the explanation", func() any { return l.Explain(node, dryRun) })
}

// JSONHandler serves what get returns as JSON, to GET and HEAD only.
func JSONHandler(what string, get func() any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: GET only", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.Marshal(get())
		if err != nil {
			http.Error(w, "encoding "+what+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	})
}
