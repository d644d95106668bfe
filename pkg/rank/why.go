// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/pkg/thresholds"
)

// Why says why c ranks where it does for signal s, in the ranking's own
// terms (usage against request, priority, group), for logs, Events and
// explanations.
func Why(s thresholds.Signal, c Candidate) string {
	var b strings.Builder
	if s.Stall() {
		fmt.Fprintf(&b, "own memory stall %.1f%% over the window; ", c.Stall*100)
		s = thresholds.MemoryAvailable // its usage is in bytes
	}
	switch {
	case s.MemoryHigh():
		// Its "usage" is the one stuck pod it counts for; what it is
		// stuck on says why.
		b.WriteString(c.MemoryHigh)
	case !c.HasUsage:
		b.WriteString("no usage figure")
	case s == thresholds.PIDAvailable:
		// Pods have no PID request: the kubelet orders them by priority,
		// then by processes.
		fmt.Fprintf(&b, "%s processes", Amount(s, c.Usage))
	case c.ExceedsRequest:
		fmt.Fprintf(&b, "usage %s exceeds request %s", Amount(s, c.Usage), Amount(s, c.Request))
	default:
		fmt.Fprintf(&b, "usage %s within request %s", Amount(s, c.Usage), Amount(s, c.Request))
	}
	if c.Swap > 0 {
		fmt.Fprintf(&b, " (%s of it in swap)", Amount(s, c.Swap))
	}
	fmt.Fprintf(&b, ", priority %d", c.Priority)
	switch {
	case c.Group != "":
		fmt.Fprintf(&b, " (effective %d, priority group %s)", c.EffectivePriority, c.Group)
	case c.EffectivePriority != c.Priority:
		fmt.Fprintf(&b, " (effective %d)", c.EffectivePriority)
	}
	return b.String()
}

// Amount prints v in s's unit: a count for inodes and PIDs, bytes
// otherwise.
func Amount(s thresholds.Signal, v int64) string {
	switch s {
	case thresholds.NodeFsInodesFree, thresholds.ImageFsInodesFree, thresholds.PIDAvailable:
		return resource.NewQuantity(v, resource.DecimalSI).String()
	}
	return resource.NewQuantity(v, resource.BinarySI).String()
}
