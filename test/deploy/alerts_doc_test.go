// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/evictd/evictd/internal/golden"
)

// alertsDocCommand regenerates docs/alerts.md (from the repository root).
const alertsDocCommand = "cd test/deploy && go test -run TestAlertsDoc -update ."

// TestAlertsDoc holds docs/alerts.md equal to the reference generated from
// deploy/monitoring/alerts.yaml; -update rewrites it.
func TestAlertsDoc(t *testing.T) {
	golden.Check(t, repoPath(t, "docs", "alerts.md"), []byte(alertsDoc(loadRules(t))), alertsDocCommand)
}

// TestAlertsDocCatchesAChange: the reference changes with each field it
// shows, so a rule changed without regenerating fails TestAlertsDoc.
func TestAlertsDocCatchesAChange(t *testing.T) {
	base := alertsDoc(loadRules(t))
	for name, change := range map[string]func(r *rulefmt.Rule){
		"severity":    func(r *rulefmt.Rule) { r.Labels["severity"] = "critical" },
		"for":         func(r *rulefmt.Rule) { r.For = model.Duration(time.Hour) },
		"summary":     func(r *rulefmt.Rule) { r.Annotations["summary"] += "!" },
		"description": func(r *rulefmt.Rule) { r.Annotations["description"] += "!" },
		"expr":        func(r *rulefmt.Rule) { r.Expr += " > 0" },
	} {
		g := loadRules(t)
		change(&g.Groups[0].Rules[1])
		if alertsDoc(g) == base {
			t.Errorf("docs/alerts.md does not change with an alert's %s", name)
		}
	}
}

// templateRef is an annotation's {{ $labels.x }} or {{ $value ... }}.
var templateRef = regexp.MustCompile(`\{\{\s*\$(labels\.(\w+)|value)[^}]*\}\}`)

// plainTemplate writes an annotation's template references as the
// upper-case names of what fills them: {{ $labels.node }} is NODE.
func plainTemplate(s string) string {
	return templateRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := templateRef.FindStringSubmatch(m)
		if sub[2] != "" {
			return strings.ToUpper(sub[2])
		}
		return "VALUE"
	})
}

// alertsDoc is docs/alerts.md for the rules: a table of every alert, then
// a section each with its description, expression and runbook link.
func alertsDoc(groups *rulefmt.RuleGroups) string {
	var b strings.Builder
	b.WriteString("# Alerts\n\n")
	fmt.Fprintf(&b, "<!-- Generated from deploy/monitoring/alerts.yaml by `%s`; a test fails when this file and the rules differ. -->\n\n", alertsDocCommand)
	b.WriteString("The Prometheus alerting rules evictd ships, in `deploy/monitoring/alerts.yaml` (the Helm chart renders the same\n" +
		"rules as a PrometheusRule with `metrics.prometheusRule.enabled`, and `alerts.rules` switches one off or changes its\n" +
		"severity). What each means and what to do: [runbook.md](runbook.md). In the texts below, NODE, POD, NAMESPACE,\n" +
		"SIGNAL, ... stand for the labels of the alert's series, VALUE for its value.\n\n")
	b.WriteString("| Alert | Severity | For | Summary |\n|---|---|---|---|\n")
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules = append(rules, r)
			}
		}
	}
	forOf := func(r rulefmt.Rule) string {
		if r.For == 0 {
			return "at once"
		}
		return r.For.String()
	}
	for _, r := range rules {
		fmt.Fprintf(&b, "| [%s](#%s) | %s | %s | %s |\n", r.Alert, strings.ToLower(r.Alert), r.Labels["severity"], forOf(r),
			strings.ReplaceAll(plainTemplate(r.Annotations["summary"]), "|", `\|`))
	}
	for _, r := range rules {
		fmt.Fprintf(&b, "\n## %s\n\n", r.Alert)
		fmt.Fprintf(&b, "Severity **%s**, for %s: %s.\n\n", r.Labels["severity"], forOf(r), plainTemplate(r.Annotations["summary"]))
		fmt.Fprintf(&b, "%s\n\n", plainTemplate(r.Annotations["description"]))
		fmt.Fprintf(&b, "```promql\n%s\n```\n\n", strings.TrimRight(r.Expr, "\n"))
		anchor := strings.TrimPrefix(r.Annotations["runbook_url"], runbookURL)
		fmt.Fprintf(&b, "Runbook: [runbook.md%s](runbook.md%s).\n", anchor, anchor)
	}
	return b.String()
}
