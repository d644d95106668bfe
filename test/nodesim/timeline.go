// SPDX-License-Identifier: Apache-2.0

package nodesim

import "time"

// Timeline records when the stand-in did each step for one pod; a zero
// time means the step has not happened (or never will).
type Timeline struct {
	// Started: the containers' processes were started.
	Started time.Time
	// Running: status Running and Ready=True were written.
	Running time.Time
	// StartError says why the pod could not be started, if it could not.
	StartError string

	// DeletionSeen: the pod was first seen with a deletionTimestamp (or
	// removed from the API outright).
	DeletionSeen time.Time
	// GracePeriod is the pod's deletionGracePeriodSeconds as seen.
	GracePeriod time.Duration
	// SIGTERM: SIGTERM was sent to every container's process group.
	SIGTERM time.Time
	// SIGKILL: the grace period ran out and SIGKILL was sent.
	SIGKILL time.Time
	// Hung: the termination was made to hang (HangTerminationAnnotation):
	// after SIGTERM nothing more happens until the node stops or the pod is
	// removed from the API.
	Hung time.Time
	// Exited: the last container process had exited.
	Exited time.Time
	// VolumesRemoved: the last file of the pod's volumes was removed
	// (VolumeRemovalRateAnnotation).
	VolumesRemoved time.Time
	// CgroupRemoved: the pod's cgroups and directories were removed.
	CgroupRemoved time.Time
	// APIDeleted: the pod was deleted from the API with grace 0.
	APIDeleted time.Time
	// Evicted: Node.Evict killed the pod, as the kubelet's eviction
	// manager does (the DisruptionTarget condition's time).
	Evicted time.Time

	// OOMKilled: the kernel OOM killer was first seen killing in the pod;
	// OOMKills counts the kills.
	OOMKilled time.Time
	OOMKills  int
}

// StoppedWithin reports whether the processes exited no later than the
// grace period after SIGTERM (plus slack, for scheduling noise).
func (t Timeline) StoppedWithin(slack time.Duration) bool {
	if t.SIGTERM.IsZero() || t.Exited.IsZero() {
		return false
	}
	return t.Exited.Sub(t.SIGTERM) <= t.GracePeriod+slack
}
