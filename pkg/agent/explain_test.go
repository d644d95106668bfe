// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The live explanation names what only the running agent knows: a pod a
// PodDisruptionBudget protects keeps its place but is held until its
// recheck, the victim that cannot stop is terminating, and the next to go
// is the first pod free to go.
func TestExplainHoldsWhatTheAgentKnows(t *testing.T) {
	pods := threePods()
	pods[0].pdb = true  // a: refused by its PDB
	pods[1].hang = true // b: evicted, terminating, its memory kept
	n := newSimNode(t, 4096*mi, base250, pods...)
	cfg := testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi")))
	n.run(t, cfg, 5*time.Second)
	if got := n.victims(); !eq(got, []string{"a", "b"}) {
		t.Fatalf("calls %v, want [a b]", got)
	}
	live := n.loop.Explain("node-1", false)
	if live.Node != "node-1" || live.ObservedAt.IsZero() || live.StandingBy {
		t.Fatalf("explanation %+v: want node-1, observed, acting", live)
	}
	mem := live.Signals[0]
	why := map[string]string{}
	for _, p := range mem.Pods {
		why[p.Name] = p.Why
		if (p.Rank == 0) != (p.Name == "b") {
			t.Errorf("pod %s: rank %d", p.Name, p.Rank)
		}
	}
	if !strings.HasPrefix(why["a"], "blocked by a PodDisruptionBudget (1 refusals in this episode); asked again after ") {
		t.Errorf("a: %q, want held by its PodDisruptionBudget", why["a"])
	}
	if !strings.Contains(why["b"], "terminating") {
		t.Errorf("b: %q, want it terminating", why["b"])
	}
	if len(mem.Next) != 1 || mem.Next[0].Name != "c" {
		t.Errorf("next %+v, want c, the one pod free to go", mem.Next)
	}

	// Served as JSON, GET only.
	h := ExplainHandler(n.loop, "node-1", false)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/explain", nil))
	var got Live
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK || len(got.Signals) == 0 {
		t.Errorf("GET /explain: %d %v %s", w.Code, err, w.Body)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/explain", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /explain: %d, want 405", w.Code)
	}
}

// Before the first observation there is nothing to explain, and it says so.
func TestExplainBeforeTheFirstObservation(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	l, err := NewLoop(testLoopConfig(mustThresholds(t, memSpec("300Mi", ""))),
		Deps{Observer: n, Waker: &simWaker{n: n}, Pods: n, Evictor: n, Metrics: n.metrics, Clock: n.clk})
	if err != nil {
		t.Fatal(err)
	}
	if live := l.Explain("node-1", true); !live.ObservedAt.IsZero() || len(live.Signals) != 0 || !live.DryRun {
		t.Errorf("explanation before any pass: %+v", live)
	}
}
