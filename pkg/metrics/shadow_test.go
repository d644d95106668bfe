// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/metrictest"
)

// TestShadowMetrics: no shadow series until InitShadow (an agent that is
// not in shadow mode exports none, so a sum across nodes counts shadow
// agents alone); InitShadow creates the closed sets' series at 0; each
// count goes to its series.
func TestShadowMetrics(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "v1.2.3-test"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"evictd_shadow_would_evictions_total", "evictd_shadow_kubelet_evictions_total", "evictd_shadow_oom_kills_total", "evictd_shadow_episodes_total"}
	for _, n := range names {
		if c := testutil.CollectAndCount(m.Registry(), n); c != 0 {
			t.Errorf("%s: %d series without shadow mode, want none", n, c)
		}
	}
	m.InitShadow(ShadowSeries{
		Signals:          map[string]string{"memory.available": "memory", "nodefs.available": "nodefs"},
		Resources:        []string{"memory", "nodefs"},
		KubeletResources: []string{"memory", "ephemeral-storage", "other"},
		Episodes:         []string{"none", "memory", "nodefs"},
		Firsts:           []string{"evictd", "kubelet", "oom_killer", "none"},
	})
	for n, want := range map[string]int{names[0]: 2, names[1]: 3, names[2]: 3, names[3]: 8} {
		if c := testutil.CollectAndCount(m.Registry(), n); c != want {
			t.Errorf("%s: %d series after InitShadow, want %d", n, c, want)
		}
	}
	if v := metrictest.Value(t, m.Registry(), names[3], map[string]string{"resource": "nodefs", "first": "oom_killer"}); v != 0 {
		t.Errorf("episodes{nodefs, oom_killer} = %v at start, want 0", v)
	}

	m.ShadowWouldEvict("memory", "memory.available")
	m.ShadowWouldEvict("memory", "memory.available")
	m.ShadowKubeletEviction("memory")
	m.ShadowOOMKills("memory", 3)
	m.ShadowOOMKills("none", 0) // nothing: no series moves
	m.ShadowOOMKills("none", -2)
	m.ShadowEpisode("memory", "evictd")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{names[0], map[string]string{"resource": "memory", "signal": "memory.available"}, 2},
		{names[0], map[string]string{"resource": "nodefs", "signal": "nodefs.available"}, 0},
		{names[1], map[string]string{"resource": "memory"}, 1},
		{names[1], map[string]string{"resource": "ephemeral-storage"}, 0},
		{names[2], map[string]string{"episode": "memory"}, 3},
		{names[2], map[string]string{"episode": "none"}, 0},
		{names[3], map[string]string{"resource": "memory", "first": "evictd"}, 1},
		{names[3], map[string]string{"resource": "memory", "first": "kubelet"}, 0},
	} {
		if got := metrictest.Value(t, m.Registry(), tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%s = %v, want %v", tc.name, metrictest.Selector(tc.labels), got, tc.want)
		}
	}

	var none *Metrics // a nil *Metrics does nothing
	none.InitShadow(ShadowSeries{Resources: []string{"memory"}})
	none.ShadowWouldEvict("memory", "memory.available")
	none.ShadowKubeletEviction("memory")
	none.ShadowOOMKills("memory", 1)
	none.ShadowEpisode("memory", "evictd")
}
