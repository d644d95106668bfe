// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/thresholds"
)

// formatAmount prints an amount of a signal the way the kubelet's messages
// do: bytes as binary-SI quantities (100Mi, or plain bytes when not a round
// multiple), counts as plain numbers.
func formatAmount(s thresholds.Signal, v int64) string {
	if s.Stall() {
		return strconv.FormatFloat(float64(v)/1e4, 'f', 1, 64) + "%"
	}
	if metrics.IsCountSignal(s) {
		return resource.NewQuantity(v, resource.DecimalSI).String()
	}
	return resource.NewQuantity(v, resource.BinarySI).String()
}

// resourceName is what the node is low on, in the kubelet's words.
func resourceName(s thresholds.Signal) string {
	if r := s.Resource(); r != "" {
		return r
	}
	return string(s)
}

func kindWord(hard bool) string {
	if hard {
		return metrics.KindHard
	}
	return metrics.KindSoft
}

// evictionNote is the Event note on an evicted pod, in the kubelet's words
// (pkg/kubelet/eviction's "The node was low on resource" message), at pod
// rather than container level because evictd ranks whole pods, followed by
// what evictd adds: the signal, the kind of threshold and the grace period.
func evictionNote(req Request, grace int64) string {
	by := fmt.Sprintf("Evicted by evictd: %s; grace period %ds.", relieves(req), grace)
	if req.GraceOverride != nil && req.GraceReason != "" && !req.Signal.MemoryHigh() {
		by += fmt.Sprintf(" The grace period was shortened: %s.", req.GraceReason)
	}
	return causeNote(req) + " " + by + orderNote(req)
}

// orderNote names the pod's place in evictd's eviction order and the pod
// that would have gone in its place, with why it ranks there: the owner's
// "why mine, and not that one?". "" when the call carries no rank.
func orderNote(req Request) string {
	if req.Rank <= 0 {
		return ""
	}
	if req.RunnerUp == "" {
		return fmt.Sprintf(" Rank %d in evictd's eviction order; no other pod could have been evicted in its place.", req.Rank)
	}
	return fmt.Sprintf(" Rank %d in evictd's eviction order; next in line: %s, rank %d (%s).", req.Rank, req.RunnerUp, req.RunnerUpRank, req.RunnerUpReason)
}

// responderNote is the Event note on a pod that an eviction responder
// evicted, acting on evictd's EvictionRequest (pkg/evictreq): the same
// cause, and who evicted it; the grace period was the responder's.
func responderNote(req Request, evictionRequest string) string {
	return causeNote(req) + fmt.Sprintf(" Evicted by an eviction responder acting on evictd's EvictionRequest %s: %s.", evictionRequest, relieves(req)) + orderNote(req)
}

// causeNote is why evictd wanted the pod gone, ending with a full stop.
func causeNote(req Request) string {
	res := resourceName(req.Signal)
	if req.Signal.MemoryHigh() {
		// The kubelet has no such signal (KEP-5986 is not merged): the
		// container and what it is stuck on, not the node's figures.
		return fmt.Sprintf("A container of the pod was stuck at its memory.high: %s.", req.MemoryHigh)
	}
	var b strings.Builder
	usageUnit := req.Signal
	if req.Signal.Stall() {
		// The kubelet has no stall signal: evictd's own words.
		fmt.Fprintf(&b, "The node's tasks were stalled on memory: %s %s of the stall window, above the threshold of %s. Pod's own memory stall %s. ",
			req.Signal, formatAmount(req.Signal, req.Available), formatAmount(req.Signal, req.Threshold),
			strconv.FormatFloat(req.Stall*100, 'f', 1, 64)+"%")
		usageUnit = thresholds.MemoryAvailable
	} else {
		fmt.Fprintf(&b, "The node was low on resource: %s. Threshold quantity: %s, available: %s. ",
			res, formatAmount(req.Signal, req.Threshold), formatAmount(req.Signal, req.Available))
	}
	fmt.Fprintf(&b, "Pod was using %s, request is %s", formatAmount(usageUnit, req.Usage), formatAmount(usageUnit, req.Request))
	if req.Swap > 0 {
		fmt.Fprintf(&b, " (%s of it in swap)", formatAmount(usageUnit, req.Swap))
	}
	if req.Usage > req.Request {
		fmt.Fprintf(&b, ", has larger consumption of %s", res)
	}
	b.WriteString(".")
	return b.String()
}

// forcedNote is the Event note on a pod deleted past its PDB.
func forcedNote(req Request, grace int64) string {
	return "PodDisruptionBudget overridden (--pdb-policy=best-effort): every eligible pod was blocked by a PodDisruptionBudget while a hard threshold was met. " +
		evictionNote(req, grace)
}

// refusedNote is the Event note on a pod whose eviction was refused; err
// carries the server's words.
func refusedNote(req Request, err error) string {
	why := err.Error()
	if inner := errors.Unwrap(err); inner != nil {
		why = strings.TrimPrefix(inner.Error(), ErrRefused.Error()+": ")
	}
	return fmt.Sprintf("evictd asked to evict this pod (%s) and the API server refused: %s. evictd evicts the next candidate instead and asks about this pod again later.",
		relieves(req), why)
}

// relieves is the threshold an eviction relieves, met or, acting early, only
// predicted: an Event must not say a threshold was met when it was not.
func relieves(req Request) string {
	if req.PredictedIn > 0 {
		return fmt.Sprintf("%s predicted to cross its %s threshold in %s (acting early)", req.Signal, kindWord(req.Hard), req.PredictedIn.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s met its %s threshold", req.Signal, kindWord(req.Hard))
}

// thresholdNote is the Event note on the Node when a threshold is first met.
func thresholdNote(s thresholds.Signal, hard bool, threshold, available int64) string {
	if s.MemoryHigh() {
		return fmt.Sprintf("Attempting to free containers stuck at memory.high: %s has %d pods with a container over a memory.high threshold (%s threshold).",
			s, -available, kindWord(hard))
	}
	if s.Stall() {
		return fmt.Sprintf("Attempting to end a memory stall: %s is %s of the stall window, above the %s threshold of %s.",
			s, formatAmount(s, available), kindWord(hard), formatAmount(s, threshold))
	}
	return fmt.Sprintf("Attempting to reclaim %s: %s is %s, below the %s threshold of %s.",
		resourceName(s), s, formatAmount(s, available), kindWord(hard), formatAmount(s, threshold))
}

// StallPPM converts a stall signal's observation figures (µs of the window
// not stalled, against the window) into the millionths of the window
// stalled that Requests and notes carry.
func StallPPM(notStalled, window int64) int64 {
	if window <= 0 {
		return 0
	}
	return int64(float64(window-notStalled) / float64(window) * 1e6)
}
