// SPDX-License-Identifier: Apache-2.0

// Package metrics holds evictd's Prometheus metrics on a private registry and
// the small HTTP server that exposes them with /healthz and /readyz.
//
// Naming: evictd_<subsystem>_<name>_<unit>, base units, counters end in
// _total, and no label ever carries a pod name (pods churn; series would
// not). docs/metrics.md lists every metric and is checked against this file
// by a test, so the two cannot drift.
//
// Every method is safe for concurrent use and on a nil *Metrics (it then does
// nothing), so packages can take a *Metrics without guarding each call.
package metrics

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/thresholds"
)

const namespace = "evictd"

// Values of the result label of evictd_evictions_total. pkg/evict's Result
// constants are these strings.
const (
	// ResultEvicted: the API server accepted the eviction (HTTP 201).
	ResultEvicted = "evicted"
	// ResultDryRun: --dry-run, and the server-side dry run allowed it.
	ResultDryRun = "dry_run"
	// ResultPDBBlocked: refused by a PodDisruptionBudget (HTTP 429).
	ResultPDBBlocked = "pdb_blocked"
	// ResultNotFound: the pod was already gone (HTTP 404); not an error.
	ResultNotFound = "not_found"
	// ResultError: any other failure, after bounded retries.
	ResultError = "error"
	// ResultRateLimited: held back by the episode's rate limit or its
	// cap; no API call was made.
	ResultRateLimited = "rate_limited"
	// ResultForcedDelete: --pdb-policy=best-effort deleted a PDB-blocked pod.
	ResultForcedDelete = "forced_delete"
	// ResultRefused: the API server refused this pod's eviction for the pod
	// itself (an admission policy or webhook, more than one
	// PodDisruptionBudget); asking again soon gets the same answer.
	ResultRefused = "refused"
	// ResultResponderEvicted: --eviction-request: an eviction responder
	// evicted the pod, acting on evictd's EvictionRequest; evictd made no
	// eviction call. Counted once the pod is terminating or gone.
	ResultResponderEvicted = "responder_evicted"
	// ResultWebhookFailed: an admission webhook with failurePolicy Fail
	// that selects this pod could not be called (its backend down, a
	// timeout, an invalid answer; HTTP 500 "failed calling webhook"): the
	// webhook's state, for the pods it selects, not the API server's.
	ResultWebhookFailed = "webhook_failed"
)

// EvictionResults lists every result label value.
var EvictionResults = []string{
	ResultEvicted, ResultDryRun, ResultPDBBlocked, ResultNotFound,
	ResultError, ResultRateLimited, ResultForcedDelete, ResultRefused,
	ResultResponderEvicted, ResultWebhookFailed,
}

// Values of the kind label of evictd_threshold_met.
const (
	KindHard = "hard"
	KindSoft = "soft"
)

// Histogram buckets, in seconds.
var (
	// From pressure noticed to eviction accepted: milliseconds on the fast
	// path, up to minutes when a soft threshold's grace period is waited out.
	evictionLatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// From eviction accepted to pod gone: bounded by the grace periods
	// evictd sends, plus the kubelet's own reaction time.
	terminationBuckets = []float64{0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600}
	// One observation reads a few hundred small files.
	observationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// Metrics is evictd's set of metrics. Create it with New.
type Metrics struct {
	reg *prometheus.Registry
	// own lists the evictd_* collectors, so tests can tell every family was
	// documented.
	own []prometheus.Collector
	// readiness is the /readyz check evictd_ready reports at each scrape.
	readiness atomic.Pointer[func() error]
	// trace is what evictd_trace_* read at each scrape (SetTrace).
	trace atomic.Pointer[Trace]

	signalAvailableBytes *prometheus.GaugeVec
	signalCapacityBytes  *prometheus.GaugeVec
	signalAvailable      *prometheus.GaugeVec
	signalCapacity       *prometheus.GaugeVec
	thresholdMet         *prometheus.GaugeVec
	thresholdBytes       *prometheus.GaugeVec
	thresholdCount       *prometheus.GaugeVec
	signalStall          *prometheus.GaugeVec
	thresholdStall       *prometheus.GaugeVec
	memoryHighContainers *prometheus.GaugeVec
	evictions            *prometheus.CounterVec
	evictionLatency      *prometheus.HistogramVec
	termination          *prometheus.HistogramVec
	observationDuration  prometheus.Histogram
	observationErrors    prometheus.Counter
	skippedFiles         prometheus.Counter
	lastObservation      prometheus.Gauge
	wakeups              *prometheus.CounterVec
	podReads             *prometheus.CounterVec // podreads.go
	wakeupSourceActive   *prometheus.GaugeVec
	signalErrors         *prometheus.CounterVec
	pressure             *prometheus.GaugeVec
	episodeCapReached    *prometheus.GaugeVec
	victimsStuck         *prometheus.CounterVec
	stuckVictims         prometheus.Gauge
	memoryLocked         prometheus.Gauge
	sandboxActive        *prometheus.GaugeVec
	evictionRequest      prometheus.Gauge
	dryRun               prometheus.Gauge
	actuatorWritable     prometheus.Gauge
	actuatorWrites       *prometheus.CounterVec
	kubelet              kubeletMetrics         // kubelet.go
	nodeLease            nodeLeaseMetrics       // nodelease.go
	nodeBrake            nodeBrakeMetrics       // nodebrake.go
	outrun               outrunMetrics          // outrun.go
	apiRequests          apiRequestMetrics      // apirequests.go
	shadow               shadowMetrics          // shadow.go
	secureRefused        *prometheus.CounterVec // secure.go
}

// New builds the metrics on a fresh private registry, with the Go and
// process collectors, and sets evictd_build_info for the binary's version
// and revision and the Go version it was built with.
func New(build buildinfo.Info) (*Metrics, error) {
	m := &Metrics{reg: prometheus.NewRegistry()}

	m.signalAvailableBytes = m.gaugeVec("signal", "available_bytes",
		"Bytes available for an eviction signal measured in bytes (memory and filesystem space), as last observed.",
		"signal")
	m.signalCapacityBytes = m.gaugeVec("signal", "capacity_bytes",
		"Capacity in bytes of an eviction signal measured in bytes (memory and filesystem space), as last observed.",
		"signal")
	m.signalAvailable = m.gaugeVec("signal", "available",
		"Amount available for an eviction signal that is a count (free inodes, PIDs), as last observed.",
		"signal")
	m.signalCapacity = m.gaugeVec("signal", "capacity",
		"Capacity of an eviction signal that is a count (inodes, PIDs), as last observed.",
		"signal")
	m.thresholdMet = m.gaugeVec("threshold", "met",
		"1 while an eviction threshold is met (for a soft threshold: whether or not its grace period has passed), else 0.",
		"signal", "kind")
	m.thresholdBytes = m.gaugeVec("threshold", "available_bytes",
		"The available amount in bytes at or below which an eviction threshold is met, for signals measured in bytes (a percentage resolved against the last observed capacity).",
		"signal", "kind")
	m.thresholdCount = m.gaugeVec("threshold", "available",
		"The available amount at or below which an eviction threshold is met, for signals that are a count (inodes, PIDs; a percentage resolved against the last observed capacity).",
		"signal", "kind")
	m.signalStall = m.gaugeVec("signal", "stall_ratio",
		"Share of the stall window (--eviction-stall-window) in which tasks stalled on memory, for the stall signals (memory.pressureSome/Full of the node, allocatableMemory.pressureSome/Full of kubepods), from PSI totals, as last observed.",
		"signal")
	m.memoryHighContainers = m.gaugeVec("memory_high", "containers",
		"Containers over a memory.high threshold (docs/memhigh.md), by container name, the signal over (high, max: the memory.events rates; pressure: the memory.pressure share) and state (over; stuck: over for the grace period, a target), as last observed.",
		"container", "signal", "state")
	m.thresholdStall = m.gaugeVec("threshold", "stall_ratio",
		"The share of the stall window stalled above which a stall signal's threshold is met.",
		"signal", "kind")

	m.evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "evictions_total",
		Help: "Eviction attempts by the signal they relieve and their result.",
	}, []string{"signal", "result"})
	m.evictionLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "eviction", Name: "latency_seconds",
		Help:    "Time from first noticing pressure on a signal to the API server accepting an eviction for it.",
		Buckets: evictionLatencyBuckets,
	}, []string{"signal"})
	m.termination = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "eviction", Name: "termination_seconds",
		Help:    "Time from the API server accepting an eviction to the evicted pod being gone.",
		Buckets: terminationBuckets,
	}, []string{"signal"})
	m.observationDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "observation", Name: "duration_seconds",
		Help:    "Time taken by one observation of the node (cgroups, PSI, filesystems, PIDs).",
		Buckets: observationBuckets,
	})
	m.observationErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "observation", Name: "errors_total",
		Help: "Observations of the node that failed.",
	})
	m.skippedFiles = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "observation", Name: "skipped_files_total",
		Help: "Host files skipped during observation because they were malformed or unreadable.",
	})
	m.lastObservation = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "observation", Name: "last_success_timestamp_seconds",
		Help: "Unix time of the last successful observation of the node.",
	})
	m.wakeups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "wakeups_total",
		Help: "Times the agent loop woke up, by what woke it (poll timeout, memcg threshold, PSI trigger, memory.events, ...).",
	}, []string{"source"})
	m.wakeupSourceActive = m.gaugeVec("wakeup", "source_active",
		"1 while a wake-up source is armed, 0 when it should arm and has not (failed). A source this node cannot have (its cgroup layout, its kernel, or a read-only cgroup mount on v1) has no series.",
		"source")

	m.signalErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "observation", Name: "signal_errors_total",
		Help: "Observations that could not measure an eviction signal because a node file it needs was unreadable or malformed (the signal was left out, not guessed).",
	}, []string{"signal"})
	m.own = append(m.own, m.signalErrors)

	m.pressure = m.gaugeVec("pressure", "episode",
		"1 while a resource (memory, nodefs, imagefs, pids) is in a pressure episode: from a threshold of it being met until none has been for the pressure transition period.",
		"resource")
	m.episodeCapReached = m.gaugeVec("pressure", "episode_cap_reached",
		"1 while a resource's pressure episode has reached its eviction cap (--eviction-max-per-episode): evictd evicts no more pods for it until the episode ends, whatever the pressure.",
		"resource")
	m.victimsStuck = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "eviction", Name: "stuck_total",
		Help: "Pods evicted (or found terminating) that were still there after their grace period and evictd's wait; their reclaim stopped counting and the next candidate became eligible.",
	}, []string{"resource"})
	m.own = append(m.own, m.victimsStuck)
	// The counter says a victim got stuck; this says one still is, which is
	// what keeps /readyz failing (the alerts tell that cause from others).
	m.stuckVictims = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "eviction", Name: "stuck_victims",
		Help: "Evicted pods that outlived their grace period and evictd's wait and are still terminating now; /readyz fails while there is one.",
	})
	m.own = append(m.own, m.stuckVictims)

	// Evaluated at each scrape, so the metric and /readyz never disagree.
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "ready",
		Help: "1 while evictd is ready (its /readyz check passes: informers synced, a recent observation that read every signal, no evicted pod stuck terminating), else 0.",
	}, m.ready)

	m.memoryLocked = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "memory", Name: "locked",
		Help: "1 when evictd's own memory is locked in RAM (--lock-memory: mlockall, pages locked as they are touched), so the node's pressure cannot page it out; 0 when turned off or refused (the log says why: usually a container without CAP_IPC_LOCK).",
	})

	m.sandboxActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "sandbox", Name: "active",
		Help: "1 while the sandbox of the kind is in force on evictd's own process, verified at start (kind=\"seccomp\": a seccomp filter on every thread refusing open_by_handle_at and name_to_handle_at, with which CAP_DAC_READ_SEARCH would open any file of a mounted host filesystem by its handle); 0 when turned off (--sandbox=none; the log warns). evictd exits rather than run without the sandbox it was asked for.",
	}, []string{"kind"})

	m.evictionRequest = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "eviction_request", Name: "served",
		Help: "1 while --eviction-request asks for soft evictions with lifecycle.k8s.io/v1alpha1 EvictionRequests; 0 when the mode is off, or while the API server answers that it does not serve them (every eviction then uses the Eviction API; evictd asks again 5 minutes later, and the log says each step).",
	})

	m.dryRun = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "dry_run",
		Help: "1 when evictd runs with --dry-run or --shadow (which implies it): it evicts nothing, and its evictd_evictions_total counts what it would have done (dry_run, and pdb_blocked or refused for the API server's dry-run verdicts); 0 when it enforces. The alerts on evictions leave a dry-run agent out.",
	})

	m.actuatorWritable = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "actuator", Name: "writable",
		Help: "1 while --actuator can write the pod cgroups' memory limits (its check at start and its last write succeeded); 0 when it is off, or refused (the log and /readyz say why: usually the chart's actuator.enabled not set, so the mount is read-only).",
	})
	m.actuatorWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "actuator", Name: "writes_total",
		Help: "The actuator's writes to pod cgroups, by action (contain: a hard memory victim's growth stopped once its eviction was accepted; relax: a container stuck at memory.high given its memory.max as memory.high) and result (ok, error).",
	}, []string{"action", "result"})

	// Both label sets are closed: every series exists at 0 from the start,
	// so rate() and an alert on errors see the first write, not a new series.
	for _, action := range ActuatorActions {
		for _, result := range ActuatorResults {
			m.actuatorWrites.WithLabelValues(action, result)
		}
	}

	m.initBuildInfo(build)
	m.initKubelet()
	m.initNodeLease()
	m.initNodeBrake()
	m.initOutrun()
	m.initPodReads()
	m.initTrace()
	m.initAPIRequests()
	m.initSecure()
	m.initShadow()
	m.own = append(m.own, ready, m.memoryLocked, m.sandboxActive, m.evictionRequest, m.dryRun, m.actuatorWritable, m.actuatorWrites, m.evictions, m.evictionLatency, m.termination, m.observationDuration,
		m.observationErrors, m.skippedFiles, m.lastObservation, m.wakeups)

	all := append([]prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}, m.own...)
	for _, c := range all {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// SetReadiness gives evictd_ready its check: the same one /readyz runs.
// Until it is set, evictd_ready is 0.
func (m *Metrics) SetReadiness(check func() error) {
	if m == nil {
		return
	}
	m.readiness.Store(&check)
}

func (m *Metrics) ready() float64 {
	check := m.readiness.Load()
	if check == nil || (*check)() != nil {
		return 0
	}
	return 1
}

// gaugeVec creates a gauge family and remembers it in m.own.
func (m *Metrics) gaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: name, Help: help,
	}, labels)
	m.own = append(m.own, g)
	return g
}

// Registry is the private registry, for tests and for callers that add
// their own collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	return m.reg
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing collector should cost one series, not the whole scrape.
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
}

// InitSignals creates the zero-valued series of the given signals up front
// (threshold met, evictions by every result, both histograms), so that
// dashboards and rate() see them before the first event, as the Prometheus
// guidelines ask.
func (m *Metrics) InitSignals(signals ...thresholds.Signal) {
	if m == nil {
		return
	}
	for _, s := range signals {
		sig := string(s)
		m.thresholdMet.WithLabelValues(sig, KindHard)
		m.thresholdMet.WithLabelValues(sig, KindSoft)
		for _, r := range EvictionResults {
			m.evictions.WithLabelValues(sig, r)
		}
		m.evictionLatency.WithLabelValues(sig)
		m.termination.WithLabelValues(sig)
		m.signalErrors.WithLabelValues(sig)
	}
}

// InitWakeupSources creates the zero-valued wake-up series of the given
// sources.
func (m *Metrics) InitWakeupSources(sources ...string) {
	if m == nil {
		return
	}
	for _, s := range sources {
		m.wakeups.WithLabelValues(s)
		m.wakeupSourceActive.WithLabelValues(s)
	}
}

// IsCountSignal reports whether a signal is a count (inodes, PIDs) rather
// than bytes; it picks the metric family SetSignal writes.
func IsCountSignal(s thresholds.Signal) bool {
	if s.MemoryHigh() {
		return true // pods with a container stuck at memory.high
	}
	switch s.Resource() {
	case "inodes", "pids":
		return true
	}
	return false
}

// SetSignal records the last observed available amount and capacity of a
// signal, in bytes or as a count as IsCountSignal says.
func (m *Metrics) SetSignal(s thresholds.Signal, available, capacity int64) {
	if m == nil {
		return
	}
	if s.MemoryHigh() {
		return // a count of pods, not an amount: SetMemoryHigh tells it
	}
	if s.Stall() {
		if capacity > 0 {
			m.signalStall.WithLabelValues(string(s)).Set(1 - float64(available)/float64(capacity))
		}
		return
	}
	avail, capa := m.signalAvailableBytes, m.signalCapacityBytes
	if IsCountSignal(s) {
		avail, capa = m.signalAvailable, m.signalCapacity
	}
	avail.WithLabelValues(string(s)).Set(float64(available))
	capa.WithLabelValues(string(s)).Set(float64(capacity))
}

// SetThreshold records whether the hard or soft threshold of a signal is
// met, and the available amount at which it is (in bytes or as a count, as
// IsCountSignal says; none when the capacity is not known yet, amount < 0).
func (m *Metrics) SetThreshold(s thresholds.Signal, hard, met bool, amount int64) {
	if m == nil {
		return
	}
	kind := m.setMet(s, hard, met)
	if amount < 0 {
		return
	}
	g := m.thresholdBytes
	if IsCountSignal(s) {
		g = m.thresholdCount
	}
	g.WithLabelValues(string(s), kind).Set(float64(amount))
}

// MemoryHighContainer is one container over a memory.high threshold, for
// SetMemoryHigh.
type MemoryHighContainer struct {
	Container, Signal string
	Stuck             bool
}

// Actuator actions and results, the labels of evictd_actuator_writes_total.
const (
	ActuatorContain = "contain"
	ActuatorRelax   = "relax"

	ActuatorOK    = "ok"
	ActuatorError = "error"
)

// ActuatorActions and ActuatorResults list every value of the action and
// result labels of evictd_actuator_writes_total; New creates each pair's
// series at 0.
var (
	ActuatorActions = []string{ActuatorContain, ActuatorRelax}
	ActuatorResults = []string{ActuatorOK, ActuatorError}
)

// SetActuatorWritable records whether the actuator can write the pod
// cgroups.
func (m *Metrics) SetActuatorWritable(ok bool) {
	if m == nil {
		return
	}
	m.actuatorWritable.Set(boolValue(ok))
}

// ActuatorWrote counts one of the actuator's writes, failed when err is
// not nil.
func (m *Metrics) ActuatorWrote(action string, err error) {
	if m == nil {
		return
	}
	result := ActuatorOK
	if err != nil {
		result = ActuatorError
	}
	m.actuatorWrites.WithLabelValues(action, result).Inc()
}

// SetMemoryHigh replaces the memory.high containers with those of the
// last observation: a container no longer over leaves no stale series.
func (m *Metrics) SetMemoryHigh(over []MemoryHighContainer) {
	if m == nil {
		return
	}
	m.memoryHighContainers.Reset()
	for _, c := range over {
		state := "over"
		if c.Stuck {
			state = "stuck"
		}
		m.memoryHighContainers.WithLabelValues(c.Container, c.Signal, state).Inc()
	}
}

// SetStallThreshold records whether a stall signal's hard or soft threshold
// is met, and the share of the window stalled above which it is.
func (m *Metrics) SetStallThreshold(s thresholds.Signal, hard, met bool, share float64) {
	if m == nil {
		return
	}
	m.thresholdStall.WithLabelValues(string(s), m.setMet(s, hard, met)).Set(share)
}

// setMet sets evictd_threshold_met for one threshold and returns its kind
// label.
func (m *Metrics) setMet(s thresholds.Signal, hard, met bool) string {
	kind := KindSoft
	if hard {
		kind = KindHard
	}
	v := 0.0
	if met {
		v = 1
	}
	m.thresholdMet.WithLabelValues(string(s), kind).Set(v)
	return kind
}

// IncEviction counts one eviction attempt; result is one of EvictionResults.
func (m *Metrics) IncEviction(s thresholds.Signal, result string) {
	if m == nil {
		return
	}
	m.evictions.WithLabelValues(string(s), result).Inc()
}

// ObserveEvictionLatency records the time from first noticing pressure on s
// to the API server accepting an eviction for it.
func (m *Metrics) ObserveEvictionLatency(s thresholds.Signal, d time.Duration) {
	if m == nil {
		return
	}
	m.evictionLatency.WithLabelValues(string(s)).Observe(d.Seconds())
}

// ObservePodGone records the time from an accepted eviction for s to the
// pod being gone (deleted from the API server, or its cgroup gone).
func (m *Metrics) ObservePodGone(s thresholds.Signal, d time.Duration) {
	if m == nil {
		return
	}
	m.termination.WithLabelValues(string(s)).Observe(d.Seconds())
}

// ObservationDone records one observation that ran from start to end and
// ended with err (nil for success). Times come from the caller's clock.
func (m *Metrics) ObservationDone(start, end time.Time, err error) {
	if m == nil {
		return
	}
	m.observationDuration.Observe(end.Sub(start).Seconds())
	if err != nil {
		m.observationErrors.Inc()
		return
	}
	m.lastObservation.Set(float64(end.UnixNano()) / 1e9)
}

// SkippedFiles counts n host files an observation skipped as malformed or
// unreadable.
func (m *Metrics) SkippedFiles(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.skippedFiles.Add(float64(n))
}

// WakeUp counts one wake-up of the agent loop by source (e.g. "timer",
// "psi", "memcg"); keep the set of sources small and fixed.
func (m *Metrics) WakeUp(source string) {
	if m == nil {
		return
	}
	m.wakeups.WithLabelValues(source).Inc()
}

// SetWakeupSourceActive records whether a wake-up source is armed.
func (m *Metrics) SetWakeupSourceActive(source string, active bool) {
	if m == nil {
		return
	}
	m.wakeupSourceActive.WithLabelValues(source).Set(boolValue(active))
}

// UnexportWakeupSource removes a source's evictd_wakeup_source_active
// series: the source cannot be armed on this node by design (a read-only
// cgroup mount), and a 0 would read as a failure to fix.
func (m *Metrics) UnexportWakeupSource(source string) {
	if m == nil {
		return
	}
	m.wakeupSourceActive.DeleteLabelValues(source)
}

// SignalReadError counts one observation that could not measure signal (a
// kubelet signal name, e.g. "memory.available") because a node file it needs
// was unreadable or malformed.
func (m *Metrics) SignalReadError(signal string) {
	if m == nil {
		return
	}
	m.signalErrors.WithLabelValues(signal).Inc()
}

// InitResources creates the per-resource series at zero, so that a
// dashboard sees every resource (and a stuck-victim rate of 0) from the start.
func (m *Metrics) InitResources(resources ...string) {
	if m == nil {
		return
	}
	for _, r := range resources {
		m.pressure.WithLabelValues(r).Set(0)
		m.episodeCapReached.WithLabelValues(r).Set(0)
		m.victimsStuck.WithLabelValues(r)
	}
}

// SetPressure records whether resource is in a pressure episode.
func (m *Metrics) SetPressure(resource string, on bool) {
	if m == nil {
		return
	}
	m.pressure.WithLabelValues(resource).Set(boolValue(on))
}

// SetEpisodeCapReached records whether resource's episode has reached its
// eviction cap.
func (m *Metrics) SetEpisodeCapReached(resource string, on bool) {
	if m == nil {
		return
	}
	m.episodeCapReached.WithLabelValues(resource).Set(boolValue(on))
}

// VictimStuck counts a pod in flight for resource ("" when it was found
// terminating) that outlived its grace period and evictd's wait.
func (m *Metrics) VictimStuck(resource string) {
	if m == nil {
		return
	}
	if resource == "" {
		resource = "unknown"
	}
	m.victimsStuck.WithLabelValues(resource).Inc()
}

// SetStuckVictims records how many evicted pods are stuck terminating now.
func (m *Metrics) SetStuckVictims(n int) {
	if m == nil {
		return
	}
	m.stuckVictims.Set(float64(n))
}

// SetMemoryLocked records whether evictd's memory is locked in RAM.
func (m *Metrics) SetMemoryLocked(locked bool) {
	if m == nil {
		return
	}
	m.memoryLocked.Set(boolValue(locked))
}

// SetSandboxActive records whether the sandbox of the kind is in force on
// evictd's own process.
func (m *Metrics) SetSandboxActive(kind string, active bool) {
	if m == nil {
		return
	}
	m.sandboxActive.WithLabelValues(kind).Set(boolValue(active))
}

// boolValue is a gauge's value for a yes/no state.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetDryRun records whether evictd runs in dry run (--dry-run, --shadow).
func (m *Metrics) SetDryRun(on bool) {
	if m == nil {
		return
	}
	m.dryRun.Set(boolValue(on))
}

// SetEvictionRequestServed records whether evictions are asked for with
// EvictionRequests (--eviction-request on and the API served).
func (m *Metrics) SetEvictionRequestServed(on bool) {
	if m == nil {
		return
	}
	m.evictionRequest.Set(boolValue(on))
}
