// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/pressure"
)

// health is what /readyz and /healthz are told by the loop.
type health struct {
	lastObservation atomic.Int64 // unix nanos of the last successful observation
	lastPass        atomic.Int64 // unix nanos of the end of the last pass

	mu      sync.Mutex
	problem error // why the last observation cannot be acted on (fully)
	// stuck are evictd's own victims still there past their wait: the node
	// cannot stop pods (a hung runtime, a stuck unmount), which an operator
	// must hear of even though evictd moved on to the next candidate.
	stuck  map[types.UID]string
	warned map[string]warnState
}

type warnState struct {
	msg string
	at  time.Time
}

func (h *health) passDone(t time.Time) { h.lastPass.Store(t.UnixNano()) }

// observed records the outcome of an observation: err when it failed, or
// the signals it could not read.
func (h *health) observed(t time.Time, err error, lost []pressure.SignalError) {
	var errs []error
	if err == nil {
		h.lastObservation.Store(t.UnixNano())
		for _, se := range lost {
			errs = append(errs, se)
		}
		err = errors.Join(errs...)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.problem = err
}

// shouldWarn rate-limits Warn lines per topic: a new message, or the same
// one after every.
func (h *health) shouldWarn(topic, msg string, now time.Time, every time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.warned == nil {
		h.warned = map[string]warnState{}
	}
	w, ok := h.warned[topic]
	if ok && w.msg == msg && now.Sub(w.at) < every {
		return false
	}
	h.warned[topic] = warnState{msg: msg, at: now}
	return true
}

// setStuck records an evicted pod that outlived its wait (desc says which),
// or forgets it (desc "").
func (h *health) setStuck(uid types.UID, desc string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stuck == nil {
		h.stuck = map[types.UID]string{}
	}
	if desc == "" {
		delete(h.stuck, uid)
	} else {
		h.stuck[uid] = desc
	}
}

func (h *health) stuckUIDs() []types.UID {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]types.UID, 0, len(h.stuck))
	for uid := range h.stuck {
		out = append(out, uid)
	}
	return out
}

// LastObservation is when the last observation succeeded (zero if none).
func (l *Loop) LastObservation() time.Time {
	return unixNano(l.published.health.lastObservation.Load())
}

// LastPass is when the loop last finished a pass (zero if none).
func (l *Loop) LastPass() time.Time { return unixNano(l.published.health.lastPass.Load()) }

// Problem is what keeps evictd from protecting the node as it should: the
// last observation failed (no kubepods cgroup, say) or could not read a node
// signal, or a pod evictd evicted is stuck terminating. Nil when all is well.
func (l *Loop) Problem() error {
	l.published.health.mu.Lock()
	defer l.published.health.mu.Unlock()
	errs := []error{l.published.health.problem, l.actuation.problem()}
	descs := make([]string, 0, len(l.published.health.stuck))
	for _, d := range l.published.health.stuck {
		descs = append(descs, d)
	}
	slices.Sort(descs)
	for _, d := range descs {
		errs = append(errs, errors.New(d))
	}
	return errors.Join(errs...)
}

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
