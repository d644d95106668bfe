// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// The memcg threshold tests are cgroup v1's: cgroup.event_control exists
// only there. On a v2-only host each runs its v2 twin instead, on the
// memory.events watch that wakes evictd there (memevents_v2_linux_test.go).

// memcgRig is a kubepods-like memory cgroup with a pod cgroup inside it and a
// threshold armed on the parent: the child charges the pod cgroup, the
// notification must come from the parent, as it would for kubepods.
type memcgRig struct {
	kubepods, pod *cgrouptest.Cgroup
	set           *Set
	th            *MemcgThreshold
}

const (
	trialAbove    = 32 << 20 // arm this far above the current usage
	trialAllocMiB = 64       // and let the child touch this much
)

func newMemcgRig(tb testing.TB) *memcgRig {
	tb.Helper()
	r := &memcgRig{}
	r.kubepods = cgrouptest.NewMemoryCgroup(tb, "evictd-wakeup-kubepods")
	r.pod = r.kubepods.Sub(tb, "pod")
	set, err := New(zaptest.NewLogger(tb), clock.RealClock{}, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = set.Close() })
	r.set = set
	usage, err := r.kubepods.MemoryUsage()
	if err != nil {
		tb.Fatal(err)
	}
	r.th, err = set.AddMemcgThreshold("kubepods", r.kubepods.Dir(), usage+trialAbove)
	if err != nil {
		tb.Fatalf("arm threshold on a fresh memcg: %v", err)
	}
	return r
}

// trial starts a child in the pod cgroup, arms the kubepods threshold 32 MiB
// above the current usage, lets the child touch 64 MiB, and returns the time
// from the child seeing usage at or above the threshold to Wait returning.
// Negative values mean the wake-up came first: the kernel signals during the
// page fault that crosses, the child notices at its next usage read.
func (r *memcgRig) trial(tb testing.TB) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := cgrouptest.StartChild(tb, r.pod)
	defer func() { _ = c.Stop() }() // a failing child shows in its answer
	usage, err := r.kubepods.MemoryUsage()
	if err != nil {
		return 0, err
	}
	at := usage + trialAbove
	if err := r.th.Arm(at); err != nil {
		return 0, err
	}
	// Forget wake-ups of the previous trial (its child's exit crossed down).
	for {
		w, err := r.set.Wait(ctx, 0)
		if err != nil {
			return 0, err
		}
		if w.Source == SourcePoll {
			break
		}
	}
	watch := &cgrouptest.Watch{File: r.kubepods.Path("memory.usage_in_bytes"), Threshold: at}
	if err := c.BeginTouch(trialAllocMiB, watch); err != nil {
		return 0, err
	}
	w, err := r.set.Wait(ctx, 30*time.Second)
	woke := cgrouptest.Now()
	if err != nil {
		return 0, err
	}
	if w.Source != SourceMemcgThreshold || w.Name != "kubepods" {
		return 0, fmt.Errorf("woken by %s/%q, want %s/%q (armed at %d, usage was %d)", w.Source, w.Name, SourceMemcgThreshold, "kubepods", at, usage)
	}
	touched, err := c.EndTouch(5 * time.Second)
	if err != nil {
		return 0, err
	}
	if touched.Crossed == 0 {
		return 0, fmt.Errorf("the child never read a usage at or above %d (last %d)", at, touched.Last)
	}
	return woke.Sub(touched.Crossed), nil
}

func TestMemcgThresholdWakesOnCrossing(t *testing.T) {
	if cgrouptest.V2() {
		eventsWakeOnCrossing(t) // v2 has no memcg thresholds: memevents_v2_linux_test.go
		return
	}
	r := newMemcgRig(t)
	const trials = 20
	lat := make([]time.Duration, 0, trials)
	for i := 0; i < trials; i++ {
		d, err := r.trial(t)
		if err != nil {
			t.Fatalf("trial %d: %v", i, err)
		}
		lat = append(lat, d)
	}
	t.Logf("memcg threshold wake-up latency over %d trials (crossing seen by the child → Wait returns): median %v, p99 %v, min %v",
		trials, percentile(lat, 50), percentile(lat, 99), percentile(lat, 0))
	// Each trial was woken by the threshold itself (its source and name), not
	// a poll; how fast is BenchmarkMemcgThresholdLatency's figure, not the
	// gate's (the waiting rule: no upper bound on wall time).
	st := r.th.Status()
	if !st.Active || !strings.HasPrefix(st.Reason, "armed at ") || st.Source != SourceMemcgThreshold {
		t.Errorf("status after the trials = %+v, want an active memcg_threshold armed source", st)
	}
	if !r.set.Active(SourceMemcgThreshold) || r.set.Active(SourcePSI) {
		t.Errorf("Active(memcg_threshold) = %v, Active(psi) = %v; want true, false",
			r.set.Active(SourceMemcgThreshold), r.set.Active(SourcePSI))
	}
}

// BenchmarkMemcgThresholdLatency reports the crossing-to-wake-up latency of
// the cgroup v1 threshold path: run with -benchtime=30x (each iteration is a
// whole trial: a child process touching 64 MiB).
func BenchmarkMemcgThresholdLatency(b *testing.B) {
	r := newMemcgRig(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := r.trial(b)
		if err != nil {
			b.Fatalf("trial %d: %v", i, err)
		}
		lat = append(lat, d)
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(percentile(lat, 100).Microseconds())/1000, "max-ms")
}

func TestMemcgThresholdRearmReplacesTheOldOne(t *testing.T) {
	if cgrouptest.V2() {
		eventsRearmFollowsKubepods(t) // v2 has no memcg thresholds: memevents_v2_linux_test.go
		return
	}
	r := newMemcgRig(t)
	ctx := context.Background()
	usage, err := r.kubepods.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	// Arm far above what the child will reach, then re-arm within reach:
	// only the second value may fire, and it must.
	if err := r.th.Arm(usage + 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := r.th.Arm(usage + trialAbove); err != nil {
		t.Fatal(err)
	}
	if got := r.th.Armed(); got != usage+trialAbove {
		t.Errorf("Armed() = %d, want %d", got, usage+trialAbove)
	}
	// Re-arm again at a value the child cannot reach, and check that the
	// replaced registration (the reachable one) no longer fires.
	if err := r.th.Arm(usage + 1<<30); err != nil {
		t.Fatal(err)
	}
	c := cgrouptest.StartChild(t, r.pod)
	watch := &cgrouptest.Watch{File: r.kubepods.Path("memory.usage_in_bytes"), Threshold: usage + trialAbove}
	if err := c.BeginTouch(trialAllocMiB, watch); err != nil {
		t.Fatal(err)
	}
	if touched, err := c.EndTouch(5 * time.Second); err != nil || touched.Crossed == 0 {
		t.Fatalf("child: %+v, %v; want it to cross the old threshold", touched, err)
	}
	if w, err := r.set.Wait(ctx, 300*time.Millisecond); err != nil || w.Source != SourcePoll {
		t.Errorf("Wait after crossing only a replaced threshold = %+v, %v; want a poll timeout", w, err)
	}
}

func TestMemcgThresholdFailsOverPerSource(t *testing.T) {
	if cgrouptest.V2() {
		eventsFailOverPerSource(t) // v2 has no memcg thresholds: memevents_v2_linux_test.go
		return
	}
	good := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-good")
	notMemcg := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-v2").Dir() // no memory.usage_in_bytes here
	missing := filepath.Join(t.TempDir(), "gone")
	set, err := New(zaptest.NewLogger(t), clock.RealClock{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()

	okTh, err := set.AddMemcgThreshold("good", good.Dir(), 1<<30)
	if err != nil {
		t.Fatalf("arming a real memcg: %v", err)
	}
	for _, tc := range []struct{ name, dir string }{{"v2", notMemcg}, {"missing", missing}} {
		th, err := set.AddMemcgThreshold(tc.name, tc.dir, 1<<30)
		if err == nil {
			t.Errorf("arming %s succeeded, want an error", tc.dir)
		}
		st := th.Status()
		if st.Active || !strings.Contains(st.Reason, tc.dir) {
			t.Errorf("%s: status %+v, want inactive with a reason naming %s", tc.name, st, tc.dir)
		}
	}
	if !okTh.Status().Active || !set.Active(SourceMemcgThreshold) {
		t.Errorf("the good source went inactive with its failing neighbours: %+v", okTh.Status())
	}
	if err := okTh.Arm(0); err == nil || !strings.Contains(err.Error(), "0 bytes") {
		t.Errorf("Arm(0) = %v, want an error naming the value", err)
	}
	if !okTh.Status().Active || okTh.Armed() != 1<<30 {
		t.Errorf("a rejected Arm changed the source: %+v armed %d", okTh.Status(), okTh.Armed())
	}
	// The cgroup disappears: re-arming fails and the source goes inactive.
	if err := good.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := okTh.Arm(2 << 30); err == nil {
		t.Errorf("re-arming a removed cgroup succeeded")
	}
	if st := okTh.Status(); st.Active || !strings.HasPrefix(st.Reason, "arming failed: ") || okTh.Armed() != 0 {
		t.Errorf("after re-arming a removed cgroup: %+v armed %d, want inactive, disarmed", st, okTh.Armed())
	}
	statuses := set.Statuses()
	if len(statuses) != 3 {
		t.Fatalf("Statuses() has %d entries, want 3", len(statuses))
	}
	if statuses[1].Name != "v2" || statuses[1].Active {
		t.Errorf("Statuses()[1] = %+v, want the inactive v2 source", statuses[1])
	}
}

func TestMemcgThresholdOnTheRootMemcgArms(t *testing.T) {
	if cgrouptest.V2() {
		eventsOnTheRootRefused(t) // v2 has no memcg thresholds: memevents_v2_linux_test.go
		return
	}
	// The agent arms the node's root memcg too. Whether it fires depends on
	// the whole machine's usage, so only the arming is checked here.
	cgrouptest.Require(t)
	set, err := New(zaptest.NewLogger(t), clock.RealClock{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	usage, err := cgrouptest.ReadInt(filepath.Join(cgrouptest.MemoryRoot, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	th, err := set.AddMemcgThreshold("node", cgrouptest.MemoryRoot, usage+(1<<40))
	if err != nil {
		t.Fatalf("arming the root memcg: %v", err)
	}
	if st := th.Status(); !st.Active || st.Reason != "armed at "+strconv.FormatInt(usage+(1<<40), 10)+" bytes" {
		t.Errorf("status = %+v", st)
	}
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	if th.Status().Active {
		t.Errorf("source still active after Close")
	}
	if _, err := os.Stat(cgrouptest.MemoryRoot); err != nil {
		t.Fatal(err)
	}
}

// openFds counts this process's open file descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// The library registers the threshold and hands over its eventfd: a source
// must hold that one fd, non-blocking, replace it on re-arm, and leave
// nothing open after Close, however often it was re-armed.
func TestMemcgThresholdHoldsOneNonblockingFd(t *testing.T) {
	if cgrouptest.V2() {
		eventsHoldNoFd(t) // v2 has no memcg thresholds: memevents_v2_linux_test.go
		return
	}
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-fds")
	before := openFds(t)
	set, err := New(zaptest.NewLogger(t), clock.RealClock{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	withSet := openFds(t)
	th, err := set.AddMemcgThreshold("kubepods", cg.Dir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := th.Arm(int64(1<<30 + i<<20)); err != nil {
			t.Fatalf("re-arm %d: %v", i, err)
		}
	}
	if got := openFds(t); got != withSet+1 {
		t.Errorf("after 20 re-arms %d fds are open, want %d (the set's and one eventfd)", got, withSet+1)
	}
	set.mu.Lock()
	fd := set.regs[th.tok].fd
	set.mu.Unlock()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Errorf("eventfd flags %#x, %v; want O_NONBLOCK", flags, err)
	}
	// A failed arm drops the registration and its fd.
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := th.Arm(2 << 30); err == nil || !strings.Contains(err.Error(), cg.Dir()) {
		t.Errorf("arming a removed cgroup: %v; want an error naming %s", err, cg.Dir())
	}
	if got := openFds(t); got != withSet {
		t.Errorf("after a failed arm %d fds are open, want %d", got, withSet)
	}
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openFds(t); got != before {
		t.Errorf("after Close %d fds are open, want %d as before New", got, before)
	}
}
