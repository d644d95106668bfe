// SPDX-License-Identifier: Apache-2.0

// Package authdelegate guards HTTP endpoints the way Kubernetes components
// guard their own (/metrics of the scheduler, the kubelet's API): the
// caller's bearer token is authenticated by the API server (TokenReview) and
// the caller authorized by it (SubjectAccessReview) for a non-resource URL,
// the request's path, with the verb its method maps to. RBAC then says who
// may read what: a ClusterRole with nonResourceURLs ["/explain"] and verbs
// ["get"] lets its subjects read evictd's explanation, and the cluster's
// existing grants for "/metrics" (system:monitoring) keep working for
// evictd's.
//
// Answers are cached briefly per token (and per token and path): a
// Prometheus scraping every 15 s must not cost the API server two reviews a
// scrape. A review that fails (the API server unreachable, evictd not
// allowed to ask) is never cached and answers 503, naming the cause: the
// caller may be entitled, evictd cannot tell.
package authdelegate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/utils/clock"
)

// Reviewer asks the API server about a token and a caller (pkg/kube's
// Client).
type Reviewer interface {
	TokenReview(ctx context.Context, token string) (authnv1.TokenReviewStatus, error)
	SubjectAccessReview(ctx context.Context, spec authzv1.SubjectAccessReviewSpec) (authzv1.SubjectAccessReviewStatus, error)
}

// Options tune a Guard.
type Options struct {
	// AllowTTL and DenyTTL are how long an answer is reused: a token found
	// valid and a caller allowed for AllowTTL, a token found invalid or a
	// caller denied for DenyTTL (shorter: a grant just made should take
	// effect soon). The kubelet's defaults: 5 minutes and 30 seconds for
	// authorization, 2 minutes for authentication.
	AllowTTL, DenyTTL time.Duration
	// Timeout bounds each review.
	Timeout time.Duration
	// MaxEntries bounds the cache; when full, it is emptied.
	MaxEntries int
	Clock      clock.PassiveClock
	// OnError is told of every review that failed (the reason), for a
	// metric and the log. Optional.
	OnError func(review string, err error)
}

// Defaults: shorter than the kubelet's, since an endpoint read by people
// should see a grant or a revocation within a minute.
const (
	DefaultAllowTTL   = time.Minute
	DefaultDenyTTL    = 10 * time.Second
	DefaultTimeout    = 10 * time.Second
	DefaultMaxEntries = 1024
)

// Guard authenticates and authorizes requests before passing them on.
type Guard struct {
	r    Reviewer
	opts Options

	mu    sync.Mutex
	users ttlCache[[32]byte, *authnv1.UserInfo]
	perms ttlCache[permKey, bool]
}

// ttlCache holds answers until they expire, and at most max of them: a
// full cache is emptied (tokens are many and short-lived, an LRU is not
// worth its keep). The Guard's mutex guards it.
type ttlCache[K comparable, V any] struct {
	m   map[K]cached[V]
	max int
}

type cached[T any] struct {
	v       T
	expires time.Time
}

func (c *ttlCache[K, V]) get(k K, now time.Time) (V, bool) {
	e, ok := c.m[k]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[K, V]) put(k K, v V, expires time.Time) {
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[K]cached[V])
	}
	c.m[k] = cached[V]{v: v, expires: expires}
}

type permKey struct {
	token [32]byte
	verb  string
	path  string
}

// New returns a Guard asking r.
func New(r Reviewer, opts Options) *Guard {
	if opts.AllowTTL <= 0 {
		opts.AllowTTL = DefaultAllowTTL
	}
	if opts.DenyTTL <= 0 {
		opts.DenyTTL = DefaultDenyTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Guard{r: r, opts: opts, users: ttlCache[[32]byte, *authnv1.UserInfo]{max: opts.MaxEntries},
		perms: ttlCache[permKey, bool]{max: opts.MaxEntries}}
}

// Decision is the outcome for one request.
type Decision struct {
	// Status is the HTTP status to answer with when not allowed: 401 (no
	// token, or one the API server does not accept), 403 (a caller not
	// allowed), 503 (a review failed).
	Status int
	// Allowed: serve the request.
	Allowed bool
	// User is who asked, once authenticated.
	User string
	// Reason is said to the caller when not allowed.
	Reason string
}

// ErrNoToken is a request without an "Authorization: Bearer" header.
var ErrNoToken = errors.New("no bearer token")

// Check decides a request: its bearer token, and the non-resource URL
// (the path) with the verb its method maps to.
func (g *Guard) Check(ctx context.Context, req *http.Request) Decision {
	token, ok := bearer(req.Header.Get("Authorization"))
	if !ok {
		return Decision{Status: http.StatusUnauthorized, Reason: "Unauthorized: " + ErrNoToken.Error() +
			" (send a token the API server accepts: Authorization: Bearer TOKEN)"}
	}
	key := sha256.Sum256([]byte(token))
	user, err := g.authenticate(ctx, key, token)
	switch {
	case err != nil:
		return Decision{Status: http.StatusServiceUnavailable, Reason: "authentication unavailable: " + err.Error()}
	case user == nil:
		return Decision{Status: http.StatusUnauthorized, Reason: "Unauthorized: the API server does not accept this token"}
	}
	verb := verbOf(req.Method)
	allowed, err := g.authorize(ctx, permKey{token: key, verb: verb, path: req.URL.Path}, user)
	switch {
	case err != nil:
		return Decision{Status: http.StatusServiceUnavailable, User: user.Username, Reason: "authorization unavailable: " + err.Error()}
	case !allowed:
		return Decision{Status: http.StatusForbidden, User: user.Username,
			Reason: fmt.Sprintf("Forbidden: user %q cannot %s path %q", user.Username, verb, req.URL.Path)}
	}
	return Decision{Allowed: true, User: user.Username}
}

// Wrap serves next only to allowed callers; the others get the decision's
// status and reason as plain text.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d := g.Check(req.Context(), req)
		if !d.Allowed {
			if d.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="evictd"`)
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(d.Status)
			fmt.Fprintln(w, d.Reason)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// authenticate returns the token's user, nil for a token not accepted.
func (g *Guard) authenticate(ctx context.Context, key [32]byte, token string) (*authnv1.UserInfo, error) {
	now := g.opts.Clock.Now()
	g.mu.Lock()
	user, ok := g.users.get(key, now)
	g.mu.Unlock()
	if ok {
		return user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	// A token not accepted comes back unauthenticated, usually with the
	// authenticators' complaints in Error ("invalid bearer token"): a 401,
	// as the API server's own delegating authenticator answers. Only a
	// review that could not be made is unknown.
	st, err := g.r.TokenReview(ctx, token)
	if err != nil {
		err = fmt.Errorf("TokenReview: %w", err)
		g.failed("TokenReview", err)
		return nil, err
	}
	ttl := g.opts.DenyTTL
	if st.Authenticated {
		u := st.User
		user, ttl = &u, g.opts.AllowTTL
	}
	g.mu.Lock()
	g.users.put(key, user, now.Add(ttl))
	g.mu.Unlock()
	return user, nil
}

func (g *Guard) authorize(ctx context.Context, key permKey, user *authnv1.UserInfo) (bool, error) {
	now := g.opts.Clock.Now()
	g.mu.Lock()
	allowed, ok := g.perms.get(key, now)
	g.mu.Unlock()
	if ok {
		return allowed, nil
	}
	spec := authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: key.path, Verb: key.verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authzv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	// Not allowed is a no, an evaluation error or not: RBAC reports one for
	// any binding to a missing role it walked past, and the API server's
	// own delegating authorizer answers 403 then too.
	st, err := g.r.SubjectAccessReview(ctx, spec)
	if err != nil {
		err = fmt.Errorf("SubjectAccessReview: %w", err)
		g.failed("SubjectAccessReview", err)
		return false, err
	}
	ttl := g.opts.DenyTTL
	if st.Allowed {
		ttl = g.opts.AllowTTL
	}
	g.mu.Lock()
	g.perms.put(key, st.Allowed, now.Add(ttl))
	g.mu.Unlock()
	return st.Allowed, nil
}

func (g *Guard) failed(review string, err error) {
	if g.opts.OnError != nil {
		g.opts.OnError(review, err)
	}
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// verbOf maps an HTTP method to the verb of a non-resource request, as the
// API server does for its own paths.
func verbOf(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}
