// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// legendRef is a label a query's legendFormat prints.
var legendRef = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// TestDashboardShape: panel ids are unique (Grafana keys panel state by
// them), each panel's refIds are unique, every data source names the
// dashboard's data source variable, and every label a legend prints is on
// the series its query returns (else the legend shows an empty name).
func TestDashboardShape(t *testing.T) {
	dash := loadDashboard(t)
	_, vars := dashboardQueries(dash)
	s := withRecorded(t, registrySeries(t))
	ids := map[float64]bool{}
	for _, p := range panels(dash) {
		title := p["title"]
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel %q: id %v is used twice", title, id)
		}
		ids[id] = true
		if ds, ok := p["datasource"].(map[string]any); ok && ds["uid"] != "${datasource}" {
			t.Errorf("panel %q: data source %v; want the ${datasource} variable", title, ds)
		}
		refs := map[string]bool{}
		targets, _ := p["targets"].([]any)
		for _, tg := range targets {
			target, _ := tg.(map[string]any)
			ref, _ := target["refId"].(string)
			if ref == "" || refs[ref] {
				t.Errorf("panel %q: refId %q missing or used twice", title, ref)
			}
			refs[ref] = true
			expr, _ := target["expr"].(string)
			legend, _ := target["legendFormat"].(string)
			q, err := substitute(expr, vars)
			if err != nil {
				continue // TestDashboardQueries reports it
			}
			e, err := parser.ParseExpr(q)
			if err != nil {
				continue
			}
			out, known := outputLabels(e, s)
			if !known {
				continue
			}
			for _, m := range legendRef.FindAllStringSubmatch(legend, -1) {
				if !out[m[1]] {
					t.Errorf("panel %q, query %s: the legend prints {{%s}}, which %s does not return (it returns %s)",
						title, ref, m[1], expr, labelList(out))
				}
			}
		}
	}
	if _, ok := vars["datasource"]; !ok {
		t.Error("the dashboard has no datasource variable")
	}
	// Every panel fits Grafana's 24 columns and none covers another
	// (Grafana would push one down; the picture would draw one over the
	// other).
	type box struct {
		title      any
		x, y, w, h float64
	}
	var boxes []box
	for _, p := range panels(dash) {
		g, _ := p["gridPos"].(map[string]any)
		b := box{title: p["title"]}
		b.x, _ = g["x"].(float64)
		b.y, _ = g["y"].(float64)
		b.w, _ = g["w"].(float64)
		b.h, _ = g["h"].(float64)
		if b.w <= 0 || b.h <= 0 || b.x < 0 || b.x+b.w > 24 {
			t.Errorf("panel %q: gridPos %v does not fit 24 columns", b.title, g)
		}
		for _, o := range boxes {
			if b.x < o.x+o.w && o.x < b.x+b.w && b.y < o.y+o.h && o.y < b.y+b.h {
				t.Errorf("panels %q and %q overlap", o.title, b.title)
			}
		}
		boxes = append(boxes, b)
	}
}

// dashboardShows is what README.md and docs/runbook.md say the dashboard
// shows, each by a metric one of its panels must select.
var dashboardShows = map[string][]string{
	"each signal against its threshold":   {"evictd_signal_available_bytes", "evictd_threshold_available_bytes", "evictd_signal_available", "evictd_threshold_available", "evictd_signal_stall_ratio", "evictd_threshold_stall_ratio"},
	"thresholds met, pressure episodes":   {"evictd_threshold_met", "evictd_pressure_episode"},
	"evictions by result and by signal":   {"evictd_evictions_total"},
	"evicted pods that did not go":        {"evictd_eviction_stuck_total"},
	"the node brake, and its failures":    {"evictd_node_brake_on", "evictd_node_brake_writes_total"},
	"the two latency histograms":          {"evictd_eviction_latency_seconds_bucket", "evictd_eviction_termination_seconds_bucket"},
	"wake-ups and the sources armed":      {"evictd_wakeups_total", "evictd_wakeup_source_active"},
	"evictd's own CPU and memory":         {"process_cpu_seconds_total", "process_resident_memory_bytes"},
	"observation time, errors, readiness": {"evictd_observation_duration_seconds_bucket", "evictd_observation_errors_total", "evictd_ready"},
}

// TestDashboardShowsWhatTheDocsSay: every metric of dashboardShows is
// selected by a panel's query, so that what the docs promise (the brake
// among them) is on the dashboard, and a panel dropped fails by name.
func TestDashboardShowsWhatTheDocsSay(t *testing.T) {
	dash := loadDashboard(t)
	_, vars := dashboardQueries(dash)
	selected := map[string][]string{} // metric: the panels whose queries select it
	for _, p := range panels(dash) {
		title, _ := p["title"].(string)
		targets, _ := p["targets"].([]any)
		for _, tg := range targets {
			target, _ := tg.(map[string]any)
			expr, _ := target["expr"].(string)
			q, err := substitute(expr, vars)
			if err != nil {
				continue // TestDashboardQueries reports it
			}
			e, err := parser.ParseExpr(q)
			if err != nil {
				continue
			}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					selected[metricName(vs)] = append(selected[metricName(vs)], title)
				}
				return nil
			})
		}
	}
	for what, metrics := range dashboardShows {
		for _, m := range metrics {
			if len(selected[m]) == 0 {
				t.Errorf("the docs say the dashboard shows %s; no panel's query selects %s", what, m)
			}
		}
	}
}

// outputLabels is the set of labels the series of e carry, for the shapes
// dashboards use: a selector, a function of one, an aggregation, a
// histogram_quantile, arithmetic with a number. known is false for any
// other shape, which is then not checked.
func outputLabels(e parser.Expr, s series) (labels map[string]bool, known bool) {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return outputLabels(n.Expr, s)
	case *parser.VectorSelector:
		have, ok := s[metricName(n)]
		return have, ok
	case *parser.MatrixSelector:
		return outputLabels(n.VectorSelector, s)
	case *parser.AggregateExpr:
		if n.Without {
			return nil, false
		}
		out := map[string]bool{}
		for _, l := range n.Grouping {
			out[l] = true
		}
		return out, true
	case *parser.Call:
		switch n.Func.Name {
		case "rate", "irate", "increase", "delta", "deriv", "abs", "max_over_time", "min_over_time", "avg_over_time":
			return outputLabels(n.Args[0], s)
		case "histogram_quantile":
			in, ok := outputLabels(n.Args[1], s)
			if !ok {
				return nil, false
			}
			out := map[string]bool{}
			for l := range in {
				if l != "le" {
					out[l] = true
				}
			}
			return out, true
		}
	case *parser.BinaryExpr:
		if n.LHS.Type() == parser.ValueTypeScalar {
			return outputLabels(n.RHS, s)
		}
		if n.RHS.Type() == parser.ValueTypeScalar {
			return outputLabels(n.LHS, s)
		}
	}
	return nil, false
}

// TestOutputLabelsCatchesALegend: a legend printing a label the query
// aggregated away is caught.
func TestOutputLabelsCatchesALegend(t *testing.T) {
	s := registrySeries(t)
	for expr, want := range map[string]string{
		`sum by (result) (increase(evictd_evictions_total[5m]))`:                                          "result",
		`histogram_quantile(0.5, sum by (le, signal) (rate(evictd_eviction_latency_seconds_bucket[5m])))`: "signal",
		`process_resident_memory_bytes / 2^20`:                                                            "instance, job",
	} {
		e, err := parser.ParseExpr(expr)
		if err != nil {
			t.Fatal(err)
		}
		out, known := outputLabels(e, s)
		if !known {
			t.Errorf("%s: shape not known", expr)
			continue
		}
		if expr == `sum by (result) (increase(evictd_evictions_total[5m]))` && out["signal"] {
			t.Errorf("%s returns signal; it was aggregated away", expr)
		}
		for _, l := range regexp.MustCompile(`\w+`).FindAllString(want, -1) {
			if !out[l] {
				t.Errorf("%s: %s not among %s", expr, l, fmt.Sprint(labelList(out)))
			}
		}
	}
}

// docVariableRef is a dashboard variable the docs name: "its `node`
// variable", "with cluster, job and node variables".
var (
	docVariableRef  = regexp.MustCompile("`(\\w+)`\\s+variable")
	docVariableList = regexp.MustCompile(`dashboard, with ((?:\w+, )*\w+ and \w+) variables`)
)

// TestDocsNameTheDashboardsVariables: every dashboard variable README.md
// names is one the dashboard has (an operator looks for it by that name).
func TestDocsNameTheDashboardsVariables(t *testing.T) {
	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct{ Name string } `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, v := range dash.Templating.List {
		have[v.Name] = true
	}
	readme, err := os.ReadFile(repoPath(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\s+`).ReplaceAllString(string(readme), " ")
	var named []string
	for _, m := range docVariableRef.FindAllStringSubmatch(text, -1) {
		named = append(named, m[1])
	}
	for _, m := range docVariableList.FindAllStringSubmatch(text, -1) {
		named = append(named, regexp.MustCompile(`\w+`).FindAllString(strings.ReplaceAll(m[1], " and ", ", "), -1)...)
	}
	if len(named) == 0 {
		t.Fatal("README.md names no dashboard variable; the test reads none")
	}
	for _, v := range named {
		if !have[v] {
			t.Errorf("README.md names the dashboard variable %q; the dashboard has %v", v, dash.Templating.List)
		}
	}
}

// loadDashboard is deploy/monitoring/dashboard.json, decoded.
func loadDashboard(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return dash
}
