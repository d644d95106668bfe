// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/thresholds"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func names(es []*Episode) []Resource {
	var out []Resource
	for _, e := range es {
		out = append(out, e.Resource)
	}
	return out
}

func TestOfCoversEverySignal(t *testing.T) {
	for _, s := range thresholds.Signals() {
		if Of(s) == "" {
			t.Errorf("signal %s belongs to no resource", s)
		}
	}
}

// Episodes are per resource and end only after the transition period
// without pressure; pressure again within it continues the same episode
// (same budget, same trail).
func TestTrackerTransitions(t *testing.T) {
	budgets := 0
	tr := NewTracker(10*time.Second, func() *evict.Budget { budgets++; return nil })
	steps := []struct {
		at             time.Duration
		pressure       []Resource
		started, ended []Resource
	}{
		{0, []Resource{NodeFs}, []Resource{NodeFs}, nil},
		{time.Second, []Resource{NodeFs, Memory}, []Resource{Memory}, nil},
		{2 * time.Second, []Resource{NodeFs}, nil, nil},
		{10500 * time.Millisecond, []Resource{NodeFs}, nil, nil},        // memory: 9.5s without pressure
		{12 * time.Second, []Resource{NodeFs, Memory}, nil, nil},        // back within the period: same episode
		{22 * time.Second, []Resource{NodeFs}, nil, []Resource{Memory}}, // 10s without: ended
		{23 * time.Second, nil, nil, nil},                               // nodefs: 1s without
		{33 * time.Second, []Resource{Memory}, []Resource{Memory}, []Resource{NodeFs}},
	}
	for i, s := range steps {
		p := map[Resource]bool{}
		for _, r := range s.pressure {
			p[r] = true
		}
		started, ended := tr.Update(t0.Add(s.at), p)
		if got := names(started); len(got) != len(s.started) || (len(got) > 0 && got[0] != s.started[0]) {
			t.Errorf("step %d (%v): started %v, want %v", i, s.at, got, s.started)
		}
		if got := names(ended); len(got) != len(s.ended) || (len(got) > 0 && got[0] != s.ended[0]) {
			t.Errorf("step %d (%v): ended %v, want %v", i, s.at, got, s.ended)
		}
	}
	if budgets != 3 {
		t.Errorf("%d budgets made, want one per episode (3)", budgets)
	}
	if e := tr.Get(Memory); e == nil || !e.Start.Equal(t0.Add(33*time.Second)) {
		t.Errorf("memory episode %+v, want one started at 33s", e)
	}
}

func TestDeferred(t *testing.T) {
	now := t0.Add(time.Minute)
	inFlight := map[types.UID]bool{"going": true}
	tests := []struct {
		name string
		ep   Episode
		obs  time.Time
		hard bool
		want string
	}{
		{"free", Episode{}, now, false, ""},
		{"unknown reclaim still going", Episode{UnknownReclaim: "going"}, now, false, "no usage figure"},
		{"a soft victim's unknown reclaim does not hold back a hard decision", Episode{UnknownReclaim: "going"}, now, true, ""},
		{"a hard victim's unknown reclaim holds back a hard decision", Episode{UnknownReclaim: "going", UnknownReclaimHard: true}, now, true, "no usage figure"},
		{"unknown reclaim gone, observation older", Episode{UnknownReclaim: "gone", FreshAfter: now}, now.Add(-time.Millisecond), false, "newer than"},
		{"unknown reclaim gone, observation newer", Episode{UnknownReclaim: "gone", FreshAfter: now.Add(-time.Second)}, now, false, ""},
		{"cap", Episode{CapReached: true}, now, false, "cap"},
		{"rate", Episode{RetryAt: now.Add(time.Second)}, now, false, "rate limited"},
		{"backoff", Episode{FailUntil: now.Add(time.Second)}, now, false, "backing off"},
	}
	for _, tc := range tests {
		ep := tc.ep
		got := ep.Deferred(now, tc.obs, func(u types.UID) bool { return inFlight[u] }, tc.hard)
		if (tc.want == "") != (got == "") || (tc.want != "" && !contains(got, tc.want)) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// PDBProbes refusals in a row pause the episode, each pause twice the last
// up to PDBPauseMax (±20 %); an accepted eviction ends the streak.
func TestPDBRefusalsPause(t *testing.T) {
	e := &Episode{Blocked: map[types.UID]Block{}}
	at := t0
	var pauses []time.Duration
	for i := range 6 * PDBProbes {
		e.PDBRefused(types.UID(fmt.Sprintf("pod-%d", i)), at, 30*time.Second)
		if (i+1)%PDBProbes != 0 {
			if why := e.PDBPaused(at); why != "" {
				t.Fatalf("paused after %d refusals: %q", i+1, why)
			}
			continue
		}
		if e.PDBPaused(at) == "" {
			t.Fatalf("no pause after %d refusals in a row", i+1)
		}
		pauses = append(pauses, e.PDBPauseUntil.Sub(at))
		at = e.PDBPauseUntil
	}
	want := []time.Duration{PDBPauseFirst, 2 * PDBPauseFirst, 4 * PDBPauseFirst, 8 * PDBPauseFirst, PDBPauseMax, PDBPauseMax}
	for i, p := range pauses {
		if lo, hi := time.Duration(0.8*float64(want[i])), time.Duration(1.2*float64(want[i])); p < lo || p >= hi {
			t.Errorf("pause %d: %v, want %v ±20%%", i+1, p, want[i])
		}
	}
	e.PDBRefused("a", at, 30*time.Second)
	e.Accepted()
	e.PDBRefused("b", at, 30*time.Second)
	e.PDBRefused("c", at, 30*time.Second)
	if why := e.PDBPaused(at); why != "" {
		t.Errorf("paused after an accepted eviction and 2 refusals: %q", why)
	}
}

// A pod refused in the current sweep is held past its recheck until a new
// sweep starts, which is due only once one of them is past it. Asking
// whether it is due, and who is held in it, changes nothing: the
// explanation's plans ask too.
func TestSweep(t *testing.T) {
	e := &Episode{Blocked: map[types.UID]Block{}}
	e.PDBRefused("a", t0, 10*time.Second)
	later := t0.Add(time.Hour)
	if !e.FreshBlocked(later)["a"] {
		t.Fatal("a asked again within its sweep")
	}
	if e.SweepDue(t0) || !e.NextSweepBlocked(t0)["a"] {
		t.Error("a new sweep due while a is within its recheck")
	}
	for range 3 {
		if !e.SweepDue(later) || e.NextSweepBlocked(later)["a"] {
			t.Fatalf("at %v: want a new sweep due, a free in it", later)
		}
	}
	if e.Sweep != 0 || !e.FreshBlocked(later)["a"] {
		t.Fatalf("asking started sweep %d", e.Sweep)
	}
	e.StartSweep()
	if e.FreshBlocked(later)["a"] {
		t.Errorf("a still held after its recheck and a new sweep (sweep %d)", e.Sweep)
	}
	if e.SweepDue(later) {
		t.Error("a second new sweep due with nobody refused in the first")
	}
}

// Deferred and Fresh only read: a victim with no usage figure that went,
// and a refusal past its recheck, are left out of what they say but
// forgotten only by ForgetUnknownReclaim and Forget, the decision's own.
func TestPlanningReadsOnly(t *testing.T) {
	now := t0.Add(time.Minute)
	ep := Episode{UnknownReclaim: "gone"}
	for range 3 {
		if why := ep.Deferred(now, now, func(types.UID) bool { return false }, false); why != "" {
			t.Fatalf("deferred for a victim no longer in flight: %q", why)
		}
	}
	if ep.UnknownReclaim != "gone" {
		t.Errorf("Deferred forgot the victim with no usage figure")
	}
	ep.ForgetUnknownReclaim(func(types.UID) bool { return true })
	if ep.UnknownReclaim != "gone" {
		t.Errorf("ForgetUnknownReclaim forgot a victim still in flight")
	}
	ep.ForgetUnknownReclaim(func(types.UID) bool { return false })
	if ep.UnknownReclaim != "" {
		t.Errorf("ForgetUnknownReclaim kept a victim no longer in flight")
	}

	refused := map[types.UID]time.Time{"old": now.Add(-time.Hour), "new": now.Add(-time.Second)}
	for range 3 {
		if got := Fresh(refused, now, time.Minute); len(got) != 1 || !got["new"] {
			t.Fatalf("Fresh = %v, want new only", got)
		}
	}
	if len(refused) != 2 {
		t.Errorf("Fresh dropped refusals: %v", refused)
	}
	Forget(refused, now, time.Minute)
	if _, ok := refused["old"]; ok || len(refused) != 1 {
		t.Errorf("after Forget: %v, want new only", refused)
	}
}
