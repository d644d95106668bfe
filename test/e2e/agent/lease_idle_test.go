// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/evictd/evictd/pkg/nodelease"
)

// leaseWrite is one write of the lease as the API server's watch sent it:
// the renewal time and duration the agent wrote (the agent's own clock).
type leaseWrite struct {
	renewed  time.Time
	duration time.Duration
}

// TestNodeLeaseIdleWrites counts an idle agent's lease writes on the real
// API server's watch of its lease, over a number of its own renewals: at
// the idle pace, once per renewal interval of the lease it last wrote (a
// tenth sooner at most, its jitter), never for the echo of its own renewal
// on its own watch; a write at the active pace comes sooner only where the
// pace changes. The spacing is read from the renewal times the agent wrote,
// not the test's clock.
func TestNodeLeaseIdleWrites(t *testing.T) {
	m := newMemoryNode(t, "lease-idle")
	const active, idle = 3 * time.Second, 9 * time.Second
	const renewals = 6
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Watched before the agent starts: every write is an event.
	w, err := m.c.Admin.CoordinationV1().Leases(nodelease.FallbackNamespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", nodelease.Name(m.node.Name)).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The node holds about 530 MiB free: a threshold of 100 MiB is far, so
	// no pressure is near and the lease is at its idle pace.
	a := startLeaseAgentWith(t, m, "a", []string{"--eviction-hard=memory.available<100Mi,allocatableMemory.available<none,nodefs.available<none," +
		"nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none",
		"--node-lease-duration=" + active.String(), "--node-lease-idle-duration=" + idle.String()})
	exited := time.NewTicker(time.Second)
	defer exited.Stop()
	var writes []leaseWrite
	idleWrites := 0
	for idleWrites < renewals {
		select {
		case <-ctx.Done():
			t.Fatalf("%d lease writes seen (%d at the idle pace) before the deadline, waited for %d at the idle pace; agent's log:\n%s", len(writes), idleWrites, renewals, a.tail(20))
		case <-exited.C:
			if !a.alive() {
				t.Fatalf("the agent exited after %d lease writes:\n%s", len(writes), a.tail(20))
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the lease watch ended")
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			if !isLease || (ev.Type != watch.Added && ev.Type != watch.Modified) || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
				t.Fatalf("lease watch: %s %T", ev.Type, ev.Object)
			}
			d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
			writes = append(writes, leaseWrite{renewed: l.Spec.RenewTime.Time, duration: d})
			if d == idle {
				idleWrites++
			}
		}
	}
	for i := 1; i < len(writes); i++ {
		prev, cur := writes[i-1], writes[i]
		step := cur.renewed.Sub(prev.renewed)
		t.Logf("write %d: duration %v, %v after the previous", i, cur.duration, step.Round(time.Millisecond))
		if cur.duration < prev.duration {
			continue // pressure came near: the active pace at once
		}
		if least := nodelease.RenewInterval(prev.duration) * 9 / 10; step < least {
			t.Errorf("write %d came %v after the previous one (duration %v), sooner than its renewal interval less its jitter (%v): a write without a reason", i, step, prev.duration, least)
		}
	}
	if got := a.scrape().Value(t, "evictd_node_lease_held", nil); got != 1 {
		t.Errorf("evictd_node_lease_held = %v, want 1", got)
	}
}
