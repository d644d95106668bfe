// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// staticRules is deploy/monitoring/alerts.yaml, parsed.
func staticRules(t *testing.T) map[string]any {
	t.Helper()
	return ruleFile(t, "alerts.yaml")
}

// ruleFile is deploy/monitoring/name, parsed.
func ruleFile(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// ruleOf returns the rendered rule of alert name, or nil.
func ruleOf(t *testing.T, pr *unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	for _, g := range nested[[]any](t, pr, "spec", "groups") {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if rm := r.(map[string]any); rm["alert"] == name {
				return rm
			}
		}
	}
	return nil
}

// TestChartAlertsDefaultsRenderTheFile: with default values, as release
// evictd, the PrometheusRule's spec is deploy/monitoring/alerts.yaml's
// groups and then deploy/monitoring/recording.yaml's, exactly.
func TestChartAlertsDefaultsRenderTheFile(t *testing.T) {
	pr := find(t, mustRender(t, "metrics: {prometheusRule: {enabled: true}}"), "PrometheusRule", "evictd")
	want := staticRules(t)
	want["groups"] = append(want["groups"].([]any), ruleFile(t, "recording.yaml")["groups"].([]any)...)
	if d := cmp.Diff(want, pr.Object["spec"]); d != "" {
		t.Errorf("the chart's default rules differ from deploy/monitoring/alerts.yaml and recording.yaml (-files +chart):\n%s", d)
	}
}

// TestChartRecordingRulesFollowTheSelector: the recording rules select this
// release's series as the alerts do, and take none of the alerts' labels
// (which would change the series they record).
func TestChartRecordingRulesFollowTheSelector(t *testing.T) {
	pr := find(t, mustRender(t, "{nameOverride: guard, fullnameOverride: node-guard, metrics: {prometheusRule: {enabled: true}}, alerts: {labels: {team: platform}}}"),
		"PrometheusRule", "node-guard")
	n := 0
	for _, g := range nested[[]any](t, pr, "spec", "groups") {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rm := r.(map[string]any)
			if rm["record"] == nil {
				continue
			}
			n++
			expr := rm["expr"].(string)
			if !strings.Contains(expr, `job="guard"`) || strings.Contains(expr, `job="evictd"`) {
				t.Errorf("recording rule %s with nameOverride guard: %q; want job=\"guard\", not job=\"evictd\"", rm["record"], expr)
			}
			if rm["labels"] != nil {
				t.Errorf("recording rule %s has the labels %v; want none", rm["record"], rm["labels"])
			}
		}
	}
	if n == 0 {
		t.Error("the PrometheusRule has no recording rule")
	}
}

// TestChartAlertsFollowTheNames: nameOverride and fullnameOverride change
// the job (app.kubernetes.io/name, the monitors' jobLabel) and the
// DaemonSet's name; the rules follow, and explicit selectors win.
func TestChartAlertsFollowTheNames(t *testing.T) {
	for _, tc := range []struct {
		values       string
		job, ds, not string
	}{
		{"{nameOverride: guard, fullnameOverride: node-guard, metrics: {prometheusRule: {enabled: true}}}", `job="guard"`, `daemonset="node-guard"`, `job="evictd"`},
		{"{metrics: {prometheusRule: {enabled: true}}, alerts: {selectors: {agents: 'job=\"agents\",namespace=\"infra\"', daemonSet: 'daemonset=~\"agents.*\"'}}}",
			`job="agents",namespace="infra"`, `daemonset=~"agents.*"`, `job="evictd"`},
	} {
		objs, err := render(t, tc.values)
		if err != nil {
			t.Fatalf("%s: %v", tc.values, err)
		}
		var pr *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "PrometheusRule" {
				pr = o
			}
		}
		if pr == nil {
			t.Fatalf("%s: no PrometheusRule", tc.values)
		}
		if ds := ruleOf(t, pr, "EvictdDaemonSetIncomplete"); !strings.Contains(ds["expr"].(string), tc.ds) {
			t.Errorf("%s: EvictdDaemonSetIncomplete %q lacks %s", tc.values, ds["expr"], tc.ds)
		}
		for _, name := range []string{"EvictdAbsent", "EvictdDown", "EvictdNotReady", "EvictdNodeBrakeFailing", "EvictdWakeupSourceInactive"} {
			r := ruleOf(t, pr, name)
			if !strings.Contains(r["expr"].(string), tc.job) || strings.Contains(r["expr"].(string), tc.not) {
				t.Errorf("%s: %s %q: want %s, not %s", tc.values, name, r["expr"], tc.job, tc.not)
			}
		}
		// The monitors' job is the name the rules select.
		for _, o := range objs {
			if o.GetKind() == "DaemonSet" && !strings.Contains(tc.ds, o.GetName()) && !strings.Contains(tc.ds, "=~") {
				t.Errorf("%s: DaemonSet %s, rules select %s", tc.values, o.GetName(), tc.ds)
			}
		}
	}
}

// TestChartAlertsPerRule: a rule switched off is gone, a severity override
// and extra labels land, global labels reach every alert, and a name that is
// no alert fails naming it.
func TestChartAlertsPerRule(t *testing.T) {
	pr := find(t, mustRender(t, `
metrics: {prometheusRule: {enabled: true}}
alerts:
  labels: {team: platform}
  rules:
    EvictdWakeupSourceInactive: {enabled: false}
    EvictdDown: {severity: warning, labels: {pager: nodes}}
    EvictdVictimStuck: {enabled: true}
`), "PrometheusRule", "evictd")
	if ruleOf(t, pr, "EvictdWakeupSourceInactive") != nil {
		t.Error("EvictdWakeupSourceInactive rendered though switched off")
	}
	if ruleOf(t, pr, "EvictdVictimStuck") == nil {
		t.Error("EvictdVictimStuck left out though enabled")
	}
	assertYAMLEqual(t, "EvictdDown labels", ruleOf(t, pr, "EvictdDown")["labels"], `{severity: warning, pager: nodes, team: platform}`)
	assertYAMLEqual(t, "EvictdAbsent labels", ruleOf(t, pr, "EvictdAbsent")["labels"], `{severity: warning, team: platform}`)
	assertYAMLEqual(t, "EvictdNotObserving labels", ruleOf(t, pr, "EvictdNotObserving")["labels"], `{severity: warning, team: platform}`)

	for _, tc := range []struct{ values, want string }{
		{"{metrics: {prometheusRule: {enabled: true}}, alerts: {rules: {EvictdGone: {enabled: false}}}}", "alerts.rules.EvictdGone: no such alert"},
		{"{alerts: {rules: {EvictdDown: {severity: page}}}}", "severity"},
		{"{metrics: {prometheusRule: {enabled: true}}, alerts: {selectors: {agents: 'job=evictd'}}}", "agents"},
		{"{alerts: {rules: {EvictdDown: {enable: false}}}}", "enable"},
	} {
		_, err := render(t, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s", tc.values, err, tc.want)
		}
	}
}

// TestChartAlertsFollowThePort: the annotations' kubectl commands read
// /readyz through the pod proxy on the metrics port; with metrics.port
// changed they name that port, and 9731 (the file's default) nowhere.
func TestChartAlertsFollowThePort(t *testing.T) {
	file, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), ":9731/proxy/") {
		t.Fatal("deploy/monitoring/alerts.yaml no longer has :9731/proxy/; update this test")
	}
	pr := find(t, mustRender(t, "metrics: {port: 9100, prometheusRule: {enabled: true}}"), "PrometheusRule", "evictd")
	for _, name := range []string{"EvictdNotReady", "EvictdNodeLeaseWaiting", "EvictdNodeBrakeFailing"} {
		r := ruleOf(t, pr, name)
		if r == nil {
			t.Fatalf("no %s rendered", name)
		}
		desc := r["annotations"].(map[string]any)["description"].(string)
		if !strings.Contains(desc, "}}:9100/proxy/readyz") || strings.Contains(desc, "9731") {
			t.Errorf("%s description with metrics.port 9100: %q; want the pod proxy on :9100, 9731 nowhere", name, desc)
		}
	}
	raw, err := yaml.Marshal(pr.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "9731") {
		t.Errorf("the rules rendered with metrics.port 9100 still name 9731:\n%s", raw)
	}
}
