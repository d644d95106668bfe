// SPDX-License-Identifier: Apache-2.0

package predict

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultGraceFloor is the shortest grace evictd asks for. One second, not
// zero: the API server treats gracePeriodSeconds=0 as an immediate (forced)
// deletion that removes the pod object before the kubelet has stopped the
// containers, so evictd could no longer wait for the memory to come back, and
// the kubelet itself never stops a pod with less than one second anyway (its
// pod workers raise any smaller grace to 1 s).
const DefaultGraceFloor = time.Second

// DefaultGraceMargin is the part of the time left that is not handed to the
// pod as grace: the Eviction API round trip, the kubelet noticing the deletion
// through its watch and pod worker, and the kernel tearing down the address
// space after SIGKILL (hundreds of milliseconds per GiB). Two seconds covers
// those on an idle node with some room; the agent should pass its measured
// eviction-to-gone overhead when it has one.
const DefaultGraceMargin = 2 * time.Second

// MinSoftGrace is the shortest grace a soft-threshold eviction is ever fitted
// to. A soft threshold is pressure that can wait: it has its own grace
// period, often minutes, and its victims are capped by
// --eviction-max-pod-grace-period, not by the hard cap. Its victim's grace is
// fitted only when a sustained fall predicts that memory runs out before the
// grace ends, and even then it is never cut below what a hard eviction
// gets: should memory keep falling, the hard threshold is crossed first and
// evicts with the hard cap (and a victim in flight whose grace outlasts the
// hard horizon does not hold it back). Five seconds is evictd's default hard
// cap; it still applies when an operator lowers that cap to one second,
// because a soft eviction is never the emergency that would justify it.
const MinSoftGrace = 5 * time.Second

// SoftGraceFloor is the floor of a fitted soft-threshold eviction's grace:
// the largest of floor (the policy's), MinSoftGrace and hardCapSeconds (the
// grace cap of hard-threshold evictions, --eviction-hard-grace-period).
func SoftGraceFloor(floor time.Duration, hardCapSeconds int64) time.Duration {
	floor = max(floor, MinSoftGrace)
	if hardCapSeconds > int64(floor/time.Second) {
		floor = time.Duration(min(hardCapSeconds, int64(math.MaxInt64/time.Second))) * time.Second
	}
	return floor
}

// GracePolicy fits an eviction's grace period to the time the node has left.
type GracePolicy struct {
	// Margin is subtracted from the predicted time left before it is offered
	// as grace.
	Margin time.Duration
	// Floor is the shortest grace ever asked for; a whole number of seconds,
	// at least one (see DefaultGraceFloor).
	Floor time.Duration
}

// DefaultGracePolicy returns the policy with DefaultGraceMargin and
// DefaultGraceFloor.
func DefaultGracePolicy() GracePolicy {
	return GracePolicy{Margin: DefaultGraceMargin, Floor: DefaultGraceFloor}
}

// Validate reports the first bad field.
func (p GracePolicy) Validate() error {
	if p.Margin < 0 {
		return fmt.Errorf("predict: grace margin %s must not be negative", p.Margin)
	}
	if p.Floor < time.Second || p.Floor%time.Second != 0 {
		return fmt.Errorf("predict: grace floor %s must be a whole number of seconds, at least 1s", p.Floor)
	}
	return nil
}

// Crossing describes the threshold the node is racing towards.
type Crossing struct {
	// Signal is the eviction signal, e.g. "memory.available".
	Signal string
	// Threshold is the level, in bytes, that the signal is predicted to fall
	// below.
	Threshold int64
	// TimeLeft is the predicted time until it does: 0 if it already has,
	// Never if the signal is not falling.
	TimeLeft time.Duration
	// Rate is the fill rate in bytes per second; it only enriches the reason
	// and may be 0.
	Rate float64
}

// Grace is the fitted grace period for one eviction.
type Grace struct {
	// Seconds is the grace to ask for. When Shortened is false it equals the
	// pod's own terminationGracePeriodSeconds and the caller should leave
	// DeleteOptions.GracePeriodSeconds unset so the API server applies the
	// pod's own value, exactly as a plain eviction would.
	Seconds int64
	// Shortened reports whether Seconds is below the pod's own grace.
	Shortened bool
	// Floored reports that even the floor does not fit the time left.
	Floored bool
	// Reason explains a shortened grace, for the eviction's Event; empty when
	// the grace was not shortened.
	Reason string
}

// Fit returns the grace for a pod whose terminationGracePeriodSeconds is
// podGrace: the pod's own grace when it fits within the time left minus the
// margin, otherwise the largest whole number of seconds that fits, but never
// less than the floor. A faster fill (less time left) never yields a longer
// grace.
func (p GracePolicy) Fit(podGrace int64, c Crossing) (Grace, error) {
	if err := p.Validate(); err != nil {
		return Grace{}, err
	}
	if podGrace < 0 {
		return Grace{}, fmt.Errorf("predict: pod grace period %ds must not be negative", podGrace)
	}
	if c.TimeLeft < 0 {
		return Grace{}, fmt.Errorf("predict: time left %s must not be negative", c.TimeLeft)
	}
	own := Grace{Seconds: podGrace}
	if c.TimeLeft == Never {
		return own, nil
	}
	var fits int64
	if spare := c.TimeLeft - p.Margin; spare > 0 {
		fits = int64(spare / time.Second)
	}
	if podGrace <= fits {
		return own, nil
	}
	g := Grace{Seconds: fits, Shortened: true}
	if floor := int64(p.Floor / time.Second); fits < floor {
		g.Seconds, g.Floored = floor, true
	}
	if g.Seconds >= podGrace {
		// The pod's own grace is already at or below the floor.
		return own, nil
	}
	g.Reason = reason(podGrace, g, c)
	return g, nil
}

func reason(podGrace int64, g Grace, c Crossing) string {
	signal := c.Signal
	if signal == "" {
		signal = "memory.available"
	}
	floor := ""
	if g.Floored {
		floor = " (the floor)"
	}
	level := resource.NewQuantity(c.Threshold, resource.BinarySI).String()
	var why string
	if c.TimeLeft == 0 {
		why = fmt.Sprintf("%s is already below %s", signal, level)
	} else {
		why = fmt.Sprintf("%s predicted to cross %s in %s", signal, level, seconds(c.TimeLeft))
	}
	if c.Rate > 0 {
		why += fmt.Sprintf(" (falling %.0fMi/s)", c.Rate/(1<<20))
	}
	return fmt.Sprintf("grace shortened from %ds to %ds%s: %s", podGrace, g.Seconds, floor, why)
}

// seconds prints a duration as seconds with the precision a reader needs:
// "5.2s", "0.35s".
func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
