// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// checkExpr parses a PromQL expression with Prometheus's own parser and
// checks it against evictd's series: every metric it selects exists, every
// label it matches on that metric has, and every label it groups or joins by
// is on the series it groups or joins.
func checkExpr(expr string, s series) error {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	var problems []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := metricName(n)
			have, ok := s[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("metric %q is not in evictd's registry", name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !have[m.Name] {
					problems = append(problems, fmt.Sprintf("%s has no label %q (it has %s)", name, m.Name, labelList(have)))
				}
			}
		case *parser.AggregateExpr:
			if err := labelsOn(n.Grouping, n.Expr, s); err != nil {
				problems = append(problems, fmt.Sprintf("%s by/without: %v", n.Op, err))
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && vm.On {
				for _, side := range []parser.Expr{n.LHS, n.RHS} {
					if err := labelsOn(vm.MatchingLabels, side, s); err != nil {
						problems = append(problems, fmt.Sprintf("%s on(): %v", n.Op, err))
					}
				}
			}
		}
		return nil
	})
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// metricName is a selector's metric, given as a name or as __name__="x".
func metricName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// labelsOn checks that every label in want is on at least one series the
// expression selects (so grouping or joining by it means something).
func labelsOn(want []string, e parser.Expr, s series) error {
	have := map[string]bool{}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			for l := range s[metricName(vs)] {
				have[l] = true
			}
		}
		return nil
	})
	var missing []string
	for _, l := range want {
		if !have[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("label %s is on none of the series of %s", strings.Join(missing, ", "), e)
	}
	return nil
}

func labelList(m map[string]bool) string {
	var l []string
	for k := range m {
		l = append(l, k)
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

// TestCheckExprCatchesMistakes: the check the rules and the dashboard pass
// fails on a wrong metric, a wrong label, a wrong grouping or join, and bad
// syntax.
func TestCheckExprCatchesMistakes(t *testing.T) {
	s := registrySeries(t)
	for _, tc := range []struct {
		expr string
		bad  string // "" when the expression is right; else a word the error has
	}{
		{`evictd_evictions_total{result="pdb_blocked", signal="memory.available", instance="n1"}`, ""},
		{`sum by (le, signal) (rate(evictd_eviction_latency_seconds_bucket[5m]))`, ""},
		{`up{job="evictd"} == 0`, ""},
		{`{__name__="evictd_threshold_met", kind="hard"}`, ""},
		{`rate(process_cpu_seconds_total[5m])`, ""},
		{`evictd_evictions_totl`, "evictd_evictions_totl"},
		{`evictd_eviction_latency_seconds{signal="x"}`, "evictd_eviction_latency_seconds"},
		{`evictd_evictions_total{reason="pdb"}`, `"reason"`},
		{`evictd_signal_available_bytes{kind="hard"}`, `"kind"`},
		{`sum by (node_name) (evictd_threshold_met)`, "node_name"},
		{`sum by (le) (evictd_eviction_latency_seconds_count)`, "le"},
		{`evictd_threshold_met and on (resource) evictd_pressure_episode`, "resource"},
		{`sum(rate(evictd_evictions_total[5m])`, "parse"},
	} {
		err := checkExpr(tc.expr, s)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case tc.bad != "" && err == nil:
			t.Errorf("%s: passed; want an error naming %s", tc.expr, tc.bad)
		case tc.bad != "" && !strings.Contains(err.Error(), tc.bad):
			t.Errorf("%s: error %q does not name %s", tc.expr, err, tc.bad)
		}
	}
}

// TestAlertingRules parses deploy/monitoring/alerts.yaml with Prometheus's
// own rule parser (which also parses every expr and annotation template)
// and checks every expression against the registry.
// runbookURL is docs/runbook.md where the alerts link it.
const runbookURL = "https://github.com/evictd/evictd/blob/main/docs/runbook.md"

func TestAlertingRules(t *testing.T) {
	groups := loadRules(t)
	raw, err := os.ReadFile(repoPath(t, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	runbook := string(raw)
	s := registrySeries(t)
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			name := r.Alert + r.Record
			if err := checkExpr(r.Expr, s); err != nil {
				t.Errorf("rule %s: %v", name, err)
			}
			if r.Alert != "" {
				if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("alert %s lacks a severity label, a summary or a description", name)
				}
				// Its runbook section exists: a "## Name" heading, whose
				// anchor is the name in lower case.
				want := runbookURL + "#" + strings.ToLower(r.Alert)
				if r.Annotations["runbook_url"] != want {
					t.Errorf("alert %s: runbook_url %q, want %q", name, r.Annotations["runbook_url"], want)
				}
				if !strings.Contains(runbook, "\n## "+r.Alert+"\n") {
					t.Errorf("alert %s has no section in docs/runbook.md", name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no rules in deploy/monitoring/alerts.yaml")
	}
	// What the rules must cover, by the series that tell it.
	all := ""
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			all += r.Expr + "\n"
		}
	}
	for what, needle := range map[string]string{
		"evictd down":                    "up{",
		"evictd unready (not observing)": "evictd_observation_last_success_timestamp_seconds",
		"evictions spiking":              `result=~"evicted`,
		"PDB refusals persisting":        `result="pdb_blocked"`,
		"observation errors":             "evictd_observation_errors_total",
		"evictions failing":              `result="error"`,
		"episode cap reached":            "evictd_pressure_episode_cap_reached",
		"DaemonSet coverage":             "kube_daemonset_status_number_ready",
		"node brake held long":           "evictd_node_brake_since_timestamp_seconds",
		"node brake left with no agent":  "kube_node_spec_taint",
	} {
		if !strings.Contains(all, needle) {
			t.Errorf("no rule covers %s (no expr has %s)", what, needle)
		}
	}
}

func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	return loadRuleFile(t, "alerts.yaml")
}

// loadRuleFile parses deploy/monitoring/name with Prometheus's own rule
// parser, which also parses every expr and annotation template.
func loadRuleFile(t *testing.T, name string) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(repoPath(t, "deploy", "monitoring", name), false, model.UTF8Validation)
	for _, err := range errs {
		t.Errorf("deploy/monitoring/%s: %v", name, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// grafanaVar is a dashboard variable reference: $name, ${name} or
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$(\w+)|\$\{(\w+)(:\w+)?\}`)

// labelValues is Grafana's label_values(metric, label) query.
var labelValues = regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)$`)

// TestDashboardQueries walks deploy/monitoring/dashboard.json for every
// query (each panel target's expr, and the templating variables') and
// checks each against the registry and the series
// deploy/monitoring/recording.yaml records.
func TestDashboardQueries(t *testing.T) {
	dash := loadDashboard(t)
	s := withRecorded(t, registrySeries(t))
	exprs, vars := dashboardQueries(dash)
	if len(exprs) < 10 {
		t.Fatalf("found %d queries in the dashboard; the walk misses some", len(exprs))
	}
	for path, q := range exprs {
		expr, err := substitute(q, vars)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if m := labelValues.FindStringSubmatch(expr); m != nil {
			// The label must be on the series the variable lists.
			expr = fmt.Sprintf("count by (%s) (%s)", m[2], m[1])
		}
		if err := checkExpr(expr, s); err != nil {
			t.Errorf("%s: %s: %v", path, q, err)
		}
	}
	// Every panel that draws must have a query, and every query a refId.
	for _, p := range panels(dash) {
		if p["type"] == "row" {
			continue
		}
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no queries", p["title"])
		}
	}
}

// dashboardQueries returns every PromQL query of the dashboard by where it
// is, and the variables' types by name.
func dashboardQueries(dash map[string]any) (exprs map[string]string, vars map[string]string) {
	exprs, vars = map[string]string{}, map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if s, ok := c.(string); ok && k == "expr" {
					exprs[path+"."+k] = s
				}
				walk(path+"."+k, c)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	walk("", dash["panels"])
	templ, _ := dash["templating"].(map[string]any)
	list, _ := templ["list"].([]any)
	for i, item := range list {
		v, _ := item.(map[string]any)
		name, _ := v["name"].(string)
		typ, _ := v["type"].(string)
		vars[name] = typ
		if typ != "query" {
			continue
		}
		switch q := v["query"].(type) {
		case string:
			exprs[fmt.Sprintf("templating[%d].query", i)] = q
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				exprs[fmt.Sprintf("templating[%d].query.query", i)] = s
			}
		}
		if d, ok := v["definition"].(string); ok && d != "" {
			exprs[fmt.Sprintf("templating[%d].definition", i)] = d
		}
	}
	return exprs, vars
}

// substitute puts a value of the right kind in place of each variable the
// way Grafana would: a duration for Grafana's interval variables and for
// variables of type interval, a plain word otherwise. A variable the
// dashboard does not define is an error.
func substitute(q string, vars map[string]string) (string, error) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(q, func(ref string) string {
		m := grafanaVar.FindStringSubmatch(ref)
		name := m[1] + m[2]
		switch {
		case name == "__rate_interval" || name == "__interval" || name == "__range":
			return "5m"
		case name == "__interval_ms" || name == "__range_s":
			return "300"
		case vars[name] == "interval":
			return "5m"
		case vars[name] != "":
			return "value"
		}
		unknown = append(unknown, ref)
		return ref
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("variable %s is not defined in the dashboard", strings.Join(unknown, ", "))
	}
	return out, nil
}

// panels lists the dashboard's panels, those inside collapsed rows too.
func panels(dash map[string]any) []map[string]any {
	var out []map[string]any
	var add func(list []any)
	add = func(list []any) {
		for _, p := range list {
			pm, ok := p.(map[string]any)
			if !ok {
				continue
			}
			out = append(out, pm)
			if inner, ok := pm["panels"].([]any); ok {
				add(inner)
			}
		}
	}
	top, _ := dash["panels"].([]any)
	add(top)
	return out
}
