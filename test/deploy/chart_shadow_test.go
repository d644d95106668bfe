// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/evictd/evictd/test/e2e/framework"
)

// grantsEvents reports whether the ClusterRole r lets its holder list and
// watch the core group's Events, and whether it grants either of the two.
func grantsEvents(t *testing.T, r *unstructured.Unstructured) (both, any bool) {
	t.Helper()
	list, watch := grants(t, r, "", "events", "list"), grants(t, r, "", "events", "watch")
	return list && watch, list || watch
}

// TestChartShadow: shadow.enabled (off by default) passes --shadow, and
// nothing else: the ClusterRole is the default's, with no list or watch of
// Events (shadow mode reads the kubelet's evictions from the node's pods,
// which the agent watches anyway). The chart adds no --dry-run of its own
// (evictd turns it on with --shadow), nor refuses shadow mode without the
// secure port (the reports are in the log too). --shadow in extraArgs is
// refused, so that shadow.enabled=false always enforces.
func TestChartShadow(t *testing.T) {
	const clusterRole = defaultRelease + "-" + defaultNamespace
	for _, tc := range []struct {
		values string
		shadow bool
	}{
		{"", false},
		{"shadow: {enabled: false}", false},
		{"shadow: {enabled: true}", true},
		{"{shadow: {enabled: true}, secure: {enabled: false}}", true},
	} {
		objs := mustRender(t, tc.values)
		c, _ := agentPod(t, tc.values)
		args := c["args"].([]any)
		if got := slices.Contains(args, any("--shadow")); got != tc.shadow {
			t.Errorf("values %q: --shadow passed %v; want %v (args %v)", tc.values, got, tc.shadow, args)
		}
		if slices.Contains(args, any("--dry-run")) {
			t.Errorf("values %q: args %v have --dry-run; want it only from dryRun (--shadow implies it)", tc.values, args)
		}
		cr := find(t, objs, "ClusterRole", clusterRole)
		if _, some := grantsEvents(t, cr); some {
			t.Errorf("values %q: the ClusterRole grants list or watch of events; want neither (no agent watches every Event in the cluster)", tc.values)
		}
		if grants(t, cr, "", "events", "create") || grants(t, cr, "", "events", "get") {
			t.Errorf("values %q: the ClusterRole grants core events", tc.values)
		}
		// evictd's own Events are events.k8s.io creates, whatever the mode.
		if !grants(t, cr, "events.k8s.io", "events", "create") {
			t.Errorf("values %q: create events.k8s.io events no longer granted", tc.values)
		}
	}

	// The same objects as the default, and the same ClusterRole: the flag
	// is all that differs.
	def, on := byKey(t, mustRender(t, "")), byKey(t, mustRender(t, "shadow: {enabled: true}"))
	if !slices.Equal(keys(def), keys(on)) {
		t.Errorf("shadow.enabled renders %v; want the default's objects %v", keys(on), keys(def))
	}
	crDef, crOn := find(t, mustRender(t, ""), "ClusterRole", clusterRole), find(t, mustRender(t, "shadow: {enabled: true}"), "ClusterRole", clusterRole)
	if !reflect.DeepEqual(crDef.Object["rules"], crOn.Object["rules"]) {
		t.Errorf("shadow.enabled changes the ClusterRole's rules:\n%v\nwant the default's\n%v", crOn.Object["rules"], crDef.Object["rules"])
	}

	// dryRun is its own value: both may be on, and --dry-run comes once.
	c, _ := agentPod(t, "{shadow: {enabled: true}, dryRun: true}")
	args := c["args"].([]any)
	if n := len(slices.DeleteFunc(slices.Clone(args), func(a any) bool { return a != "--dry-run" })); n != 1 || !slices.Contains(args, any("--shadow")) {
		t.Errorf("shadow.enabled and dryRun: args %v; want --shadow and one --dry-run", args)
	}

	// rbac.create false: the flag still comes.
	if c, _ := agentPod(t, "{shadow: {enabled: true}, rbac: {create: false}}"); !slices.Contains(c["args"].([]any), any("--shadow")) {
		t.Error("shadow.enabled with rbac.create false drops --shadow")
	}

	for _, tc := range []struct {
		values string
		naming string
	}{
		{"extraArgs: [--shadow]", "shadow.enabled"},
		{"extraArgs: [--shadow=true]", "shadow.enabled"},
		{`shadow: {enabled: "true"}`, "enabled"},
		{"shadow: {reports: 32}", "reports"},
		{"shadow: true", "shadow"},
	} {
		if _, err := render(t, tc.values); err == nil || !strings.Contains(err.Error(), tc.naming) {
			t.Errorf("values %q: %v; want a refusal naming %s", tc.values, err, tc.naming)
		}
	}
}

// TestManifestShadowCommented: deploy/daemonset.yaml carries shadow mode
// commented out (the flag alone: it needs no rule of its own), and
// uncommenting it gives what the chart renders with shadow.enabled, so the
// plain manifest's opt-in cannot drift from the chart's.
func TestManifestShadowCommented(t *testing.T) {
	src, err := os.ReadFile(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	uncommented, blocks := uncommentBlocks(string(src), "# - --shadow")
	if blocks != 1 {
		t.Fatalf(`deploy/daemonset.yaml has %d commented shadow blocks; want 1 (# - --shadow)`, blocks)
	}
	want, err := framework.ParseManifest(strings.NewReader(uncommented))
	if err != nil {
		t.Fatalf("deploy/daemonset.yaml with shadow mode uncommented: %v", err)
	}
	equalsChart(t, want, "shadow: {enabled: true}", "deploy/daemonset.yaml with shadow mode uncommented")
	if _, some := grantsEvents(t, find(t, want, "ClusterRole", "evictd")); some {
		t.Error(`deploy/daemonset.yaml with shadow mode uncommented: the ClusterRole evictd grants list or watch of events`)
	}
}

// TestChartNotesShadow: with shadow.enabled the NOTES say where the
// evidence is: every evictd_shadow_* metric of the registry, a query of
// them (which must name real series and labels, with this release's
// selector), the recorded series of deploy/monitoring/recording.yaml when
// the chart ships them (else that file), the dashboard's row by its title,
// and the /shadow report when the secure port is on. Without shadow mode
// they say none of it.
func TestChartNotesShadow(t *testing.T) {
	var metricNames []string
	for name := range registrySeries(t) {
		if strings.HasPrefix(name, "evictd_shadow_") {
			metricNames = append(metricNames, name)
		}
	}
	if len(metricNames) == 0 {
		t.Fatal("no evictd_shadow_* series in the registry")
	}
	var recorded []string
	for _, g := range loadRuleFile(t, "recording.yaml").Groups {
		for _, r := range g.Rules {
			recorded = append(recorded, r.Record)
		}
	}
	row := dashboardRow(t, "Shadow mode")

	notes := renderNotes(t, "shadow: {enabled: true}")
	for _, want := range append(metricNames, "deploy/monitoring/recording.yaml", "metrics.prometheusRule.enabled=true",
		`row "`+row+`"`, "deploy/monitoring/dashboard.json", "/shadow on the secure port", "in shadow mode: it evicts nothing", "shadow.enabled=false") {
		if !strings.Contains(notes, want) {
			t.Errorf("shadow.enabled: the NOTES do not say %q:\n%s", want, notes)
		}
	}
	query := ""
	for _, l := range strings.Split(notes, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "sum by (resource, first)") {
			query = l
		}
	}
	if err := checkExpr(query, registrySeries(t)); err != nil || !strings.Contains(query, `{job="evictd"}`) {
		t.Errorf("the NOTES' query %q: %v; want one of evictd's series with job=\"evictd\"", query, err)
	}

	notes = renderNotes(t, "{shadow: {enabled: true}, metrics: {prometheusRule: {enabled: true}}, nameOverride: guard, secure: {enabled: false}}")
	for _, want := range append(recorded, "PrometheusRule evictd-guard", `{job="guard"}`) {
		if !strings.Contains(notes, want) {
			t.Errorf("shadow.enabled with the PrometheusRule: the NOTES do not say %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "/shadow on the secure port") || strings.Contains(notes, "deploy/monitoring/recording.yaml") {
		t.Errorf("shadow.enabled, the rules shipped, no secure port: the NOTES still send to /shadow or to the rules' file:\n%s", notes)
	}

	for _, values := range []string{"", "dryRun: true", "metrics: {prometheusRule: {enabled: true}}"} {
		if notes := renderNotes(t, values); strings.Contains(notes, "evictd_shadow") || strings.Contains(notes, "Shadow mode") {
			t.Errorf("values %q: the NOTES speak of shadow mode:\n%s", values, notes)
		}
	}
}

// dashboardRow is the title of deploy/monitoring/dashboard.json's row that
// starts with prefix.
func dashboardRow(t *testing.T, prefix string) string {
	t.Helper()
	dash := loadDashboard(t)
	for _, p := range panels(dash) {
		if title, _ := p["title"].(string); p["type"] == "row" && strings.HasPrefix(title, prefix) {
			return title
		}
	}
	t.Fatalf("deploy/monitoring/dashboard.json has no row %q", prefix)
	return ""
}
