// SPDX-License-Identifier: Apache-2.0

package imagegc

import (
	"time"

	"github.com/evictd/evictd/pkg/thresholds"
)

// Chance is the kubelet's chance at each disk signal's unused images: from
// the first pass that counts them while the signal's threshold holds, they
// count as the kubelet's reclaim for Patience, then as nothing until the
// threshold clears (Forget) and the wait starts afresh.
type Chance struct {
	since  map[thresholds.Signal]time.Time
	gaveUp map[thresholds.Signal]bool
}

// NewChance returns a Chance with no wait under way.
func NewChance() *Chance {
	return &Chance{since: map[thresholds.Signal]time.Time{}, gaveUp: map[thresholds.Signal]bool{}}
}

// Forget ends the wait of every signal not active in st (a whole pass's
// status).
func (c *Chance) Forget(st thresholds.Status) {
	if len(c.since) == 0 {
		return
	}
	active := map[thresholds.Signal]bool{}
	for _, a := range st.Active {
		active[a.Signal] = true
	}
	for s := range c.since {
		if !active[s] {
			delete(c.since, s)
			delete(c.gaveUp, s)
		}
	}
}

// Counts is what unused counts toward s at now, as Count says it, and
// changes nothing: the explanation plans with it, and must not start a
// wait (Count starts it, for the decisions alone).
func (c *Chance) Counts(s thresholds.Signal, unused int64, now time.Time) int64 {
	if unused <= 0 {
		return unused
	}
	if since, ok := c.since[s]; ok && now.Sub(since) >= Patience {
		return 0
	}
	return unused
}

// Count is what unused counts toward s at now: all of it within Patience
// of the wait's start, nothing after. ended is true on the one call that
// finds the patience spent, with how long the wait was.
func (c *Chance) Count(s thresholds.Signal, unused int64, now time.Time) (count int64, ended bool, waited time.Duration) {
	if unused <= 0 {
		return unused, false, 0
	}
	since, ok := c.since[s]
	if !ok {
		c.since[s] = now
		return unused, false, 0
	}
	if now.Sub(since) < Patience {
		return unused, false, 0
	}
	if !c.gaveUp[s] {
		c.gaveUp[s] = true
		return 0, true, now.Sub(since)
	}
	return 0, false, 0
}
