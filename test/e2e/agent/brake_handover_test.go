// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestNodeBrakeExitLiftWithinLease: agent a holds the node lease (3 s, no
// longer renewed once it is on its way out) and has the memory brake on in
// an episode that cannot end (the hog is under a PodDisruptionBudget that
// allows no disruption); b waits for the lease. a is sent SIGTERM, and its
// exit lift's ownership check reads the lease while it is still a's; a
// then stalls before its write (the proxy between a and the API server
// holds the check's answer, as a GC pause or a starved CPU would hold a),
// while the lease runs out, b takes it over and acts in the episode with
// its brake on. a's write, were it made, would lift b's brake: a must see
// that the lease it read may have passed, and leave the brake on. Every
// change of the Node, through a watch, is checked from a's SIGTERM until a
// mark written after a's exit.
func TestNodeBrakeExitLiftWithinLease(t *testing.T) {
	// maxHold bounds the stall: under a's exit try's own bound (10 s), so
	// that a gets the answer and goes on to its write; it is ended at once
	// when b's brake is on.
	const maxHold = 8 * time.Second
	m := newMemoryNode(t, "liftlease")
	cfg, kubeconfig := m.c.EvictdNodeToken(t, m.node.Name)
	hog := pdbHeldHog(t, m)

	// a reaches the API server through the proxy, with the same pod-bound
	// token; armed, the proxy holds the answer of a's next read of the
	// lease (not its watch): the exit lift's ownership check.
	var armed, held atomic.Bool
	leasePath := "/leases/" + nodelease.Name(m.node.Name)
	proxy, err := framework.NewAPIProxy(m.c.Server, m.c.CAData, func(r *http.Request) time.Duration {
		if armed.Load() && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, leasePath) && r.URL.Query().Get("watch") == "" &&
			held.CompareAndSwap(false, true) {
			return maxHold
		}
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	proxyKubeconfig := filepath.Join(t.TempDir(), "a.kubeconfig")
	if err := proxy.WriteKubeconfig(proxyKubeconfig, cfg.BearerToken); err != nil {
		t.Fatal(err)
	}

	a, b, w := startHandoverPair(t, m, proxyKubeconfig, kubeconfig, hog)

	var lifts []string
	seen := func(n *corev1.Node) {
		if taint, cond := memoryBrake(n); !taint || !cond {
			lifts = append(lifts, fmt.Sprintf("rv %s: taint %v, condition %v", n.ResourceVersion, taint, cond))
		}
	}
	w.sync(30*time.Second, seen)
	lifts = nil // the watch is now at a's SIGTERM
	armed.Store(true)
	if err := syscall.Kill(a.p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// b takes the lease over once a's runs out, and acts with its brake.
	bActs := b.waitLog(60*time.Second, "acting on this node: holding its lease", nil)
	b.waitLog(60*time.Second, "pressure episode started", func(l logEntry) bool { return l.Str("resource") == "memory" && !l.TS.Before(bActs.TS) })
	if err := waitMetric(b, 60*time.Second, "evictd_node_brake_on", map[string]string{"resource": "memory"}, 1); err != nil {
		t.Fatalf("b: %v", err)
	}
	// a resumes with the lease as it read it.
	proxy.ReleaseHeld()
	a.waitLog(60*time.Second, "stopped", nil)
	a.ended = true
	if killed, code, err := a.p.Stop(stopGrace); killed || code != 0 || err != nil {
		t.Errorf("a after SIGTERM: killed %v, exit code %d, %v", killed, code, err)
	}
	final := w.sync(30*time.Second, seen)

	calls := proxy.HeldCalls()
	if len(calls) != 1 || calls[0].Status != http.StatusOK || calls[0].Answered.IsZero() {
		t.Fatalf("the proxy held %+v; want one read of the lease, answered 200, its answer given to a (the stall this test is about)", calls)
	}
	t.Logf("a's exit check read the lease at %s; its answer reached a %s later (b acted at %s)",
		calls[0].Upstream.Format(time.StampMilli), calls[0].Answered.Sub(calls[0].Upstream).Round(time.Millisecond), bActs.TS.Format(time.StampMilli))
	checkExitLeftBrake(t, a, b, final, lifts, "after the lease it read could have passed to b",
		"leaving the node brake on at exit: the node lease this agent holds may pass to another evictd before the lift's write; the next agent to act lifts it once it has judged the node")
}

// TestNodeBrakeRestartKeepsBrake: an agent that starts on a node where an
// earlier agent, killed mid-episode, left the memory brake, and that sees
// no pressure, keeps the brake for the pressure transition period from its
// first pass as the acting agent, as the kubelet keeps its condition that
// long after it last saw the pressure, and then lifts it. The pressure the
// brake was put on for may have held until the earlier agent died. The
// time kept is evictd's own: the log's timestamps of "acting" and of
// "node brake lifted"; the Node, through a watch, shows the brake on until
// that lift.
func TestNodeBrakeRestartKeepsBrake(t *testing.T) {
	const period = 10 * time.Second
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "restart", MemoryBytes: nodeMemory})
	_, kubeconfig := c.EvictdNodeToken(t, node.Name)
	putLeftover(t, c, node.Name)
	w := watchNode(t, c, node.Name)
	if taint, cond := memoryBrake(w.last); !taint || !cond {
		t.Fatalf("the leftover is not on the Node: taint %v, condition %v", taint, cond)
	}
	e := startEvictdWith(t, c, node, evictdSetup{kubeconfig: kubeconfig},
		// The leftover's effect, as the agent killed with the same flags
		// left it.
		append([]string{"--node-brake=true", "--node-brake-taint-effect=NoSchedule", "--eviction-pressure-transition-period=" + period.String(),
			"--node-lease-duration=3s"}, memoryFlags...)...)
	acts := e.waitLog(60*time.Second, "acting on this node: holding its lease", nil)
	w.until(period+60*time.Second, "lost the leftover brake", noEvictdBrake, nil)
	lifted := e.waitLog(30*time.Second, "node brake lifted", func(l logEntry) bool { return l.Str("resource") == "memory" })
	kept := lifted.TS.Sub(acts.TS)
	t.Logf("the brake found on was lifted %s after the agent began acting (transition period %s)", kept.Round(time.Millisecond), period)
	if kept < period {
		t.Errorf("the brake found on was lifted %s after the agent began acting (%s, lifted %s); want it kept for the transition period %s",
			kept.Round(time.Millisecond), stamp(acts.TS), stamp(lifted.TS), period)
	}
	if got := e.find("keeping the node brake found on: the pressure it was put on for may still hold; lifted once no episode of the resource has been open for the pressure transition period"); len(got) == 0 {
		t.Errorf("the agent did not say it kept the brake found on:\n%s", e.tail(20))
	}
	if got := e.find("pressure episode started"); len(got) > 0 {
		t.Errorf("an episode started on a node without pressure: %s", got[0].Raw)
	}
}
