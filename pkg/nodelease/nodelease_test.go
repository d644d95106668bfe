// SPDX-License-Identifier: Apache-2.0

package nodelease

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/install"
)

const (
	ns   = "evictd-system"
	node = "node-a"
	dur  = 30 * time.Second
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// store is an API server's Lease storage in miniature: resourceVersions,
// conflicts, AlreadyExists, delete preconditions, and injected errors.
type store struct {
	mu    sync.Mutex
	lease *coordinationv1.Lease
	rv    int
	// fail, when set, is returned by every call.
	fail error
	// writes counts successful creates and updates; reads, gets.
	writes, reads int
	// lost, when set, is returned by a create that was stored: the
	// answer lost, as when the caller's context ends in flight.
	lost error
	// watches, when echo is set, get every write as an API server's watch
	// sends it; without echo a watch never fires (rounds driven by hand).
	echo    bool
	watches []*watch.FakeWatcher
}

// sent tells the watches of a write (s.mu held).
func (s *store) sent(t watch.EventType, l *coordinationv1.Lease) {
	for _, w := range s.watches {
		w.Action(t, l.DeepCopy())
	}
}

var leaseGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (s *store) GetLease(_ context.Context, _, name string) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.fail != nil {
		return nil, s.fail
	}
	if s.lease == nil {
		return nil, apierrors.NewNotFound(leaseGR, name)
	}
	return s.lease.DeepCopy(), nil
}

func (s *store) CreateLease(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	if s.lease != nil {
		return nil, apierrors.NewAlreadyExists(leaseGR, l.Name)
	}
	s.rv++
	s.writes++
	s.lease = l.DeepCopy()
	s.lease.ResourceVersion = strconv.Itoa(s.rv)
	s.lease.UID = types.UID("uid-" + strconv.Itoa(s.rv))
	s.sent(watch.Added, s.lease)
	if s.lost != nil {
		return nil, s.lost
	}
	return s.lease.DeepCopy(), nil
}

func (s *store) UpdateLease(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	if s.lease == nil {
		return nil, apierrors.NewNotFound(leaseGR, l.Name)
	}
	if l.ResourceVersion != s.lease.ResourceVersion {
		return nil, apierrors.NewConflict(leaseGR, l.Name, nil)
	}
	s.rv++
	s.writes++
	uid := s.lease.UID
	s.lease = l.DeepCopy()
	s.lease.UID = uid
	s.lease.ResourceVersion = strconv.Itoa(s.rv)
	s.sent(watch.Modified, s.lease)
	if s.lost != nil {
		return nil, s.lost
	}
	return s.lease.DeepCopy(), nil
}

func (s *store) DeleteLease(_ context.Context, _, name string, opts metav1.DeleteOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.lease == nil {
		return apierrors.NewNotFound(leaseGR, name)
	}
	if p := opts.Preconditions; p != nil && (p.ResourceVersion != nil && *p.ResourceVersion != s.lease.ResourceVersion || p.UID != nil && *p.UID != s.lease.UID) {
		return apierrors.NewConflict(leaseGR, name, nil)
	}
	s.sent(watch.Deleted, s.lease)
	s.lease = nil
	return nil
}

func (s *store) WatchLeases(ctx context.Context, _ string, _ metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.echo {
		return watch.NewFake(), nil // rounds are driven by hand here
	}
	// Buffered, as the API server's watch is: a writer never waits for
	// the agent to read its echo.
	w := watch.NewFakeWithChanSize(1<<16, false)
	s.watches = append(s.watches, w)
	if s.lease != nil {
		w.Action(watch.Added, s.lease.DeepCopy())
	}
	// As the API client's watch: it ends with its context.
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.watches {
			if x == w {
				s.watches = append(s.watches[:i], s.watches[i+1:]...)
				break
			}
		}
		w.Stop()
	}()
	return w, nil
}

func (s *store) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil || s.lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *s.lease.Spec.HolderIdentity
}

type harness struct {
	t     *testing.T
	clk   *clocktesting.FakeClock
	api   *store
	pods  []*v1.Pod
	nodeU types.UID
	// idle is the runners' idle duration (0: one pace); synced, whether
	// the pod list is complete; jitter, the runners' jitter.
	idle   time.Duration
	synced bool
	jitter func() float64
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, clk: clocktesting.NewFakeClock(t0), api: &store{}, nodeU: "node-uid"}
}

func (h *harness) runner(identity string) *Runner {
	h.t.Helper()
	r, err := NewRunner(Options{API: h.api, Namespace: ns, Node: node, Identity: identity, Duration: dur, IdleDuration: h.idle, Clock: h.clk,
		Pods: func() []*v1.Pod { return h.pods }, NodeUID: func() types.UID { return h.nodeU }, Synced: func() bool { return h.synced },
		Jitter: h.jitter})
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// pod adds an agent's pod, of the DaemonSet controller, created at created.
func (h *harness) pod(identity string, controller types.UID, created time.Time) {
	nsName := strings.SplitN(identity, "/", 2)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName[0], Name: nsName[1], CreationTimestamp: metav1.NewTime(created)}}
	if controller != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "evictd", UID: controller, Controller: ptr(true)}}
	}
	h.pods = append(h.pods, p)
}

// round runs one round of r, its cached lease first brought up to date as
// its watch does between rounds (an API server's watch echoes every write,
// the agent's own included).
func (h *harness) round(r *Runner) {
	h.api.mu.Lock()
	var l *coordinationv1.Lease
	if h.api.lease != nil {
		l = h.api.lease.DeepCopy()
	}
	h.api.mu.Unlock()
	r.mu.Lock()
	r.cached = l
	r.mu.Unlock()
	r.round(context.Background())
}

func wantActing(t *testing.T, r *Runner, want bool) {
	t.Helper()
	if got := r.Acting(); got != want {
		t.Fatalf("%s acting = %v, want %v (check: %v)", r.o.Identity, got, want, r.Check())
	}
	if err := r.Check(); (err == nil) != want {
		t.Fatalf("%s check = %v, want ready %v", r.o.Identity, err, want)
	}
}

func wantReason(t *testing.T, r *Runner, parts ...string) {
	t.Helper()
	err := r.Check()
	if err == nil {
		t.Fatalf("%s is ready, want not ready with %q", r.o.Identity, parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s's reason %q lacks %q", r.o.Identity, err, p)
		}
	}
}

func TestAcquireRenewAndWait(t *testing.T) {
	h := newHarness(t)
	a, b := h.runner("evictd/a"), h.runner("other/b")
	wantReason(t, a, "not acquired yet")
	h.round(a)
	wantActing(t, a, true)
	l := h.api.lease
	if l.Name != "evictd-"+node || l.Namespace != ns || *l.Spec.LeaseDurationSeconds != 30 || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("created lease %s/%s duration %v renew %v", l.Namespace, l.Name, *l.Spec.LeaseDurationSeconds, l.Spec.RenewTime)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != "node-uid" || l.OwnerReferences[0].Name != node {
		t.Fatalf("owner references %+v, want the Node", l.OwnerReferences)
	}
	select {
	case <-a.Acquired():
	default:
		t.Fatal("Acquired not closed once acting")
	}

	h.round(b)
	wantActing(t, b, false)
	wantReason(t, b, "another evictd (evictd/a) acts on this node; waiting for its lease evictd-system/evictd-node-a, held until 2026-05-01T12:00:30Z")

	// The holder renews from the lease it wrote; the other keeps waiting
	// while renewals go on.
	for i := 1; i <= 6; i++ {
		h.clk.Step(RenewInterval(dur))
		h.round(a)
		h.round(b)
		wantActing(t, a, true)
		wantActing(t, b, false)
	}
	if h.api.holder() != "evictd/a" {
		t.Fatalf("holder %q", h.api.holder())
	}
	if got := *h.api.lease.Spec.LeaseTransitions; got != 0 {
		t.Errorf("transitions %d after renewals only", got)
	}
}

func TestExpiryTakeOver(t *testing.T) {
	h := newHarness(t)
	a, b := h.runner("evictd/a"), h.runner("evictd/b")
	h.round(a)
	h.round(b)
	// a stops renewing (killed, or the API unreachable for it): it stops
	// acting one renewal interval before the lease expires...
	h.clk.Step(dur - RenewInterval(dur))
	wantActing(t, a, false)
	wantReason(t, a, "was not renewed in time")
	h.round(b)
	wantActing(t, b, false)
	// ...and b takes over only once it has.
	h.clk.Step(RenewInterval(dur) - time.Millisecond)
	h.round(b)
	wantActing(t, b, false)
	h.clk.Step(time.Millisecond)
	h.round(b)
	wantActing(t, b, true)
	if got := *h.api.lease.Spec.LeaseTransitions; got != 1 {
		t.Errorf("transitions %d after one take-over, want 1", got)
	}
	// a, back, finds b the holder and waits.
	h.round(a)
	wantActing(t, a, false)
	wantReason(t, a, "another evictd (evictd/b)")
}

func TestSameIdentityTakesAtOnce(t *testing.T) {
	h := newHarness(t)
	h.round(h.runner("evictd/a"))
	h.clk.Step(time.Second)
	// The container restarted: a new process, the same pod, mid-lease.
	again := h.runner("evictd/a")
	h.round(again)
	wantActing(t, again, true)
	if !h.api.lease.Spec.AcquireTime.Time.Equal(t0) {
		t.Errorf("acquireTime %v, want the pod's first acquisition %v", h.api.lease.Spec.AcquireTime, t0)
	}
}

func TestReleaseLetsTheNextTakeOver(t *testing.T) {
	h := newHarness(t)
	a, b := h.runner("evictd/a"), h.runner("evictd/b")
	h.round(a)
	h.round(b)
	a.Release()
	wantActing(t, a, false)
	if h.api.lease != nil {
		t.Fatal("the lease is still there after Release")
	}
	h.round(b)
	wantActing(t, b, true)

	// A waiter's Release deletes nothing.
	h.round(a)
	a.Release()
	if h.api.holder() != "evictd/b" {
		t.Fatalf("holder %q after the waiter's release, want evictd/b", h.api.holder())
	}
}

// An acquisition cut short by the exit (SIGTERM cancels the round's
// context) may still have been stored: Release reads the lease and deletes
// it, or the next agent would wait the lease out. An error the API server
// answered stored nothing, and the waiter's Release leaves the lease alone.
func TestReleaseAfterAnAcquisitionCutShort(t *testing.T) {
	h := newHarness(t)
	a, b := h.runner("evictd/a"), h.runner("evictd/b")
	h.api.lost = context.Canceled
	h.round(a)
	h.api.lost = nil
	wantActing(t, a, false)
	if h.api.holder() != "evictd/a" {
		t.Fatalf("holder %q, want the create stored for evictd/a", h.api.holder())
	}
	a.Release()
	if h.api.lease != nil {
		t.Fatalf("lease still held by %q after the Release of an agent whose create was cut short", h.api.holder())
	}
	h.round(b)
	wantActing(t, b, true)

	// An answered error: a knows it holds nothing, and reads nothing.
	h.api.fail = apierrors.NewServiceUnavailable("etcd is down")
	h.round(a)
	h.api.fail = nil
	reads := h.api.reads
	a.Release()
	if h.api.reads != reads {
		t.Errorf("the Release of a waiter whose last call was answered read the lease %d times, want none", h.api.reads-reads)
	}
	if h.api.holder() != "evictd/b" {
		t.Fatalf("holder %q after the Release of a waiter, want evictd/b", h.api.holder())
	}
}

// A take-over cut short by the exit may have been stored too, though the
// agent last saw the other agent's lease: Release reads the lease, finds
// it its own, and deletes it. A lease gone by then is no failure.
func TestReleaseAfterATakeOverCutShort(t *testing.T) {
	h := newHarness(t)
	a, b := h.runner("evictd/a"), h.runner("evictd/b")
	var failed int
	a.o.Failed = func() { failed++ }
	h.round(b)
	h.clk.Step(dur + time.Second) // b is gone; its lease expired
	h.api.lost = context.Canceled
	h.round(a)
	h.api.lost = nil
	if h.api.holder() != "evictd/a" {
		t.Fatalf("holder %q, want the take-over stored for evictd/a", h.api.holder())
	}
	a.Release()
	if h.api.lease != nil {
		t.Fatalf("lease still held by %q after the Release of an agent whose take-over was cut short", h.api.holder())
	}
	// Again, the lease deleted meanwhile (an uninstall's cleanup).
	h.round(b)
	h.clk.Step(dur + time.Second)
	h.api.lost = context.Canceled
	h.round(a)
	h.api.lost = nil
	h.api.mu.Lock()
	h.api.lease = nil
	h.api.mu.Unlock()
	failed = 0 // the round's lost write is one
	a.Release()
	if failed != 0 {
		t.Errorf("%d failed Lease calls counted for a Release that found the lease gone; want none", failed)
	}
}

func TestReleaseAfterARequestIsWritten(t *testing.T) {
	h := newHarness(t)
	a := h.runner("evictd/a")
	h.round(a)
	// Someone wrote since a's renewal: the conditional delete conflicts,
	// a reads again and deletes that version.
	l := h.api.lease.DeepCopy()
	l.Annotations = map[string]string{AnnotationHandover: "evictd/x"}
	if _, err := h.api.UpdateLease(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	a.Release()
	if h.api.lease != nil {
		t.Fatalf("lease still held by %q", h.api.holder())
	}
}

// TestReleaseLeavesALeaseTakenOverMeanwhile: an agent that last saw
// itself the holder (frozen, cut off from the API server) while its lease
// expired and another agent took it over releases at exit from what it
// last saw: its delete, conditional on that version, is refused, it reads
// the lease again, finds another holder, and leaves the lease to it.
func TestReleaseLeavesALeaseTakenOverMeanwhile(t *testing.T) {
	h := newHarness(t)
	a, b := h.runner("evictd/a"), h.runner("evictd/b")
	h.round(a)
	h.clk.Step(dur + time.Second)
	h.round(b)
	wantActing(t, b, true)
	reads := h.api.reads
	a.Release()
	if h.api.holder() != "evictd/b" {
		t.Fatalf("after the Release of an agent whose lease another took over meanwhile the lease is held by %q; want evictd/b's kept", h.api.holder())
	}
	if h.api.reads == reads {
		t.Error("the Release did not read the lease again after its conditional delete: the test does not reach the conflict")
	}
	wantActing(t, b, true)
}

func TestHandoverToANewerPodOfTheSameDaemonSet(t *testing.T) {
	h := newHarness(t)
	h.pod("evictd/old", "ds-1", t0.Add(-time.Hour))
	h.pod("evictd/new", "ds-1", t0)
	old, surge := h.runner("evictd/old"), h.runner("evictd/new")
	h.round(old)
	writes := h.api.writes
	// The surged pod asks; the old one's next round (its cached lease now
	// conflicts) hands over, and stops acting.
	h.round(surge)
	if got := h.api.lease.Annotations[AnnotationHandover]; got != "evictd/new" {
		t.Fatalf("handover annotation %q, want evictd/new", got)
	}
	wantReason(t, surge, "another evictd (evictd/old)", "asked it to hand over")
	// Asked once: its next round, the old holder not yet at its own,
	// writes nothing.
	h.round(surge)
	h.round(old)
	wantActing(t, old, false)
	wantReason(t, old, "handed the node lease evictd-system/evictd-node-a over to evictd/new")
	if h.api.holder() != "evictd/new" {
		t.Fatalf("holder %q after the handover, want evictd/new", h.api.holder())
	}
	if _, ok := h.api.lease.Annotations[AnnotationHandover]; ok {
		t.Error("the handover annotation is still there after the handover")
	}
	h.round(surge)
	wantActing(t, surge, true)
	if h.api.writes-writes != 3 {
		t.Errorf("%d writes for a handover, want 3 (request, transfer, renewal)", h.api.writes-writes)
	}
	// The old pod does not ask back, nor take it.
	h.round(old)
	wantActing(t, old, false)
	if h.api.holder() != "evictd/new" {
		t.Fatalf("holder %q", h.api.holder())
	}
}

func TestNoHandoverBetweenInstalls(t *testing.T) {
	for _, tc := range []struct {
		name     string
		new, old types.UID
		newer    bool
	}{
		{"another DaemonSet", "ds-2", "ds-1", true},
		{"an older pod of the same DaemonSet", "ds-1", "ds-1", false},
		{"no controller", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			created := t0.Add(-time.Minute)
			if tc.newer {
				created = t0.Add(time.Minute)
			}
			h.pod("a/first", tc.old, t0)
			h.pod("b/second", tc.new, created)
			first, second := h.runner("a/first"), h.runner("b/second")
			h.round(first)
			h.round(second)
			if _, ok := h.api.lease.Annotations[AnnotationHandover]; ok {
				t.Fatal("a handover was asked for")
			}
			h.round(first)
			wantActing(t, first, true)
			wantReason(t, second, "another evictd (a/first) acts on this node")
		})
	}
}

func TestAForgedRequestIsDropped(t *testing.T) {
	h := newHarness(t)
	h.pod("a/first", "ds-1", t0)
	h.pod("b/second", "ds-2", t0.Add(time.Minute))
	first := h.runner("a/first")
	h.round(first)
	l := h.api.lease.DeepCopy()
	l.Annotations = map[string]string{AnnotationHandover: "b/second"}
	if _, err := h.api.UpdateLease(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(RenewInterval(dur))
	h.round(first)
	wantActing(t, first, true)
	if _, ok := h.api.lease.Annotations[AnnotationHandover]; ok || h.api.holder() != "a/first" {
		t.Fatalf("holder %q annotations %v: want the request from another DaemonSet dropped", h.api.holder(), h.api.lease.Annotations)
	}
}

func TestAPIErrorsShowAndTheHolderStopsInTime(t *testing.T) {
	h := newHarness(t)
	a := h.runner("evictd/a")
	h.api.fail = apierrors.NewForbidden(leaseGR, "evictd-node-a", nil)
	h.round(a)
	wantActing(t, a, false)
	wantReason(t, a, "forbidden", "Role in namespace evictd-system must grant leases")

	h.api.fail = nil
	h.round(a)
	wantActing(t, a, true)
	// Renewals fail: a acts on until its last renewal is a renewal
	// interval from expiry, then says why it stopped.
	h.api.fail = apierrors.NewServiceUnavailable("etcd down")
	h.clk.Step(RenewInterval(dur))
	h.round(a)
	wantActing(t, a, true)
	h.clk.Step(RenewInterval(dur))
	h.round(a)
	wantActing(t, a, false)
	wantReason(t, a, "etcd down", "not acting")
}

func TestElectorRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		self string
		d    time.Duration
		want string
	}{
		{"", dur, `identity ""`},
		{"a/b", time.Second, "lease duration 1s is below 3s"},
		{"node-x", dur, `identity "node-x" is not an agent`},
	} {
		if _, err := NewElector(ns, node, tc.self, tc.d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewElector(%q, %v) = %v, want an error with %q", tc.self, tc.d, err, tc.want)
		}
	}
}

// TestForeignLeaseLeftAlone: a Lease under the agent's name whose holder
// is not an agent's identity (the kubelet's heartbeat of a node named
// evictd-<node>, held by that node's name; or one with no holder) is never
// taken over, renewed or deleted, however long it has gone unrenewed: the
// agent does not act, and says why.
func TestForeignLeaseLeftAlone(t *testing.T) {
	for _, holder := range []*string{ptr("evictd-" + node), nil, ptr("")} {
		h := newHarness(t)
		h.api.lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name(node), ResourceVersion: "1", UID: "kubelet-lease"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: ptr(int32(40)),
				RenewTime: micro(t0.Add(-time.Hour))},
		}
		a := h.runner("evictd/a")
		for range 3 {
			h.round(a)
			h.clk.Step(dur)
		}
		wantActing(t, a, false)
		wantReason(t, a, "not an evictd agent", "left alone")
		if h.api.writes != 0 || h.api.lease.ResourceVersion != "1" {
			t.Errorf("holder %v: %d writes, lease now held by %q: want the Lease left as it was", holder, h.api.writes, h.api.holder())
		}
		a.mu.Lock()
		a.el.held = true // as if it once held it: Release must still leave it
		a.mu.Unlock()
		a.Release()
		if h.api.lease == nil {
			t.Errorf("holder %v: Release deleted a Lease no agent wrote", holder)
		}
	}
}

func TestIsAgentIdentity(t *testing.T) {
	for holder, want := range map[string]bool{
		"evictd-system/evictd-x7k2p": true, "node-a_4242": true,
		"node-a": false, "evictd-node-a": false, "": false, "a/b/c": false, "/x": false, "ns/": false, "Bad_NS/x": false, "host_0": false,
	} {
		if got := IsAgentIdentity(holder); got != want {
			t.Errorf("IsAgentIdentity(%q) = %v, want %v", holder, got, want)
		}
	}
}

// TestLeaseNamesItsInstall: the lease an agent creates names its install;
// an agent that takes over the expired lease of another install's agent
// names its own; a holder whose lease names no install (an older evictd's
// write) or another renews at once, so that only its own uninstall takes
// the lease. Owned tells them apart for the cleanup.
func TestLeaseNamesItsInstall(t *testing.T) {
	const first, second = "evictd-system/evictd", "evictd-system/second-evictd"
	h := newHarness(t)
	runner := func(identity, id string) *Runner {
		r := h.runner(identity)
		r.el.SetInstall(id)
		return r
	}
	a, b := runner("evictd-system/evictd-a", first), runner("evictd-system/second-evictd-b", second)
	h.round(a)
	if got := h.api.lease.Annotations[install.Annotation]; got != first {
		t.Fatalf("created lease's install %q; want %q", got, first)
	}
	if !Owned(h.api.lease, first) || Owned(h.api.lease, second) {
		t.Errorf("Owned: the lease of %s is %v for it and %v for %s; want only its own", first, Owned(h.api.lease, first), Owned(h.api.lease, second), second)
	}
	h.round(b)
	h.clk.Step(dur)
	h.round(b)
	wantActing(t, b, true)
	if got := h.api.lease.Annotations[install.Annotation]; got != second {
		t.Fatalf("taken-over lease's install %q; want %q, the new holder's", got, second)
	}

	// An older evictd's lease, held by this pod: renewed at once with the
	// install, though not due.
	h.api.lease.Annotations = nil
	writes := h.api.writes
	h.clk.Step(time.Second)
	h.round(b)
	if h.api.writes != writes+1 || h.api.lease.Annotations[install.Annotation] != second {
		t.Errorf("unmarked lease of the holder: %d writes, install %q; want one write naming %s", h.api.writes-writes, h.api.lease.Annotations[install.Annotation], second)
	}
	unmarked := h.api.lease.DeepCopy()
	unmarked.Annotations = nil
	if !Owned(unmarked, first) || !Owned(unmarked, second) {
		t.Error("an unmarked agent's lease (an older evictd's) is no install's to take back")
	}
	kubelet := unmarked.DeepCopy()
	kubelet.Spec.HolderIdentity = ptr(node)
	if Owned(kubelet, first) {
		t.Error("Owned: a kubelet's lease is an install's")
	}
}
