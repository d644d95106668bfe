// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/pkg/actuator"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

const (
	msgContained          = "victim contained while it shuts down"
	reasonVictimContained = "EvictionVictimContained"
)

// TestActuatorContainsHardVictim: with --actuator, the hard victim's pod
// cgroup is held at its usage + 16 MiB (v1: its limit, with the OOM killer
// off for it; v2: its memory.high), in the real cgroup, once the real API server accepted its eviction; the
// pod's Event and the metrics say so. The victim's termination hangs (the
// stand-in never sends SIGKILL, a finalizer keeps the pod), so its cgroup
// stays to be read.
func TestActuatorContainsHardVictim(t *testing.T) {
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "actuator", MemoryBytes: nodeMemory})
	ns := c.Namespace(t, "actuator")

	// As in TestFaultStuckTerminating: stuck ranks first; db and the load
	// stay within their requests. The load takes memory.available below
	// the 300 MiB threshold, and the hung victim keeps it there.
	pods := createRunning(t, c.Admin, append(podsFor(ns, node.Name, []podSpec{stuckDB}), hungPod(ns, node.Name))...)
	t.Cleanup(func() { releaseStuck(t, c, pods["stuck"]) })
	waitHolding(t, node, mapValues(pods)...)

	e := startEvictd(t, c, node, memoryOnlyHard("300Mi"), "--actuator")
	if e.find("actuator on: hard memory victims are contained once their eviction is accepted") == nil {
		t.Errorf("evictd did not say the actuator is on; log tail:\n%s", e.tail(20))
	}
	// Without TestFaultStuckTerminating's "next" pod the node rests about
	// 250 MiB higher: the load is that much larger, within its request.
	pods["load"] = createRunning(t, c.Admin, podSpec{name: "load", priorityClass: classHigh, holdMiB: 500,
		requests: res("memory", "550Mi")}.pod(ns, node.Name))["load"]

	evs := waitEvictions(t, e, 1, evictionTimeout)
	if evs[0].Pod != podKey(pods["stuck"]) || evs[0].Str("kind") != "hard" {
		t.Fatalf("evictd's first eviction was %s (%s), want the hard eviction of %s; the test is mis-sized", evs[0].Pod, evs[0].Str("kind"), podKey(pods["stuck"]))
	}
	l := e.waitLog(30*time.Second, msgContained, func(l logEntry) bool { return l.Pod == podKey(pods["stuck"]) })
	t.Logf("evicted %s, contained %s later: %s", evs[0].TS.Format(time.StampMilli), l.TS.Sub(evs[0].TS), l.Raw)
	limit, _ := l.Num("limitBytes")
	usage, _ := l.Num("usageBytes")
	// The file of the host's cgroup version: v1 memory.limit_in_bytes, with
	// the OOM killer off; v2 memory.high, with memory.max left as it was.
	dir := node.PodMemoryCgroupDir(pods["stuck"])
	file := "memory.limit_in_bytes"
	if cgrouptest.V2() {
		file = "memory.high"
	}
	if !strings.HasSuffix(l.Str("file"), nodesim.PodCgroup(pods["stuck"])+"/"+file) {
		t.Errorf("contained %s, want the stuck pod's %s", l.Str("file"), file)
	}
	if usage < 250*mib || uint64(limit) != actuator.CapAbove(uint64(usage)) {
		t.Errorf("contained at %v bytes for a usage of %v, want the usage (at least the 250 MiB it holds) + 16 MiB", limit, usage)
	}

	// In the kernel: the limit as logged.
	got, err := cgrouptest.ReadInt(dir + "/" + file)
	if err != nil || float64(got) != limit {
		t.Errorf("the pod cgroup's %s is %d (%v), want %v", file, got, err, limit)
	}
	if cgrouptest.V2() {
		if max, err := os.ReadFile(dir + "/memory.max"); err != nil || string(max) != "max\n" {
			t.Errorf("the pod cgroup's memory.max is %q (%v), want max: containment only throttles", max, err)
		}
	} else if oom, err := os.ReadFile(dir + "/memory.oom_control"); err != nil || !strings.Contains(string(oom), "oom_kill_disable 1") {
		t.Errorf("the pod cgroup's memory.oom_control is %q (%v), want the OOM killer off", oom, err)
	}
	// The victim here holds steady, so a check of its usage against the
	// limit could not fail: a grower held at the limit is tested on the
	// host's real memory cgroup (TestContainStopsARealGrower, pkg/actuator)
	// and on the real cgroup v2 node (TestNodeContainHardVictim).

	var events []string
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		events = evictdEvents(t, c, ns)
		return slices.ContainsFunc(events, func(s string) bool { return strings.HasPrefix(s, reasonVictimContained+" Pod/stuck:") }), nil
	})
	if err != nil {
		t.Errorf("no %s Event on pod stuck; evictd's Events: %q", reasonVictimContained, events)
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_actuator_writes_total", map[string]string{"action": "contain", "result": "ok"}); got != 1 {
		t.Errorf("evictd_actuator_writes_total{contain,ok} = %v, want 1", got)
	}
	if got := mt.Value(t, "evictd_actuator_writable", nil); got != 1 {
		t.Errorf("evictd_actuator_writable = %v, want 1", got)
	}
	untouched(t, c.Admin, node, pods["db"])
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes", n)
	}
}
