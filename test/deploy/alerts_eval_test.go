package deploy

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestAlertExpressionsFire evaluates some of the rules' own expressions
// (read from deploy/monitoring/alerts.yaml) with Prometheus's engine over
// synthetic series of three nodes, and checks which nodes each selects: the
// ones in trouble, and not the ones that only look alike. `for:` is not
// evaluated here; only whether the condition holds.
func TestAlertExpressionsFire(t *testing.T) {
	exprs := map[string]string{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	// One sample a minute for 20 minutes; evaluated at 20m (Unix time 1200).
	store := promqltest.LoadedStorage(t, `
load 1m
  evictd_evictions_total{job="evictd",instance="a",signal="memory.available",result="pdb_blocked"} 0+1x20
  evictd_threshold_met{job="evictd",instance="a",signal="memory.available",kind="hard"} 1+0x20
  evictd_evictions_total{job="evictd",instance="b",signal="memory.available",result="pdb_blocked"} 0+1x20
  evictd_threshold_met{job="evictd",instance="b",signal="memory.available",kind="hard"} 0+0x20
  evictd_evictions_total{job="evictd",instance="c",signal="memory.available",result="pdb_blocked"} 0+0x20
  evictd_threshold_met{job="evictd",instance="c",signal="memory.available",kind="hard"} 1+0x20
  evictd_evictions_total{job="evictd",instance="a",signal="nodefs.available",result="evicted"} 0+1x20
  evictd_evictions_total{job="evictd",instance="b",signal="nodefs.available",result="evicted"} 0+0.1x20
  evictd_evictions_total{job="evictd",instance="c",signal="nodefs.available",result="dry_run"} 0+1x20
  evictd_observation_last_success_timestamp_seconds{job="evictd",instance="a"} 0+0x20
  evictd_observation_last_success_timestamp_seconds{job="evictd",instance="b"} 0+60x20
  evictd_observation_errors_total{job="evictd",instance="a"} 0+6x20
  evictd_observation_duration_seconds_count{job="evictd",instance="a"} 0+60x20
  evictd_observation_errors_total{job="evictd",instance="b"} 0+1x20
  evictd_observation_duration_seconds_count{job="evictd",instance="b"} 0+60x20
  up{job="evictd",instance="a"} 0+0x20
  up{job="evictd",instance="b"} 1+0x20
  up{job="node-exporter",instance="c"} 0+0x20
`)
	t.Cleanup(func() { store.Close() })
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	at := time.Unix(1200, 0)

	for _, tc := range []struct {
		alert string
		want  []string // the instances it selects
	}{
		// PDBs refuse while the threshold stays met: a; b's threshold is no
		// longer met, c has no refusals.
		{"EvictdEvictionsRefusedByPDB", []string{"a"}},
		// 15 evictions in 15 minutes on a; 1.5 on b; c only in dry run.
		{"EvictdEvictionsSpiking", []string{"a"}},
		// a's last success is 20 minutes old; b's is now.
		{"EvictdNotObserving", []string{"a"}},
		// 10% of a's observations fail, under 2% of b's.
		{"EvictdObservationsFailing", []string{"a"}},
		// Only evictd's own targets count.
		{"EvictdDown", []string{"a"}},
	} {
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
			got = append(got, s.Metric.Get("instance"))
		}
		sort.Strings(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s selects instances %v at 20m; want %v (result %v)", tc.alert, got, tc.want, vec)
		}
		q.Close()
	}
}
