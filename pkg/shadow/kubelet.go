// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// EvictedReason is the status.reason the kubelet's eviction manager gives
// a pod it evicts, with phase Failed and the eviction's message.
const EvictedReason = "Evicted"

// rejectedPrefix starts the status.message of a pod the kubelet refused to
// admit (kubelet.rejectPod). Under pressure its eviction manager refuses
// pods with the reason Evicted too, but such a pod never ran: nothing was
// evicted, and evictd could not have chosen it.
const rejectedPrefix = "Pod was rejected: "

// Where the time of a kubelet eviction was read (Action.AtFrom).
const (
	// AtCondition is the DisruptionTarget condition (reason
	// TerminationByKubelet, Kubernetes 1.26 and later): the kubelet stamps
	// it when it writes the pod Failed, once the pod's containers are
	// killed (its status manager holds the terminal status back until
	// then). For a hard threshold that is at most about 2 s after its
	// decision (the runtime's least grace); for a soft one, up to the
	// pod's grace period after it. The Event it also writes carries the
	// decision itself, but only a watch of every Event in the cluster
	// could read it.
	AtCondition = "condition"
	// AtContainerExit is the last container's exit (state.terminated
	// finishedAt), for a kubelet that writes no condition: the kill.
	AtContainerExit = "containerExit"
	// AtSeen is when evictd first saw the pod evicted, when the pod says
	// neither: late by the API server's round trip, or by evictd's own
	// start for a pod already evicted then.
	AtSeen = "seen"
)

// KubeletEviction reads a pod of the node: whether the kubelet's eviction
// manager evicted it (phase Failed, reason Evicted, and not a refused
// admission) and, if so, the eviction as an Action: the pod, its UID, the
// kubelet's message (Why) and when (At, read as AtFrom says). seen is when
// evictd saw the pod so, the last resort for At.
func KubeletEviction(p *v1.Pod, seen time.Time) (Action, bool) {
	if p == nil || p.Status.Phase != v1.PodFailed || p.Status.Reason != EvictedReason ||
		strings.HasPrefix(p.Status.Message, rejectedPrefix) {
		return Action{}, false
	}
	a := Action{Pod: p.Namespace + "/" + p.Name, UID: string(p.UID), Why: p.Status.Message}
	a.At, a.AtFrom = evictedAt(p, seen)
	return a, true
}

// evictedAt is the time of an eviction the pod says the kubelet made, and
// where it was read.
func evictedAt(p *v1.Pod, seen time.Time) (time.Time, string) {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet &&
			!c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, AtCondition
		}
	}
	// The last exit, not the first: a container that had finished before
	// the eviction (one of a pod that restarts Never) would date it early.
	var last time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
	}
	if !last.IsZero() {
		return last, AtContainerExit
	}
	return seen, AtSeen
}
