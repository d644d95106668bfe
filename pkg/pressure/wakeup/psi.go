// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kernel limits on PSI trigger windows (kernel/sched/psi.c).
const (
	psiWindowMax = 10 * time.Second
	// psiUnprivilegedStep: without CAP_SYS_RESOURCE the window must be a
	// multiple of it (kernel ≥ 6.5); such triggers run on the 2 s averaging
	// clock.
	psiUnprivilegedStep = 2 * time.Second
)

// PSITrigger is a PSI trigger: notify when tasks stalled on memory (Full:
// all non-idle tasks at once; otherwise at least one) for Stall within any
// Window. The kernel takes both in microseconds.
type PSITrigger struct {
	Full   bool
	Stall  time.Duration
	Window time.Duration
}

// ParsePSITrigger parses the kernel's syntax, "some 150000 1000000" (stall
// and window in microseconds).
func ParsePSITrigger(s string) (PSITrigger, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return PSITrigger{}, fmt.Errorf("wakeup: PSI trigger %q: want \"some|full <stall µs> <window µs>\"", s)
	}
	var t PSITrigger
	switch f[0] {
	case "some":
	case "full":
		t.Full = true
	default:
		return PSITrigger{}, fmt.Errorf("wakeup: PSI trigger %q: kind %q is neither some nor full", s, f[0])
	}
	for i, d := range []*time.Duration{&t.Stall, &t.Window} {
		us, err := strconv.ParseInt(f[1+i], 10, 64)
		if err != nil || us <= 0 || us > int64(psiWindowMax/time.Microsecond) {
			return PSITrigger{}, fmt.Errorf("wakeup: PSI trigger %q: %q is not a number of microseconds in (0, 10000000]", s, f[1+i])
		}
		*d = time.Duration(us) * time.Microsecond
	}
	if err := t.Validate(); err != nil {
		return PSITrigger{}, err
	}
	return t, nil
}

// String is the kernel's syntax, e.g. "some 150000 1000000".
func (t PSITrigger) String() string {
	kind := "some"
	if t.Full {
		kind = "full"
	}
	return fmt.Sprintf("%s %d %d", kind, t.Stall.Microseconds(), t.Window.Microseconds())
}

// Validate checks the limits every kernel enforces; the privilege-dependent
// window limits are left to the kernel.
func (t PSITrigger) Validate() error {
	switch {
	case t.Window < time.Microsecond || t.Window > psiWindowMax:
		return fmt.Errorf("wakeup: PSI trigger window %s must be within 1µs..10s", t.Window)
	case t.Stall < time.Microsecond || t.Stall > t.Window:
		return fmt.Errorf("wakeup: PSI trigger stall %s must be within 1µs..the window %s", t.Stall, t.Window)
	case t.Window%time.Microsecond != 0 || t.Stall%time.Microsecond != 0:
		return fmt.Errorf("wakeup: PSI trigger %s/%s is not in whole microseconds", t.Stall, t.Window)
	}
	return nil
}

// Unprivileged returns the trigger the kernel accepts without
// CAP_SYS_RESOURCE: the window rounded up to a multiple of 2 s, the stall
// scaled to keep the same share of the window (150 ms in 1 s becomes 300 ms
// in 2 s). ok is false when t already is such a trigger.
func (t PSITrigger) Unprivileged() (u PSITrigger, ok bool) {
	if t.Window%psiUnprivilegedStep == 0 {
		return t, false
	}
	u = t
	u.Window = min((t.Window/psiUnprivilegedStep+1)*psiUnprivilegedStep, psiWindowMax)
	share := float64(t.Stall) / float64(t.Window)
	u.Stall = time.Duration(share * float64(u.Window)).Round(time.Microsecond)
	u.Stall = min(max(u.Stall, time.Microsecond), u.Window)
	return u, true
}
