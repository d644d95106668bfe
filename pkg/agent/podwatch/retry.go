// SPDX-License-Identifier: Apache-2.0

package podwatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/logging"
)

// A list or watch that fails for a reason that passes (an API server down,
// restarting, loading its RBAC, throttling) is tried again here, not handed
// back to client-go's reflector. The reflector backs off from 0.8 s to 30 s,
// doubled again by its jitter, and only time ends its wait: after a 20 s
// outage evictd and the kubelet stand-in stayed blind 30 to 60 s, long
// enough for a victim evicted at the API server's return to look like one
// that never went, and be evicted again. The wait here backs off the same
// way, for the same reason (every node's agent retries at once against an
// API server that is coming back), but Retry ends it: an answer to any other
// call of evictd's (an eviction, another informer's watch) shows the server
// is back, and a node under pressure makes such calls at once. A 429 that
// API Priority and Fairness answers when it sheds load is no such answer
// (ServerAnswered), and a Retry-After the server sends is waited out.

// Back-off between tries of a failing list or watch, as client-go's reflector.
const (
	DefaultRetryMin = 800 * time.Millisecond
	DefaultRetryMax = 30 * time.Second
)

// retryable reports whether a failed list or watch should be tried again
// here. The errors that are not say the request itself must change, and
// the reflector knows how: 410 Gone (list again from scratch), 400 and the
// like (a streaming list the server cannot serve: list instead). A 403
// before the first sync is a ClusterRole without the grant, which fails
// WaitForSync at once; after it, an API server that restarts answers 403
// until it has loaded its RBAC, so it is tried again (and logged).
func retryable(err error, synced bool) bool {
	switch {
	case err == nil:
		return false
	case apierrors.IsForbidden(err):
		return synced
	case apierrors.IsGone(err), apierrors.IsResourceExpired(err), apierrors.IsBadRequest(err), apierrors.IsInvalid(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsNotFound(err):
		return false
	}
	return true
}

// ServerAnswered reports whether err, the result of an API call, shows an
// API server that is serving: a success, or an answer about the request
// itself (404, 409, 422, a PodDisruptionBudget's 429). Any other 429 does
// not, Retry-After or not: it is API Priority and Fairness shedding load,
// and a server that sheds load is no server back for every informer to
// list again at once. A 401 or 403 does not either: a restarted API server
// answers them before its authorization has loaded.
func ServerAnswered(err error) bool {
	if err == nil {
		return true
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	if code == http.StatusTooManyRequests {
		return evict.IsPDBRefusal(err)
	}
	return code >= 400 && code < 500 && code != http.StatusUnauthorized && code != http.StatusForbidden
}

// Retry ends the back-off of every list and watch waiting to be tried
// again: call it when another call to the API server was answered.
func (w *Watcher) Retry() {
	w.retryMu.Lock()
	close(w.retryNow)
	w.retryNow = make(chan struct{})
	w.retryMu.Unlock()
}

// Answered calls Retry when err, the result of another API call, shows the
// API server is serving (ServerAnswered).
func (w *Watcher) Answered(err error) {
	if ServerAnswered(err) {
		w.Retry()
	}
}

// retryChan is closed by the next Retry.
func (w *Watcher) retryChan() <-chan struct{} {
	w.retryMu.Lock()
	defer w.retryMu.Unlock()
	return w.retryNow
}

// withRetry runs call until it succeeds, fails for good (retryable says
// no), or ctx ends, and returns its last error. It logs the first failure
// of a run of them, and the recovery.
func (w *Watcher) withRetry(ctx context.Context, in *informer, verb string, call func() error) error {
	delay := w.retryMin
	var failing time.Time
	for tries := 1; ; tries++ {
		// Taken before the call: a Retry while it is under way counts.
		now := w.retryChan()
		err := call()
		if err == nil || ctx.Err() != nil || !retryable(err, w.Synced()) {
			if err == nil && !failing.IsZero() {
				w.log.Info("API server answering again", zap.String("resource", in.resource), zap.String("verb", verb),
					zap.Duration("after", time.Since(failing).Round(time.Millisecond)), zap.Int("tries", tries))
			}
			return err
		}
		if failing.IsZero() {
			failing = time.Now()
		}
		// Jitter as the reflector's (up to the delay again), so that the
		// nodes' agents spread out; never sooner than the server asked
		// (a 429's Retry-After, when it sheds load).
		wait := delay + rand.N(delay+1)
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			wait = max(wait, time.Duration(s)*time.Second)
		}
		if !apierrors.IsForbidden(err) { // answered has logged it, with what to grant
			w.log.Warn("list or watch failed; trying again", zap.String("resource", in.resource), zap.String("verb", verb),
				logging.Err(err), zap.Duration("retryIn", wait.Round(time.Millisecond)), zap.Int("tries", tries))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-now:
			t.Stop()
		case <-t.C:
		}
		delay = min(2*delay, w.retryMax)
	}
}
