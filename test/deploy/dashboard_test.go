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
	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
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
