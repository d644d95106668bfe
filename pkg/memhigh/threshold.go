// SPDX-License-Identifier: Apache-2.0

package memhigh

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/pkg/thresholds"
)

// Threshold is the loop's threshold on the memory.highStuck signal for th:
// soft, with th's grace period, so that a victim gets its own termination
// grace (capped by the maximum pod grace period): a container at
// memory.high slows down, it does not take the node with it. Met when one
// pod has a container over a threshold (the signal's observation is the
// negated count of such pods).
func (th Thresholds) Threshold() thresholds.Threshold {
	return thresholds.Threshold{Signal: thresholds.MemoryHighStuck, Value: thresholds.Value{Quantity: resource.NewQuantity(0, resource.DecimalSI)}, GracePeriod: max(th.Grace, time.Nanosecond)}
}
