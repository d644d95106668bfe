// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"time"

	"github.com/evictd/evictd/pkg/evict"
)

// DecisionOf is what req asks for and why, as a trace keeps it: the
// recorder's record of a call and a replay's of the same call must be one
// shape for the two to compare.
func DecisionOf(req evict.Request, force bool, pass uint64, launched time.Time) Decision {
	return Decision{Pass: pass, Launched: launched, Pod: req.Pod.Namespace + "/" + req.Pod.Name, UID: req.Pod.UID,
		Signal: string(req.Signal), Hard: req.Hard, Force: force, Rank: req.Rank, Reason: req.Reason, RunnerUp: req.RunnerUp,
		Threshold: req.Threshold, Available: req.Available, Usage: req.Usage, PredictedIn: req.PredictedIn}
}
