// SPDX-License-Identifier: Apache-2.0

package fastpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

// TestSyncLeavesAReadOnlyMemcgUnexported: on cgroup v1 the DaemonSet's
// read-only /sys/fs/cgroup mount refuses cgroup.event_control (EROFS). That
// is by design, so the memcg source must not read as failed: no
// evictd_wakeup_source_active series for it, no retry, while a source that
// can arm (PSI here) keeps its series. The cgroup is real and so is the
// read-only bind mount of it. On v2 the same mount costs nothing: kubepods'
// memory.events is watched through it (readOnlyV2).
func TestSyncLeavesAReadOnlyMemcgUnexported(t *testing.T) {
	cgrouptest.Need(t, os.Geteuid() == 0, "root, to bind-mount a cgroup read-only")
	cg := cgrouptest.NewMemoryCgroup(t, "evictd-fastpath-ro")
	ro := readOnlyBind(t, cg.Dir())
	if cgrouptest.V2() {
		readOnlyV2(t, ro)
		return
	}

	m, err := metrics.New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	src := wakeup.Sources{Memcg: true}
	var names []string
	for _, s := range src.List() {
		names = append(names, string(s))
	}
	m.InitWakeupSources(names...)
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	mgr := New(set, Config{Sources: src, Thresholds: ths, Retry: 1}, log, clock.RealClock{}, m)
	usage, err := cg.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	obs, sig := observation(ro, usage, usage, usage+32*mi+300*mi)
	for range 3 {
		mgr.Sync(obs, sig)
	}
	if !mgr.memcgReadOnly {
		t.Fatalf("a memcg threshold on a read-only mount was not recognised as such; statuses %+v", set.Statuses())
	}
	// One attempt: the retry interval (1 ns) has passed twice since.
	if n := len(set.Statuses()); n != 1 {
		t.Errorf("%d memcg registrations tried; want 1 (a read-only mount is not retried)", n)
	}
	want := `# HELP evictd_wakeup_source_active ` + helpOf(t, m, "evictd_wakeup_source_active") + `
# TYPE evictd_wakeup_source_active gauge
evictd_wakeup_source_active{source="kick"} 1
evictd_wakeup_source_active{source="poll"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "evictd_wakeup_source_active"); err != nil {
		t.Error(err)
	}

	// The same cgroup through its writable path arms, and is exported.
	m2, _ := metrics.New(buildinfo.Info{Version: "test"})
	m2.InitWakeupSources(names...)
	mgr2 := New(newSet(t, log, wakeup.Options{}), Config{Sources: src, Thresholds: ths}, log, clock.RealClock{}, m2)
	obs, sig = observation(cg.Dir(), usage, usage, usage+32*mi+300*mi)
	mgr2.Sync(obs, sig)
	want2 := strings.Replace(want, "gauge\n", "gauge\n"+`evictd_wakeup_source_active{source="memcg_threshold"} 1`+"\n", 1)
	if err := testutil.GatherAndCompare(m2.Registry(), strings.NewReader(want2), "evictd_wakeup_source_active"); err != nil {
		t.Errorf("a writable cgroup: %v", err)
	}
}

// readOnlyBind bind-mounts dir read-only on a new directory, as the
// DaemonSet mounts the host's cgroups, until the test ends.
func readOnlyBind(t *testing.T, dir string) string {
	t.Helper()
	ro := t.TempDir()
	if err := unix.Mount(dir, ro, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remounting %s read-only: %v", ro, err)
	}
	return ro
}

// readOnlyV2: through the read-only mount of a v2 kubepods, Sync watches
// its memory.events (inotify needs no write), and the source is exported
// active; memcg thresholds, which v2 lacks, are not exported at all.
func readOnlyV2(t *testing.T, ro string) {
	m, err := metrics.New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	src := wakeup.Sources{Memcg: true, MemoryEvents: true}
	l := pressure.Layout{Mode: pressure.ModeV2}
	var names []string
	for _, s := range src.On(l).List() {
		names = append(names, string(s))
	}
	m.InitWakeupSources(names...)
	log := zaptest.NewLogger(t)
	set := newSet(t, log, wakeup.Options{})
	ths, err := thresholds.Parse(thresholds.Spec{Hard: map[string]string{"memory.available": "300Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	mgr := New(set, Config{Sources: src.On(l), Thresholds: ths, Retry: 1}, log, clock.RealClock{}, m)
	obs, sig := observation(ro, 100*mi, 100*mi, 1024*mi)
	obs.Layout.Mode, obs.Layout.KubepodsMemoryDir = pressure.ModeV2, ro
	mgr.Sync(obs, sig)
	if st := set.Statuses(); len(st) != 1 || !st[0].Active || strings.TrimSuffix(st[0].Path, ".local") != filepath.Join(ro, "memory.events") {
		t.Errorf("statuses %+v; want one active memory.events watch through the read-only mount", st)
	}
	want := `# HELP evictd_wakeup_source_active ` + helpOf(t, m, "evictd_wakeup_source_active") + `
# TYPE evictd_wakeup_source_active gauge
evictd_wakeup_source_active{source="kick"} 1
evictd_wakeup_source_active{source="memory_events"} 1
evictd_wakeup_source_active{source="poll"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "evictd_wakeup_source_active"); err != nil {
		t.Error(err)
	}
}

// helpOf is a metric family's help text, as the registry has it.
func helpOf(t *testing.T, m *metrics.Metrics, name string) string {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("no %s in the registry", name)
	return ""
}
