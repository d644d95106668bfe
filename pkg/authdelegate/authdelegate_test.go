// SPDX-License-Identifier: Apache-2.0

package authdelegate

import (
	"context"
	"errors"
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
	allowed  map[string]bool             // user + " " + verb + " " + path
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
	return authzv1.SubjectAccessReviewStatus{Allowed: r.allowed[spec.User+" "+spec.NonResourceAttributes.Verb+" "+spec.NonResourceAttributes.Path]}, nil
}

func newReviewer() *reviewer {
	return &reviewer{
		users: map[string]authnv1.UserInfo{
			"reader-token": {Username: "reader", Groups: []string{"ops"}, Extra: map[string]authnv1.ExtraValue{"scope": {"a"}}},
			"other-token":  {Username: "other"},
		},
		allowed: map[string]bool{"reader get /explain": true},
	}
}

func serve(g *Guard, method, path, auth string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })).ServeHTTP(w, req)
	return w
}

func TestGuardDecides(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, auth string
		want                     int
		body                     string
	}{
		{"no header", "GET", "/explain", "", http.StatusUnauthorized, "no bearer token"},
		{"basic auth", "GET", "/explain", "Basic cmVhZGVyOng=", http.StatusUnauthorized, "no bearer token"},
		{"empty bearer", "GET", "/explain", "Bearer  ", http.StatusUnauthorized, "no bearer token"},
		{"unknown token", "GET", "/explain", "Bearer nope", http.StatusUnauthorized, "does not accept this token"},
		{"allowed", "GET", "/explain", "Bearer reader-token", http.StatusTeapot, ""},
		{"scheme in any case", "GET", "/explain", "bearer reader-token", http.StatusTeapot, ""},
		{"HEAD is get", "HEAD", "/explain", "Bearer reader-token", http.StatusTeapot, ""},
		{"another path", "GET", "/metrics", "Bearer reader-token", http.StatusForbidden, `user "reader" cannot get path "/metrics"`},
		{"another verb", "POST", "/explain", "Bearer reader-token", http.StatusForbidden, `cannot post path "/explain"`},
		{"another user", "GET", "/explain", "Bearer other-token", http.StatusForbidden, `user "other" cannot get`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(New(newReviewer(), Options{}), tc.method, tc.path, tc.auth)
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

func TestGuardAsksForTheCallersIdentity(t *testing.T) {
	r := newReviewer()
	serve(New(r, Options{}), "GET", "/explain", "Bearer reader-token")
	got := r.last
	if got.User != "reader" || len(got.Groups) != 1 || got.Groups[0] != "ops" || got.Extra["scope"][0] != "a" ||
		got.NonResourceAttributes == nil || got.ResourceAttributes != nil {
		t.Errorf("SubjectAccessReview spec %+v: want reader's user, groups and extra on a non-resource path", got)
	}
}

func TestGuardCachesAnswersForTheirTTL(t *testing.T) {
	r := newReviewer()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	g := New(r, Options{AllowTTL: time.Minute, DenyTTL: 10 * time.Second, Clock: clk})
	for range 3 {
		serve(g, "GET", "/explain", "Bearer reader-token")
		serve(g, "GET", "/explain", "Bearer other-token")
	}
	if r.tokens != 2 || r.accesses != 2 {
		t.Fatalf("%d token and %d access reviews for 3 requests by 2 callers, want 2 and 2", r.tokens, r.accesses)
	}
	// The denial expires first: a grant made meanwhile takes effect.
	r.allowed["other get /explain"] = true
	clk.SetTime(clk.Now().Add(11 * time.Second))
	if w := serve(g, "GET", "/explain", "Bearer other-token"); w.Code != http.StatusTeapot {
		t.Errorf("after the deny TTL and a grant: status %d, want it served", w.Code)
	}
	if r.accesses != 3 || r.tokens != 2 {
		t.Errorf("%d access and %d token reviews, want 3 and 2 (the user still cached)", r.accesses, r.tokens)
	}
	// The allowance lasts until its own TTL: a revocation takes that long.
	delete(r.allowed, "reader get /explain")
	if w := serve(g, "GET", "/explain", "Bearer reader-token"); w.Code != http.StatusTeapot {
		t.Errorf("within the allow TTL: status %d, want the cached allowance", w.Code)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	if w := serve(g, "GET", "/explain", "Bearer reader-token"); w.Code != http.StatusForbidden {
		t.Errorf("after the allow TTL and a revocation: status %d, want 403", w.Code)
	}
}

func TestGuardFailedReviewIsUnavailableAndNotCached(t *testing.T) {
	r := newReviewer()
	r.fail = errors.New("connection refused")
	var failures []string
	g := New(r, Options{OnError: func(review string, err error) { failures = append(failures, review+": "+err.Error()) }})
	w := serve(g, "GET", "/explain", "Bearer reader-token")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "connection refused") {
		t.Fatalf("status %d body %q, want 503 naming the cause", w.Code, w.Body)
	}
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "TokenReview: ") {
		t.Errorf("failures reported %q, want the TokenReview's", failures)
	}
	r.fail = nil
	if w := serve(g, "GET", "/explain", "Bearer reader-token"); w.Code != http.StatusTeapot {
		t.Errorf("once the API server answers: status %d, want it served (the failure not cached)", w.Code)
	}
}

// An evaluation error without an allowance is a 403, as the API server's
// own delegating authorizer answers: RBAC reports one for every binding to
// a missing role, which real clusters have.
func TestGuardEvaluationErrorIsADenial(t *testing.T) {
	g := New(evalErr{}, Options{})
	if w := serve(g, "GET", "/explain", "Bearer x"); w.Code != http.StatusForbidden {
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
	g := New(r, Options{MaxEntries: 4})
	for i := range 10 {
		serve(g, "GET", "/explain", "Bearer token-"+string(rune('a'+i)))
	}
	g.mu.Lock()
	n := len(g.users.m)
	g.mu.Unlock()
	if n > 4 {
		t.Errorf("%d cached tokens, want at most 4", n)
	}
}
