// SPDX-License-Identifier: Apache-2.0

package nodebrake

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// OnSince is when r's brake went on, as node records it: the
// lastTransitionTime of evictd's condition while it is True (zero
// otherwise, or when node is nil). The Node keeps it across agents: one
// that takes over a brake still on (its predecessor killed outright) keeps
// the condition True and its lastTransitionTime with it (ConditionPatch),
// so a brake held for hours shows as such whichever agent holds it now.
func OnSince(node *v1.Node, r Resource) time.Time {
	if node == nil {
		return time.Time{}
	}
	c := findCondition(node, ConditionType(r))
	if c == nil || c.Status != v1.ConditionTrue {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}
