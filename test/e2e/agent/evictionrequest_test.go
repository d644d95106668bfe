// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestEvictionRequestMode: --eviction-request on an API server that serves
// lifecycle.k8s.io/v1alpha1 (feature gate EvictionRequestAPI, alpha in
// 1.37), with the optional RBAC rule of deploy/daemonset.yaml granted.
//   - A soft memory eviction is asked for with an EvictionRequest named for
//     the pod's UID, with evictd's requester, the pod's name and UID, intent
//     Eviction, owned by the pod; the pod is not evicted while the
//     responder wait runs.
//   - Pressure that ends first withdraws it (intent Withdrawn), then
//     deletes it, and the pod stays.
//   - Pressure that comes back asks again; with no responder (Kubernetes
//     1.37.2 runs none), evictd falls back to the Eviction API once the
//     wait is over, the pod goes, and the request, done, is deleted.
func TestEvictionRequestMode(t *testing.T) {
	// responderWait is what phase 2 must fit in: the load deleted and gone,
	// the pressure ended (its transition period), the request withdrawn and
	// deleted, all API round trips on a possibly loaded machine; 45 s leaves
	// that chain ample room. Phase 3 bounds the wait only from below.
	const (
		softGrace     = 2 * time.Second
		responderWait = 45 * time.Second
	)
	c, node, ns, pods := evictionRequestNode(t, "evreq")
	reqs := watchRequests(t, c, ns)
	e := startEvictd(t, c, node, evictionRequestFlags(softGrace, responderWait)...)
	if got := e.scrape().Value(t, "evictd_eviction_request_served", nil); got != 1 {
		t.Errorf("evictd_eviction_request_served = %v, want 1", got)
	}
	batch := pods["batch"]
	erName := evictreq.Name(batch.UID)

	// 1: pressure that lasts past the soft grace period; the load stays under
	// its request, so batch (BestEffort, above its request) is the victim.
	load := startLoad(t, c, ns, node, "load")
	first := reqs.wait(t, 60*time.Second, "created with intent Eviction", func(ev requestEvent) bool {
		return ev.name == erName && ev.typ == watch.Added && ev.er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
	})
	er := first.er
	if er.Spec.Requester != evictreq.DefaultRequester {
		t.Errorf("requester %q, want %q", er.Spec.Requester, evictreq.DefaultRequester)
	}
	if p := er.Spec.Target.Pod; p == nil || p.Name != batch.Name || p.UID != batch.UID {
		t.Errorf("target %+v, want pod %s (%s)", er.Spec.Target.Pod, batch.Name, batch.UID)
	}
	if refs := er.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].APIVersion != "v1" || refs[0].UID != batch.UID || refs[0].Name != batch.Name {
		t.Errorf("ownerReferences %+v; want the pod %s (%s), so that the garbage collector removes the request with it", refs, batch.Name, batch.UID)
	}
	requested := first.at

	// 2: the load goes before the responder wait is over; the pressure ends
	// and the request is withdrawn, then deleted, batch untouched.
	if err := c.Admin.CoreV1().Pods(ns).Delete(context.Background(), load.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c.Admin, load, 30*time.Second)
	deleted := reqs.wait(t, responderWait+30*time.Second, "deleted", func(ev requestEvent) bool { return ev.name == erName && ev.typ == watch.Deleted })
	if since := deleted.at.Sub(requested); since >= responderWait {
		t.Fatalf("withdrawn %s after the request, past the responder wait %s: the test is mis-sized", since, responderWait)
	}
	if got := reqs.story(erName); !slices.Equal(got, []string{"ADDED Eviction", "MODIFIED Withdrawn", "DELETED Withdrawn"}) {
		t.Errorf("EvictionRequest %s went %q; want it created, withdrawn, deleted", erName, got)
	}
	if p, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), batch.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("batch after the withdrawal: %v, %+v; want it running", err, p)
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Fatalf("evicted %v while the request was open or withdrawn", podsOf(evs))
	}

	// 3: the pressure comes back: evictd asks again, no responder answers,
	// and the Eviction API evicts batch after the wait; the request, done,
	// is deleted.
	startLoad(t, c, ns, node, "load2")
	again := reqs.wait(t, 60*time.Second, "asking again", func(ev requestEvent) bool {
		return ev.name == erName && ev.at.After(deleted.at) && ev.er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
	}).at
	evs := waitEvictions(t, e, 1, responderWait+60*time.Second)
	if got := podsOf(evs); len(got) != 1 || got[0] != podKey(batch) {
		t.Fatalf("evicted %v, want %s", got, podKey(batch))
	}
	askedAgain := requestedBefore(t, e, podKey(batch), evs[0])
	if took := evs[0].TS.Sub(askedAgain.TS); took < responderWait {
		t.Errorf("the Eviction API evicted batch %s after the request was made again, before the responder wait %s", took, responderWait)
	}
	done := reqs.wait(t, 30*time.Second, "deleted once batch was evicted", func(ev requestEvent) bool {
		return ev.name == erName && ev.typ == watch.Deleted && ev.at.After(again)
	})
	waitGone(t, c.Admin, batch, 30*time.Second)
	t.Logf("request %s: withdrawn and deleted %s after it was made; made again, evicted through the Eviction API %s after that, deleted %s after the eviction",
		erName, deleted.at.Sub(requested).Round(time.Second), evs[0].TS.Sub(again).Round(time.Millisecond), done.at.Sub(evs[0].TS).Round(time.Millisecond))
}

// TestEvictionRequestGivenUp: evictd gives up on a pod when its fall-back
// eviction is refused; its PodDisruptionBudget (kept by the real
// disruption controller) blocks it here. The request is withdrawn and
// deleted at once, while the pressure lasts and before the next victim is
// asked for, so that no responder evicts it later on top of the next
// victim. The next victim's request, its pod evicted, is deleted.
func TestEvictionRequestGivenUp(t *testing.T) {
	const (
		softGrace     = 2 * time.Second
		responderWait = 5 * time.Second
	)
	c, node, ns, pods := evictionRequestNode(t, "evreq-pdb")
	createPDB(t, c, ns, "batch", 1, map[string]string{"app": "batch"}, 0)
	reqs := watchRequests(t, c, ns)
	e := startEvictd(t, c, node, evictionRequestFlags(softGrace, responderWait)...)
	batch := pods["batch"]
	erName := evictreq.Name(batch.UID)
	startLoad(t, c, ns, node, "load")

	reqs.wait(t, 60*time.Second, "asked for", func(ev requestEvent) bool { return ev.name == erName && ev.typ == watch.Added })
	blocked := e.waitLog(responderWait+60*time.Second, "eviction blocked by PodDisruptionBudget", func(l logEntry) bool { return l.Pod == podKey(batch) })
	// The next victim's request, if any yet, comes after batch's ends.
	ended := reqs.wait(t, 60*time.Second, "deleted after its fall-back was blocked", func(ev requestEvent) bool {
		return ev.name == erName && ev.typ == watch.Deleted
	})
	if got := reqs.story(erName); !slices.Equal(got, []string{"ADDED Eviction", "MODIFIED Withdrawn", "DELETED Withdrawn"}) {
		t.Errorf("EvictionRequest %s went %q; want it created, withdrawn, deleted", erName, got)
	}
	for _, ev := range reqs.all() {
		if ev.name != erName && ev.typ == watch.Added && ev.at.Before(ended.at) {
			t.Errorf("%s asked for at %s, before batch's request was withdrawn and deleted (%s)", ev.name, ev.at.Format(time.StampMilli), ended.at.Format(time.StampMilli))
		}
	}
	if ended := e.find("pressure episode ended"); len(ended) != 0 && ended[0].TS.Before(blocked.TS) {
		t.Fatalf("the pressure ended at %s, before batch's eviction was blocked: the test is mis-sized", ended[0].TS)
	}

	// The next victim goes through the Eviction API after its own wait, and
	// its request, done, is deleted.
	evs := waitEvictions(t, e, 1, responderWait+60*time.Second)
	victim := strings.TrimPrefix(evs[0].Pod, ns+"/")
	if victim == batch.Name {
		t.Fatalf("evicted %s; want a pod other than batch", evs[0].Pod)
	}
	next := reqs.wait(t, 60*time.Second, "made for "+victim, func(ev requestEvent) bool {
		return ev.typ == watch.Added && ev.er.Spec.Target.Pod != nil && ev.er.Spec.Target.Pod.Name == victim
	})
	reqs.wait(t, 60*time.Second, "the next victim's request deleted once it was evicted", func(ev requestEvent) bool {
		return ev.name == next.name && ev.typ == watch.Deleted
	})
	untouched(t, c.Admin, node, batch)
	t.Logf("batch's request withdrawn and deleted %s after its eviction was blocked; %s evicted next", ended.at.Sub(blocked.TS).Round(time.Millisecond), evs[0].Pod)
}

// TestEvictionRequestLeftovers: requests an evictd that crashed or was
// killed left with intent Eviction on this node's pods are withdrawn and
// deleted when evictd starts; those of another requester, or for a pod of
// another node, are left alone. And a request evictd builds is owned by
// its pod: the real garbage collector removes it with the pod.
func TestEvictionRequestLeftovers(t *testing.T) {
	c, node, ns, pods := evictionRequestNode(t, "evreq-left")
	ctx := context.Background()
	ers := c.Admin.LifecycleV1alpha1().EvictionRequests(ns)
	batch := pods["batch"]
	create := func(er *lifecyclev1alpha1.EvictionRequest) {
		t.Helper()
		if _, err := ers.Create(ctx, er, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	left := evictreq.Build(batch, evictreq.DefaultRequester) // as an evictd killed while it waited left it
	create(left)
	theirs := evictreq.Build(batch, "example.com/drainer")
	theirs.Name = "drainer-" + string(batch.UID)
	create(theirs)
	away := evictreq.Build(batch, evictreq.DefaultRequester) // a pod of another node's
	away.Name, away.OwnerReferences = "evictd-7d0c4ad4-6f1e-4a57-9b8e-2f4b1a0c9e31", nil
	away.Spec.Target.Pod = &lifecyclev1alpha1.EvictionRequestPodReference{Name: "elsewhere", UID: "7d0c4ad4-6f1e-4a57-9b8e-2f4b1a0c9e31"}
	create(away)
	reqs := watchRequests(t, c, ns)

	e := startEvictd(t, c, node, evictionRequestFlags(2*time.Second, time.Minute)...)
	reqs.wait(t, 60*time.Second, "deleted at start", func(ev requestEvent) bool { return ev.name == left.Name && ev.typ == watch.Deleted })
	if got := reqs.story(left.Name); !slices.Equal(got, []string{"ADDED Eviction", "MODIFIED Withdrawn", "DELETED Withdrawn"}) {
		t.Errorf("the request left open went %q; want it withdrawn, then deleted", got)
	}
	e.waitLog(60*time.Second, "searched for the EvictionRequests an earlier evictd left on this node's pods", nil)
	for _, name := range []string{theirs.Name, away.Name} {
		er, err := ers.Get(ctx, name, metav1.GetOptions{})
		if err != nil || er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction || er.Generation != 1 {
			t.Errorf("request %s after evictd's start: %v, %+v; want it untouched", name, err, er)
		}
	}
	if evs := evicted(e); len(evs) != 0 {
		t.Errorf("evicted %v; want nothing, no threshold is met", podsOf(evs))
	}

	// Owned by its pod: deleted with it.
	owned := evictreq.Build(pods["steady"], evictreq.DefaultRequester)
	owned.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	create(owned)
	if err := c.Admin.CoreV1().Pods(ns).Delete(ctx, "steady", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reqs.wait(t, 60*time.Second, "removed by the garbage collector with its pod", func(ev requestEvent) bool {
		return ev.name == owned.Name && ev.typ == watch.Deleted
	})
}

// TestEvictionRequestAskedAgainAfterFailed: a request evictd asks again
// (its intent set back to Eviction, a new generation) still carries the
// status the evictionrequest-controller wrote for the withdrawal before:
// here Failed, CanceledDueToNoRequesters, observed at the withdrawal's
// generation (the API server keeps the status across an update of the
// spec and bumps metadata.generation). That Failed is not the new
// request's: evictd waits the responder wait in full before it uses the
// Eviction API.
func TestEvictionRequestAskedAgainAfterFailed(t *testing.T) {
	const (
		softGrace     = 2 * time.Second
		responderWait = 8 * time.Second
	)
	c, node, ns, pods := evictionRequestNode(t, "evreq-stale")
	ctx := context.Background()
	ers := c.Admin.LifecycleV1alpha1().EvictionRequests(ns)
	reqs := watchRequests(t, c, ns)
	e := startEvictd(t, c, node, evictionRequestFlags(softGrace, responderWait)...)
	e.waitLog(60*time.Second, "searched for the EvictionRequests an earlier evictd left on this node's pods", nil)
	batch := pods["batch"]

	// A request withdrawn, whose withdrawal the controller answered (made
	// after evictd's start-up search, which would delete it).
	er, err := ers.Create(ctx, evictreq.Build(batch, evictreq.DefaultRequester), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	er.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	if er, err = ers.Update(ctx, er, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	withdrawnAt := er.Generation
	er.Status = lifecyclev1alpha1.EvictionRequestStatus{ObservedGeneration: &withdrawnAt, Conditions: []metav1.Condition{{
		Type: string(lifecyclev1alpha1.EvictionConditionFailed), Status: metav1.ConditionTrue, ObservedGeneration: withdrawnAt,
		Reason:  string(lifecyclev1alpha1.EvictionConditionReasonCanceledDueToNoRequesters),
		Message: "every requester withdrew", LastTransitionTime: metav1.Now(),
	}}}
	if _, err = ers.UpdateStatus(ctx, er, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	startLoad(t, c, ns, node, "load")
	asked := reqs.wait(t, 60*time.Second, "asked again", func(ev requestEvent) bool {
		return ev.name == er.Name && ev.typ == watch.Modified && ev.er.Spec.Intent == lifecyclev1alpha1.EvictionRequestIntentEviction
	})
	if g := asked.er.Generation; g <= withdrawnAt || asked.er.Status.ObservedGeneration == nil || *asked.er.Status.ObservedGeneration != withdrawnAt ||
		len(asked.er.Status.Conditions) != 1 {
		t.Fatalf("asked again at generation %d with status %+v; want a generation past %d and the withdrawal's Failed kept: the test is mis-built", g, asked.er.Status, withdrawnAt)
	}
	evs := waitEvictions(t, e, 1, responderWait+60*time.Second)
	if got := podsOf(evs); len(got) != 1 || got[0] != podKey(batch) {
		t.Fatalf("evicted %v, want %s", got, podKey(batch))
	}
	if failed := e.find("EvictionRequest failed; using the Eviction API"); len(failed) != 0 {
		t.Errorf("evictd took the withdrawal's Failed for the request asked again: %s", failed[0].Raw)
	}
	askedAgain := requestedBefore(t, e, podKey(batch), evs[0])
	if took := evs[0].TS.Sub(askedAgain.TS); took < responderWait {
		t.Errorf("the Eviction API evicted batch %s after the request was asked again, before the responder wait %s", took, responderWait)
	}
}

// evictionRequestNode is a cluster serving lifecycle.k8s.io/v1alpha1 with
// evictd's optional rule granted, and a node running batch (low priority,
// BestEffort, 200 MiB, label app=batch) and steady (high priority,
// Guaranteed, 250 MiB), holding their memory.
func evictionRequestNode(t *testing.T, name string) (*framework.Cluster, *nodesim.Node, string, map[string]*corev1.Pod) {
	t.Helper()
	c := framework.Start(t, framework.WithAPIServerArgs(
		"--feature-gates=EvictionRequestAPI=true", "--runtime-config=lifecycle.k8s.io/v1alpha1=true"))
	grantEvictionRequests(t, c)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: name, MemoryBytes: nodeMemory})
	ns := c.Namespace(t, name)
	pods := createRunning(t, c.Admin, podsFor(ns, node.Name, []podSpec{
		{name: "batch", priorityClass: classLow, holdMiB: 200, grace: 2, labels: map[string]string{"app": "batch"}},
		{name: "steady", priorityClass: classHigh, holdMiB: 250, grace: 2,
			requests: res("cpu", "100m", "memory", "300Mi"), limits: res("cpu", "100m", "memory", "300Mi")},
	})...)
	waitHolding(t, node, mapValues(pods)...)
	return c, node, ns, pods
}

// evictionRequestFlags: a soft memory.available threshold of 400Mi, met
// once a load grows to 250 MiB beside batch and steady, no hard one to
// speak of, and --eviction-request.
func evictionRequestFlags(softGrace, responderWait time.Duration) []string {
	return []string{
		softOnlyHard,
		"--eviction-soft=memory.available<400Mi",
		"--eviction-soft-grace-period=memory.available=" + softGrace.String(),
		"--act-early=false",
		"--eviction-request",
		"--eviction-request-responder-wait=" + responderWait.String(),
	}
}

// startLoad starts a pod that grows to 250 MiB at 50 MiB/s, under its
// request, with a high priority: the pressure, never its victim first.
func startLoad(t *testing.T, c *framework.Cluster, ns string, node *nodesim.Node, name string) *corev1.Pod {
	t.Helper()
	return createRunning(t, c.Admin, podSpec{name: name, priorityClass: classHigh, holdMiB: 10, growMiBPerSec: 50, growToMiB: 250,
		requests: res("memory", "300Mi")}.pod(ns, node.Name))[name]
}

// grantEvictionRequests binds evictd's ServiceAccount to the optional rule
// deploy/daemonset.yaml documents for --eviction-request.
func grantEvictionRequests(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "evictd-eviction-requests"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"lifecycle.k8s.io"}, Resources: []string{"evictionrequests"}, Verbs: []string{"create", "get", "update", "list", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		}}
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: c.EvictdServiceAccount.Namespace,
			Name: c.EvictdServiceAccount.Name}}}
	if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// requestEvent is one change of an EvictionRequest, as a watch saw it.
type requestEvent struct {
	at   time.Time
	typ  watch.EventType
	name string
	er   *lifecyclev1alpha1.EvictionRequest
}

// requestLog records every change of the EvictionRequests of a namespace:
// a request withdrawn and deleted within milliseconds is seen in both
// states, which polling would miss.
type requestLog struct {
	mu     sync.Mutex
	events []requestEvent
	err    error
}

// watchRequests watches the EvictionRequests of ns until the test ends.
func watchRequests(t *testing.T, c *framework.Cluster, ns string) *requestLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Admin.LifecycleV1alpha1().EvictionRequests(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	l := &requestLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			er, ok := ev.Object.(*lifecyclev1alpha1.EvictionRequest)
			l.mu.Lock()
			if ok {
				l.events = append(l.events, requestEvent{at: time.Now(), typ: ev.Type, name: er.Name, er: er})
			} else if ev.Type == watch.Error {
				l.err = apierrors.FromObject(ev.Object)
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return l
}

func (l *requestLog) all() []requestEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// wait waits for a change that cond accepts and returns it.
func (l *requestLog) wait(t *testing.T, timeout time.Duration, what string, cond func(requestEvent) bool) requestEvent {
	t.Helper()
	found, err := pollFind(timeout, l.all, cond)
	if err != nil {
		l.mu.Lock()
		werr := l.err
		l.mu.Unlock()
		t.Fatalf("no EvictionRequest %s within %s; the watch saw:\n%s (watch error: %v)", what, timeout, l.describe(), werr)
	}
	return found
}

// story is what happened to the request name: "TYPE Intent" per change.
func (l *requestLog) story(name string) []string {
	var out []string
	for _, ev := range l.all() {
		if ev.name == name {
			out = append(out, string(ev.typ)+" "+string(ev.er.Spec.Intent))
		}
	}
	return out
}

func (l *requestLog) describe() string {
	var b strings.Builder
	for _, ev := range l.all() {
		fmt.Fprintf(&b, "  %s %s %s intent %s generation %d\n", ev.at.Format(time.StampMilli), ev.typ, ev.name, ev.er.Spec.Intent, ev.er.Generation)
	}
	return b.String()
}

// requestedBefore is evictd's last "eviction requested" line for pod before
// its eviction ev. A responder wait is bounded from below on evictd's own
// clock from there: the test sees the watch event later, and a late event
// would shorten the figure.
func requestedBefore(t *testing.T, e *evictd, pod string, ev logEntry) logEntry {
	t.Helper()
	var asked logEntry
	for _, l := range e.find("eviction requested") {
		if l.Pod == pod && l.TS.Before(ev.TS) {
			asked = l
		}
	}
	if asked.TS.IsZero() {
		t.Fatalf("evictd evicted %s without logging that it asked for it:\n%s", pod, e.tail(30))
	}
	return asked
}
