// SPDX-License-Identifier: Apache-2.0

package fastpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

const mi = 1 << 20

func TestMain(m *testing.M) {
	// The real-crossing test re-executes this binary as its workload.
	cgrouptest.RunChildIfRequested()
	os.Exit(m.Run())
}

// newSet makes a wake-up set that is closed when the test ends.
func newSet(t *testing.T, log *zap.Logger, opts wakeup.Options) *wakeup.Set {
	t.Helper()
	set, err := wakeup.New(log, clock.RealClock{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	return set
}

// observation builds what the observer would report for a node cgroup dir
// with the given usage, working set and capacity.
func observation(dir string, usage, ws, capacity int64) (*pressure.Observation, map[thresholds.Signal]thresholds.Observation) {
	u, w, a := uint64(usage), uint64(ws), uint64(capacity-ws)
	obs := &pressure.Observation{
		Layout:  pressure.Layout{Mode: pressure.ModeHybrid, NodeMemoryDir: dir},
		Summary: &statsapi.Summary{Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{UsageBytes: &u, WorkingSetBytes: &w, AvailableBytes: &a}}},
	}
	sig := thresholds.Observe(obs.Summary)
	return obs, sig
}

func TestArmAt(t *testing.T) {
	ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "10%"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		usage, ws, capa int64
		want            int64
		wantErr         bool
	}{
		// 10% of 1000Mi is 100Mi: the working set may reach 900Mi, usage
		// 900Mi plus the 50Mi of inactive_file.
		{"inactive file raises the arming point", 600 * mi, 550 * mi, 1000 * mi, 950 * mi, false},
		{"no inactive file", 600 * mi, 600 * mi, 1000 * mi, 900 * mi, false},
		{"working set above usage counts no inactive file", 600 * mi, 700 * mi, 1000 * mi, 900 * mi, false},
		{"no capacity", 0, 0, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, w := uint64(tc.usage), uint64(tc.ws)
			got, err := ArmAt(ths[0], &statsapi.MemoryStats{UsageBytes: &u, WorkingSetBytes: &w}, thresholds.Observation{Available: tc.capa - tc.ws, Capacity: tc.capa})
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("ArmAt = %d (%dMi), %v; want %dMi, error %v", got, got/mi, err, tc.want/mi, tc.wantErr)
			}
		})
	}
	if _, err := ArmAt(ths[0], nil, thresholds.Observation{Capacity: 1}); err == nil {
		t.Error("ArmAt without memory stats: no error")
	}
}

// TestSyncWakesOnARealCrossing: a process charging a real memory cgroup
// wakes the set through the host's cgroup version's own source: v1 a memcg
// threshold, armed, re-armed and crossed (syncCrossingV1); v2, which has
// none, kubepods' memory.events (syncCrossingV2).
func TestSyncWakesOnARealCrossing(t *testing.T) {
	if cgrouptest.V2() {
		syncCrossingV2(t)
	} else {
		syncCrossingV1(t)
	}
}

func syncCrossingV1(t *testing.T) {
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-fastpath")
	dir := cg.Dir()
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	m := New(set, Config{Sources: wakeup.Sources{Memcg: true}, Thresholds: ths}, log, clock.RealClock{}, nil)

	// Capacity chosen so that the threshold is crossed 32Mi above the
	// cgroup's current usage.
	usage, err := cg.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	capacity := usage + 32*mi + 300*mi
	obs, sig := observation(dir, usage, usage, capacity)
	m.Sync(obs, sig)
	h := m.memcg[thresholds.MemoryAvailable]
	if h == nil || h.h.Armed() != usage+32*mi || !m.EventDriven(thresholds.MemoryAvailable) {
		t.Fatalf("armed at %v, want %d; event driven %v", h, usage+32*mi, m.EventDriven(thresholds.MemoryAvailable))
	}
	if m.EventDriven(thresholds.AllocatableMemoryAvailable) {
		t.Error("allocatableMemory.available reported event driven without a kubepods cgroup")
	}
	// inactive_file drifting by less than the tolerance keeps the arming;
	// by more, re-arms (usage up by 20Mi of inactive file: working set the
	// same, arming point 20Mi higher).
	obs, sig = observation(dir, usage+4*mi, usage, capacity)
	m.Sync(obs, sig)
	if got := h.h.Armed(); got != usage+32*mi {
		t.Errorf("re-armed at %d for a 4Mi drift", got)
	}
	obs, sig = observation(dir, usage+20*mi, usage, capacity)
	m.Sync(obs, sig)
	if got := h.h.Armed(); got != usage+52*mi {
		t.Errorf("armed at %d after a 20Mi drift, want %d", got, usage+52*mi)
	}
	// Back to the first arming point, then charge 64Mi of anonymous memory
	// to the cgroup from a process inside it: the crossing wakes the set.
	obs, sig = observation(dir, usage, usage, capacity)
	m.Sync(obs, sig)
	c := cgrouptest.StartChild(t, cg)
	start := time.Now()
	if _, err := c.Touch(64); err != nil {
		t.Fatalf("charging the cgroup: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := set.Wait(ctx, 5*time.Second)
	if err != nil || w.Source != wakeup.SourceMemcgThreshold || w.Name != "node" {
		t.Fatalf("Wait = %+v, %v; want the node memcg threshold", w, err)
	}
	t.Logf("woken %v after the touch started", w.At.Sub(start))
}

// syncCrossingV2: on v2 Sync arms no memcg threshold, even asked to, and
// watches kubepods' memory.events; a process in a pod charging past
// kubepods' own memory.high (the kubelet's node allocatable on a real node)
// raises its local high counter, which wakes the set.
func syncCrossingV2(t *testing.T) {
	kubepods := cgrouptest.NewMemoryCgroup(t, "evictd-fastpath")
	pod := kubepods.Sub(t, "pod")
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	m := New(set, Config{Sources: wakeup.Sources{Memcg: true, MemoryEvents: true}, Thresholds: ths}, log, clock.RealClock{}, nil)
	usage, err := kubepods.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	if err := kubepods.Write("memory.high", fmt.Sprint(usage+32*mi)); err != nil {
		t.Fatal(err)
	}
	obs, sig := observation(kubepods.Dir(), usage, usage, usage+32*mi+300*mi)
	obs.Layout.Mode, obs.Layout.KubepodsMemoryDir = pressure.ModeV2, kubepods.Dir()
	m.Sync(obs, sig)
	if len(m.memcg) != 0 || m.EventDriven(thresholds.MemoryAvailable) {
		t.Errorf("memcg thresholds %v on cgroup v2, which has none", m.memcg)
	}
	if !set.Active(wakeup.SourceMemoryEvents) {
		t.Fatalf("no active memory.events watch on kubepods: statuses %+v", set.Statuses())
	}
	c := cgrouptest.StartChild(t, pod)
	start := time.Now()
	if err := c.BeginTouch(64, nil); err != nil {
		t.Fatalf("charging the cgroup: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := set.Wait(ctx, 15*time.Second)
	if err != nil || w.Source != wakeup.SourceMemoryEvents || w.Name != "kubepods" {
		t.Fatalf("Wait = %+v, %v; want kubepods' memory.events", w, err)
	}
	t.Logf("woken %v after the touch started", w.At.Sub(start))
	// Past memory.high the kernel throttles the child hard (a sleep on each
	// return to user space): lifted, it finishes.
	if err := kubepods.Write("memory.high", "max"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndTouch(cgrouptest.TouchTimeout); err != nil {
		t.Errorf("the child, no longer throttled: %v", err)
	}
}

func TestSyncLeavesOtherModesAndDisabledSourcesAlone(t *testing.T) {
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	ths, _ := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	tests := []struct {
		name string
		src  wakeup.Sources
		mode pressure.Mode
	}{
		{"memcg on cgroup v2: no memcg thresholds there", wakeup.Sources{Memcg: true}, pressure.ModeV2},
		{"memcg switched off", wakeup.Sources{PSI: false}, pressure.ModeV1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(set, Config{Sources: tc.src, Thresholds: ths}, log, clock.RealClock{}, nil)
			obs, sig := observation(t.TempDir(), 100*mi, 100*mi, 1024*mi)
			obs.Layout.Mode = tc.mode
			m.Sync(obs, sig)
			if len(m.memcg) != 0 || len(set.Statuses()) != 0 {
				t.Errorf("sources added: memcg %v, statuses %+v", m.memcg, set.Statuses())
			}
		})
	}
}

func TestSyncArmsPSIOnce(t *testing.T) {
	_, err := os.Stat("/proc/pressure/memory")
	cgrouptest.Need(t, err == nil, "PSI (/proc/pressure/memory)")
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{SystemPressureDirs: []string{"/proc/pressure"}})
	m := New(set, Config{Sources: wakeup.Sources{PSI: true}}, log, clock.RealClock{}, nil)
	obs, sig := observation("", 0, 0, 1024*mi)
	obs.Layout.ProcPressureDir = "/proc/pressure"
	for range 3 {
		m.Sync(obs, sig)
	}
	st := set.Statuses()
	if len(st) != 1 || st[0].Source != wakeup.SourcePSI || st[0].Path != "/proc/pressure/memory" {
		t.Fatalf("statuses %+v, want one PSI trigger on /proc/pressure/memory", st)
	}
	if !st[0].Active {
		// Armed as root on this machine; a kernel refusing it must say why.
		t.Logf("PSI trigger inactive: %s", st[0].Reason)
	}
	if !st[0].Privileged && set.PressureReadable("/proc/pressure/memory") {
		t.Error("an unprivileged trigger left /proc/pressure readable for the polling loop")
	}
}

// The DaemonSet mounts the host's /proc read-only; a node trigger that cannot
// be armed under the host root must fall back to this process's own
// /proc/pressure/memory, which shows the same system-wide PSI.
func TestSyncFallsBackToOwnProcPressure(t *testing.T) {
	_, err := os.Stat(OwnProcPressureMemory)
	cgrouptest.Need(t, err == nil, "PSI (/proc/pressure/memory)")
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{SystemPressureDirs: []string{"/proc/pressure"}})
	m := New(set, Config{Sources: wakeup.Sources{PSI: true}}, log, clock.RealClock{}, nil)
	obs, sig := observation("", 0, 0, 1024*mi)
	unusable := filepath.Join(t.TempDir(), "proc", "pressure") // no such directory: arming fails
	obs.Layout.ProcPressureDir = unusable
	for range 3 {
		m.Sync(obs, sig)
	}
	var paths []string
	for _, st := range set.Statuses() {
		paths = append(paths, st.Path)
		if st.Path == filepath.Join(unusable, "memory") && st.Active {
			t.Errorf("a trigger on a missing file reports active: %+v", st)
		}
		if st.Path == OwnProcPressureMemory && !st.Active {
			t.Errorf("fallback trigger inactive: %s", st.Reason)
		}
	}
	if len(paths) != 2 || paths[1] != OwnProcPressureMemory {
		t.Fatalf("trigger paths %v, want the host-root one then %s", paths, OwnProcPressureMemory)
	}
}

// writeEvents writes a memory.events-format file with the given max count.
func writeEvents(t *testing.T, path string, max int) {
	t.Helper()
	s := fmt.Sprintf("low 0\nhigh 12\nmax %d\noom 0\noom_kill 0\noom_group_kill 0\n", max)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// makeKubepods creates kubepods with memory.events and memory.events.local.
func makeKubepods(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, filepath.Join(dir, "memory.events"), 3)
	writeEvents(t, filepath.Join(dir, "memory.events.local"), 0)
}

// waitFor runs Wait until cond holds or 15 s pass, and returns the wake-ups
// seen on the way.
func waitFor(t *testing.T, set *wakeup.Set, cond func() bool) []wakeup.Wakeup {
	t.Helper()
	return waitWithin(t, set, 15*time.Second, cond)
}

// waitWithin is waitFor, for up to d.
func waitWithin(t *testing.T, set *wakeup.Set, d time.Duration, cond func() bool) []wakeup.Wakeup {
	t.Helper()
	var got []wakeup.Wakeup
	for deadline := time.Now().Add(d); !cond() && time.Now().Before(deadline); {
		w, err := set.Wait(context.Background(), 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if w.Source != wakeup.SourcePoll {
			got = append(got, w)
		}
	}
	return got
}

// drain returns the wake-ups Wait delivers before it first times out after
// 100 ms (inotify events arrive within milliseconds).
func drain(t *testing.T, set *wakeup.Set) []wakeup.Wakeup {
	t.Helper()
	var got []wakeup.Wakeup
	for len(got) < 100 {
		w, err := set.Wait(context.Background(), 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if w.Source == wakeup.SourcePoll {
			break
		}
		got = append(got, w)
	}
	return got
}

// kubepods can be removed and created again (the kubelet restarted with
// another cgroup driver, the node's slices reset). The kernel then drops an
// inotify watch on a regular file with IN_IGNORED, and sends nothing at all
// for a cgroupfs file: Sync must notice either way and watch the new file.
func TestSyncRearmsMemoryEventsAfterKubepodsIsRecreated(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	set := newSet(t, log, wakeup.Options{MemoryEventsInterval: -1}) // no rate limit: re-arming is under test
	m := New(set, Config{Sources: wakeup.Sources{MemoryEvents: true}}, log, clock.RealClock{}, nil)
	kubepods := filepath.Join(t.TempDir(), "kubepods")
	makeKubepods(t, kubepods)
	obs := &pressure.Observation{Layout: pressure.Layout{Mode: pressure.ModeV2, KubepodsMemoryDir: kubepods}}
	m.Sync(obs, nil)
	if !set.Active(wakeup.SourceMemoryEvents) {
		t.Fatalf("memory.events watch inactive after the first Sync: %+v", set.Statuses())
	}

	// Removed: IN_IGNORED makes the watch inactive, and Sync keeps it so
	// while the file is missing.
	if err := os.RemoveAll(kubepods); err != nil {
		t.Fatal(err)
	}
	waitFor(t, set, func() bool { return !set.Active(wakeup.SourceMemoryEvents) })
	m.Sync(obs, nil)
	if set.Active(wakeup.SourceMemoryEvents) {
		t.Fatalf("memory.events watch active while kubepods is gone: %+v", set.Statuses())
	}

	// Created again: the next Sync watches the new file.
	makeKubepods(t, kubepods)
	m.Sync(obs, nil)
	if !set.Active(wakeup.SourceMemoryEvents) {
		t.Fatalf("memory.events watch not re-armed once kubepods is back: %+v", set.Statuses())
	}
	writeEvents(t, filepath.Join(kubepods, "memory.events.local"), 1)
	got := drain(t, set)
	if len(got) != 1 || got[0].Source != wakeup.SourceMemoryEvents || got[0].Name != "kubepods" {
		t.Fatalf("wake-ups after a bump of the re-armed file: %+v, want one memory_events/kubepods", got)
	}

	// Replaced without any notice, as cgroupfs does (here: the old file is
	// kept open, so the kernel cannot report its removal yet).
	old, err := os.Open(filepath.Join(kubepods, "memory.events.local"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := os.RemoveAll(kubepods); err != nil {
		t.Fatal(err)
	}
	makeKubepods(t, kubepods)
	drain(t, set)
	m.Sync(obs, nil)
	m.Sync(obs, nil)
	writeEvents(t, filepath.Join(kubepods, "memory.events.local"), 1)
	got = drain(t, set)
	if len(got) != 1 || got[0].Source != wakeup.SourceMemoryEvents {
		t.Fatalf("wake-ups after a bump of the replacing file: %+v, want one memory_events", got)
	}
	if n := logs.FilterMessage("wake-up source re-armed").Len(); n != 2 {
		t.Errorf("logged %d re-arms, want 2 (one per re-arm): %v", n, logs.All())
	}
}

// The observer forgets kubepods when it goes away (KubepodsMemoryDir "")
// and may find it again under the other driver's name: the watch follows,
// and the set keeps one memory_events source, not one per path ever seen.
func TestSyncMovesMemoryEventsWatchWithKubepods(t *testing.T) {
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	m := New(set, Config{Sources: wakeup.Sources{MemoryEvents: true}}, log, clock.RealClock{}, nil)
	root := t.TempDir()
	cgroupfs, systemd := filepath.Join(root, "kubepods"), filepath.Join(root, "kubepods.slice")
	makeKubepods(t, cgroupfs)
	sync := func(dir string) []wakeup.Status {
		m.Sync(&pressure.Observation{Layout: pressure.Layout{Mode: pressure.ModeV2, KubepodsMemoryDir: dir}}, nil)
		return set.Statuses()
	}
	if st := sync(cgroupfs); len(st) != 1 || !st[0].Active || st[0].Path != filepath.Join(cgroupfs, "memory.events.local") {
		t.Fatalf("statuses %+v, want one active watch on kubepods/memory.events.local", st)
	}
	if err := os.RemoveAll(cgroupfs); err != nil {
		t.Fatal(err)
	}
	drain(t, set)
	if st := sync(""); len(st) != 1 || st[0].Active {
		t.Fatalf("statuses with kubepods gone: %+v, want one inactive watch", st)
	}
	// Found again under kubepods.slice, on a kernel without
	// memory.events.local: the hierarchical file is watched.
	if err := os.Mkdir(systemd, 0o755); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, filepath.Join(systemd, "memory.events"), 3)
	st := sync(systemd)
	if len(st) != 1 || !st[0].Active || st[0].Path != filepath.Join(systemd, "memory.events") {
		t.Fatalf("statuses %+v, want one active watch on kubepods.slice/memory.events", st)
	}
	// A pod hitting its own limit there does not wake the loop.
	writeEvents(t, filepath.Join(systemd, "memory.events"), 40)
	if got := drain(t, set); len(got) != 0 {
		t.Errorf("woken by %+v for a pod's own limit", got)
	}
	if !set.Active(wakeup.SourceMemoryEvents) {
		t.Errorf("memory_events inactive: %+v", set.Statuses())
	}
}

// psiStatus returns the set's one PSI trigger named name.
func psiStatus(t *testing.T, set *wakeup.Set, name string) wakeup.Status {
	t.Helper()
	var found []wakeup.Status
	for _, st := range set.Statuses() {
		if st.Source == wakeup.SourcePSI && st.Name == name {
			found = append(found, st)
		}
	}
	if len(found) != 1 {
		t.Fatalf("PSI triggers named %q: %+v, want exactly one (statuses %+v)", name, found, set.Statuses())
	}
	return found[0]
}

// kubepods can be removed and created again (a kubelet restart recreating
// its cgroups). The PSI trigger on its memory.pressure then points at a dead
// cgroup: the kernel reports POLLERR, or, if the removal is not noticed
// before the group is back, nothing at all. Either way Sync must arm a
// trigger on the new group's file, and report the source inactive while
// kubepods is missing.
func TestSyncRearmsKubepodsPSITriggerAfterKubepodsIsRecreated(t *testing.T) {
	parent := cgrouptest.NewUnifiedCgroup(t, "evictd-fastpath-psi")
	group := parent.Sub(t, "kubepods")
	_, err := os.Stat(group.Path("memory.pressure"))
	cgrouptest.Need(t, err == nil, "PSI in cgroup2 groups ("+group.Path("memory.pressure")+")")
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	set := newSet(t, log, wakeup.Options{})
	m := New(set, Config{Sources: wakeup.Sources{PSI: true}}, log, clock.RealClock{}, nil)
	obs := &pressure.Observation{Layout: pressure.Layout{Mode: pressure.ModeV2, KubepodsPressureDir: group.Dir()}}
	m.Sync(obs, nil)
	if st := psiStatus(t, set, "kubepods"); !st.Active || st.Path != group.Path("memory.pressure") {
		t.Fatalf("kubepods trigger after the first Sync: %+v, want active on %s", st, group.Path("memory.pressure"))
	}
	t.Logf("armed: %+v", psiStatus(t, set, "kubepods"))
	// pollErr waits until the kernel's POLLERR for a removed group has made
	// the trigger inactive (or 2 s pass), and fails on a PSI wake-up.
	pollErr := func() {
		t.Helper()
		for _, w := range waitFor(t, set, func() bool { return !set.Active(wakeup.SourcePSI) }) {
			if w.Source == wakeup.SourcePSI {
				t.Errorf("a removed group's trigger delivered %+v", w)
			}
		}
	}

	// Removed, and noticed (POLLERR) before the next Sync: inactive while
	// kubepods is missing, armed again once it is back.
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	pollErr()
	m.Sync(obs, nil)
	if st := psiStatus(t, set, "kubepods"); st.Active {
		t.Fatalf("kubepods trigger active while kubepods is gone: %+v", st)
	}
	group = parent.Sub(t, "kubepods")
	m.Sync(obs, nil)
	if st := psiStatus(t, set, "kubepods"); !st.Active {
		t.Fatalf("kubepods trigger not re-armed once kubepods is back: %+v", st)
	}
	// The new trigger is on the new group: removing it again errors it.
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	pollErr()
	if st := psiStatus(t, set, "kubepods"); st.Active {
		t.Fatalf("the re-armed trigger did not notice its group's removal: %+v", st)
	}

	// Removed and created again between two Syncs, the kernel's POLLERR not
	// yet collected: Sync finds memory.pressure is another file and re-arms;
	// the stale error must not then turn the new trigger off.
	group = parent.Sub(t, "kubepods")
	m.Sync(obs, nil) // re-arms on the group created above
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	parent.Sub(t, "kubepods") // created again, silently
	m.Sync(obs, nil)
	waitWithin(t, set, 2*time.Second, func() bool { return false }) // 2 s of Wait: any stale POLLERR is dispatched
	if st := psiStatus(t, set, "kubepods"); !st.Active {
		t.Fatalf("kubepods trigger after a silent re-creation: %+v, want active", st)
	}
	if n := logs.FilterMessage("wake-up source re-armed").FilterField(zap.String("source", string(wakeup.SourcePSI))).Len(); n != 3 {
		t.Errorf("logged %d PSI re-arms, want 3 (one per re-arm): %v", n, logs.FilterMessage("wake-up source re-armed").All())
	}
}

// TestSetThresholdsRearms: thresholds given anew (placement after a
// kubelet restart) re-arm the memcg threshold at the new value on the next
// Sync, in a real cgroup (v1); on v2, where the wake-up does not depend on
// the thresholds, the next Sync keeps kubepods' one memory.events watch
// (setThresholdsV2).
func TestSetThresholdsRearms(t *testing.T) {
	if cgrouptest.V2() {
		setThresholdsV2(t)
		return
	}
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-fastpath-set")
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	parse := func(v string) []thresholds.Threshold {
		ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": v}})
		if err != nil {
			t.Fatal(err)
		}
		return ths
	}
	m := New(set, Config{Sources: wakeup.Sources{Memcg: true}, Thresholds: parse("300Mi")}, log, clock.RealClock{}, nil)
	usage, err := cg.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	capacity := usage + 532*mi
	obs, sig := observation(cg.Dir(), usage, usage, capacity)
	m.Sync(obs, sig)
	h := m.memcg[thresholds.MemoryAvailable]
	if h == nil || h.h.Armed() != usage+232*mi {
		t.Fatalf("armed at %v, want %d", h, usage+232*mi)
	}
	// 200Mi higher: crossed 200Mi sooner.
	m.SetThresholds(parse("500Mi"))
	if got := h.h.Armed(); got != usage+232*mi {
		t.Errorf("re-armed at %d before a Sync", got)
	}
	m.Sync(obs, sig)
	if got := m.memcg[thresholds.MemoryAvailable].h.Armed(); got != usage+32*mi {
		t.Errorf("armed at %d after memory.available moved to 500Mi, want %d", got, usage+32*mi)
	}
}

func setThresholdsV2(t *testing.T) {
	kubepods := cgrouptest.NewMemoryCgroup(t, "evictd-fastpath-set")
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	parse := func(v string) []thresholds.Threshold {
		ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": v}})
		if err != nil {
			t.Fatal(err)
		}
		return ths
	}
	m := New(set, Config{Sources: wakeup.Sources{Memcg: true, MemoryEvents: true}, Thresholds: parse("300Mi")}, log, clock.RealClock{}, nil)
	usage, err := kubepods.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	obs, sig := observation(kubepods.Dir(), usage, usage, usage+532*mi)
	obs.Layout.Mode, obs.Layout.KubepodsMemoryDir = pressure.ModeV2, kubepods.Dir()
	m.Sync(obs, sig)
	m.SetThresholds(parse("500Mi"))
	m.Sync(obs, sig)
	st := set.Statuses()
	if len(m.memcg) != 0 || len(st) != 1 || st[0].Source != wakeup.SourceMemoryEvents || !st[0].Active || strings.TrimSuffix(st[0].Path, ".local") != kubepods.Path("memory.events") {
		t.Errorf("after new thresholds: memcg %v, statuses %+v; want kubepods' one active memory.events (.local) watch", m.memcg, st)
	}
}
