// SPDX-License-Identifier: Apache-2.0

package authdelegate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// reviewer answers from tables and counts the reviews; the API server's
// real answers are in test/e2e/agent (TestExplainEndpoint).
type reviewer struct {
	users    map[string]authnv1.UserInfo // token → user
	allowed  map[string]bool             // user + " " + verb + " " + subresource
	fail     error
	tokens   int
	accesses int
	last     authzv1.SubjectAccessReviewSpec
}

func (r *reviewer) TokenReview(_ context.Context, token string) (authnv1.TokenReviewStatus, error) {
	r.tokens++
	if r.fail != nil {
		return authnv1.TokenReviewStatus{}, r.fail
	}
	u, ok := r.users[token]
	return authnv1.TokenReviewStatus{Authenticated: ok, User: u}, nil
}

func (r *reviewer) SubjectAccessReview(_ context.Context, spec authzv1.SubjectAccessReviewSpec) (authzv1.SubjectAccessReviewStatus, error) {
	r.accesses++
	r.last = spec
	if r.fail != nil {
		return authzv1.SubjectAccessReviewStatus{}, r.fail
	}
	ra := spec.ResourceAttributes
	if ra == nil || ra.Group != Group || ra.Resource != Resource || ra.Name != "node-a" {
		return authzv1.SubjectAccessReviewStatus{}, nil
	}
	return authzv1.SubjectAccessReviewStatus{Allowed: r.allowed[spec.User+" "+ra.Verb+" "+ra.Subresource]}, nil
}

func newReviewer() *reviewer {
	return &reviewer{
		users: map[string]authnv1.UserInfo{
			"reader-token": {Username: "reader", Groups: []string{"ops"}, Extra: map[string]authnv1.ExtraValue{"scope": {"a"}}},
			"other-token":  {Username: "other"},
		},
		allowed: map[string]bool{"reader get explain": true},
	}
}

// serve asks g for subresource, at the path of the same name.
func serve(g *Guard, method, subresource, auth string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/"+subresource, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	g.Wrap(subresource, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })).ServeHTTP(w, req)
	return w
}

func newGuard(r Reviewer, opts Options) *Guard {
	opts.Node = "node-a"
	return New(r, opts)
}

func TestGuardDecides(t *testing.T) {
	for _, tc := range []struct {
		name, method, sub, auth string
		want                    int
		body                    string
	}{
		{"no header", "GET", "explain", "", http.StatusUnauthorized, "no bearer token"},
		{"basic auth", "GET", "explain", "Basic cmVhZGVyOng=", http.StatusUnauthorized, "no bearer token"},
		{"empty bearer", "GET", "explain", "Bearer  ", http.StatusUnauthorized, "no bearer token"},
		{"unknown token", "GET", "explain", "Bearer nope", http.StatusUnauthorized, "does not accept this token"},
		{"allowed", "GET", "explain", "Bearer reader-token", http.StatusTeapot, ""},
		{"scheme in any case", "GET", "explain", "bearer reader-token", http.StatusTeapot, ""},
		{"HEAD is get", "HEAD", "explain", "Bearer reader-token", http.StatusTeapot, ""},
		{"another subresource", "GET", "metrics", "Bearer reader-token", http.StatusForbidden,
			`user "reader" cannot get nodes/metrics in the API group evictd.io (node "node-a"): bind it to a ClusterRole granting get on nodes/metrics in the API group evictd.io`},
		{"another method", "POST", "explain", "Bearer reader-token", http.StatusMethodNotAllowed, "Method Not Allowed: POST"},
		{"another user", "GET", "explain", "Bearer other-token", http.StatusForbidden, `user "other" cannot get nodes/explain`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(newGuard(newReviewer(), Options{}), tc.method, tc.sub, tc.auth)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d (%s)", w.Code, tc.want, w.Body)
			}
			if !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("body %q, want it to contain %q", w.Body, tc.body)
			}
			if (w.Code == http.StatusUnauthorized) != (w.Header().Get("WWW-Authenticate") != "") {
				t.Errorf("WWW-Authenticate %q with status %d", w.Header().Get("WWW-Authenticate"), w.Code)
			}
		})
	}
}

// TestGuardAsksAboutTheNodesSubresource: the review is of the caller, for
// a resource only evictd serves (get nodes/explain of evictd.io, named for
// the node), never a non-resource URL, which every server delegating
// authorization honours (the API server's own /metrics).
func TestGuardAsksAboutTheNodesSubresource(t *testing.T) {
	r := newReviewer()
	serve(newGuard(r, Options{}), "GET", "explain", "Bearer reader-token")
	got := r.last
	if got.User != "reader" || len(got.Groups) != 1 || got.Groups[0] != "ops" || got.Extra["scope"][0] != "a" {
		t.Errorf("SubjectAccessReview spec %+v: want reader's user, groups and extra", got)
	}
	want := authzv1.ResourceAttributes{Group: "evictd.io", Resource: "nodes", Subresource: "explain", Name: "node-a", Verb: "get"}
	if got.NonResourceAttributes != nil || got.ResourceAttributes == nil || *got.ResourceAttributes != want {
		t.Errorf("SubjectAccessReview asks about %+v and %+v; want only %+v", got.NonResourceAttributes, got.ResourceAttributes, want)
	}
}

// TestGuardBoundsTokenReviews: requests with fresh bogus tokens cost at
// most the bucket's TokenReviews (its burst at once, then its rate); the
// others answer 429 without a review, each counted, while a token already
// answered is still served from the cache.
func TestGuardBoundsTokenReviews(t *testing.T) {
	r := newReviewer()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	var refused int
	g := newGuard(r, Options{Clock: clk, ReviewRate: 1, ReviewBurst: 5, OnRefused: func(reason string) {
		if reason == ReasonReviewRate {
			refused++
		}
	}})
	if w := serve(g, "GET", "explain", "Bearer reader-token"); w.Code != http.StatusTeapot {
		t.Fatalf("the reader: status %d", w.Code)
	}
	codes := map[int]int{}
	for i := range 200 {
		w := serve(g, "GET", "explain", fmt.Sprintf("Bearer bogus-%d", i))
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests && (w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "too many new tokens")) {
			t.Errorf("429 without Retry-After or its reason: %q %q", w.Header(), w.Body)
		}
	}
	if r.tokens != 5 || codes[http.StatusUnauthorized] != 4 || codes[http.StatusTooManyRequests] != 196 || refused != 196 {
		t.Errorf("200 fresh tokens after the reader's: %d TokenReviews, answers %v, %d counted refused; want 5 reviews (the reader's and 4), 4 401s and 196 429s counted",
			r.tokens, codes, refused)
	}
	if w := serve(g, "GET", "explain", "Bearer reader-token"); w.Code != http.StatusTeapot {
		t.Errorf("the reader with the bucket empty: status %d, want its cached answer served", w.Code)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	for i := range 3 {
		serve(g, "GET", "explain", fmt.Sprintf("Bearer later-%d", i))
	}
	if r.tokens != 7 {
		t.Errorf("%d TokenReviews after 2 s more and 3 fresh tokens, want 7 (2 refilled)", r.tokens)
	}
}

func TestGuardCachesAnswersForTheirTTL(t *testing.T) {
	r := newReviewer()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	g := newGuard(r, Options{AllowTTL: time.Minute, DenyTTL: 10 * time.Second, Clock: clk})
	for range 3 {
		serve(g, "GET", "explain", "Bearer reader-token")
		serve(g, "GET", "explain", "Bearer other-token")
	}
	if r.tokens != 2 || r.accesses != 2 {
		t.Fatalf("%d token and %d access reviews for 3 requests by 2 callers, want 2 and 2", r.tokens, r.accesses)
	}
	// The denial expires first: a grant made meanwhile takes effect.
	r.allowed["other get explain"] = true
	clk.SetTime(clk.Now().Add(11 * time.Second))
	if w := serve(g, "GET", "explain", "Bearer other-token"); w.Code != http.StatusTeapot {
		t.Errorf("after the deny TTL and a grant: status %d, want it served", w.Code)
	}
	if r.accesses != 3 || r.tokens != 2 {
		t.Errorf("%d access and %d token reviews, want 3 and 2 (the user still cached)", r.accesses, r.tokens)
	}
	// The allowance lasts until its own TTL: a revocation takes that long.
	delete(r.allowed, "reader get explain")
	if w := serve(g, "GET", "explain", "Bearer reader-token"); w.Code != http.StatusTeapot {
		t.Errorf("within the allow TTL: status %d, want the cached allowance", w.Code)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	if w := serve(g, "GET", "explain", "Bearer reader-token"); w.Code != http.StatusForbidden {
		t.Errorf("after the allow TTL and a revocation: status %d, want 403", w.Code)
	}
}

func TestGuardFailedReviewIsUnavailableAndNotCached(t *testing.T) {
	r := newReviewer()
	r.fail = errors.New("connection refused")
	var failures []string
	g := newGuard(r, Options{OnError: func(review string, err error) { failures = append(failures, review+": "+err.Error()) }})
	w := serve(g, "GET", "explain", "Bearer reader-token")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "connection refused") {
		t.Fatalf("status %d body %q, want 503 naming the cause", w.Code, w.Body)
	}
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "TokenReview: ") {
		t.Errorf("failures reported %q, want the TokenReview's", failures)
	}
	r.fail = nil
	if w := serve(g, "GET", "explain", "Bearer reader-token"); w.Code != http.StatusTeapot {
		t.Errorf("once the API server answers: status %d, want it served (the failure not cached)", w.Code)
	}
}

// An evaluation error without an allowance is a 403, as the API server's
// own delegating authorizer answers: RBAC reports one for every binding to
// a missing role, which real clusters have.
func TestGuardEvaluationErrorIsADenial(t *testing.T) {
	g := newGuard(evalErr{}, Options{})
	if w := serve(g, "GET", "explain", "Bearer x"); w.Code != http.StatusForbidden {
		t.Errorf("status %d for a review with an evaluation error and no allowance, want 403", w.Code)
	}
}

type evalErr struct{}

func (evalErr) TokenReview(context.Context, string) (authnv1.TokenReviewStatus, error) {
	return authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "u"}}, nil
}

func (evalErr) SubjectAccessReview(context.Context, authzv1.SubjectAccessReviewSpec) (authzv1.SubjectAccessReviewStatus, error) {
	return authzv1.SubjectAccessReviewStatus{EvaluationError: `clusterrole.rbac.authorization.k8s.io "gone" not found`}, nil
}

func TestGuardCacheIsBounded(t *testing.T) {
	r := newReviewer()
	g := newGuard(r, Options{MaxEntries: 4, ReviewBurst: 10})
	for i := range 10 {
		serve(g, "GET", "explain", "Bearer token-"+string(rune('a'+i)))
	}
	g.mu.Lock()
	n := len(g.users.m)
	g.mu.Unlock()
	if n > 4 {
		t.Errorf("%d cached tokens, want at most 4", n)
	}
}
