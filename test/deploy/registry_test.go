// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"errors"
	"sort"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/pkg/thresholds"
)

// targetLabels are the labels Prometheus adds to every series it scrapes
// from evictd: job and instance always, the rest from Kubernetes service
// discovery (a ServiceMonitor's defaults), the chart's relabeling (node)
// and, where several clusters share one Prometheus or Thanos, an external
// cluster label (the dashboard's cluster variable).
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint", "node", "cluster"}

// series is what a query may select: each series name evictd's registry
// exposes (a histogram's _bucket, _sum and _count), with the labels it has.
type series map[string]map[string]bool

// registrySeries gathers evictd's real registry after giving every family
// a series, so that label vectors show their labels, and adds `up`, the one
// series Prometheus makes itself.
func registrySeries(t *testing.T) series {
	t.Helper()
	m, err := metrics.New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sig := thresholds.MemoryAvailable
	m.InitSignals(thresholds.Signals()...)
	m.InitWakeupSources(string(wakeup.AllSources()[0]))
	m.InitResources("memory")
	m.SetSignal(sig, 1<<30, 8<<30)
	m.SetSignal(thresholds.PIDAvailable, 1000, 32768)
	m.SetThreshold(sig, true, true, 300<<20)
	m.SetThreshold(thresholds.PIDAvailable, true, false, 3276)
	m.SetSignal(thresholds.MemoryPressureSome, 900, 1000)
	m.SetStallThreshold(thresholds.MemoryPressureSome, true, false, 0.2)
	m.IncEviction(sig, metrics.ResultEvicted)
	m.ObserveEvictionLatency(sig, time.Second)
	m.ObservePodGone(sig, time.Second)
	now := time.Now()
	m.ObservationDone(now, now, nil)
	m.ObservationDone(now, now, errors.New("test"))
	m.SkippedFiles(1)
	m.WakeUp(string(wakeup.AllSources()[0]))
	m.SetWakeupSourceActive(string(wakeup.AllSources()[0]), true)
	m.SignalReadError(string(sig))
	m.SetPressure("memory", true)
	m.VictimStuck("memory")
	m.SetKubeletThreshold(sig, 100<<20, false)
	m.SetNodeLeaseHeld(true)
	m.SetNodeBrake("memory", true, time.Unix(1700000000, 0))
	m.NodeBrakeWrite("taint", nil)
	m.InitShadow(metrics.ShadowSeries{Signals: map[string]string{string(sig): "memory"}, Resources: []string{"memory"},
		KubeletResources: shadow.KubeletResources, Episodes: []string{shadow.OOMOutsideEpisodes, "memory"}, Firsts: shadow.Firsts})

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := series{}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, mm := range mf.GetMetric() {
			for _, lp := range mm.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		name := mf.GetName()
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
			bucket := map[string]bool{"le": true}
			for l := range labels {
				bucket[l] = true
			}
			out[name+"_bucket"] = bucket
		case dto.MetricType_SUMMARY:
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
			quantile := map[string]bool{"quantile": true}
			for l := range labels {
				quantile[l] = true
			}
			out[name] = quantile
		default:
			out[name] = labels
		}
		if len(mf.GetMetric()) == 0 {
			t.Errorf("%s has no series: give it one above, or its labels go unchecked", name)
		}
	}
	out["up"] = map[string]bool{}
	// kube-state-metrics' DaemonSet series, which the coverage alert reads.
	for _, name := range []string{"kube_daemonset_status_desired_number_scheduled", "kube_daemonset_status_number_ready"} {
		out[name] = map[string]bool{"namespace": true, "daemonset": true, "job": true, "instance": true}
	}
	// And its pods' deletion time, which leaves pods being deleted out of
	// EvictdDown and EvictdNotReady.
	out["kube_pod_deletion_timestamp"] = map[string]bool{"namespace": true, "pod": true, "uid": true, "job": true, "instance": true}
	// And the Nodes' taints and conditions, where EvictdNodeBrakeLeftBehind
	// sees a brake no agent keeps: `node` is the Node's name, a label of
	// kube-state-metrics' own.
	out["kube_node_spec_taint"] = map[string]bool{"node": true, "key": true, "value": true, "effect": true, "job": true, "instance": true}
	out["kube_node_status_condition"] = map[string]bool{"node": true, "condition": true, "status": true, "job": true, "instance": true}
	for _, s := range out {
		for _, l := range targetLabels {
			s[l] = true
		}
	}
	return out
}

// TestRegistrySeriesSeesEveryFamily: registrySeries reaches every evictd
// family the documentation lists, so no metric is missed for lack of a
// series.
func TestRegistrySeriesSeesEveryFamily(t *testing.T) {
	s := registrySeries(t)
	var names []string
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, want := range []string{"evictd_evictions_total", "evictd_threshold_met", "evictd_eviction_latency_seconds_bucket",
		"evictd_wakeup_source_active", "evictd_eviction_stuck_total", "process_cpu_seconds_total", "up"} {
		if s[want] == nil {
			t.Errorf("no %s among %v", want, names)
		}
	}
	if !s["evictd_evictions_total"]["result"] || !s["evictd_evictions_total"]["signal"] {
		t.Errorf("evictd_evictions_total labels %v", s["evictd_evictions_total"])
	}
}
