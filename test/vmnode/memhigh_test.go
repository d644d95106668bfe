// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKubeletMemoryHigh: the kubelet's formula, worked by hand.
func TestKubeletMemoryHigh(t *testing.T) {
	const mi = 1 << 20
	for _, tt := range []struct {
		name           string
		request, limit int64
		factor         float64
		want           int64
	}{
		// 32 Mi + 0.9 * 224 Mi = 244947353.6 bytes, 59801 whole pages.
		{"burstable", 32 * mi, 256 * mi, 0.9, 59801 * 4096},
		{"no request", 0, 100 * mi, 0.5, 50 * mi},
		{"guaranteed", 64 * mi, 64 * mi, 0.9, 0},
		{"no limit", 32 * mi, 0, 0.9, 0},
		{"not above the request", 100 * mi, 100*mi + 4096, 0.5, 0},
	} {
		if got := kubeletMemoryHigh(tt.request, tt.limit, tt.factor, 4096); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestWithMemoryThrottlingFactor: the factor lands in the config and the
// rest stays; a factor the kubelet refuses is refused here.
func TestWithMemoryThrottlingFactor(t *testing.T) {
	base, err := kubeletConfig("/out", false, Systemd)
	if err != nil {
		t.Fatal(err)
	}
	b, err := withMemoryThrottlingFactor(base, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["memoryThrottlingFactor"] != 0.9 || cfg["cgroupDriver"] != Systemd {
		t.Errorf("memoryThrottlingFactor %v, cgroupDriver %v; want 0.9 and %s", cfg["memoryThrottlingFactor"], cfg["cgroupDriver"], Systemd)
	}
	for _, f := range []float64{0, 1.5, math.NaN()} {
		if _, err := withMemoryThrottlingFactor(base, f); err == nil {
			t.Errorf("factor %g accepted", f)
		}
	}
	if _, err := withMemoryThrottlingFactor([]byte(`{"kind":"Pod"}`), 0.9); err == nil || !strings.Contains(err.Error(), "Pod") {
		t.Errorf("a Pod accepted as a kubelet config: %v", err)
	}
}

// TestParseCgroupRead: the files as the 6.1 guest kernel prints them.
func TestParseCgroupRead(t *testing.T) {
	out := `812.45 1500.10
== memory.events
low 0
high 2214
max 3
oom 0
oom_kill 0
== memory.pressure
some avg10=41.23 avg60=12.05 avg300=2.90 total=18234567
full avg10=40.10 avg60=11.80 avg300=2.80 total=17900000
== memory.current
247463936
== memory.peak
251658240
== memory.high
244944896
`
	r, err := parseCgroupRead(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Uptime != 812.45 || r.Events["high"] != 2214 || r.Events["max"] != 3 || r.SomeTotal != 18234567 ||
		r.Current != 247463936 || r.Peak != 251658240 || r.High != 244944896 {
		t.Errorf("read %+v", r)
	}
	later := r
	later.Uptime, later.Events = r.Uptime+10, map[string]int64{"high": 2214 + 500}
	later.SomeTotal = r.SomeTotal + 2_500_000
	if h, s := memHighRates(r, later); h != 50 || s != 25 {
		t.Errorf("rates %g/s, %g%%; want 50/s, 25%%", h, s)
	}
	unset := strings.Replace(out, "244944896", "max", 1)
	if r, err := parseCgroupRead(unset); err != nil || r.High != -1 {
		t.Errorf("memory.high max: %d, %v; want -1", r.High, err)
	}
	for _, bad := range []string{
		strings.Replace(out, "high 2214", "high x", 1),
		strings.Replace(out, "== memory.high\n244944896\n", "", 1),
		strings.Replace(out, "total=18234567", "18234567", 1),
		"not an uptime",
	} {
		if _, err := parseCgroupRead(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestMemHighSeries: the gauge's series as Prometheus prints them.
func TestMemHighSeries(t *testing.T) {
	metrics := `# HELP evictd_memory_high_containers Containers over a memory.high threshold
# TYPE evictd_memory_high_containers gauge
evictd_memory_high_containers{container="churn",signal="high",state="stuck"} 1
evictd_memory_high_containers{container="churn",signal="pressure",state="stuck"} 1
evictd_memory_high_containers{container="busy",signal="high",state="over"} 0
evictd_memory_high_containers_other 3
`
	got := memHighSeries(metrics)
	if want := []string{"churn/high/stuck", "churn/pressure/stuck"}; !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

func TestWakeupFigures(t *testing.T) {
	page := `# HELP evictd_wakeup_source_active 1 while a wake-up source is armed, 0 when it is unavailable or has failed.
# TYPE evictd_wakeup_source_active gauge
evictd_wakeup_source_active{source="memory_events"} 1
evictd_wakeup_source_active{source="psi"} 0
# TYPE evictd_wakeups_total counter
evictd_wakeups_total{source="memory_events"} 412
evictd_wakeups_total{source="poll"} 3.5e+02
evictd_wakeups_totally{source="x"} 9
`
	active, woke := WakeupFigures(page)
	if active["memory_events"] != 1 || active["psi"] != 0 || len(active) != 2 {
		t.Errorf("active %v", active)
	}
	if woke["memory_events"] != 412 || woke["poll"] != 350 || len(woke) != 2 {
		t.Errorf("woke %v", woke)
	}
}

// TestSpecMemoryHigh: the kubelet's memory.high as ctr prints a container's
// spec (trimmed from the node's), none, "max" and a bad value.
func TestSpecMemoryHigh(t *testing.T) {
	for _, tt := range []struct {
		name, spec string
		want       int64
		err        string
	}{
		{name: "the kubelet's", spec: `{"ociVersion":"1.2.1","linux":{"resources":{"memory":{"limit":268435456},"unified":{"memory.high":"244944896","memory.low":"0","memory.min":"0"}},"cgroupsPath":"kubepods-burstable-podX.slice:cri-containerd:Y"}}`, want: 244944896},
		{name: "no factor", spec: `{"linux":{"resources":{"unified":{"memory.low":"0","memory.min":"0"}}}}`},
		{name: "no resources", spec: `{"linux":{}}`},
		{name: "reset to max", spec: `{"linux":{"resources":{"unified":{"memory.high":"max"}}}}`, want: -1},
		{name: "bad value", spec: `{"linux":{"resources":{"unified":{"memory.high":"lots"}}}}`, err: `memory.high "lots"`},
		{name: "not JSON", spec: `ctr: container "x" in namespace "k8s.io": not found`, err: "the container's OCI spec"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := specMemoryHigh([]byte(tt.spec))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestMemHighHeld: evictd's stuck time from its eviction reason, as the node
// logged it, and reasons without one.
func TestMemHighHeld(t *testing.T) {
	got, err := memHighHeld("container churn: memory.events high 352.9/s over 30s (threshold 10/s), for 20s, priority 0")
	if err != nil || got != 20*time.Second {
		t.Fatalf("got %s, %v; want 20s", got, err)
	}
	for _, bad := range []string{"memory.available<300Mi", "container churn: for ever, priority 0"} {
		if _, err := memHighHeld(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
