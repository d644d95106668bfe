// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Budget is what one pressure episode may still spend: its cap on accepted
// evictions, its token bucket, and what was already said in it (dry-run
// verdicts, PDB refusals). The agent keeps one per resource, so that disk
// pressure that evictions cannot relieve never uses up what a memory
// episode needs. A Budget is safe for concurrent use: calls of different
// budgets run at the same time, and so may a hard and a soft call of one.
type Budget struct {
	max   int
	rate  float64
	burst int

	mu      sync.Mutex
	limiter tokenBucket
	// count counts accepted evictions, plus calls under way (admit reserves,
	// finish refunds what was not accepted).
	count int
	// capLogged: the cap was logged at Warn in this episode.
	capLogged bool
	// seen holds, per pod UID and call, what was already logged this
	// episode: dry run reuses the verdict; real PDB refusals log at Info
	// only once.
	seen map[seenKey]seenEntry
}

type seenKey struct {
	uid  types.UID
	verb verb
}

type seenEntry struct {
	outcome Outcome
	err     error
}

// NewBudget returns a fresh budget with the evictor's cap and rate.
func (e *Evictor) NewBudget() *Budget {
	return &Budget{
		max: e.opts.MaxPerEpisode, rate: e.opts.Rate, burst: e.opts.Burst,
		// The bucket starts full.
		limiter: tokenBucket{rate: e.opts.Rate, burst: float64(e.opts.Burst), tokens: float64(e.opts.Burst)},
		seen:    map[seenKey]seenEntry{},
	}
}

// Evictions is the number of accepted evictions (and calls under way)
// charged to the budget.
func (b *Budget) Evictions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}

// reset starts the budget afresh.
func (b *Budget) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.count = 0
	b.capLogged = false
	clear(b.seen)
}

// RetainPods forgets what was logged for pods no longer listed: an episode
// that never ends would otherwise keep a record of every pod it ever asked
// for.
func (b *Budget) RetainPods(listed func(types.UID) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.seen {
		if !listed(k.uid) {
			delete(b.seen, k)
		}
	}
}

// charge is a reservation admit made: finish keeps it for an accepted
// eviction and refunds it otherwise, so refusals and errors cost nothing.
// The token is taken at admission, so that the bucket refills while a call
// hangs (a hard call must not wait behind a slow soft one), and given back
// whole on a refusal. (golang.org/x/time/rate's Reservation.CancelAt, used
// before, restores nothing once the reservation's time has passed, which
// it always has by the time an answer is in: every refusal cost a token,
// and the next candidate queued behind it.)
type charge struct {
	held bool
}

// tokenBucket is the episode's rate limit: tokens refill at rate per
// second up to burst; a call takes one, a refusal gives it back.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

// at brings the bucket to now and returns its tokens.
func (t *tokenBucket) at(now time.Time) float64 {
	if !t.last.IsZero() && now.After(t.last) {
		t.tokens = min(t.burst, t.tokens+now.Sub(t.last).Seconds()*t.rate)
	}
	if now.After(t.last) {
		t.last = now
	}
	return t.tokens
}

// admit checks the cap and the token bucket before a call and reserves
// both, so that calls under way at the same time are counted exactly.
func (b *Budget) admit(now time.Time) (charge, time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.count >= b.max {
		return charge{}, 0, fmt.Errorf("%w (%d; --%s)", ErrEpisodeCap, b.max, FlagMaxPerEpisode)
	}
	if tokens := b.limiter.at(now); tokens < 1 {
		wait := time.Duration((1 - tokens) / b.rate * float64(time.Second))
		return charge{}, wait, fmt.Errorf("%w (--%s=%v, --%s=%d); next token in %v", ErrRateLimited, FlagRate, b.rate, FlagBurst, b.burst, wait.Round(time.Millisecond))
	}
	b.count++
	b.limiter.tokens--
	return charge{held: true}, 0, nil
}

// settle keeps a charge for an accepted eviction, or gives it back.
func (b *Budget) settle(c charge, accepted bool, now time.Time) {
	if !c.held || accepted {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.count--
	b.limiter.tokens = min(b.limiter.burst, b.limiter.at(now)+1)
}

func (b *Budget) lookup(k seenKey) (seenEntry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.seen[k]
	return s, ok
}

// remember records a verdict worth reusing and reports whether the pod's
// call was seen before and whether this is the first time the cap is hit.
func (b *Budget) remember(k seenKey, out Outcome, err error, capHit bool) (seenBefore, firstCap bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, seenBefore = b.seen[k]
	if out.Result == PDBBlocked || out.Result == Refused || out.Result == WebhookFailed || out.Result == DryRun {
		b.seen[k] = seenEntry{outcome: out, err: err}
	}
	if capHit && !b.capLogged {
		b.capLogged, firstCap = true, true
	}
	return seenBefore, firstCap
}

// Reservation is an eviction's place in its budget (a cap slot and a rate
// token) held while someone other than the Evictor may carry the eviction
// out: --eviction-request's responders (pkg/evictreq). Settle it once:
// accepted keeps the charge, as an accepted eviction keeps its own;
// otherwise it is given back whole, as a refusal's is.
type Reservation struct {
	b     *Budget
	clock func() time.Time

	mu      sync.Mutex
	c       charge
	settled bool
}

// Reserve charges req's budget (req.Budget, or the shared one) for an
// eviction that a responder may carry out: the episode cap and the rate
// limit apply to it as to a call of Evict. When the budget has no room it
// returns a nil Reservation and the RateLimited Outcome and error Evict
// would (logged and counted as Evict's are); then ask nobody.
func (e *Evictor) Reserve(req Request) (*Reservation, Outcome, error) {
	if err := req.validate(); err != nil {
		return nil, Outcome{Result: Failed}, &PodError{Pod: req.podKey(), Result: Failed, Err: err}
	}
	b := req.Budget
	if b == nil {
		b = e.budget
	}
	c, wait, err := b.admit(e.clock.Now())
	if err != nil {
		out := Outcome{Result: RateLimited, RetryAfter: wait, GracePeriodSeconds: e.opts.GracePeriod(req.Pod, req.Hard, req.GraceOverride)}
		out, err = e.finish(req, b, verbEvict, out, err)
		return nil, out, err
	}
	return &Reservation{b: b, c: c, clock: e.clock.Now}, Outcome{}, nil
}

// Settle keeps the charge (accepted: the pod was evicted through the
// reservation) or gives it back. Only the first call counts; a nil
// Reservation does nothing.
func (r *Reservation) Settle(accepted bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return
	}
	r.settled = true
	r.b.settle(r.c, accepted, r.clock())
}
