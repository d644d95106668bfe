// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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

// explainState is one pass's inputs to the explanation, kept by the loop
// for the serving goroutine; never changed once published.
type explainState struct {
	obs     *pressure.Observation
	pods    []*v1.Pod
	rank    rank.Options
	held    map[types.UID]string
	standby bool
}

// publishExplanation keeps the pass's inputs for /explain. Ranking waits
// for a request: a pass must not pay for an explanation nobody reads.
func (l *Loop) publishExplanation(v *view) {
	held := map[types.UID]string{}
	for _, e := range l.inFlightView() {
		held[e.UID] = heldInFlight(e)
	}
	for _, ep := range l.episodes.All() {
		for uid, b := range ep.Blocked {
			if v.now.Before(b.Until) {
				held[uid] = fmt.Sprintf("blocked by a PodDisruptionBudget (%d refusals in this episode); asked again after %s",
					b.Refusals, b.Until.UTC().Format(time.RFC3339))
			}
		}
	}
	for uid, at := range l.refused {
		if v.now.Sub(at) < l.cfg.RefusedRecheck {
			held[uid] = fmt.Sprintf("its eviction was refused by the API server at %s; asked again after %s",
				at.UTC().Format(time.RFC3339), at.Add(l.cfg.RefusedRecheck).UTC().Format(time.RFC3339))
		}
	}
	l.explained.Store(&explainState{obs: v.obs, pods: v.pods, rank: v.rank, held: held})
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
	l.explained.Store(&explainState{obs: obs, standby: true})
}

// Explain builds the explanation of the last pass for node.
func (l *Loop) Explain(node string, dryRun bool) Live {
	out := Live{Node: node, DryRun: dryRun}
	st := l.explained.Load()
	if st == nil || st.obs == nil {
		return out
	}
	out.ObservedAt, out.StandingBy = st.obs.Time, st.standby
	in := explain.Input{Thresholds: l.thresholdsNow(), Signals: thresholds.Observe(st.obs.Summary), Held: st.held}
	if !st.standby {
		in.Rank = func(s thresholds.Signal) []rank.Candidate {
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
	return jsonHandler("the explanation", func() any { return l.Explain(node, dryRun) })
}

// jsonHandler serves what get returns as JSON, to GET and HEAD only.
func jsonHandler(what string, get func() any) http.Handler {
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
