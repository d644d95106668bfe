// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/nodelease"
	"github.com/evictd/evictd/test/e2e/agent/evictdproc"
	"github.com/evictd/evictd/test/e2e/framework"
)

// leaseDuration is long enough that the one figure the test bounds from
// above (the take-over after a release, evictd's own timestamps) has many
// seconds of slack on a loaded machine, and short enough that the take-over
// after a SIGKILL does not make the test slow. It is renewed every third of
// it (nodelease.RenewInterval).
const leaseDuration = 15 * time.Second

// startLeaseAgent starts one more evictd on m's node, with the shipped
// RBAC's token, and does not wait for it to be ready (a waiting agent never
// is). Its cleanup stops it if it still runs; the test checks each exit.
func startLeaseAgent(t *testing.T, m *memoryNode, name string) *evictd {
	t.Helper()
	return startLeaseAgentWith(t, m, name, memoryFlags)
}

// startLeaseAgentWith is startLeaseAgent with flags of its own for
// memoryFlags (thresholds, lease durations: a flag given again wins).
func startLeaseAgentWith(t *testing.T, m *memoryNode, name string, flags []string) *evictd {
	t.Helper()
	bin := framework.RequireBinary(t, "evictd")
	args := append([]string{
		"--kubeconfig=" + m.c.EvictdKubeconfig, "--node-name=" + m.node.Name,
		"--host-root=" + m.node.HostRoot, "--cgroup-root=" + m.node.CgroupRoot, "--node-cgroup=" + m.node.CgroupRoot,
		"--eviction-pressure-transition-period=2s", "--node-lease-duration=" + leaseDuration.String(),
		"--node-brake=false", // the unbound test token may not write the Node
	}, flags...)
	p, err := evictdproc.Start(evictdproc.Options{Bin: bin, Args: args, LogPath: filepath.Join(t.TempDir(), name+".log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started %s: %s", name, strings.Join(p.Args(), " "))
	e := &evictd{t: t, p: p}
	t.Cleanup(func() {
		if !p.Exited() {
			_, _, _ = p.Stop(stopGrace)
		}
		if t.Failed() {
			t.Logf("%s's log (last 40 lines):\n%s", name, p.Tail(40))
		}
	})
	return e
}

func leaseHeld(t *testing.T, e *evictd) float64 {
	t.Helper()
	return e.scrape().Value(t, "evictd_node_lease_held", nil)
}

func isReady(code int, _ string) bool { return code == http.StatusOK }

func waitingFor(holder string) func(int, string) bool {
	return func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "another evictd ("+holder+") acts on this node; waiting for its lease")
	}
}

// TestNodeLeaseOneAgentActs: two, then three evictd on one node. One acts,
// the others wait not ready, naming the holder in /readyz, their log and
// evictd_node_lease_held. A SIGTERMed holder releases the lease and the
// next agent takes over at once; a SIGKILLed one is taken over a lease
// duration after its last renewal. Under pressure only the holder evicts:
// the waiting agent neither evicts nor starts an episode (whose Events it
// would write).
func TestNodeLeaseOneAgentActs(t *testing.T) {
	m := newMemoryNode(t, "lease")
	ctx := context.Background()
	lease := "evictd-" + m.node.Name

	a := startLeaseAgent(t, m, "a")
	a.waitReadyz(60*time.Second, "became ready", isReady)
	aID := a.waitLog(30*time.Second, "acting on this node: holding its lease", nil).Str("identity")
	b := startLeaseAgent(t, m, "b")
	_, _, body := b.waitReadyz(60*time.Second, "said it waits for a's lease", waitingFor(aID))
	t.Logf("b's /readyz: %s", body)
	b.waitLog(30*time.Second, "not acting: another evictd acts on this node", func(l logEntry) bool { return l.Str("holder") == aID })
	if got := leaseHeld(t, a); got != 1 {
		t.Errorf("a: evictd_node_lease_held = %v, want 1", got)
	}
	if got := leaseHeld(t, b); got != 0 {
		t.Errorf("b: evictd_node_lease_held = %v, want 0", got)
	}
	l, err := m.c.Admin.CoordinationV1().Leases(nodelease.FallbackNamespace).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != aID {
		t.Errorf("lease holder %v, want %s", l.Spec.HolderIdentity, aID)
	}
	if refs := l.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != m.node.Name {
		t.Errorf("lease owner references %+v, want the Node %s", refs, m.node.Name)
	}
	// The runbook's check (EvictdNodeLeaseWaiting), as written, with the
	// real kubectl: it names the holder.
	if got := runbookLeaseHolder(t, m.c, m.node.Name); got != aID {
		t.Errorf("docs/runbook.md's lease check printed %q, want the holder %s", got, aID)
	}

	// SIGTERM: a releases the lease on its way out; b takes over at once.
	killed, code, err := a.p.Stop(stopGrace)
	if killed || code != 0 || err != nil {
		t.Fatalf("a after SIGTERM: killed %v, exit code %d, %v", killed, code, err)
	}
	a.waitLog(10*time.Second, "released the node lease", nil)
	// Its delete's start, not the line after it returned: b may see the
	// delete and log its acting before a logs that the delete returned.
	released := a.waitLog(10*time.Second, "releasing the node lease", nil)
	b.waitReadyz(60*time.Second, "became ready after a's release", isReady)
	bActs := b.waitLog(30*time.Second, "acting on this node: holding its lease", nil)
	bID := bActs.Str("identity")
	// By evictd's own timestamps (one host clock): b acts after a let go,
	// never before, and sooner than it could have by the lease expiring.
	// a renewed at most a renewal interval before it released, so without
	// the release b could not have acted for a lease duration minus that
	// interval; the watch event of the release is what lets it act sooner.
	took := bActs.TS.Sub(released.TS)
	t.Logf("b acting %s after a released the lease (SIGTERM, lease %s)", took.Round(time.Millisecond), leaseDuration)
	if took < 0 {
		t.Errorf("b acted at %s, before a released the lease at %s: two agents acted at once", stamp(bActs.TS), stamp(released.TS))
	}
	if expiry := leaseDuration - nodelease.RenewInterval(leaseDuration); took >= expiry {
		t.Errorf("b acted %s after a released the lease, want sooner than the %s a held lease could still have run: b waited for expiry, not the release", took, expiry)
	}

	// SIGKILL: b leaves its lease behind; c takes over one lease duration
	// after b's last renewal, once it sees b's process gone.
	c := startLeaseAgent(t, m, "c")
	c.waitReadyz(60*time.Second, "said it waits for b's lease", waitingFor(bID))
	if err := syscall.Kill(b.p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	// b's last renewal, as the API server holds it once b is dead: what c
	// owes it. b's process is gone, which c sees on this host, so c owes
	// it the active lease duration from that renewal (--node-lease-duration,
	// whatever pace b renewed at), and cannot have taken the lease over yet.
	l, err = m.c.Admin.CoordinationV1().Leases(nodelease.FallbackNamespace).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != bID || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		t.Fatalf("lease just after b's SIGKILL: holder %v, renewed %v, duration %v; want b's (%s): the lease was taken from b while it lived", l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds, bID)
	}
	renewed := l.Spec.RenewTime.Time
	expiry := renewed.Add(min(leaseDuration, time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second))
	ready, _, _ := c.waitReadyz(leaseDuration+60*time.Second, "became ready after b's lease expired", isReady)
	cActs := c.waitLog(30*time.Second, "acting on this node: holding its lease", nil)
	t.Logf("c ready %s, acting %s after b was killed (SIGKILL, lease %s renewed every %s; b's last renewal %s before the kill, so %s owed after it)",
		ready.Sub(killedAt).Round(time.Millisecond), cActs.TS.Sub(killedAt).Round(time.Millisecond), leaseDuration, nodelease.RenewInterval(leaseDuration),
		killedAt.Sub(renewed).Round(time.Millisecond), expiry.Sub(killedAt).Round(time.Millisecond))
	// Lower bounds only, which no load can break, and exact: c acts no
	// sooner than b's last renewal plus the lease, by evictd's own log and
	// by the acquisition c wrote in the lease (its clock when it decided).
	if cActs.TS.Before(expiry) {
		t.Errorf("c acted at %s, %s before b's lease (renewed %s) expired at %s", stamp(cActs.TS), expiry.Sub(cActs.TS), stamp(renewed), stamp(expiry))
	}
	l, err = m.c.Admin.CoordinationV1().Leases(nodelease.FallbackNamespace).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cID := cActs.Str("identity")
	switch {
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != cID || l.Spec.AcquireTime == nil:
		t.Errorf("lease after c acted: holder %v, acquired %v; want c's (%s)", l.Spec.HolderIdentity, l.Spec.AcquireTime, cID)
	case l.Spec.AcquireTime.Time.Before(expiry):
		t.Errorf("c acquired the lease at %s, %s before b's lease (renewed %s) expired at %s", stamp(l.Spec.AcquireTime.Time), expiry.Sub(l.Spec.AcquireTime.Time), stamp(renewed), stamp(expiry))
	}

	// Pressure with a waiting agent beside the holder: only the holder evicts.
	d := startLeaseAgent(t, m, "d")
	d.waitReadyz(60*time.Second, "said it waits for c's lease", waitingFor(cID))
	_, hog := m.startHog(t, hogSpec(50, 600))
	evs := waitEvictions(t, c, 3, evictionTimeout)
	c.waitLog(60*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[len(evs)-1].TS) })
	if got := podsOf(evs); len(got) < 3 || got[len(got)-1] != podKey(hog) {
		t.Errorf("c evicted %v, want the memory scenario's victims ending with the hog", got)
	}
	for _, msg := range []string{"evicted pod", "pressure episode started", "threshold met"} {
		if got := d.find(msg); len(got) > 0 {
			t.Errorf("the waiting agent d logged %q %d times: it must not act; first: %s", msg, len(got), got[0].Raw)
		}
	}
	if got := d.scrape().Evictions("evicted"); got > 0 {
		t.Errorf("d: evictd_evictions_total{result=evicted} = %v, want none", got)
	}
	// d still observes: its signal shows the pressure it did not act on.
	if got := d.scrape().Value(t, "evictd_signal_available_bytes", map[string]string{"signal": "memory.available"}); got <= 0 {
		t.Errorf("d: evictd_signal_available_bytes{memory.available} = %v, want an observed value", got)
	}

	// The holder first: the waiting agent may take over the lease it
	// releases in the moment before its own SIGTERM, and must release
	// it too, even when that SIGTERM cuts its acquisition short (the API
	// server may have stored what the agent never saw answered; a map's
	// random order once left the lease so).
	for _, x := range []struct {
		name string
		e    *evictd
	}{{"c", c}, {"d", d}} {
		if killed, code, err := x.e.p.Stop(stopGrace); killed || code != 0 || err != nil {
			t.Errorf("%s after SIGTERM: killed %v, exit code %d, %v", x.name, killed, code, err)
		}
	}
	// Nothing left behind once the last agent has gone.
	if _, err := m.c.Admin.CoordinationV1().Leases(nodelease.FallbackNamespace).Get(ctx, lease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease %s after every agent stopped: %v, want NotFound", lease, err)
	}
}

// TestNodeLeaseRBAC: the shipped manifest's Role lets evictd's
// ServiceAccount do exactly what pkg/nodelease does with leases in its own
// namespace (evictd-system), and nothing with leases anywhere else:
// kube-node-lease, where the kubelets' heartbeats are, least of all.
func TestNodeLeaseRBAC(t *testing.T) {
	c := framework.Start(t)
	other := c.Namespace(t, "lease-rbac")
	own := nodelease.FallbackNamespace
	review := func(ns, verb string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.EvictdClient.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: "coordination.k8s.io", Resource: "leases",
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview %s leases in %q: %v", verb, ns, err)
		}
		return r.Status.Allowed
	}
	for _, verb := range []string{"get", "create", "update", "delete", "watch"} {
		if !review(own, verb) {
			t.Errorf("%s leases in %s is denied; pkg/nodelease needs it", verb, own)
		}
		for _, ns := range []string{"kube-node-lease", other, metav1.NamespaceAll} {
			if review(ns, verb) {
				t.Errorf("%s leases in %q is allowed; only %s's are evictd's", verb, ns, own)
			}
		}
	}
	for _, verb := range []string{"list", "patch", "deletecollection"} {
		if review(own, verb) {
			t.Errorf("%s leases in %s is allowed; no code uses it", verb, own)
		}
	}
}

// runbookLeaseHolder runs docs/runbook.md's command that reads who holds a
// node's Lease, verbatim but for its NODE, with the real kubectl as the
// cluster's admin, and returns what it prints.
func runbookLeaseHolder(t *testing.T, c *framework.Cluster, node string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(kubectl [^`]*get lease evictd-NODE[^`]*)`").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/runbook.md shows no `kubectl ... get lease evictd-NODE ...` check")
	}
	kubectl, err := framework.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", strings.Replace(strings.ReplaceAll(string(m[1]), "NODE", node), "kubectl", kubectl, 1))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", m[1], err, out)
	}
	return strings.TrimSpace(string(out))
}
