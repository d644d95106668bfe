// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestAlertExpressionsFire evaluates every alert's own expression (read
// from deploy/monitoring/alerts.yaml) with Prometheus's engine over
// synthetic series of four nodes (and kube-state-metrics' DaemonSet series), and checks which nodes each selects: the
// ones in trouble, and not the ones that only look alike. `for:` is not
// evaluated here; only whether the condition holds. Each series an alert
// returns must carry every label its annotations print ({{ $labels.x }}),
// or the alert would say "on  " with the node left out.
func TestAlertExpressionsFire(t *testing.T) {
	exprs := map[string]string{}
	printed := map[string][]string{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
			for _, text := range r.Annotations {
				for _, m := range labelRef.FindAllStringSubmatch(text, -1) {
					printed[r.Alert] = append(printed[r.Alert], m[1])
				}
			}
		}
	}
	// One sample a minute for 20 minutes; evaluated at 20m (Unix time 1200).
	store := promqltest.LoadedStorage(t, `
load 1m
  evictd_evictions_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="memory.available",result="pdb_blocked"} 0+1x20
  evictd_threshold_met{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="memory.available",kind="hard"} 1+0x20
  evictd_evictions_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="memory.available",result="pdb_blocked"} 0+1x20
  evictd_threshold_met{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="memory.available",kind="hard"} 0+0x20
  evictd_evictions_total{job="evictd",node="c",namespace="evictd-system",pod="evictd-c",signal="memory.available",result="pdb_blocked"} 0+0x20
  evictd_threshold_met{job="evictd",node="c",namespace="evictd-system",pod="evictd-c",signal="memory.available",kind="hard"} 1+0x20
  evictd_evictions_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="nodefs.available",result="evicted"} 0+1x20
  evictd_evictions_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="nodefs.available",result="evicted"} 0+0.1x20
  evictd_evictions_total{job="evictd",node="c",namespace="evictd-system",pod="evictd-c",signal="nodefs.available",result="dry_run"} 0+1x20
  evictd_observation_last_success_timestamp_seconds{job="evictd",node="a",namespace="evictd-system",pod="evictd-a"} 0+0x20
  evictd_observation_last_success_timestamp_seconds{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 0+60x20
  evictd_observation_errors_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a"} 0+6x20
  evictd_observation_duration_seconds_count{job="evictd",node="a",namespace="evictd-system",pod="evictd-a"} 0+60x20
  evictd_observation_errors_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 0+1x20
  evictd_observation_duration_seconds_count{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 0+60x20
  up{job="evictd",node="a",namespace="evictd-system",pod="evictd-a"} 0+0x20
  evictd_ready{job="evictd",node="a",namespace="evictd-system",pod="evictd-a"} 0+0x20
  evictd_ready{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 1+0x20
  up{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 1+0x20
  up{job="node-exporter",node="c",namespace="evictd-system",pod="evictd-c"} 0+0x20
  evictd_observation_signal_errors_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="pid.available"} 0+1x20
  evictd_observation_signal_errors_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="pid.available"} 0+0x20
  evictd_evictions_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="memory.available",result="refused"} 0+1x20
  evictd_evictions_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="memory.available",result="refused"} 0+0x20
  evictd_evictions_total{job="evictd",node="e",namespace="evictd-system",pod="evictd-e",signal="memory.available",result="webhook_failed"} 0+1x20
  evictd_eviction_stuck_victims{job="evictd",node="a",namespace="evictd-system",pod="evictd-a"} 1+0x20
  evictd_eviction_stuck_victims{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 0+0x20
  evictd_wakeup_source_active{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",source="psi"} 0+0x20
  evictd_wakeup_source_active{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",source="psi"} 1+0x20
  evictd_ready{job="evictd",node="d",namespace="evictd-system",pod="evictd-d"} 0+0x20
  evictd_observation_last_success_timestamp_seconds{job="evictd",node="d",namespace="evictd-system",pod="evictd-d"} 0+60x20
  evictd_evictions_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="memory.available",result="error"} 0+1x20
  evictd_evictions_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="memory.available",result="error"} 0+0x20
  evictd_pressure_episode_cap_reached{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",resource="memory"} 1+0x20
  evictd_pressure_episode_cap_reached{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",resource="memory"} 0+0x20
  evictd_wakeup_source_active{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",source="memory_events"} 1+0x20
  evictd_wakeup_source_active{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",source="poll"} 1+0x20
  evictd_ready{job="evictd",node="h",namespace="evictd-system",pod="evictd-h"} 0+0x20
  evictd_observation_last_success_timestamp_seconds{job="evictd",node="h",namespace="evictd-system",pod="evictd-h"} 0+60x20
  evictd_node_lease_held{job="evictd",node="h",namespace="evictd-system",pod="evictd-h"} 0+0x20
  evictd_node_lease_errors_total{job="evictd",node="h",namespace="evictd-system",pod="evictd-h"} 0+0x20
  evictd_ready{job="evictd",node="i",namespace="evictd-system",pod="evictd-i"} 0+0x20
  evictd_observation_last_success_timestamp_seconds{job="evictd",node="i",namespace="evictd-system",pod="evictd-i"} 0+60x20
  evictd_node_lease_held{job="evictd",node="i",namespace="evictd-system",pod="evictd-i"} 0+0x20
  evictd_node_lease_errors_total{job="evictd",node="i",namespace="evictd-system",pod="evictd-i"} 0+1x20
  evictd_node_lease_held{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 0+0x20
  evictd_threshold_outrun_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="memory.available"} 0+0x10 1+0x10
  evictd_threshold_outrun_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="memory.available"} 0+0x20
  evictd_node_lease_errors_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b"} 0+0x20
  evictd_threshold_below_kubelet{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",signal="memory.available"} 1+0x20
  evictd_threshold_below_kubelet{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",signal="memory.available"} 0+0x20
  evictd_node_brake_writes_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",object="taint",result="error"} 0+2x20
  evictd_node_brake_writes_total{job="evictd",node="a",namespace="evictd-system",pod="evictd-a",object="condition",result="ok"} 0+1x20
  evictd_node_brake_writes_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",object="taint",result="error"} 0+0x15 1+0x4
  evictd_node_brake_writes_total{job="evictd",node="b",namespace="evictd-system",pod="evictd-b",object="taint",result="ok"} 0+0x16 1+0x3
  evictd_node_brake_writes_total{job="evictd",node="c",namespace="evictd-system",pod="evictd-c",object="taint",result="error"} 3+0x20
  evictd_node_brake_writes_total{job="evictd",node="c",namespace="evictd-system",pod="evictd-c",object="taint",result="ok"} 4+0x20
  evictd_node_brake_since_timestamp_seconds{job="evictd",node="j",namespace="evictd-system",pod="evictd-j",resource="memory"} -3000+0x20
  evictd_node_brake_on{job="evictd",node="j",namespace="evictd-system",pod="evictd-j",resource="memory"} 1+0x20
  kube_node_spec_taint{job="kube-state-metrics",node="j",key="evictd.io/memory-pressure",value="",effect="NoSchedule"} 1+0x20
  evictd_node_brake_since_timestamp_seconds{job="evictd",node="k",namespace="evictd-system",pod="evictd-k",resource="memory"} 0+0x20
  evictd_node_brake_on{job="evictd",node="k",namespace="evictd-system",pod="evictd-k",resource="memory"} 1+0x20
  kube_node_spec_taint{job="kube-state-metrics",node="k",key="evictd.io/memory-pressure",value="",effect="NoSchedule"} 1+0x20
  evictd_node_brake_since_timestamp_seconds{job="evictd",node="h",namespace="evictd-system",pod="evictd-h",resource="pids"} -3000+0x20
  evictd_node_brake_on{job="evictd",node="h",namespace="evictd-system",pod="evictd-h",resource="pids"} 1+0x20
  kube_node_status_condition{job="kube-state-metrics",node="h",condition="EvictdPIDPressure",status="true"} 1+0x20
  kube_node_spec_taint{job="kube-state-metrics",node="l",key="evictd.io/disk-pressure",value="",effect="NoSchedule"} 1+0x20
  kube_node_status_condition{job="kube-state-metrics",node="m",condition="EvictdMemoryPressure",status="true"} 0+0x20
  kube_node_status_condition{job="kube-state-metrics",node="m",condition="EvictdMemoryPressure",status="false"} 1+0x20
  kube_daemonset_status_desired_number_scheduled{job="kube-state-metrics",namespace="evictd-system",daemonset="evictd"} 4+0x20
  kube_daemonset_status_number_ready{job="kube-state-metrics",namespace="evictd-system",daemonset="evictd"} 3+0x20
  kube_daemonset_status_desired_number_scheduled{job="kube-state-metrics",namespace="other",daemonset="evictd-canary"} 2+0x20
  kube_daemonset_status_number_ready{job="kube-state-metrics",namespace="other",daemonset="evictd-canary"} 2+0x20
`)
	t.Cleanup(func() { store.Close() })
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	at := time.Unix(1200, 0)
	evaluated := map[string]bool{}
	defer func() {
		for alert := range exprs {
			if !evaluated[alert] {
				t.Errorf("alert %s is not evaluated here: add a case", alert)
			}
		}
	}()

	for _, tc := range []struct {
		alert string
		want  []string // the nodes it selects (DaemonSets: namespace/name)
	}{
		// PDBs refuse while the threshold stays met: a; b's threshold is no
		// longer met, c has no refusals.
		{"EvictdEvictionsRefusedByPDB", []string{"a"}},
		// 15 evictions in 15 minutes on a; 1.5 on b; c only in dry run.
		{"EvictdEvictionsSpiking", []string{"a"}},
		// d is unready while it observes (informers not synced, say); a is
		// unready because it does not observe, which EvictdNotObserving
		// names, and it cannot read a signal (EvictdSignalUnreadable): a
		// pages once, for its cause. b is ready. h waits for the node's
		// lease (EvictdNodeLeaseWaiting's); i's lease calls fail, which is
		// no wait for another agent.
		{"EvictdNotReady", []string{"d", "i"}},
		// h waits, unready, for a lease another evictd holds; i's lease
		// calls fail; b holds none but is ready (a dry run).
		{"EvictdNodeLeaseWaiting", []string{"h"}},
		// a's memory.available threshold sits at or below the kubelet's;
		// b's does not.
		{"EvictdThresholdBelowKubelet", []string{"a"}},
		// a's memory fell past its threshold's room once, 10 minutes ago;
		// b's never did.
		{"EvictdThresholdOutrun", []string{"a"}},
		// a's last success is 20 minutes old; b's and d's are now.
		{"EvictdNotObserving", []string{"a"}},
		// 10% of a's observations fail, under 2% of b's.
		{"EvictdObservationsFailing", []string{"a"}},
		// Only evictd's own targets count.
		{"EvictdDown", []string{"a"}},
		// evictd's targets are there (deploy/monitoring/tests has the
		// case where none is).
		{"EvictdAbsent", nil},
		// a cannot read pid.available; b can.
		{"EvictdSignalUnreadable", []string{"a"}},
		// a's eviction calls fail; b's did not.
		{"EvictdEvictionsFailing", []string{"a"}},
		// a's taint cannot be written while its condition's heartbeat can
		// (the heartbeat must not hide it); b's taint met one conflict and
		// was written a minute later; c wrote nothing in the window.
		{"EvictdNodeBrakeFailing", []string{"a"}},
		// j's brake went on 70 minutes before the evaluation (Unix time
		// -3000); k's 20 minutes before; h's agent waits for the lease, and
		// its series of the brake it held is no longer its own.
		{"EvictdNodeBrakeHeldLong", []string{"j"}},
		// h's condition is kept by no agent (its one waits for the lease), l
		// has a taint and no agent at all; j's and k's agents act, m's
		// condition is False.
		{"EvictdNodeBrakeLeftBehind", []string{"h", "l"}},
		// a's memory episode spent its cap; b's did not.
		{"EvictdEpisodeCapReached", []string{"a"}},
		// a's evictions are refused; e's fail on a webhook that cannot be
		// called; b's were neither in the last 15 minutes.
		{"EvictdEvictionsRefused", []string{"a", "e"}},
		// a's victims stay; b's go.
		{"EvictdVictimStuck", []string{"a"}},
		// a's PSI trigger is not armed; b's is, and b, a cgroup v2 node,
		// exports memory_events (armed) and no memcg_threshold series at
		// all: the false positive of old, a v1-only source at 0 on every v2
		// node for ever, cannot arise.
		{"EvictdWakeupSourceInactive", []string{"a"}},
		// evictd-system's DaemonSet has 3 of 4 pods ready; the canary in
		// another namespace all of its 2.
		{"EvictdDaemonSetIncomplete", []string{"evictd-system/evictd"}},
	} {
		evaluated[tc.alert] = true
		expr, ok := exprs[tc.alert]
		if !ok {
			t.Errorf("no alert %s in deploy/monitoring/alerts.yaml", tc.alert)
			continue
		}
		q, err := engine.NewInstantQuery(context.Background(), store, nil, expr, at)
		if err != nil {
			t.Fatalf("%s: %v", tc.alert, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", tc.alert, res.Err)
		}
		vec, err := res.Vector()
		if err != nil {
			t.Fatalf("%s: %v", tc.alert, err)
		}
		var got []string
		for _, s := range vec {
			if ds := s.Metric.Get("daemonset"); ds != "" {
				got = append(got, s.Metric.Get("namespace")+"/"+ds)
			} else {
				got = append(got, s.Metric.Get("node"))
			}
			for _, l := range printed[tc.alert] {
				if s.Metric.Get(l) == "" {
					t.Errorf("%s prints $labels.%s, which its result %s lacks", tc.alert, l, s.Metric)
				}
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s selects nodes %v at 20m; want %v (result %v)", tc.alert, got, tc.want, vec)
		}
		q.Close()
	}
}

// labelRef is a label an alert's annotation template prints.
var labelRef = regexp.MustCompile(`\$labels\.(\w+)`)
