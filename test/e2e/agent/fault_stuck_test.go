// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// stuckFinalizer keeps the stuck pod's object in the API whatever deletes
// it; the test removes it when it is done.
const stuckFinalizer = "evictd.test/hold"

// The message evictd logs, once, when a victim outlives its grace period and
// GoneTimeout, and the Event reason it leaves on that pod.
const (
	msgVictimStuck    = "victim not gone in time; its reclaim no longer counts"
	reasonVictimStuck = "EvictionStuck"
)

// TestFaultStuckTerminating: the first victim's termination hangs (the
// stand-in sends SIGTERM and never SIGKILL, as with a hung runtime; the
// process keeps its memory and the pod stays Terminating with phase Running
// behind a finalizer), so the pressure stays. After the victim's grace
// period (hard: capped at 5 s) plus evictd's GoneTimeout (30 s) its
// reclaim must stop counting: evictd says so once (log, Event, metric) and
// evicts the next candidate, and nothing more once that relieves the
// pressure.
func TestFaultStuckTerminating(t *testing.T) {
	const goneTimeout = 30 * time.Second // inflight.DefaultOptions().GoneTimeout
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "stuck", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "stuck")

	// stuck (rank 1) and next (rank 2) are BestEffort; db and the load stay
	// within their requests. Baseline memory.available is about 390 MiB;
	// the load takes it to about 140 MiB, below the 300 MiB threshold, and
	// only the next pod's 250 MiB bring it back above (stuck keeps its own).
	stuck := hungPod(ns, node.Name)
	specs := []podSpec{
		{name: "next", priorityClass: classLow, holdMiB: 250, grace: 2},
		stuckDB,
	}
	pods := createRunning(t, c.Admin, append(podsFor(ns, node.Name, specs), stuck)...)
	t.Cleanup(func() { releaseStuck(t, c, pods["stuck"]) })
	waitHolding(t, node, mapValues(pods)...)
	avail := startSampler(t, sampleInterval, memoryAvailable(node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, node, avail, mapValues(pods))

	e := startEvictd(t, c, node, memoryOnlyHard("300Mi"))
	start := time.Now()
	pods["load"] = createRunning(t, c.Admin, podSpec{name: "load", priorityClass: classHigh, holdMiB: 250,
		requests: res("memory", "300Mi")}.pod(ns, node.Name))["load"]

	evs := waitEvictions(t, e, 1, evictionTimeout)
	if evs[0].Pod != podKey(pods["stuck"]) {
		t.Fatalf("evictd's first eviction was %s, want %s (rank 1); the test is mis-sized", evs[0].Pod, podKey(pods["stuck"]))
	}
	grace, _ := evs[0].Num("gracePeriodSeconds")
	if grace < 1 || grace > 5 {
		t.Errorf("the stuck pod was evicted with gracePeriodSeconds %v, want 1..5 (hard cap 5)", evs[0].Fields["gracePeriodSeconds"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tl, err := node.WaitRecord(ctx, pods["stuck"].UID, func(tl nodesim.Timeline) bool { return !tl.Hung.IsZero() })
	cancel()
	if err != nil {
		t.Fatalf("the stand-in never hung the stuck pod's termination: %v", err)
	}
	t.Logf("stuck evicted %s (grace %v s), SIGTERM %s, termination hangs", evs[0].TS.Format(time.StampMilli), grace, tl.SIGTERM.Format(time.StampMilli))

	// The stuck pod is Terminating with phase Running and keeps its memory:
	// the pressure stays.
	// The victim's deadline is the API server's: its deletionTimestamp
	// (the eviction's time, in whole seconds, plus the grace period), and
	// its reclaim stops counting GoneTimeout after that.
	sp, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), "stuck", metav1.GetOptions{})
	if err != nil || sp.DeletionTimestamp == nil {
		t.Fatalf("the stuck pod after its eviction: deletionTimestamp %v, err %v; want it terminating", deletionOf(sp), err)
	}
	expireAt := sp.DeletionTimestamp.Add(goneTimeout)
	// The waits end on evictd's own lines: the stuck-victim warning, due at
	// the expiry, then the second eviction, with the deadline any eviction
	// gets. How soon after the expiry they come is the machine's business;
	// that they do not come before it is checked, on evictd's clock.
	stuckLine := e.waitLog(time.Until(expireAt)+60*time.Second, msgVictimStuck, nil)
	if stuckLine.TS.Before(expireAt) {
		t.Errorf("evictd called the stuck pod stuck at %s, %s after its eviction, before its deletionTimestamp (%s) + GoneTimeout (%s)",
			stamp(stuckLine.TS), stuckLine.TS.Sub(evs[0].TS).Round(time.Millisecond), stamp(sp.DeletionTimestamp.Time), goneTimeout)
	}
	deadline := time.Now().Add(evictionTimeout)
	for len(evicted(e)) < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	evs = evicted(e)
	if len(evs) < 2 {
		p, _ := c.Admin.CoreV1().Pods(ns).Get(context.Background(), "stuck", metav1.GetOptions{})
		last, _ := avail.last()
		t.Fatalf("evictd evicted only %v in the %s after it called the stuck pod stuck: its reclaim no longer counts "+
			"and the next candidate %s should go; "+
			"the stuck pod is %s (deletionTimestamp %v), memory.available %d MiB; stuck-victim lines: %s; log tail:\n%s",
			podsOf(evs), evictionTimeout, podKey(pods["next"]),
			phaseOf(p), deletionOf(p), last.available/mib, rawLines(e.find(msgVictimStuck)), e.tail(25))
	}
	second := evs[1]
	if second.Pod != podKey(pods["next"]) {
		t.Fatalf("evictd's second eviction was %s, want %s (rank 2; the stuck pod is still there)", second.Pod, podKey(pods["next"]))
	}
	if second.TS.Before(expireAt) {
		t.Errorf("the next pod was evicted %s after the stuck one, before its deletionTimestamp + GoneTimeout (%s after the eviction) were over",
			second.TS.Sub(evs[0].TS).Round(time.Millisecond), expireAt.Sub(evs[0].TS).Round(time.Millisecond))
	}
	t.Logf("next evicted %s after the stuck pod (deletionTimestamp + GoneTimeout %s after it; the stuck line %s after it)",
		second.TS.Sub(evs[0].TS).Round(time.Millisecond), expireAt.Sub(evs[0].TS).Round(time.Millisecond), stuckLine.TS.Sub(evs[0].TS).Round(time.Millisecond))
	if second.Signal != "memory.available" || second.Str("kind") != "hard" {
		t.Errorf("the second eviction: signal %q kind %q, want memory.available hard", second.Signal, second.Str("kind"))
	}

	waitGone(t, c.Admin, pods["next"], 60*time.Second)
	e.waitLog(60*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(second.TS) })
	// Give anything that would wrongly come next its chances: passes, not
	// seconds.
	e.waitObservedPasses(e.observedPasses(), 5, 60*time.Second)
	if got, want := podsOf(evicted(e)), []string{podKey(pods["stuck"]), podKey(pods["next"])}; !slices.Equal(got, want) {
		t.Errorf("evictd evicted %v, want exactly %v: one more eviction once the stuck pod stopped counting", got, want)
	}

	// What evictd said about it: one warning naming the pod, before the
	// second eviction.
	if stuckLines := e.find(msgVictimStuck); len(stuckLines) != 1 {
		t.Errorf("evictd logged %q %d times, want once:%s", msgVictimStuck, len(stuckLines), rawLines(stuckLines))
	} else {
		l := stuckLines[0]
		if l.Level != "warn" || l.Pod != podKey(pods["stuck"]) {
			t.Errorf("%q: level %q pod %q, want warn naming %s: %s", msgVictimStuck, l.Level, l.Pod, podKey(pods["stuck"]), l.Raw)
		}
		if l.TS.After(second.TS) {
			t.Errorf("%q came at %s, after the second eviction at %s", msgVictimStuck, l.TS.Format(time.StampMilli), second.TS.Format(time.StampMilli))
		}
	}
	var events []string
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		events = evictdEvents(t, c, ns)
		return slices.ContainsFunc(events, func(s string) bool { return strings.HasPrefix(s, reasonVictimStuck+" Pod/stuck:") }), nil
	})
	if err != nil {
		t.Errorf("no %s Event on pod stuck; evictd's Events: %q", reasonVictimStuck, events)
	}
	// A node that cannot stop a pod is an error an operator must see:
	// /readyz names the stuck victim while it stays.
	if code, body := e.readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, podKey(pods["stuck"])) {
		t.Errorf("/readyz answered %d %q while %s is stuck, want 503 naming it", code, body, podKey(pods["stuck"]))
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_eviction_stuck_total", map[string]string{"resource": "memory"}); got != 1 {
		t.Errorf("evictd_eviction_stuck_total{resource=memory} = %v, want 1", got)
	}
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "evicted"}); got != 2 {
		t.Errorf("evictd_evictions_total{result=evicted} = %v, want 2", got)
	}

	// The fault was real: the stuck pod is still Terminating and Running,
	// and the stand-in never killed it.
	p, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), "stuck", metav1.GetOptions{})
	if err != nil || p.UID != pods["stuck"].UID || p.DeletionTimestamp == nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the stuck pod should still be there, Terminating with phase Running: %s, deletionTimestamp %v, err %v", phaseOf(p), deletionOf(p), err)
	}
	if tl, _ := node.Record(pods["stuck"].UID); !tl.SIGKILL.IsZero() || !tl.APIDeleted.IsZero() {
		t.Errorf("the stand-in killed or deleted the stuck pod (timeline %+v); its termination was to hang", tl)
	}
	untouched(t, c.Admin, node, pods["db"])
	untouched(t, c.Admin, node, pods["load"])
	if final, err := avail.last(); err != nil || final.available < 300*mib {
		t.Errorf("memory.available at the end: %d MiB (err %v), want above the 300 MiB threshold", final.available/mib, err)
	}
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
	if x, ok := avail.crossing(start, 300*mib); ok {
		t.Logf("threshold crossed %s; stuck evicted %s later, next %s later", x.at.Format(time.StampMilli),
			evs[0].TS.Sub(x.at).Round(time.Millisecond), second.TS.Sub(x.at).Round(time.Millisecond))
	}
}

// memoryOnlyHard is --eviction-hard with one memory.available threshold and
// every other signal off.
func memoryOnlyHard(threshold string) string {
	return "--eviction-hard=memory.available<" + threshold + ",allocatableMemory.available<none,nodefs.available<none," +
		"nodefs.inodesFree<none,imagefs.available<none,imagefs.inodesFree<none,pid.available<none"
}

// hungPod is "stuck": BestEffort, holding 250 MiB, whose termination the
// stand-in hangs (SIGTERM, never SIGKILL) and whose object a finalizer
// keeps; releaseStuck ends it.
func hungPod(ns, nodeName string) *corev1.Pod {
	p := podSpec{name: "stuck", holdMiB: 250, termDelay: 10 * time.Minute}.pod(ns, nodeName)
	p.Annotations = map[string]string{nodesim.HangTerminationAnnotation: "true"}
	p.Finalizers = []string{stuckFinalizer}
	return p
}

// stuckDB is the Guaranteed pod beside the stuck one, within its request.
var stuckDB = podSpec{name: "db", priorityClass: classHigh, holdMiB: 100,
	requests: res("cpu", "100m", "memory", "200Mi"), limits: res("cpu", "100m", "memory", "200Mi")}

// releaseStuck removes the stuck pod's finalizer and deletes it at once, so
// that the stand-in kills its processes and the namespace can go.
func releaseStuck(t *testing.T, c *framework.Cluster, pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods := c.Admin.CoreV1().Pods(pod.Namespace)
	_, err := pods.Patch(ctx, pod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Logf("remove the finalizer of %s: %v", podKey(pod), err)
	}
	err = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
		Preconditions: &metav1.Preconditions{UID: ptr.To(pod.UID)}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		t.Logf("delete %s: %v", podKey(pod), err)
	}
}

func phaseOf(p *corev1.Pod) string {
	if p == nil {
		return "(not found)"
	}
	return string(p.Status.Phase)
}

func deletionOf(p *corev1.Pod) any {
	if p == nil || p.DeletionTimestamp == nil {
		return nil
	}
	return p.DeletionTimestamp.Time
}
