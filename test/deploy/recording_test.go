// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// recordName is a recording rule's name as Prometheus's naming practice
// has it, level:metric:operations, the metric one of evictd's.
var recordName = regexp.MustCompile(`^[a-z_]+:evictd_[a-z_]+:[a-z0-9_]+$`)

// TestRecordingRules parses deploy/monitoring/recording.yaml with
// Prometheus's own rule parser: recording rules only (they page no one;
// the alerts are alerts.yaml's), each named level:metric:operations after
// an evictd metric, each selecting evictd's series by job="evictd" (which
// the chart replaces with its own selector, as in the alerts) and each
// expression checked against evictd's registry.
func TestRecordingRules(t *testing.T) {
	s := registrySeries(t)
	n := 0
	for _, g := range loadRuleFile(t, "recording.yaml").Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert != "" || r.Record == "" {
				t.Errorf("rule %s%s in recording.yaml: want recording rules only", r.Alert, r.Record)
				continue
			}
			if !recordName.MatchString(r.Record) {
				t.Errorf("recording rule %s: want level:evictd_metric:operations", r.Record)
			}
			if err := checkExpr(r.Expr, s); err != nil {
				t.Errorf("recording rule %s: %v", r.Record, err)
			}
			e, err := parser.ParseExpr(r.Expr)
			if err != nil {
				continue
			}
			parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok && !strings.Contains(vs.String(), `job="evictd"`) {
					t.Errorf("recording rule %s selects %s without job=\"evictd\": the chart could not put its selector there", r.Record, vs)
				}
				return nil
			})
		}
	}
	if n == 0 {
		t.Fatal("no rules in deploy/monitoring/recording.yaml")
	}
}

// withRecorded is s and the series deploy/monitoring/recording.yaml
// records, each with the labels its expression returns: what the dashboard
// may read besides evictd's own.
func withRecorded(t *testing.T, s series) series {
	t.Helper()
	out := maps.Clone(s)
	for _, g := range loadRuleFile(t, "recording.yaml").Groups {
		for _, r := range g.Rules {
			e, err := parser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("recording rule %s: %v", r.Record, err)
			}
			labels, known := outputLabels(e, s)
			if !known {
				t.Fatalf("recording rule %s: the labels %s returns are not known to outputLabels", r.Record, r.Expr)
			}
			labels = maps.Clone(labels)
			for l := range r.Labels {
				labels[l] = true
			}
			out[r.Record] = labels
		}
	}
	return out
}

// TestWithRecorded: the dashboard may read a recorded series by the labels
// its rule keeps, and no other.
func TestWithRecorded(t *testing.T) {
	s := withRecorded(t, registrySeries(t))
	if err := checkExpr(`sum by (resource) (resource_first:evictd_shadow_episodes:rate5m{cluster=~".*", first="evictd"})`, s); err != nil {
		t.Error(err)
	}
	if err := checkExpr(`sum by (node) (resource_first:evictd_shadow_episodes:rate5m)`, s); err == nil || !strings.Contains(err.Error(), "node") {
		t.Errorf("a recorded series grouped by node, which its rule sums away: %v; want an error naming node", err)
	}
}

// TestDocQueries: every query the docs show in a promql block names
// evictd's series (or the recorded ones) with labels they have, so that an
// operator who pastes it gets an answer, not nothing. docs/shadow.md must
// show one: who acted first across a fleet.
func TestDocQueries(t *testing.T) {
	s := withRecorded(t, registrySeries(t))
	files, err := filepath.Glob(repoPath(t, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range append(files, repoPath(t, "README.md")) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fenceRE.FindAllStringSubmatch(string(raw), -1) {
			if m[1] != "promql" {
				continue
			}
			seen[filepath.Base(f)]++
			if err := checkExpr(m[2], s); err != nil {
				t.Errorf("%s: %s: %v", filepath.Base(f), strings.TrimSpace(m[2]), err)
			}
		}
	}
	if seen["shadow.md"] == 0 {
		t.Errorf("docs/shadow.md shows no promql query (seen: %v)", seen)
	}
}
