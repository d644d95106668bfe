// SPDX-License-Identifier: Apache-2.0

// Package fastpath arms the agent's event-driven wake-up sources
// (pkg/pressure/wakeup) where the host's cgroup layout allows, and keeps them
// armed as the node changes: memcg threshold eventfds on cgroup v1 at the
// usage where each hard memory threshold is crossed (re-armed as
// inactive_file drifts), PSI triggers on the host's and kubepods' memory
// pressure, and inotify on kubepods' memory.events.local (or memory.events)
// on cgroup v2; the kubepods trigger and watch are armed again whenever
// kubepods is removed and created anew.
// Each source that cannot be armed is logged by the wake-up set and left to
// polling.
package fastpath

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

// DefaultPSITrigger wakes the agent when tasks stalled on memory for 100 ms
// within a second: rare on a healthy node, and the first sign of reclaim
// trouble. Without CAP_SYS_RESOURCE the wake-up set falls back to 200 ms in
// 2 s, which the kernel accepts from anyone.
var DefaultPSITrigger = wakeup.PSITrigger{Stall: 100 * time.Millisecond, Window: time.Second}

// DefaultRetry is how long a memcg threshold that failed to arm waits
// before the next attempt.
const DefaultRetry = 30 * time.Second

// Config configures a Manager.
type Config struct {
	Sources wakeup.Sources
	// Thresholds: the hard memory.available and allocatableMemory.available
	// ones are armed as memcg thresholds.
	Thresholds     []thresholds.Threshold
	PSITrigger     wakeup.PSITrigger
	RearmTolerance int64
	Retry          time.Duration
}

// Set is the part of *wakeup.Set the manager uses.
type Set interface {
	AddMemcgThreshold(name, dir string, usage int64) (*wakeup.MemcgThreshold, error)
	AddPSITrigger(name, pressureFile string, want wakeup.PSITrigger) (*wakeup.PSIWatch, error)
	WatchMemoryEvents(name, path string) (*wakeup.EventsWatch, error)
	Active(src wakeup.Source) bool
}

type memcgState struct {
	dir      string
	h        *wakeup.MemcgThreshold
	failedAt time.Time
}

// Manager arms and re-arms the sources. Sync is called from the agent loop
// after each observation.
type Manager struct {
	set     Set
	cfg     Config
	log     *zap.Logger
	clk     clock.PassiveClock
	metrics *metrics.Metrics

	memcg map[thresholds.Signal]*memcgState
	// done holds the files a node PSI trigger was tried on; each is tried
	// once (a failure is logged by the set and stays reported inactive;
	// trying again every pass would only repeat it).
	done map[string]bool
	// psi and events are the PSI trigger on kubepods' memory.pressure and
	// the watch on its memory.events; both are re-armed on every Sync (one
	// stat when nothing changed).
	psi, events kubepodsSource
	active      string
	logged      bool
	// memcgReadOnly: a memcg threshold failed with EROFS. The DaemonSet
	// mounts /sys/fs/cgroup read-only on purpose, so on v1 this source
	// cannot arm there until evictd runs with another mount: it is neither
	// retried nor exported, and evictd_wakeup_source_active stays a
	// signal of sources that should arm and did not.
	memcgReadOnly bool
}

// New returns a manager adding sources to set.
func New(set Set, cfg Config, log *zap.Logger, clk clock.PassiveClock, m *metrics.Metrics) *Manager {
	if log == nil {
		log = zap.NewNop()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if cfg.PSITrigger == (wakeup.PSITrigger{}) {
		cfg.PSITrigger = DefaultPSITrigger
	}
	if cfg.RearmTolerance == 0 {
		cfg.RearmTolerance = wakeup.DefaultRearmTolerance
	}
	if cfg.Retry == 0 {
		cfg.Retry = DefaultRetry
	}
	return &Manager{set: set, cfg: cfg, log: log, clk: clk, metrics: m,
		memcg: map[thresholds.Signal]*memcgState{}, done: map[string]bool{}}
}

// SetThresholds arms the memcg thresholds at ths from the next Sync on (a
// threshold whose value moved is re-armed there, as one whose crossing
// point drifted). Called from the loop's goroutine, as Sync is.
func (m *Manager) SetThresholds(ths []thresholds.Threshold) {
	m.cfg.Thresholds = ths
}

// OwnProcPressureMemory is system-wide memory PSI as this process sees it;
// the node PSI trigger falls back to it when the host root's is read-only.
const OwnProcPressureMemory = "/proc/pressure/memory"

// Sync arms what the observation's layout allows, re-arms the memcg
// thresholds whose crossing point has drifted, and re-arms kubepods' PSI
// trigger and memory.events watch when kubepods was created anew.
func (m *Manager) Sync(obs *pressure.Observation, sig map[thresholds.Signal]thresholds.Observation) {
	l := obs.Layout
	if m.cfg.Sources.PSI {
		if l.ProcPressureDir != "" {
			m.once(filepath.Join(l.ProcPressureDir, "memory"), func(p string) {
				_, err := m.set.AddPSITrigger("node", p, m.cfg.PSITrigger)
				if err != nil && p != OwnProcPressureMemory {
					// The DaemonSet mounts the host's /proc read-only, so a
					// trigger cannot be written there (EROFS). System-wide PSI
					// is not namespaced: this process's own procfs shows the
					// same file, and it is writable.
					m.once(OwnProcPressureMemory, func(own string) {
						_, _ = m.set.AddPSITrigger("node", own, m.cfg.PSITrigger)
					})
				}
			})
		}
		m.syncPSI(l.KubepodsPressureDir)
	}
	if m.cfg.Sources.MemoryEvents && l.Mode == pressure.ModeV2 {
		m.syncEvents(l.KubepodsMemoryDir)
	}
	if m.cfg.Sources.Memcg && !m.memcgReadOnly && (l.Mode == pressure.ModeV1 || l.Mode == pressure.ModeHybrid) && obs.Summary != nil {
		for _, th := range m.cfg.Thresholds {
			if !th.Hard() {
				continue
			}
			switch th.Signal {
			case thresholds.MemoryAvailable:
				m.syncMemcg(th, "node", l.NodeMemoryDir, obs.Summary.Node.Memory, sig)
			case thresholds.AllocatableMemoryAvailable:
				m.syncMemcg(th, "kubepods", l.KubepodsMemoryDir, podsMemory(obs.Summary), sig)
			}
		}
	}
	m.export()
}

// rearmable is a wake-up source on a kubepods file (*wakeup.PSIWatch,
// *wakeup.EventsWatch).
type rearmable interface {
	Rearm() (bool, error)
	Close()
}

// kubepodsSource is a wake-up source kept on a file of kubepods' current
// directory.
type kubepodsSource struct {
	src  rearmable
	path string
}

// keep keeps the source on path ("" while the observer has lost kubepods).
// kubepods may be removed and created again, under the same name or another
// driver's: the kernel then reports an error on a PSI trigger, drops an
// inotify watch with IN_IGNORED, or, on cgroupfs, says nothing and leaves
// either on the removed file. Rearm notices all three (the last by the
// file's device and inode) and arms again once the file exists; add arms a
// source on a new path.
func (k *kubepodsSource) keep(path string, add func(string) rearmable) {
	if k.src != nil && path != "" && path != k.path {
		k.src.Close()
		k.src = nil
	}
	switch {
	case k.src != nil:
		// A failure keeps the source inactive; the set logs it once.
		_, _ = k.src.Rearm()
	case path != "":
		k.src, k.path = add(path), path
	}
}

// syncEvents keeps the memory.events watch on kubepods' directory dir.
func (m *Manager) syncEvents(dir string) {
	m.events.keep(fileIn(dir, "memory.events"), func(p string) rearmable {
		if w, _ := m.set.WatchMemoryEvents("kubepods", p); w != nil {
			return w
		}
		return nil // a nil *EventsWatch must not become a non-nil interface
	})
}

// syncPSI keeps the PSI trigger on kubepods' memory.pressure in dir.
func (m *Manager) syncPSI(dir string) {
	m.psi.keep(fileIn(dir, "memory.pressure"), func(p string) rearmable {
		if w, _ := m.set.AddPSITrigger("kubepods", p, m.cfg.PSITrigger); w != nil {
			return w
		}
		return nil
	})
}

// fileIn is dir/name, or "" when dir is "".
func fileIn(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

func (m *Manager) once(path string, arm func(string)) {
	if m.done[path] {
		return
	}
	m.done[path] = true
	arm(path)
}

func podsMemory(s *statsapi.Summary) *statsapi.MemoryStats {
	for i := range s.Node.SystemContainers {
		if s.Node.SystemContainers[i].Name == statsapi.SystemContainerPods {
			return s.Node.SystemContainers[i].Memory
		}
	}
	return nil
}

// ArmAt is the memory.usage_in_bytes value at which a memcg threshold must be
// armed for th, from the cgroup's memory stats (inactive_file is usage minus
// working set) and the signal's observation (capacity).
func ArmAt(th thresholds.Threshold, mem *statsapi.MemoryStats, o thresholds.Observation) (int64, error) {
	if mem == nil || mem.UsageBytes == nil || mem.WorkingSetBytes == nil {
		return 0, fmt.Errorf("no usage and working set for %s", th.Signal)
	}
	usage, ws := int64(*mem.UsageBytes), int64(*mem.WorkingSetBytes)
	inactive := max(usage-ws, 0)
	return wakeup.ThresholdUsage(o.Capacity, th.Value.Amount(o.Capacity), inactive)
}

func (m *Manager) syncMemcg(th thresholds.Threshold, name, dir string, mem *statsapi.MemoryStats, sig map[thresholds.Signal]thresholds.Observation) {
	if dir == "" {
		return
	}
	o, ok := sig[th.Signal]
	if !ok {
		return
	}
	want, err := ArmAt(th, mem, o)
	if err != nil {
		m.log.Debug("memcg threshold not armed", zap.String("signal", string(th.Signal)), zap.String("reason", err.Error()))
		return
	}
	st := m.memcg[th.Signal]
	now := m.clk.Now()
	switch {
	case st == nil || st.dir != dir:
		h, err := m.set.AddMemcgThreshold(name, dir, want)
		st = &memcgState{dir: dir, h: h}
		if err != nil {
			st.failedAt = now
			m.noteReadOnly(err, dir)
		}
		m.memcg[th.Signal] = st
	case st.h.Armed() == 0:
		if now.Sub(st.failedAt) < m.cfg.Retry {
			return
		}
		if err := st.h.Arm(want); err != nil {
			st.failedAt = now
			m.noteReadOnly(err, dir)
		}
	case wakeup.NeedRearm(st.h.Armed(), want, m.cfg.RearmTolerance):
		m.log.Debug("re-arming memcg threshold", zap.String("signal", string(th.Signal)),
			zap.Int64("from", st.h.Armed()), zap.Int64("to", want))
		if err := st.h.Arm(want); err != nil {
			st.failedAt = now
		}
	}
}

// noteReadOnly marks the memcg source unavailable when err says the cgroup
// mount is read-only.
func (m *Manager) noteReadOnly(err error, dir string) {
	if m.memcgReadOnly || !errors.Is(err, unix.EROFS) {
		return
	}
	m.memcgReadOnly = true
	m.log.Info("memcg thresholds unavailable: the cgroup mount is read-only (the DaemonSet's default); "+
		"not retried and not exported, PSI and adaptive polling wake the agent instead",
		zap.String("path", dir))
}

// EventDriven reports whether a memcg threshold is armed for s's hard
// threshold: its crossing then wakes the agent at once.
func (m *Manager) EventDriven(s thresholds.Signal) bool {
	st := m.memcg[s]
	return st != nil && st.h != nil && st.h.Armed() != 0
}

// export sets the active-sources gauge and logs the set of active sources
// whenever it changes.
func (m *Manager) export() {
	var active []string
	for _, src := range m.cfg.Sources.List() {
		if src == wakeup.SourceMemcgThreshold && m.memcgReadOnly {
			m.metrics.UnexportWakeupSource(string(src))
			continue
		}
		on := src == wakeup.SourcePoll || src == wakeup.SourceKick || m.set.Active(src)
		m.metrics.SetWakeupSourceActive(string(src), on)
		if on && src != wakeup.SourcePoll && src != wakeup.SourceKick {
			active = append(active, string(src))
		}
	}
	slices.Sort(active)
	s := strings.Join(active, ",")
	if !m.logged || s != m.active {
		m.active, m.logged = s, true
		m.log.Info("wake-up sources", zap.Strings("active", active), zap.Bool("memcg", m.cfg.Sources.Memcg),
			zap.Bool("psi", m.cfg.Sources.PSI), zap.Bool("memoryEvents", m.cfg.Sources.MemoryEvents))
	}
}
