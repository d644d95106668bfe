// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// promtool is the binary hack/get-promtool.sh unpacks from Debian's
// prometheus package (make test-deploy does), or $PROMTOOL.
func promtool(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		p = repoPath(t, "_output", "tools", "promtool")
	}
	_, err := os.Stat(p)
	cgrouptest.Need(t, err == nil, "promtool at "+p+" (hack/get-promtool.sh _output/tools, or make test-deploy)")
	return p
}

// ruleTests reads deploy/monitoring/tests/*.yaml, promtool's rule test
// files.
func ruleTests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(repoPath(t, "deploy", "monitoring", "tests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule test files in deploy/monitoring/tests (%v)", err)
	}
	return files
}

// ruleFiles are deploy/monitoring's rule files, those the tests load.
var ruleFiles = []string{"alerts.yaml", "recording.yaml"}

// TestPromtoolRules runs the real `promtool test rules` on the rules' unit
// tests, and checks that every alert in deploy/monitoring/alerts.yaml has a
// case where it fires and one where it does not, and that every recording
// rule of deploy/monitoring/recording.yaml has a case that reads it.
func TestPromtoolRules(t *testing.T) {
	files := ruleTests(t)
	type testFile struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			Name  string `json:"name"`
			Cases []struct {
				Alert string `json:"alertname"`
				Exp   []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
			Exprs []struct {
				Expr string `json:"expr"`
				Exp  []any  `json:"exp_samples"`
			} `json:"promql_expr_test"`
		} `json:"tests"`
	}
	fires, quiet, read := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf testFile
		if err := yaml.Unmarshal(raw, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.ContainsFunc(tf.RuleFiles, func(f string) bool { return slices.Contains(ruleFiles, strings.TrimPrefix(f, "../")) }) {
			t.Errorf("%s tests %v, none of deploy/monitoring's %v", f, tf.RuleFiles, ruleFiles)
		}
		for _, tc := range tf.Tests {
			for _, c := range tc.Cases {
				if len(c.Exp) > 0 {
					fires[c.Alert] = true
				} else {
					quiet[c.Alert] = true
				}
			}
			for _, e := range tc.Exprs {
				if len(e.Exp) > 0 {
					read[strings.TrimSpace(e.Expr)] = true
				}
			}
		}
	}
	for _, g := range loadRuleFile(t, "recording.yaml").Groups {
		for _, r := range g.Rules {
			if r.Record != "" && !read[r.Record] {
				t.Errorf("recording rule %s has no promtool test that reads it (a promql_expr_test of expr %s with samples)", r.Record, r.Record)
			}
		}
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] {
				t.Errorf("alert %s has no promtool test where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("alert %s has no promtool test where it stays quiet", r.Alert)
			}
		}
	}

	bin := promtool(t)
	cmd := exec.Command(bin, append([]string{"test", "rules"}, files...)...)
	cmd.Dir = repoPath(t, "deploy", "monitoring", "tests")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool test rules said no SUCCESS:\n%s", out)
	}
}

// TestPromtoolRulesCatchAWrongRule: the same tests fail against a rule
// (an alert, or a recording rule) that counts a ServiceMonitor's and a
// PodMonitor's series twice, a recording rule that takes another scrape
// job's series in, one
// that pages for a pod being deleted, one that lets the node brake's
// condition heartbeat hide a taint that cannot be written, and the node
// brake's alerts with each of their parts broken (the bound, the `for:` on
// evictd_node_brake_on the since gauge replaces, the lease, the acting
// agent, the condition's status), EvictdDown without its Ready node, and the
// eviction alerts without their dry-run exclusion, so they can fail.
func TestPromtoolRulesCatchAWrongRule(t *testing.T) {
	bin := promtool(t)
	raws := map[string]string{}
	for _, f := range ruleFiles {
		raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", f))
		if err != nil {
			t.Fatal(err)
		}
		raws[f] = string(raw)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"doubled", `max by (namespace, pod, node, signal, result) (increase(evictd_evictions_total{job="evictd", result=~"evicted`,
			`sum by (namespace, pod, node, signal, result) (increase(evictd_evictions_total{job="evictd", result=~"evicted`, "EvictdEvictionsSpiking"},
		{"terminating", "max by (namespace, pod, node) (up{job=\"evictd\"}) == 0\n          unless on (namespace, pod) kube_pod_deletion_timestamp",
			"max by (namespace, pod, node) (up{job=\"evictd\"}) == 0", "EvictdDown"},
		{"heartbeat", `unless on (namespace, pod, object) max by (namespace, pod, object) (increase(evictd_node_brake_writes_total{job="evictd", result="ok"}`,
			`unless on (namespace, pod) max by (namespace, pod) (increase(evictd_node_brake_writes_total{job="evictd", result="ok"}`, "EvictdNodeBrakeFailing"},
		// Fires for a brake on 35 minutes.
		{"held-bound", "          ) > 3600\n", "          ) > 0\n", "EvictdNodeBrakeHeldLong"},
		// A `for:` starts again with the agent killed outright and replaced:
		// misses the brake held across it.
		{"held-for", `          time() - max by (node, resource) (
            evictd_node_brake_since_timestamp_seconds{job="evictd"}
            unless on (namespace, pod) max by (namespace, pod) (evictd_node_lease_held{job="evictd"}) == 0
          ) > 3600
`, `          max by (node, resource) (
            evictd_node_brake_on{job="evictd"}
            unless on (namespace, pod) max by (namespace, pod) (evictd_node_lease_held{job="evictd"}) == 0
          ) == 1
        for: 1h
`, "EvictdNodeBrakeHeldLong"},
		// Counts the series an agent that lost the lease left as they were.
		{"held-lease", `            evictd_node_brake_since_timestamp_seconds{job="evictd"}
            unless on (namespace, pod) max by (namespace, pod) (evictd_node_lease_held{job="evictd"}) == 0
`, `            evictd_node_brake_since_timestamp_seconds{job="evictd"}
`, "EvictdNodeBrakeHeldLong"},
		// Fires on a taint an acting agent keeps.
		{"left-acting", `          unless on (node) (
            max by (namespace, pod, node) (evictd_node_brake_on{job="evictd"})
            unless on (namespace, pod) max by (namespace, pod) (evictd_node_lease_held{job="evictd"}) == 0
          )
`, "", "EvictdNodeBrakeLeftBehind"},
		// Takes an agent waiting for the lease for one that acts.
		{"left-waiting", `            max by (namespace, pod, node) (evictd_node_brake_on{job="evictd"})
            unless on (namespace, pod) max by (namespace, pod) (evictd_node_lease_held{job="evictd"}) == 0
`, `            max by (namespace, pod, node) (evictd_node_brake_on{job="evictd"})
`, "EvictdNodeBrakeLeftBehind"},
		// Takes kube-state-metrics' series of a False condition for a True one.
		{"left-status", `status="true"} == 1)`, `status="true"})`, "EvictdNodeBrakeLeftBehind"},
		// Reports the agent of a NotReady or powered-off node.
		{"down-notready", "\n          unless on (node) max by (node) (kube_node_status_condition{condition=\"Ready\", status=\"true\"}) == 0", "", "EvictdDown"},
		// Takes a dry run's or a shadow's verdicts for refusals.
		{"pdb-dryrun", "\n            unless on (namespace, pod) evictd_dry_run{job=\"evictd\"} == 1", "", "EvictdEvictionsRefusedByPDB"},
		{"refused-dryrun", "\n            unless on (namespace, pod) max by (namespace, pod) (evictd_dry_run{job=\"evictd\"}) == 1", "", "EvictdEvictionsRefused"},
		{"failing-dryrun", "result=\"error\"}[10m])) > 0\n          unless on (namespace, pod) max by (namespace, pod) (evictd_dry_run{job=\"evictd\"}) == 1", "result=\"error\"}[10m])) > 0", "EvictdEvictionsFailing"},
		{"cap-dryrun", "(evictd_pressure_episode_cap_reached{job=\"evictd\"}) == 1\n          unless on (namespace, pod) max by (namespace, pod) (evictd_dry_run{job=\"evictd\"}) == 1", "(evictd_pressure_episode_cap_reached{job=\"evictd\"}) == 1", "EvictdEpisodeCapReached"},
		// The recording rules (recording.yaml): counting an agent scraped
		// twice twice, and taking another install's agents in.
		{"shadow-doubled", "max by (cluster, job, namespace, pod, node, resource, signal) (rate(evictd_shadow_would_evictions_total",
			"sum by (cluster, job, namespace, pod, node, resource, signal) (rate(evictd_shadow_would_evictions_total", "resource_signal:evictd_shadow_would_evictions:rate5m"},
		{"shadow-any-job", `(evictd_shadow_episodes_total{job="evictd"}[5m])`, `(evictd_shadow_episodes_total[5m])`, "resource_first:evictd_shadow_episodes:rate5m"},
		{"shadow-agents-doubled", "count by (cluster, job) (\n            max by (cluster, job, namespace, pod, node)", "count by (cluster, job) (\n            max by (cluster, job, namespace, pod, node, endpoint, service)", "job:evictd_shadow_agents:count"},
	} {
		file := "alerts.yaml"
		if strings.HasPrefix(tc.name, "shadow-") {
			file = "recording.yaml"
		}
		if !strings.Contains(raws[file], tc.old) {
			t.Fatalf("%s: %s no longer holds %q; update this test", tc.name, file, tc.old)
		}
		dir := t.TempDir()
		for f, raw := range raws {
			if f == file {
				raw = strings.Replace(raw, tc.old, tc.new, 1)
			}
			if err := os.WriteFile(filepath.Join(dir, f), []byte(raw), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tests := filepath.Join(dir, "tests")
		if err := os.Mkdir(tests, 0o755); err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, f := range ruleTests(t) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			about, err := groupsAbout(b, tc.want)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if about == nil {
				continue
			}
			dst := filepath.Join(tests, filepath.Base(f))
			if err := os.WriteFile(dst, about, 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, dst)
		}
		if len(args) == 0 {
			t.Fatalf("%s: no test group of deploy/monitoring/tests tests %s", tc.name, tc.want)
		}
		cmd := exec.Command(bin, append([]string{"test", "rules"}, args...)...)
		cmd.Dir = tests
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: promtool passed the wrong rule or did not name %s (%v):\n%s", tc.name, tc.want, err, out)
		}
	}
}

// groupsAbout is the promtool test file raw with only its test groups about
// name: an alert_rule_test of that alert, or a promql_expr_test whose
// expression reads that recorded series; nil when it has none. A wrong rule
// is caught by its own alert's groups (the failure names it), and promtool
// then evaluates those alone rather than every group of every file: 17 runs
// of all four files took 64 s of CPU, about half of the chart tests' own.
// Numbers are kept as written (json.Number), so the groups promtool reads
// are the file's.
func groupsAbout(raw []byte, name string) ([]byte, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var file map[string]any
	if err := dec.Decode(&file); err != nil {
		return nil, err
	}
	groups, _ := file["tests"].([]any)
	var kept []any
	for _, g := range groups {
		group, _ := g.(map[string]any)
		about := false
		for _, c := range asList(group["alert_rule_test"]) {
			if c, _ := c.(map[string]any); c["alertname"] == name {
				about = true
			}
		}
		for _, c := range asList(group["promql_expr_test"]) {
			if c, _ := c.(map[string]any); strings.Contains(fmt.Sprint(c["expr"]), name) {
				about = true
			}
		}
		if about {
			kept = append(kept, group)
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	file["tests"] = kept
	return json.Marshal(file)
}

func asList(v any) []any { l, _ := v.([]any); return l }
