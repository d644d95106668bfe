// SPDX-License-Identifier: Apache-2.0

// Package authdelegate guards HTTP endpoints the way the kubelet guards its
// API: the caller's bearer token is authenticated by the API server
// (TokenReview) and the caller authorized by it (SubjectAccessReview) for a
// subresource of this node that only evictd serves: get on
// nodes/explain, nodes/shadow, nodes/trace or nodes/metrics in the API
// group evictd.io, named for the node. RBAC then says who may read what: a
// ClusterRole with apiGroups ["evictd.io"], resources ["nodes/explain"] and
// verbs ["get"] lets its subjects read evictd's explanation, and no other
// server honours that grant (a non-resource URL such as "/metrics" would be
// honoured by every server that delegates authorization, the API server's
// own /metrics included).
//
// Answers are cached briefly per token (and per token and subresource): a
// Prometheus scraping every 15 s must not cost the API server two reviews a
// scrape. A token evictd has no answer for costs a TokenReview, and those
// are bounded (Options.ReviewRate): past the bound, the request answers 429
// without asking the API server, so that anyone who reaches the port with
// fresh tokens cannot make evictd hammer it. A review that fails (the API
// server unreachable, evictd not allowed to ask) is never cached and
// answers 503, naming the cause: the caller may be entitled, evictd cannot
// tell.
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

	"golang.org/x/time/rate"
)

// Group and Resource are what a SubjectAccessReview of the secure port
// asks about: get on Resource/SUBRESOURCE of Group, named for the node. No
// built-in server serves this group, so a grant of it reaches evictd only.
const (
	Group    = "evictd.io"
	Resource = "nodes"
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
	// MaxEntries bounds the cache; when full, expired answers are dropped,
	// and if none had, it is emptied.
	MaxEntries int
	// Node is the name the reviews ask about (the node evictd runs on).
	Node string
	// ReviewRate and ReviewBurst bound the TokenReviews of tokens without
	// a cached answer: a token bucket of ReviewBurst, refilled at
	// ReviewRate a second. Past it, a request answers 429 and asks
	// nothing.
	ReviewRate  float64
	ReviewBurst int
	Clock       clock.PassiveClock
	// OnError is told of every review that failed (the reason), for a
	// metric and the log. Optional.
	OnError func(review string, err error)
	// OnRefused is told of every request refused without a review, past
	// ReviewRate (reason ReasonReviewRate). Optional.
	OnRefused func(reason string)
}

// ReasonReviewRate is OnRefused's reason for a request refused past the
// TokenReview bound.
const ReasonReviewRate = "token-reviews"

// Defaults: shorter than the kubelet's, since an endpoint read by people
// should see a grant or a revocation within a minute.
const (
	DefaultAllowTTL   = time.Minute
	DefaultDenyTTL    = 10 * time.Second
	DefaultTimeout    = 10 * time.Second
	DefaultMaxEntries = 1024
	// One TokenReview a second, five at once: a Prometheus (or two, or a
	// restarted one) and a few people with evictd explain each present a
	// token a minute at most (its answer is cached for AllowTTL), while an
	// agent on every node of a 15,000-node cluster, all asked with fresh
	// tokens, asks the API server no more than 15,000 a second at worst
	// (within evictd's own FlowSchema), not as many as an attacker sends.
	DefaultReviewRate  = 1
	DefaultReviewBurst = 5
)

// Guard authenticates and authorizes requests before passing them on.
type Guard struct {
	r    Reviewer
	opts Options

	mu      sync.Mutex
	users   ttlCache[[32]byte, *authnv1.UserInfo]
	perms   ttlCache[permKey, bool]
	reviews *rate.Limiter
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

func (c *ttlCache[K, V]) put(k K, v V, now, expires time.Time) {
	if c.m != nil && len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
	}
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[K]cached[V])
	}
	c.m[k] = cached[V]{v: v, expires: expires}
}

type permKey struct {
	token       [32]byte
	subresource string
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
	if opts.ReviewRate <= 0 {
		opts.ReviewRate = DefaultReviewRate
	}
	if opts.ReviewBurst <= 0 {
		opts.ReviewBurst = DefaultReviewBurst
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Guard{r: r, opts: opts, users: ttlCache[[32]byte, *authnv1.UserInfo]{max: opts.MaxEntries},
		perms:   ttlCache[permKey, bool]{max: opts.MaxEntries},
		reviews: rate.NewLimiter(rate.Limit(opts.ReviewRate), opts.ReviewBurst)}
}

// Decision is the outcome for one request.
type Decision struct {
	// Status is the HTTP status to answer with when not allowed: 401 (no
	// token, or one the API server does not accept), 403 (a caller not
	// allowed), 405 (a method other than GET or HEAD), 429 (past the
	// TokenReview bound), 503 (a review failed).
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

// errReviewRate is a token without a cached answer, past the bound on
// TokenReviews.
var errReviewRate = errors.New("too many new tokens: evictd asks the API server about a few a second; try again")

// Grant names the RBAC rule that lets a caller get subresource: what a
// refusal and the CLI's errors say a caller needs.
func Grant(subresource string) string {
	return fmt.Sprintf("get on %s/%s in the API group %s", Resource, subresource, Group)
}

// Check decides a request for subresource (explain, shadow, trace,
// metrics): its bearer token, and get on nodes/SUBRESOURCE of evictd.io
// named for the node. Only GET and HEAD are served: they read.
func (g *Guard) Check(ctx context.Context, req *http.Request, subresource string) Decision {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return Decision{Status: http.StatusMethodNotAllowed, Reason: fmt.Sprintf("Method Not Allowed: %s (the secure port serves GET and HEAD)", req.Method)}
	}
	token, ok := bearer(req.Header.Get("Authorization"))
	if !ok {
		return Decision{Status: http.StatusUnauthorized, Reason: "Unauthorized: " + ErrNoToken.Error() +
			" (send a token the API server accepts: Authorization: Bearer TOKEN)"}
	}
	key := sha256.Sum256([]byte(token))
	user, err := g.authenticate(ctx, key, token)
	switch {
	case errors.Is(err, errReviewRate):
		return Decision{Status: http.StatusTooManyRequests, Reason: "Too Many Requests: " + err.Error()}
	case err != nil:
		return Decision{Status: http.StatusServiceUnavailable, Reason: "authentication unavailable: " + err.Error()}
	case user == nil:
		return Decision{Status: http.StatusUnauthorized, Reason: "Unauthorized: the API server does not accept this token"}
	}
	allowed, err := g.authorize(ctx, permKey{token: key, subresource: subresource}, user)
	switch {
	case err != nil:
		return Decision{Status: http.StatusServiceUnavailable, User: user.Username, Reason: "authorization unavailable: " + err.Error()}
	case !allowed:
		return Decision{Status: http.StatusForbidden, User: user.Username,
			Reason: fmt.Sprintf("Forbidden: user %q cannot get %s/%s in the API group %s (node %q): bind it to a ClusterRole granting %s",
				user.Username, Resource, subresource, Group, g.opts.Node, Grant(subresource))}
	}
	return Decision{Allowed: true, User: user.Username}
}

// Wrap serves next, the secure port's subresource, only to allowed
// callers; the others get the decision's status and reason as plain text.
func (g *Guard) Wrap(subresource string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d := g.Check(req.Context(), req, subresource)
		if !d.Allowed {
			switch d.Status {
			case http.StatusUnauthorized:
				w.Header().Set("WWW-Authenticate", `Bearer realm="evictd"`)
			case http.StatusMethodNotAllowed:
				w.Header().Set("Allow", "GET, HEAD")
			case http.StatusTooManyRequests:
				w.Header().Set("Retry-After", "1")
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
	if !g.reviews.AllowN(now, 1) {
		if g.opts.OnRefused != nil {
			g.opts.OnRefused(ReasonReviewRate)
		}
		return nil, errReviewRate
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
	g.users.put(key, user, now, now.Add(ttl))
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
		ResourceAttributes: &authzv1.ResourceAttributes{
			Group: Group, Resource: Resource, Subresource: key.subresource, Name: g.opts.Node, Verb: "get",
		},
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
	g.perms.put(key, st.Allowed, now, now.Add(ttl))
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
