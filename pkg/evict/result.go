// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"errors"
	"fmt"
	"time"

	"github.com/evictd/evictd/pkg/metrics"
)

// Result classifies one eviction attempt. Its values are the result label
// of evictd_evictions_total.
type Result string

const (
	// Evicted: the API server accepted the eviction; the pod is terminating.
	Evicted Result = metrics.ResultEvicted
	// DryRun: dry-run mode, and the server-side dry run allowed it.
	DryRun Result = metrics.ResultDryRun
	// PDBBlocked: a PodDisruptionBudget refused it (HTTP 429). In dry-run
	// mode: it would have. Try the next candidate.
	PDBBlocked Result = metrics.ResultPDBBlocked
	// NotFound: the pod is already gone (HTTP 404, or a new pod now has
	// its name). Not an error: its resources are coming back anyway.
	NotFound Result = metrics.ResultNotFound
	// Refused: the API server refused the eviction for this pod itself
	// (an admission policy or webhook denied it, or more than one
	// PodDisruptionBudget covers it): the same answer would come again, for
	// this pod only. Try the next candidate.
	Refused Result = metrics.ResultRefused
	// WebhookFailed: an admission webhook with failurePolicy Fail that
	// selects this pod could not be called (its backend down or too slow,
	// an answer the API server could not read): the webhook's state, for
	// the pods it selects, not the API server's. Not retried within the
	// call; try the next candidate, and this one again after a while.
	WebhookFailed Result = metrics.ResultWebhookFailed
	// Failed: any other error, after bounded retries with backoff; it may
	// be the API server's, for every pod alike (down, overloaded, evictd's
	// own permissions).
	Failed Result = metrics.ResultError
	// RateLimited: the per-node rate limit or the per-episode cap held it
	// back; no API call was made.
	RateLimited Result = metrics.ResultRateLimited
	// ForcedDelete: ForceDelete deleted a PDB-blocked pod
	// (--pdb-policy=best-effort).
	ForcedDelete Result = metrics.ResultForcedDelete
	// ResponderEvicted: an eviction responder evicted the pod, acting on
	// evictd's EvictionRequest (pkg/evictreq, RecordResponderEviction); no
	// Eviction API call was made.
	ResponderEvicted Result = metrics.ResultResponderEvicted
)

// Accepted reports whether the pod is now (or, in dry run, would be) on its
// way out, so that its usage counts as reclaim in flight.
func (r Result) Accepted() bool {
	return r == Evicted || r == ForcedDelete || r == DryRun || r == ResponderEvicted
}

// Outcome is what an eviction attempt did.
type Outcome struct {
	Result Result
	// GracePeriodSeconds is the grace period sent (or that would have been).
	GracePeriodSeconds int64
	// Accepted is when the API server accepted an eviction or delete (zero
	// unless Result is Evicted or ForcedDelete); start the pod-gone timer
	// (metrics.ObservePodGone) from it.
	Accepted time.Time
	// Attempts is the number of API calls made (0 when rate limited or when
	// a dry-run verdict was reused).
	Attempts int
	// Cached: dry run only, the verdict was asked for earlier in this
	// pressure episode and is reused without a new API call or log line.
	Cached bool
	// RetryAfter: for RateLimited by the rate limit, how long until a
	// token is free (0 for the per-episode cap, which lasts until
	// ResetEpisode).
	RetryAfter time.Duration
}

// Errors that Evict and ForceDelete wrap in a *PodError; test with errors.Is.
var (
	// ErrPDBBlocked: a PodDisruptionBudget refused the eviction.
	ErrPDBBlocked = errors.New("blocked by PodDisruptionBudget")
	// ErrRefused: the API server refused the eviction for this pod (an
	// admission policy or webhook, several PodDisruptionBudgets).
	ErrRefused = errors.New("eviction refused for this pod")
	// ErrWebhookFailed: an admission webhook that selects this pod could
	// not be called; WebhookName tells which.
	ErrWebhookFailed = errors.New("admission webhook failed on this pod's eviction")
	// ErrRateLimited: the per-node token bucket is empty.
	ErrRateLimited = errors.New("eviction rate limit reached")
	// ErrEpisodeCap: this pressure episode already had MaxPerEpisode
	// evictions; nothing more is evicted until ResetEpisode.
	ErrEpisodeCap = errors.New("eviction cap for this pressure episode reached")
	// ErrStrictPDBPolicy: ForceDelete was called with --pdb-policy=strict.
	ErrStrictPDBPolicy = errors.New("forced delete refused: --pdb-policy is strict")
	// ErrInvalidRequest: the request lacks a pod, a name or a UID.
	ErrInvalidRequest = errors.New("invalid eviction request")
)

// PodError is the error of an attempt that did not evict its pod. It names
// the pod and carries the Result.
type PodError struct {
	// Pod is namespace/name.
	Pod    string
	Result Result
	Err    error
}

func (e *PodError) Error() string {
	return fmt.Sprintf("evict pod %s: %s: %v", e.Pod, e.Result, e.Err)
}

func (e *PodError) Unwrap() error { return e.Err }

var _ error = (*PodError)(nil)
