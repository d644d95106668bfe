package fastpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
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

func TestSyncArmsRearmsAndWakesOnARealCrossing(t *testing.T) {
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-fastpath")
	dir := cg.Dir()
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	m := New(set, Config{Sources: Sources{Memcg: true}, Thresholds: ths}, log, clock.RealClock{}, nil)

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

func TestSyncLeavesOtherModesAndDisabledSourcesAlone(t *testing.T) {
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	ths, _ := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	tests := []struct {
		name string
		src  Sources
		mode pressure.Mode
	}{
		{"memcg on cgroup v2: no memcg thresholds there", Sources{Memcg: true}, pressure.ModeV2},
		{"memcg switched off", Sources{PSI: false}, pressure.ModeV1},
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
	m := New(set, Config{Sources: Sources{PSI: true}}, log, clock.RealClock{}, nil)
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
	m := New(set, Config{Sources: Sources{PSI: true}}, log, clock.RealClock{}, nil)
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
