// SPDX-License-Identifier: Apache-2.0

package nodelease

import (
	"context"
	"testing"
	"time"
)

// TestReadHold: what the brake's ownership check reads of the lease. The
// holder's writes are bounded by the time it would still act under the
// lease as read (its renewal plus its duration, less a renewal interval,
// as Elector.Acting); another agent's live lease is not ours; a lease
// that is gone, held by nobody or expired is nobody's, with no bound.
func TestReadHold(t *testing.T) {
	h := newHarness(t)
	a, b := h.runner("evictd/a"), h.runner("evictd/b")
	ctx := context.Background()
	if got, err := a.ReadHold(ctx); err != nil || !got.NoOther || !got.Until.IsZero() {
		t.Errorf("no lease: ReadHold = %+v, %v; want nobody's, no bound", got, err)
	}
	h.round(a)
	renewed := h.clk.Now()
	h.clk.Step(5 * time.Second)
	want := renewed.Add(dur - RenewInterval(dur))
	if got, err := a.ReadHold(ctx); err != nil || !got.NoOther || !got.Until.Equal(want) {
		t.Errorf("the holder's ReadHold = %+v, %v; want its own until %s", got, err, want)
	}
	if got, err := b.ReadHold(ctx); err != nil || got.NoOther || !got.Until.IsZero() {
		t.Errorf("another agent's ReadHold while a holds the lease = %+v, %v; want not its own", got, err)
	}
	if got, err := ReadHold(ctx, h.api, ns, node, "", h.clk.Now()); err != nil || got.NoOther {
		t.Errorf("a dry run's ReadHold while a holds the lease = %+v, %v; want not its own", got, err)
	}
	h.clk.SetTime(renewed.Add(dur))
	if got, err := b.ReadHold(ctx); err != nil || !got.NoOther || !got.Until.IsZero() {
		t.Errorf("another agent's ReadHold once a's lease expired = %+v, %v; want nobody's, no bound", got, err)
	}
	// A lease held by nobody (its holder cleared) is nobody's for a dry
	// run too, with no bound: it holds no lease of its own to outlive.
	h.api.mu.Lock()
	h.api.lease.Spec.HolderIdentity = ptr("")
	h.api.mu.Unlock()
	if got, err := ReadHold(ctx, h.api, ns, node, "", h.clk.Now()); err != nil || !got.NoOther || !got.Until.IsZero() {
		t.Errorf("a dry run's ReadHold of a lease held by nobody = %+v, %v; want nobody's, no bound", got, err)
	}
	// A lease of a's with no renewal or duration has no time left in it:
	// a's writes end now.
	h.api.mu.Lock()
	h.api.lease.Spec.HolderIdentity = ptr("evictd/a")
	h.api.lease.Spec.RenewTime = nil
	h.api.mu.Unlock()
	if got, err := a.ReadHold(ctx); err != nil || !got.NoOther || !got.Until.Equal(h.clk.Now()) {
		t.Errorf("the holder's ReadHold of its lease with no renewal = %+v, %v; want its own until now, %s", got, err, h.clk.Now())
	}
}
