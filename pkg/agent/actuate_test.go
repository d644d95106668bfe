// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/actuator"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// fakeActuator records the actuator's writes; its errors are scripted.
type fakeActuator struct {
	mu                 sync.Mutex
	checkErr, writeErr error
	contained, relaxed []string
	onRelax            func(cgroup string)
}

func (a *fakeActuator) Check() error { return a.checkErr }

func (a *fakeActuator) Contain(cg string) (actuator.Contained, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.contained = append(a.contained, cg)
	return actuator.Contained{File: cg + "/memory.high", Limit: 116 << 20, Usage: 100 << 20}, a.writeErr
}

func (a *fakeActuator) Relax(cg string) (actuator.Relaxed, error) {
	a.mu.Lock()
	a.relaxed = append(a.relaxed, cg)
	err := a.writeErr
	a.mu.Unlock()
	if err == nil && a.onRelax != nil {
		a.onRelax(cg)
	}
	return actuator.Relaxed{File: cg + "/memory.high", From: "241172480", To: "268435456"}, err
}

// podEvents records the Events the loop leaves on pods.
type podEvents struct {
	mu   sync.Mutex
	list []string
}

func (e *podEvents) emit(ref v1.ObjectReference, _, reason, _, note string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ref.Name+" "+reason+": "+note)
}

func (n *simNode) runWithActuator(t *testing.T, cfg LoopConfig, d time.Duration, act Actuator, ev *podEvents, fams ...family.Family) {
	t.Helper()
	w := &simWaker{n: n}
	deps := Deps{Observer: n, Waker: w, Pods: n, Evictor: n, Metrics: n.metrics, Log: zaptest.NewLogger(t), Clock: n.clk, Go: syncCall,
		Actuator: act, PodEvents: ev.emit}
	if len(fams) > 0 {
		deps.Families = fams
	}
	l, err := NewLoop(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	n.loop = l
	n.runMore(t, d, w)
}

func newMetrics(t *testing.T) *metrics.Metrics {
	t.Helper()
	m, err := metrics.New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A hard memory victim is contained once its eviction is accepted, its own
// pod cgroup and nothing else, with an Event saying so; soft victims and
// calls not accepted are left alone.
func TestLoopContainsAcceptedHardVictims(t *testing.T) {
	t.Run("hard", func(t *testing.T) {
		n := newSimNode(t, 4096*mi, base250, threePods()...)
		n.metrics = newMetrics(t)
		act, ev := &fakeActuator{}, &podEvents{}
		n.runWithActuator(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 10*time.Second, act, ev)
		if !eq(n.victims(), []string{"a"}) {
			t.Fatalf("eviction calls %v, want a", n.victims())
		}
		if want := []string{n.pod("a").cgroup()}; !eq(act.contained, want) {
			t.Errorf("contained %v, want %v", act.contained, want)
		}
		if len(ev.list) != 1 || !strings.HasPrefix(ev.list[0], "a "+evict.ReasonVictimContained+": ") || !strings.Contains(ev.list[0], "116Mi") {
			t.Errorf("events %q, want one %s on a naming the limit", ev.list, evict.ReasonVictimContained)
		}
		actuatorMetrics(t, n.metrics, `
evictd_actuator_writable 1
evictd_actuator_writes_total{action="contain",result="error"} 0
evictd_actuator_writes_total{action="contain",result="ok"} 1
evictd_actuator_writes_total{action="relax",result="error"} 0
evictd_actuator_writes_total{action="relax",result="ok"} 0`)
		if p := n.loop.Problem(); p != nil {
			t.Errorf("Problem() = %v", p)
		}
	})
	t.Run("soft and refused", func(t *testing.T) {
		n := newSimNode(t, 4096*mi, base250, threePods()...)
		n.pod("a").pdb = true
		act, ev := &fakeActuator{}, &podEvents{}
		spec := thresholds.Spec{Soft: map[string]string{"memory.available": "300Mi"}, GracePeriod: map[string]string{"memory.available": "1s"}}
		n.runWithActuator(t, testLoopConfig(mustThresholds(t, spec)), 10*time.Second, act, ev)
		if len(n.victims()) < 2 || n.victims()[0] != "a" {
			t.Fatalf("eviction calls %v, want a refused by its PDB, then another", n.victims())
		}
		if len(act.contained) != 0 || len(ev.list) != 0 {
			t.Errorf("contained %v (events %q): soft victims and refused calls must not be", act.contained, ev.list)
		}
	})
}

// actuatorMetrics compares the actuator's metrics with want (exposition
// lines, without HELP and TYPE).
func actuatorMetrics(t *testing.T, m *metrics.Metrics, want string) {
	t.Helper()
	head := `# HELP evictd_actuator_writable 1 while --actuator can write the pod cgroups' memory limits (its check at start and its last write succeeded); 0 when it is off, or refused (the log and /readyz say why: usually the chart's actuator.enabled not set, so the mount is read-only).
# TYPE evictd_actuator_writable gauge
`
	writes := "# HELP evictd_actuator_writes_total The actuator's writes to pod cgroups, by action (contain: a hard memory victim's growth stopped once its eviction was accepted; relax: a container stuck at memory.high given its memory.max as memory.high) and result (ok, error).\n# TYPE evictd_actuator_writes_total counter\n"
	var b strings.Builder
	b.WriteString(head)
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		if strings.HasPrefix(l, "evictd_actuator_writable") {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(writes)
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		if strings.HasPrefix(l, "evictd_actuator_writes_total") {
			b.WriteString(l + "\n")
		}
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(b.String()), "evictd_actuator_writable", "evictd_actuator_writes_total"); err != nil {
		t.Error(err)
	}
}

// An actuator that cannot write says so in readiness and its metric, and
// evictd goes on evicting without it.
func TestLoopActuatorFailureShows(t *testing.T) {
	n := newSimNode(t, 4096*mi, base250, threePods()...)
	n.metrics = newMetrics(t)
	rofs := errors.New("open /host/sys/fs/cgroup/kubepods.slice/memory.high: read-only file system")
	act := &fakeActuator{checkErr: rofs, writeErr: rofs}
	n.runWithActuator(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 10*time.Second, act, &podEvents{})
	if !eq(n.victims(), []string{"a"}) {
		t.Fatalf("eviction calls %v, want a, actuator or not", n.victims())
	}
	if p := n.loop.Problem(); p == nil || !strings.Contains(p.Error(), "actuator: "+rofs.Error()) {
		t.Errorf("Problem() = %v; want the actuator's failure", p)
	}
	actuatorMetrics(t, n.metrics, `
evictd_actuator_writable 0
evictd_actuator_writes_total{action="contain",result="error"} 1
evictd_actuator_writes_total{action="contain",result="ok"} 0
evictd_actuator_writes_total{action="relax",result="error"} 0
evictd_actuator_writes_total{action="relax",result="ok"} 0`)
}

// jvmReader scripts one container per pod whose memory.events high grows
// at rate[pod] a second; a test changes the rates as it goes.
type jvmReader struct {
	n      *simNode
	mu     sync.Mutex
	rate   map[string]uint64
	counts map[string]uint64
	last   time.Time
}

func (r *jvmReader) read(obs *pressure.Observation) ([]memhigh.Sample, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.n.clk.Now()
	if r.last.IsZero() {
		r.last = t0
	}
	secs := now.Sub(r.last).Seconds()
	r.last = now
	var out []memhigh.Sample
	for _, ps := range obs.Summary.Pods {
		name := ps.PodRef.Name
		r.counts[name] += uint64(float64(r.rate[name]) * secs)
		out = append(out, memhigh.Sample{PodUID: ps.PodRef.UID, ContainerID: "c-" + name, Cgroup: r.n.pod(name).cgroup() + "/c-" + name,
			High: 256 * mi, HighSet: true, HighEvents: r.counts[name], HasPSI: true})
	}
	return out, nil
}

// Stage 1: with the actuator, a container stuck on memory.events high for
// the grace period has its memory.high relaxed, once, instead of its pod
// evicted; the pod is evicted only if it stays stuck for another grace
// period, and at once, as without the actuator, if the relax fails.
func TestLoopMemoryHighRelaxesFirst(t *testing.T) {
	th := memhigh.Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: 10 * time.Second, Grace: 30 * time.Second}
	for _, tc := range []struct {
		name      string
		stabilise bool
		writeErr  error
		// evictedAt bounds the eviction (zero: none).
		evictedFrom, evictedBy time.Duration
		relaxed                int
		protected              bool
	}{
		// Relaxed at 35 s (half the window, then the grace), quiet after.
		{name: "stabilises", stabilise: true, relaxed: 1},
		// Relaxed at 35 s, stuck again 5 s later, evicted 30 s after that.
		{name: "persists", evictedFrom: 69 * time.Second, evictedBy: 72 * time.Second, relaxed: 1},
		{name: "relax fails", writeErr: errors.New("read-only file system"), evictedFrom: 35 * time.Second, evictedBy: 37 * time.Second},
		// A pod evictd never evicts is never relaxed either.
		{name: "protected", protected: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prio int32
			if tc.protected {
				prio = 2000001000 // system-node-critical
			}
			n := newSimNode(t, 4096*mi, 250*mi,
				&simPod{name: "jvm", usage: 300 * mi, request: 256 * mi, grace: 20, exitIn: 2 * time.Second, priority: prio},
				&simPod{name: "quiet", usage: 300 * mi, request: 256 * mi, grace: 20})
			n.metrics = newMetrics(t)
			r := &jvmReader{n: n, rate: map[string]uint64{"jvm": 200}, counts: map[string]uint64{}}
			act, ev := &fakeActuator{writeErr: tc.writeErr}, &podEvents{}
			if tc.stabilise {
				act.onRelax = func(string) {
					r.mu.Lock()
					r.rate["jvm"] = 0
					r.mu.Unlock()
				}
			}
			cfg := testLoopConfig([]thresholds.Threshold{th.Threshold()})
			cfg.MemoryHigh = th
			relax := newActuation(act, ev.emit, n.metrics, zaptest.NewLogger(t)).relaxer()
			mh := family.NewMemHigh(th, r.read, n.Pods, n.metrics, relax).Protect(func(p *v1.Pod) string { return rank.SkipReason(p, cfg.Rank) })
			n.runWithActuator(t, cfg, 100*time.Second, act, ev, mh)

			if want := tc.relaxed + map[bool]int{true: 1}[tc.writeErr != nil]; len(act.relaxed) != want {
				t.Errorf("relax calls %v, want %d", act.relaxed, want)
			}
			if len(act.relaxed) > 0 && act.relaxed[0] != n.pod("jvm").cgroup()+"/c-jvm" {
				t.Errorf("relaxed %q, want jvm's container cgroup", act.relaxed[0])
			}
			if tc.evictedBy == 0 {
				if v := n.victims(); len(v) != 0 {
					t.Errorf("evicted %v; the relaxed container stabilised", v)
				}
			} else {
				if !eq(n.victims(), []string{"jvm"}) {
					t.Fatalf("eviction calls %v, want jvm", n.victims())
				}
				if at := n.calls[0].at.Sub(t0); at < tc.evictedFrom || at > tc.evictedBy {
					t.Errorf("jvm evicted at %v, want within %v..%v", at, tc.evictedFrom, tc.evictedBy)
				}
			}
			relaxedEvents := 0
			for _, e := range ev.list {
				if strings.HasPrefix(e, "jvm "+evict.ReasonMemoryHighRelaxed+": ") && strings.Contains(e, "c-jvm") && strings.Contains(e, "memory.events high") {
					relaxedEvents++
				}
			}
			if relaxedEvents != tc.relaxed {
				t.Errorf("events %q, want %d %s naming the container and the signal", ev.list, tc.relaxed, evict.ReasonMemoryHighRelaxed)
			}
		})
	}
}

// A write that fails for the victim's own cgroup (gone before the write,
// or growing past each limit tried) is not the actuator failing: readiness
// stays green, the write still counts as an error.
func TestLoopActuatorVictimFailureKeepsReadiness(t *testing.T) {
	for _, werr := range []error{
		fmt.Errorf("open /host/sys/fs/cgroup/kubepods.slice/pod-a/memory.high: %w", fs.ErrNotExist),
		fmt.Errorf("writing 1073741824 to memory.limit_in_bytes: the cgroup kept growing past it (%w)", syscall.EBUSY),
	} {
		n := newSimNode(t, 4096*mi, base250, threePods()...)
		n.metrics = newMetrics(t)
		n.runWithActuator(t, testLoopConfig(mustThresholds(t, memSpec("300Mi", "200Mi"))), 10*time.Second, &fakeActuator{writeErr: werr}, &podEvents{})
		if !eq(n.victims(), []string{"a"}) {
			t.Fatalf("eviction calls %v, want a", n.victims())
		}
		if p := n.loop.Problem(); p != nil {
			t.Errorf("%v: Problem() = %v; want none, the actuator can write", werr, p)
		}
		actuatorMetrics(t, n.metrics, `
evictd_actuator_writable 1
evictd_actuator_writes_total{action="contain",result="error"} 1
evictd_actuator_writes_total{action="contain",result="ok"} 0
evictd_actuator_writes_total{action="relax",result="error"} 0
evictd_actuator_writes_total{action="relax",result="ok"} 0`)
	}
}
