// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLegend(t *testing.T) {
	lbls := map[string]string{"instance": "n1", "signal": "memory.available"}
	for _, c := range []struct{ format, want string }{
		{"{{instance}} {{signal}}", "n1 memory.available"},
		{"{{ signal }} threshold", "memory.available threshold"},
		{"p99 {{missing}}", "p99"},
		{"", "instance=n1,signal=memory.available"},
	} {
		if got := Legend(c.format, lbls); got != c.want {
			t.Errorf("Legend(%q) = %q, want %q", c.format, got, c.want)
		}
	}
}

func TestExpand(t *testing.T) {
	got := Expand(`rate(x{cluster=~"$cluster",job=~"${job}",node=~"$node"}[$__rate_interval])`, 2*time.Second)
	if want := `rate(x{cluster=~".*",job=~".*",node=~".*"}[8s])`; got != want {
		t.Errorf("Expand = %q, want %q", got, want)
	}
}

func TestStack(t *testing.T) {
	got := Stack([]Series{{T: []int64{1, 2}, V: []float64{1, 2}}, {T: []int64{2, 3}, V: []float64{10, 10}}})
	if fmt.Sprint(got[1].V) != "[12 10]" || fmt.Sprint(got[0].V) != "[1 2]" {
		t.Errorf("Stack = %v", got)
	}
}

func TestAxis(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{300 << 20, "bytes", "300 MiB"}, {1.5 * (1 << 30), "bytes", "1.5 GiB"}, {0.025, "s", "25 ms"},
		{2e-5, "s", "20 us"}, {16e6, "short", "16 Mil"}, {0.25, "short", "0.25"},
	} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %s) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
	ticks := axisTicks(0, 700<<20, "bytes")
	if last := ticks[len(ticks)-1]; last < 700<<20 || int64(last)%(100<<20) != 0 {
		t.Errorf("byte ticks %v: the last must cover 700 MiB on a round number of MiB", ticks)
	}
}

// scrape writes one /metrics capture as evictd's handler would serve it.
func scrape(t *testing.T, dir string, at time.Time, avail, evictions float64, buckets [3]float64) {
	t.Helper()
	text := fmt.Sprintf(`# HELP evictd_signal_available_bytes Available.
# TYPE evictd_signal_available_bytes gauge
evictd_signal_available_bytes{signal="memory.available"} %g
# HELP evictd_evictions_total Evictions.
# TYPE evictd_evictions_total counter
evictd_evictions_total{result="evicted",signal="memory.available"} %g
# HELP evictd_observation_duration_seconds Observation.
# TYPE evictd_observation_duration_seconds histogram
evictd_observation_duration_seconds_bucket{le="0.001"} %g
evictd_observation_duration_seconds_bucket{le="0.01"} %g
evictd_observation_duration_seconds_bucket{le="+Inf"} %g
evictd_observation_duration_seconds_sum 0.1
evictd_observation_duration_seconds_count %g
`, avail, evictions, buckets[0], buckets[1], buckets[2], buckets[2])
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.prom", at.UnixMilli())), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const testDashboard = `{"title": "t", "panels": [
 {"type": "row", "title": "Pressure", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}},
 {"type": "timeseries", "title": "Memory", "gridPos": {"x": 0, "y": 1, "w": 12, "h": 8},
  "fieldConfig": {"defaults": {"unit": "bytes"}},
  "targets": [{"expr": "evictd_signal_available_bytes{node=~\"$node\"}", "legendFormat": "{{signal}}"}]},
 {"type": "timeseries", "title": "Evictions", "gridPos": {"x": 12, "y": 1, "w": 12, "h": 8},
  "fieldConfig": {"defaults": {"unit": "short", "custom": {"stacking": {"mode": "normal"}}}},
  "targets": [{"expr": "sum by (result) (increase(evictd_evictions_total[$__rate_interval]))", "legendFormat": "{{result}}"}]},
 {"type": "timeseries", "title": "Observation", "gridPos": {"x": 0, "y": 9, "w": 12, "h": 8},
  "fieldConfig": {"defaults": {"unit": "s"}},
  "targets": [{"expr": "histogram_quantile(0.5, sum by (le) (rate(evictd_observation_duration_seconds_bucket[$__rate_interval])))", "legendFormat": "p50"}]},
 {"type": "timeseries", "title": "Nothing yet", "gridPos": {"x": 12, "y": 9, "w": 12, "h": 8},
  "targets": [{"expr": "evictd_no_such_metric"}]}
]}`

func writeScrapes(t *testing.T) (dir string, start time.Time) {
	dir = t.TempDir()
	start = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	for i := range 30 {
		scrape(t, dir, start.Add(time.Duration(i)*time.Second), float64(800-20*i)*(1<<20), float64(i/10),
			[3]float64{float64(10 * i), float64(19 * i), float64(20 * i)})
	}
	return dir, start
}

func TestPanelQueriesOverScrapes(t *testing.T) {
	dir, start := writeScrapes(t)
	d := filepath.Join(t.TempDir(), "d.json")
	if err := os.WriteFile(d, []byte(testDashboard), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "d.png")
	if err := render(context.Background(), d, dir, out, "", map[string]string{"node": "n1", "job": "evictd"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if w := img.Bounds().Dx(); w != canvasWidth {
		t.Errorf("picture is %d px wide, want %d", w, canvasWidth)
	}
	// The first series' colour is on the picture: the memory line was drawn.
	found := false
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y && !found; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := palette[0]
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B {
				found = true
				break
			}
		}
	}
	if !found {
		t.Error("no line of the first series' colour in the picture")
	}

	// The values the engine returns for the panels, checked directly.
	scrapes, err := ListScrapes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(scrapes) != 30 || !scrapes[0].At.Equal(start) {
		t.Fatalf("ListScrapes: %d scrapes from %v", len(scrapes), scrapes[0].At)
	}
	ev, closeDB := openEvaluator(t, scrapes)
	defer closeDB()
	dash, err := ReadDashboard(d)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := ev.Panel(context.Background(), dash.Panels[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(mem) != 1 || mem[0].Legend != "memory.available" || mem[0].V[0] != 800<<20 || mem[0].V[len(mem[0].V)-1] != 220<<20 {
		t.Errorf("memory panel: %+v", mem)
	}
	obs, err := ev.Panel(context.Background(), dash.Panels[3])
	if err != nil {
		t.Fatal(err)
	}
	// Half the observations fall under 1 ms each second: the median is at the 1 ms bucket's bound.
	if len(obs) != 1 || obs[0].V[len(obs[0].V)-1] != 0.001 {
		t.Errorf("observation p50: %+v", obs)
	}
	none, err := ev.Panel(context.Background(), dash.Panels[4])
	if err != nil || len(none) != 0 {
		t.Errorf("a metric with no samples: %v series, err %v; want none and no error", len(none), err)
	}
}

func TestBadQueryNamesThePanel(t *testing.T) {
	dir, _ := writeScrapes(t)
	d := filepath.Join(t.TempDir(), "d.json")
	bad := strings.Replace(testDashboard, `"expr": "evictd_no_such_metric"`, `"expr": "sum by (signal (evictd_x)"`, 1)
	if err := os.WriteFile(d, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	err := render(context.Background(), d, dir, filepath.Join(t.TempDir(), "d.png"), "", nil)
	if err == nil || !strings.Contains(err.Error(), `panel "Nothing yet"`) || !strings.Contains(err.Error(), "sum by (signal (evictd_x)") {
		t.Errorf("err = %v; want one naming the panel and its query", err)
	}
}

func TestListScrapesRefusesStrangeNames(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "latest.prom"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ListScrapes(dir); err == nil || !strings.Contains(err.Error(), "latest.prom") {
		t.Errorf("err = %v; want one naming latest.prom", err)
	}
}

func openEvaluator(t *testing.T, scrapes []Scrape) (*Evaluator, func()) {
	t.Helper()
	db, closeDB, err := openStore(context.Background(), scrapes, map[string]string{"node": "n1", "job": "evictd"})
	if err != nil {
		t.Fatal(err)
	}
	return NewEvaluator(db, windowOf(scrapes)), closeDB
}

// TestTheDashboardDrawsTheBrake draws deploy/monitoring/dashboard.json
// itself (every panel of a type the picture draws, every query one
// Prometheus's engine evaluates) over scrapes of a node whose memory brake
// goes on, and reads the brake back from the panel that shows it.
func TestTheDashboardDrawsTheBrake(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	for i := range 30 {
		on := 0
		if i >= 10 {
			on = 1
		}
		text := fmt.Sprintf(`# HELP evictd_node_brake_on Brake on.
# TYPE evictd_node_brake_on gauge
evictd_node_brake_on{resource="memory"} %d
# HELP evictd_node_brake_writes_total Brake writes.
# TYPE evictd_node_brake_writes_total counter
evictd_node_brake_writes_total{object="condition",result="ok"} %d
`, on, i/10)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.prom", start.Add(time.Duration(i)*time.Second).UnixMilli())), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join("..", "..", "deploy", "monitoring", "dashboard.json")
	if err := render(context.Background(), path, dir, filepath.Join(t.TempDir(), "d.png"), "", map[string]string{"node": "n1", "job": "evictd"}); err != nil {
		t.Fatalf("drawing %s: %v", path, err)
	}
	dash, err := ReadDashboard(path)
	if err != nil {
		t.Fatal(err)
	}
	scrapes, err := ListScrapes(dir)
	if err != nil {
		t.Fatal(err)
	}
	ev, closeDB := openEvaluator(t, scrapes)
	defer closeDB()
	found := false
	for _, p := range dash.Panels {
		if !slices.ContainsFunc(p.Targets, func(tg Target) bool { return strings.Contains(tg.Expr, "evictd_node_brake_on") }) {
			continue
		}
		found = true
		series, err := ev.Panel(context.Background(), p)
		if err != nil {
			t.Fatalf("panel %q: %v", p.Title, err)
		}
		on := slices.IndexFunc(series, func(s Series) bool { return strings.Contains(s.Legend, "memory") })
		if on < 0 {
			t.Fatalf("panel %q draws %+v; want the memory brake's series", p.Title, series)
		}
		if v := series[on].V; v[0] != 0 || v[len(v)-1] != 1 {
			t.Errorf("panel %q: the memory brake %v; want it off, then on", p.Title, v)
		}
	}
	if !found {
		t.Error("no panel of the dashboard shows the node brake (evictd_node_brake_on)")
	}
}
