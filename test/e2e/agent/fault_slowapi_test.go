// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestFaultSlowAPIServer: evictd reaches the API server through a loopback
// proxy that passes every eviction on at once but holds its answer for
// 20 s (the eviction takes effect; evictd does not hear so). A soft
// threshold's eviction is stuck that way when a fast leak crosses the hard
// threshold: evictd must keep observing and must evict the leaking pod at
// once, while the soft call is still unanswered, so that the leak is gone
// within seconds of the crossing and the OOM killer never strikes.
func TestFaultSlowAPIServer(t *testing.T) {
	const (
		hold          = 20 * time.Second
		hardThreshold = 200 * mib
		softThreshold = 550 * mib
		softGrace     = 8 * time.Second
		// maxLatency is how long after the hard crossing the leaking pod may
		// still be in the API server.
		maxLatency = 5 * time.Second
		// maxObsLag is how old evictd's last successful observation may be
		// while an eviction call is outstanding (housekeeping is 1 s).
		maxObsLag = 5 * time.Second
	)
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "slowapi", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "slowapi")
	proxy := c.StartEvictdProxy(t, func(r *http.Request) time.Duration {
		if framework.IsEviction(r) {
			return hold
		}
		return 0
	})
	pods := createRunning(t, c.Admin, podSpec{name: "batch", holdMiB: 200, grace: 2}.pod(ns, node.Name))
	waitHolding(t, node, pods["batch"])
	avail := startSampler(t, sampleInterval, memoryAvailable(node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, node, avail, mapValues(pods))

	e := startEvictdWith(t, c, node, evictdSetup{kubeconfig: proxy.Kubeconfig},
		memoryOnlyHard("200Mi"),
		"--eviction-soft=memory.available<550Mi",
		"--eviction-soft-grace-period=memory.available="+softGrace.String(),
		"--eviction-api-timeout=30s",
	)

	// Phase 1: a steady load takes memory.available from about 800 MiB to
	// about 450 MiB: below the soft threshold, far above the hard one.
	// After the grace period batch (rank 1) is evicted for it; that call
	// takes effect at once, but its answer is held.
	pods["load"] = createRunning(t, c.Admin, podSpec{name: "load", priorityClass: classHigh, holdMiB: 350,
		requests: res("cpu", "100m", "memory", "400Mi"), limits: res("cpu", "100m", "memory", "400Mi")}.pod(ns, node.Name))["load"]
	soft := waitHeldCall(t, proxy, e, "batch", softGrace+30*time.Second)
	if soft.Status != http.StatusCreated {
		t.Fatalf("the API server answered the soft eviction of batch with %d, want 201: the eviction must take effect while its answer is held", soft.Status)
	}
	t.Logf("soft eviction of batch reached the proxy at %s, accepted by the API server %s later; its answer is held until %s",
		soft.Received.Format(time.StampMilli), soft.Upstream.Sub(soft.Received).Round(time.Millisecond), soft.Received.Add(hold).Format(time.StampMilli))
	waitGone(t, c.Admin, pods["batch"], 10*time.Second)
	// batch's 200 MiB are back: above the soft threshold again, so the
	// leak below meets the soft threshold afresh and, leaking fast, crosses
	// the hard one well within the soft grace period: its eviction is the
	// hard threshold's.
	for {
		if last, err := avail.last(); err == nil && last.available > softThreshold+30*mib {
			break
		}
		if time.Since(soft.Received) > 5*time.Second {
			last, _ := avail.last()
			t.Fatalf("memory.available is %d MiB after batch was deleted, want above the soft threshold; the test is mis-sized", last.available/mib)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)

	// Phase 2: a leak of 100 MiB/s from 32 MiB. It crosses the hard
	// threshold about 4 s in; left alone it would take the node past its
	// 1 GiB 2 s later.
	leakStart := time.Now()
	hog := createRunning(t, c.Admin, podSpec{name: "hog", holdMiB: 32, growMiBPerSec: 100, growToMiB: 700, grace: 1}.pod(ns, node.Name))["hog"]
	pods["hog"] = hog

	var goneAt time.Time
	var maxLag time.Duration
	var lagAt time.Time
	deadline := soft.Received.Add(hold)
	for time.Now().Before(deadline) {
		p, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), hog.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != hog.UID) {
			goneAt = time.Now()
			break
		}
		if time.Since(soft.Received) > 2*time.Second {
			obs := e.scrape().Value(t, "evictd_observation_last_success_timestamp_seconds", nil)
			now := time.Now()
			if lag := now.Sub(time.Unix(0, int64(obs*1e9))); lag > maxLag {
				maxLag, lagAt = lag, now
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	x, crossed := avail.crossing(leakStart, hardThreshold)
	calls := proxy.HeldCalls()
	if goneAt.IsZero() {
		var when string
		if crossed {
			when = fmt.Sprintf("; memory.available fell below %d MiB at %s, %s ago", hardThreshold/mib, x.at.Format(time.StampMilli), time.Since(x.at).Round(time.Millisecond))
		} else {
			when = fmt.Sprintf("; memory.available never fell below %d MiB", hardThreshold/mib)
		}
		t.Errorf("the leaking pod %s was still in the API server when the soft eviction's answer was released (%s after the call)%s; "+
			"evictd's last successful observation lagged up to %s behind (at %s); eviction calls seen by the proxy: %s: "+
			"evictd waited for the stuck soft call instead of evicting for the hard threshold",
			podKey(hog), hold, when, maxLag.Round(time.Millisecond), lagAt.Format(time.StampMilli), describeCalls(calls))
	} else {
		t.Logf("hog gone from the API server at %s", goneAt.Format(time.StampMilli))
		switch {
		case !crossed:
			t.Logf("hog deleted before memory.available crossed %d MiB (predicted)", hardThreshold/mib)
		case goneAt.Sub(x.at) > maxLatency:
			t.Errorf("hog deleted %s after the hard crossing at %s, want within %s", goneAt.Sub(x.at).Round(time.Millisecond), x.at.Format(time.StampMilli), maxLatency)
		default:
			t.Logf("hog deleted %s after the hard crossing", goneAt.Sub(x.at).Round(time.Millisecond))
		}
	}
	if maxLag > maxObsLag {
		t.Errorf("while the soft eviction call was unanswered, evictd's last successful observation lagged up to %s behind (at %s), want at most %s: it stopped observing",
			maxLag.Round(time.Millisecond), lagAt.Format(time.StampMilli), maxObsLag)
	}
	hard := -1
	for i, cl := range calls {
		if strings.HasSuffix(cl.Path, "/pods/hog/eviction") {
			hard = i
			break
		}
	}
	switch {
	case hard < 0:
		t.Errorf("no eviction call for hog reached the proxy; calls: %s", describeCalls(calls))
	case !calls[hard].Received.Before(soft.Received.Add(hold)):
		t.Errorf("the hard eviction call reached the proxy at %s, not before the soft call's answer was released at %s",
			calls[hard].Received.Format(time.StampMilli), soft.Received.Add(hold).Format(time.StampMilli))
	}

	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes on the node", n)
	}
	// Once both answers are released, both evictions are on record.
	if !goneAt.IsZero() {
		end := time.Now().Add(hold + 10*time.Second)
		for !slices.Contains(podsOf(evicted(e)), podKey(hog)) && time.Now().Before(end) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	evs := evicted(e)
	if got, want := podsOf(evs), []string{podKey(pods["batch"]), podKey(hog)}; !slices.Equal(got, want) {
		t.Errorf("evictd logged evictions of %v, want %v", got, want)
	}
	for _, ev := range evs {
		if ev.Signal != "memory.available" {
			t.Errorf("eviction of %s: signal %q, want memory.available", ev.Pod, ev.Signal)
		}
		if want := map[string]string{podKey(pods["batch"]): "soft", podKey(hog): "hard"}[ev.Pod]; ev.Str("kind") != want {
			t.Errorf("eviction of %s: kind %q, want %s", ev.Pod, ev.Str("kind"), want)
		}
	}
	untouched(t, c.Admin, node, pods["load"])
	if !e.alive() {
		t.Errorf("evictd is not running")
	}
}

// waitHeldCall waits until the proxy holds the API server's answer to an
// eviction of the named pod.
func waitHeldCall(t *testing.T, p *framework.EvictdProxy, e *evictd, pod string, timeout time.Duration) framework.HeldCall {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, c := range p.HeldCalls() {
			if strings.HasSuffix(c.Path, "/pods/"+pod+"/eviction") && !c.Upstream.IsZero() {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no eviction of %s reached the API proxy within %s; calls: %s; log tail:\n%s", pod, timeout, describeCalls(p.HeldCalls()), e.tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describeCalls(calls []framework.HeldCall) string {
	if len(calls) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, c := range calls {
		fmt.Fprintf(&b, "\n\t%s %s received %s, API server answered %d, released %s",
			c.Method, c.Path, c.Received.Format(time.StampMilli), c.Status, stampOrNotYet(c.Answered))
	}
	return b.String()
}

func stampOrNotYet(t time.Time) string {
	if t.IsZero() {
		return "not yet"
	}
	return t.Format(time.StampMilli)
}
