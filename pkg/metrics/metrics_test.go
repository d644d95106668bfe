// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/thresholds"
)

// populated returns metrics with every evictd_* family holding at least one
// series, as a running agent would have them.
func populated(t *testing.T) *Metrics {
	t.Helper()
	m, err := New(buildinfo.Info{Version: "v1.2.3-test"})
	if err != nil {
		t.Fatal(err)
	}
	m.InitSignals(thresholds.Signals()...)
	m.InitWakeupSources("timer", "psi")
	m.InitResources("memory", "nodefs")
	m.SetSignal(thresholds.MemoryAvailable, 1<<30, 8<<30)
	m.SetSignal(thresholds.PIDAvailable, 30000, 32768)
	m.SetThreshold(thresholds.MemoryAvailable, true, false, 300<<20)
	m.SetThreshold(thresholds.PIDAvailable, true, false, 3276)
	m.SetKubeletThreshold(thresholds.MemoryAvailable, 100<<20, false)
	m.SetKubeletThreshold(thresholds.NodeFsInodesFree, 50000, true)
	m.SetKubeletThresholdCompared(thresholds.MemoryAvailable, true)
	m.KubeletRestarted()
	m.SetKubeletThresholdsUnknown("missing")
	m.SetNodeLeaseHeld(true)
	m.SetSandboxActive("seccomp", true)
	m.SetNodeBrake("memory", true, time.Unix(1700000000, 0))
	m.NodeBrakeWrite("taint", nil)
	m.SetSignal(thresholds.MemoryPressureSome, 6_000_000, 10_000_000)
	m.SetStallThreshold(thresholds.MemoryPressureSome, true, true, 0.3)
	m.SetMemoryHigh([]MemoryHighContainer{{Container: "app", Signal: "high", Stuck: true}})
	m.ActuatorWrote(ActuatorContain, nil)
	m.EvictionMemoryBack(thresholds.MemoryAvailable, 1500*time.Millisecond)
	start := time.Unix(1700000000, 0)
	m.ObservationDone(start, start.Add(3*time.Millisecond), nil)
	m.APIRequest("list", "pods", "200")
	m.APIRequestDuration("list", "pods", 20*time.Millisecond)
	m.InitShadow(ShadowSeries{Signals: map[string]string{"memory.available": "memory"}, Resources: []string{"memory"},
		KubeletResources: []string{"memory"}, Episodes: []string{"none", "memory"}, Firsts: []string{"evictd", "none"}})
	return m
}

func TestLintClean(t *testing.T) {
	m := populated(t)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// The lint must have seen the Go and process collectors too.
	var sawGo, sawProcess, sawOwn bool
	for _, mf := range mfs {
		name := mf.GetName()
		sawGo = sawGo || strings.HasPrefix(name, "go_")
		sawProcess = sawProcess || strings.HasPrefix(name, "process_")
		sawOwn = sawOwn || strings.HasPrefix(name, "evictd_")
	}
	if !sawGo || !sawProcess || !sawOwn {
		t.Errorf("gathered families lack go_ (%v), process_ (%v) or evictd_ (%v)", sawGo, sawProcess, sawOwn)
	}
}

// TestBuildInfo: evictd_build_info is client_golang's version collector's
// family, with the labels dashboards and alerts read (version, revision,
// goversion: the ones evictd's own gauge had) taken from the Info given.
func TestBuildInfo(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "v9.9.9", Revision: "0123abc"})
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, mf := range mfs {
		if mf.GetName() != "evictd_build_info" {
			continue
		}
		found = true
		if mf.GetType() != dto.MetricType_GAUGE || len(mf.GetMetric()) != 1 {
			t.Fatalf("evictd_build_info: %v with %d series, want one gauge", mf.GetType(), len(mf.GetMetric()))
		}
		if !strings.HasPrefix(mf.GetHelp(), "A metric with a constant '1' value labeled by version, revision") {
			t.Errorf("help %q is not the version collector's", mf.GetHelp())
		}
		s := mf.GetMetric()[0]
		if v := s.GetGauge().GetValue(); v != 1 {
			t.Errorf("value %v, want 1", v)
		}
		got := map[string]string{}
		var names []string
		for _, l := range s.GetLabel() {
			got[l.GetName()] = l.GetValue()
			names = append(names, l.GetName())
		}
		if want := "branch,goarch,goos,goversion,revision,tags,version"; strings.Join(names, ",") != want {
			t.Errorf("labels %v, want %s", names, want)
		}
		for k, want := range map[string]string{"version": "v9.9.9", "revision": "0123abc", "goversion": runtime.Version(),
			"goos": runtime.GOOS, "goarch": runtime.GOARCH} {
			if got[k] != want {
				t.Errorf("label %s=%q, want %q", k, got[k], want)
			}
		}
	}
	if !found {
		t.Fatal("no evictd_build_info family")
	}
}

func TestSignalFamilies(t *testing.T) {
	tests := []struct {
		signal        thresholds.Signal
		avail, capa   int64
		wantAvailName string
		wantCapaName  string
	}{
		{thresholds.MemoryAvailable, 512 << 20, 4 << 30, "evictd_signal_available_bytes", "evictd_signal_capacity_bytes"},
		{thresholds.AllocatableMemoryAvailable, 100, 200, "evictd_signal_available_bytes", "evictd_signal_capacity_bytes"},
		{thresholds.NodeFsAvailable, 10 << 30, 100 << 30, "evictd_signal_available_bytes", "evictd_signal_capacity_bytes"},
		{thresholds.ImageFsAvailable, 1, 2, "evictd_signal_available_bytes", "evictd_signal_capacity_bytes"},
		{thresholds.NodeFsInodesFree, 9000, 10000, "evictd_signal_available", "evictd_signal_capacity"},
		{thresholds.ImageFsInodesFree, 5, 6, "evictd_signal_available", "evictd_signal_capacity"},
		{thresholds.PIDAvailable, 31000, 32768, "evictd_signal_available", "evictd_signal_capacity"},
	}
	for _, tt := range tests {
		t.Run(string(tt.signal), func(t *testing.T) {
			m, err := New(buildinfo.Info{Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			m.SetSignal(tt.signal, tt.avail, tt.capa)
			got := map[string]float64{}
			for _, fam := range []struct {
				name string
				vec  *prometheus.GaugeVec
			}{
				{"evictd_signal_available_bytes", m.signalAvailableBytes},
				{"evictd_signal_capacity_bytes", m.signalCapacityBytes},
				{"evictd_signal_available", m.signalAvailable},
				{"evictd_signal_capacity", m.signalCapacity},
			} {
				if n := testutil.CollectAndCount(fam.vec); n > 0 {
					got[fam.name] = testutil.ToFloat64(fam.vec.WithLabelValues(string(tt.signal)))
				}
			}
			want := map[string]float64{tt.wantAvailName: float64(tt.avail), tt.wantCapaName: float64(tt.capa)}
			if len(got) != len(want) || got[tt.wantAvailName] != want[tt.wantAvailName] || got[tt.wantCapaName] != want[tt.wantCapaName] {
				t.Errorf("SetSignal(%s, %d, %d) wrote %v, want %v", tt.signal, tt.avail, tt.capa, got, want)
			}
		})
	}
}

func TestCountersAndGauges(t *testing.T) {
	mem, pid := thresholds.MemoryAvailable, thresholds.PIDAvailable
	tests := []struct {
		name   string
		do     func(m *Metrics)
		metric func(m *Metrics) prometheus.Collector
		want   float64
	}{
		{"evictions add up per result", func(m *Metrics) {
			m.IncEviction(mem, ResultEvicted)
			m.IncEviction(mem, ResultEvicted)
			m.IncEviction(mem, ResultPDBBlocked)
			m.IncEviction(pid, ResultEvicted)
		}, func(m *Metrics) prometheus.Collector { return m.evictions.WithLabelValues(string(mem), ResultEvicted) }, 2},
		{"pdb blocked separate", func(m *Metrics) {
			m.IncEviction(mem, ResultEvicted)
			m.IncEviction(mem, ResultPDBBlocked)
		}, func(m *Metrics) prometheus.Collector {
			return m.evictions.WithLabelValues(string(mem), ResultPDBBlocked)
		}, 1},
		{"hard threshold met", func(m *Metrics) { m.SetThreshold(mem, true, true, 300<<20) },
			func(m *Metrics) prometheus.Collector { return m.thresholdMet.WithLabelValues(string(mem), KindHard) }, 1},
		{"soft unaffected by hard", func(m *Metrics) { m.SetThreshold(mem, true, true, 300<<20) },
			func(m *Metrics) prometheus.Collector { return m.thresholdMet.WithLabelValues(string(mem), KindSoft) }, 0},
		{"threshold cleared", func(m *Metrics) {
			m.SetThreshold(mem, false, true, 300<<20)
			m.SetThreshold(mem, false, false, 300<<20)
		},
			func(m *Metrics) prometheus.Collector { return m.thresholdMet.WithLabelValues(string(mem), KindSoft) }, 0},
		{"threshold amount in bytes", func(m *Metrics) { m.SetThreshold(mem, true, false, 300<<20) },
			func(m *Metrics) prometheus.Collector { return m.thresholdBytes.WithLabelValues(string(mem), KindHard) }, 300 << 20},
		{"threshold amount as a count", func(m *Metrics) { m.SetThreshold(pid, true, false, 3276) },
			func(m *Metrics) prometheus.Collector { return m.thresholdCount.WithLabelValues(string(pid), KindHard) }, 3276},
		{"threshold amount kept when the capacity is unknown", func(m *Metrics) { m.SetThreshold(mem, true, false, 300<<20); m.SetThreshold(mem, true, true, -1) },
			func(m *Metrics) prometheus.Collector { return m.thresholdBytes.WithLabelValues(string(mem), KindHard) }, 300 << 20},
		{"observation errors", func(m *Metrics) {
			t0 := time.Unix(100, 0)
			m.ObservationDone(t0, t0.Add(time.Millisecond), errors.New("read memory.stat: EIO"))
			m.ObservationDone(t0, t0.Add(time.Millisecond), nil)
			m.ObservationDone(t0, t0.Add(time.Millisecond), errors.New("again"))
		}, func(m *Metrics) prometheus.Collector { return m.observationErrors }, 2},
		{"last success is the successful end", func(m *Metrics) {
			m.ObservationDone(time.Unix(100, 0), time.Unix(101, 500000000), nil)
			m.ObservationDone(time.Unix(200, 0), time.Unix(201, 0), errors.New("failed later"))
		}, func(m *Metrics) prometheus.Collector { return m.lastObservation }, 101.5},
		{"skipped files", func(m *Metrics) { m.SkippedFiles(3); m.SkippedFiles(0); m.SkippedFiles(-2); m.SkippedFiles(1) },
			func(m *Metrics) prometheus.Collector { return m.skippedFiles }, 4},
		{"wakeups by source", func(m *Metrics) { m.WakeUp("psi"); m.WakeUp("timer"); m.WakeUp("psi") },
			func(m *Metrics) prometheus.Collector { return m.wakeups.WithLabelValues("psi") }, 2},
		{"wakeup source active", func(m *Metrics) { m.SetWakeupSourceActive("memcg", true) },
			func(m *Metrics) prometheus.Collector { return m.wakeupSourceActive.WithLabelValues("memcg") }, 1},
		{"wakeup source failed", func(m *Metrics) {
			m.SetWakeupSourceActive("memcg", true)
			m.SetWakeupSourceActive("memcg", false)
		}, func(m *Metrics) prometheus.Collector { return m.wakeupSourceActive.WithLabelValues("memcg") }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(buildinfo.Info{Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			tt.do(m)
			if got := testutil.ToFloat64(tt.metric(m)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHistograms(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	mem := thresholds.MemoryAvailable
	m.ObserveEvictionLatency(mem, 40*time.Millisecond)
	m.ObserveEvictionLatency(mem, 3*time.Second)
	m.ObservePodGone(mem, 12*time.Second)
	t0 := time.Unix(0, 0)
	m.ObservationDone(t0, t0.Add(2*time.Millisecond), nil)

	want := `
# HELP evictd_eviction_termination_seconds Time from the API server accepting an eviction to the evicted pod being gone.
# TYPE evictd_eviction_termination_seconds histogram
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="0.5"} 0
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="1"} 0
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="2"} 0
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="5"} 0
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="10"} 0
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="15"} 1
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="30"} 1
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="60"} 1
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="120"} 1
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="300"} 1
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="600"} 1
evictd_eviction_termination_seconds_bucket{signal="memory.available",le="+Inf"} 1
evictd_eviction_termination_seconds_sum{signal="memory.available"} 12
evictd_eviction_termination_seconds_count{signal="memory.available"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "evictd_eviction_termination_seconds"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.evictionLatency); n != 1 {
		t.Errorf("latency histogram has %d series, want 1", n)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "evictd_eviction_latency_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 3.04 {
				t.Errorf("latency: count %d sum %v, want 2 and 3.04", h.GetSampleCount(), h.GetSampleSum())
			}
		case "evictd_observation_duration_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.002 {
				t.Errorf("observation: count %d sum %v, want 1 and 0.002", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

func TestInitSignalsCreatesEverySeries(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sigs := thresholds.Signals()
	m.InitSignals(sigs...)
	if got, want := testutil.CollectAndCount(m.evictions), len(sigs)*len(EvictionResults); got != want {
		t.Errorf("evictions series: %d, want %d", got, want)
	}
	if got, want := testutil.CollectAndCount(m.thresholdMet), len(sigs)*2; got != want {
		t.Errorf("threshold_met series: %d, want %d", got, want)
	}
	if got := testutil.ToFloat64(m.evictions.WithLabelValues(string(thresholds.MemoryAvailable), ResultPDBBlocked)); got != 0 {
		t.Errorf("initialised counter is %v, want 0", got)
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	// Every one of these must return without a panic.
	m.InitSignals(thresholds.MemoryAvailable)
	m.InitWakeupSources("timer")
	m.SetSignal(thresholds.MemoryAvailable, 1, 2)
	m.SetThreshold(thresholds.MemoryAvailable, true, true, 300<<20)
	m.IncEviction(thresholds.MemoryAvailable, ResultEvicted)
	m.ObserveEvictionLatency(thresholds.MemoryAvailable, time.Second)
	m.ObservePodGone(thresholds.MemoryAvailable, time.Second)
	m.ObservationDone(time.Now(), time.Now(), nil)
	m.SkippedFiles(1)
	m.WakeUp("timer")
	m.SetWakeupSourceActive("timer", true)
}

func TestReadyFollowsTheCheck(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "v"})
	if err != nil {
		t.Fatal(err)
	}
	value := func() float64 {
		t.Helper()
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "evictd_ready" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no evictd_ready")
		return -1
	}
	if v := value(); v != 0 {
		t.Errorf("before a check is set: evictd_ready %v, want 0", v)
	}
	var problem error
	m.SetReadiness(func() error { return problem })
	if v := value(); v != 1 {
		t.Errorf("check passing: evictd_ready %v, want 1", v)
	}
	problem = errors.New("no observation has succeeded yet")
	if v := value(); v != 0 {
		t.Errorf("check failing: evictd_ready %v, want 0", v)
	}
}

func TestStallSignalsGoToTheirOwnFamilies(t *testing.T) {
	m := populated(t)
	if got := testutil.ToFloat64(m.signalStall.WithLabelValues(string(thresholds.MemoryPressureSome))); got != 0.4 {
		t.Errorf("evictd_signal_stall_ratio = %v, want 0.4 (4 s of 10 stalled)", got)
	}
	if got := testutil.ToFloat64(m.thresholdStall.WithLabelValues(string(thresholds.MemoryPressureSome), KindHard)); got != 0.3 {
		t.Errorf("evictd_threshold_stall_ratio = %v, want 0.3", got)
	}
	if got := testutil.ToFloat64(m.thresholdMet.WithLabelValues(string(thresholds.MemoryPressureSome), KindHard)); got != 1 {
		t.Errorf("threshold met = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.signalAvailableBytes); n != 1 {
		t.Errorf("a stall signal leaked into evictd_signal_available_bytes: %d series", n)
	}
}

// TestClosedLabelSetsStartAtZero: a counter whose label values are a closed
// set has every series from New on, at 0, so rate() and an alert see the
// first increment (kube-state-metrics' rule) and a test reading 0 reads a
// series that is there, not one that was renamed away.
func TestClosedLabelSetsStartAtZero(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testutil.CollectAndCount(m.actuatorWrites), len(ActuatorActions)*len(ActuatorResults); got != want {
		t.Fatalf("evictd_actuator_writes_total: %d series after New, want %d (every action and result)", got, want)
	}
	for _, action := range ActuatorActions {
		for _, result := range ActuatorResults {
			labels := map[string]string{"action": action, "result": result}
			if got := metrictest.Value(t, m.Registry(), "evictd_actuator_writes_total", labels); got != 0 {
				t.Errorf("evictd_actuator_writes_total%v = %v after New, want 0", labels, got)
			}
		}
	}
	m.ActuatorWrote(ActuatorRelax, errors.New("EACCES"))
	if got := metrictest.Value(t, m.Registry(), "evictd_actuator_writes_total", map[string]string{"action": ActuatorRelax, "result": ActuatorError}); got != 1 {
		t.Errorf("after a failed relax: %v, want 1", got)
	}
}

// TestNodeLeaseHeldOnlyWhenTaken: no evictd_node_lease_held series until
// the agent takes a lease, so a dry-run agent never reads as one waiting.
func TestNodeLeaseHeldOnlyWhenTaken(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "v1.2.3-test"})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "evictd_node_lease_held" {
				return len(mf.GetMetric())
			}
		}
		return 0
	}
	if n := count(); n != 0 {
		t.Errorf("evictd_node_lease_held has %d series before any lease; want none", n)
	}
	m.SetNodeLeaseHeld(false)
	if n := count(); n != 1 {
		t.Errorf("evictd_node_lease_held has %d series once set; want 1", n)
	}
}
