// SPDX-License-Identifier: Apache-2.0

package nodelease

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Hold is what a fresh read of the node lease says of who acts on the
// node.
type Hold struct {
	// NoOther: no agent but self acts on the node now (the lease is gone,
	// held by nobody or by self, or its holder's time is up).
	NoOther bool
	// Until, when self holds the lease as read, is the end of the time in
	// which self may still write as the node's agent: the lease's renewal
	// plus its duration, less one renewal interval, as Elector.Acting
	// spares it (a write under way, a clock read late). From then on
	// another agent may take the lease over, so a writer that cannot renew
	// (an agent on its way out) must stop by then. Zero when self does not
	// hold the lease: there is no lease of its own for it to outlive.
	Until time.Time
}

// ReadHold reads node's lease in namespace fresh from the API server and
// says who acts on the node at now, for self (an agent without a lease of
// its own, a dry run, passes self ""). Each agent on a node reads the same
// clock, as in Elector.Plan.
func ReadHold(ctx context.Context, api LeaseGetter, namespace, node, self string, now time.Time) (Hold, error) {
	l, err := api.GetLease(ctx, namespace, Name(node))
	switch {
	case apierrors.IsNotFound(err):
		return Hold{NoOther: true}, nil
	case err != nil:
		return Hold{}, err
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if self != "" && holder == self {
		until := time.Time{}
		if expiry := expiresAt(l); !expiry.IsZero() {
			until = expiry.Add(-RenewInterval(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
		} else {
			// A lease of self's without a renewal or a duration has no time
			// left in it: it can be taken over at once.
			until = now
		}
		return Hold{NoOther: true, Until: until}, nil
	}
	return Hold{NoOther: holder == "" || !now.Before(expiresAt(l))}, nil
}

// ReadHold is ReadHold for this agent: the brake asks it before every
// write of its lift at exit, after Run has ended and nothing renews the
// lease any more, so that it stops while the lease, as read, is still its
// own (Hold.Until), and leaves the brake of an agent that took the lease
// over alone.
func (r *Runner) ReadHold(ctx context.Context) (Hold, error) {
	return ReadHold(ctx, r.o.API, r.o.Namespace, r.o.Node, r.o.Identity, r.o.Clock.Now())
}
