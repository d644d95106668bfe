// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestNoPressureChurn: for two minutes pods come and go on a node that is
// never short of anything: they start, grow a little, write a little, exit
// by themselves or are deleted with a grace period. evictd runs with every
// default threshold (on the node's own 256 MiB filesystem, so the host's
// disk plays no part) and must evict nothing, meet no threshold and write
// no Event, while it keeps observing.
func TestNoPressureChurn(t *testing.T) {
	const (
		churn   = 2 * time.Minute
		maxLive = 7
	)
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "churn", MemoryBytes: nodeMemory, DiskBytes: 256 * mib})
	ns := c.Namespace(t, "churn")
	mem := startSampler(t, 50*time.Millisecond, memoryAvailable(node, nodeMemory))
	e := startEvictd(t, c, node) // the default thresholds, all of them

	// A fixed seed: the same churn every run, so a failure can be replayed.
	rng := rand.New(rand.NewPCG(5, 2026))
	ctx := context.Background()
	var live []*corev1.Pod
	created, deletedByTest := 0, 0
	start := time.Now()
	for i := 0; time.Since(start) < churn; i++ {
		s := podSpec{
			name:     "churn-" + strconv.Itoa(i),
			holdMiB:  10 + rng.Int64N(30),
			writeMiB: rng.Int64N(8),
			grace:    1 + rng.Int64N(4),
		}
		if rng.IntN(3) == 0 {
			s.growToMiB, s.growMiBPerSec = s.holdMiB+20, 10
		}
		if rng.IntN(2) == 0 {
			s.exitAfter = time.Duration(5+rng.IntN(20)) * time.Second
		}
		if rng.IntN(2) == 0 {
			s.termDelay = time.Duration(rng.IntN(1500)) * time.Millisecond
		}
		if rng.IntN(3) == 0 {
			s.priorityClass = classNodeCritical
		}
		p, err := c.Admin.CoreV1().Pods(ns).Create(ctx, s.pod(ns, node.Name), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", s.name, err)
		}
		created++
		live = append(live, p)
		if len(live) > maxLive {
			victim := live[0]
			live = live[1:]
			err := c.Admin.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(1 + rng.Int64N(3))})
			if err != nil {
				t.Fatalf("delete %s: %v", victim.Name, err)
			}
			deletedByTest++
		}
		time.Sleep(time.Duration(800+rng.IntN(1400)) * time.Millisecond)
	}
	// Let the last deletions and exits finish.
	for _, p := range live {
		_ = c.Admin.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)})
		deletedByTest++
	}
	time.Sleep(5 * time.Second)
	// ... and after passes evictd made since: it looked, however slow the host.
	e.waitObservedPasses(e.observedPasses(), 3, evictionTimeout)
	t.Logf("%d pods created, %d deleted by the test, over %s", created, deletedByTest, time.Since(start).Round(time.Second))

	if low, ok := mem.min(start); !ok || low.available < 400*mib {
		t.Fatalf("memory.available fell to %d MiB: the churn made pressure and proves nothing", low.available/mib)
	} else {
		t.Logf("lowest memory.available during the churn: %d MiB", low.available/mib)
	}
	for _, msg := range []string{"evicted pod", "would evict pod", "eviction blocked by PodDisruptionBudget", "threshold met",
		"pressure episode started", "eviction failed", "observation failed"} {
		if got := e.find(msg); len(got) > 0 {
			t.Errorf("evictd logged %q %d times without pressure; first: %s", msg, len(got), got[0].Raw)
		}
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_evictions_total", nil); got != 0 {
		t.Errorf("evictd_evictions_total sums to %v, want 0", got)
	}
	if got := mt.Value(t, "evictd_threshold_met", nil); got != 0 {
		t.Errorf("evictd_threshold_met sums to %v, want 0", got)
	}
	if got := mt.Value(t, "evictd_observation_errors_total", nil); got != 0 {
		t.Errorf("evictd_observation_errors_total = %v, want 0", got)
	}
	// The housekeeping interval is 1 s: evictd must have kept observing.
	if got := mt.Value(t, "evictd_observation_duration_seconds", nil); got < churn.Seconds()/2 {
		t.Errorf("evictd observed the node %v times in %s, want at least one every 2 s", got, churn)
	}
	if ev := evictdEvents(t, c, ""); len(ev) != 0 {
		t.Errorf("evictd wrote Events without pressure: %q", ev)
	}
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
	if !e.healthy(ctx) || e.get(ctx, "/readyz") != http.StatusOK {
		t.Errorf("evictd is not healthy and ready after the churn")
	}
}
