// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	flowcontrol "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/evictd/evictd/test/e2e/framework"
)

// flowSchemaSubjects are the ServiceAccounts (namespace/name) a rendered
// FlowSchema's one rule names.
func flowSchemaSubjects(t *testing.T, fs *unstructured.Unstructured) []string {
	t.Helper()
	rules := nested[[]any](t, fs, "spec", "rules")
	if len(rules) != 1 {
		t.Fatalf("%s: %d rules; want one", key(fs), len(rules))
	}
	var out []string
	for _, s := range rules[0].(map[string]any)["subjects"].([]any) {
		m := s.(map[string]any)
		if m["kind"] != "ServiceAccount" {
			t.Errorf("%s: a subject of kind %v; want ServiceAccounts only", key(fs), m["kind"])
			continue
		}
		sa := m["serviceAccount"].(map[string]any)
		out = append(out, sa["namespace"].(string)+"/"+sa["name"].(string))
	}
	return out
}

// TestChartFlowControl: the FlowSchema and its priority level are on by
// default and take in exactly the release's ServiceAccounts: the agents'
// (serviceAccount.name when the release does not create it) and evictd
// cleanup's while the cleanup Job is installed; flowControl.enabled false
// renders neither; a hand of more queues than the level has is refused at
// render, naming both values.
func TestChartFlowControl(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{"", []string{"evictd-system/evictd", "evictd-system/evictd-cleanup"}},
		{"cleanup: {enabled: false}", []string{"evictd-system/evictd"}},
		{"serviceAccount: {create: false, name: existing}", []string{"evictd-system/existing", "evictd-system/evictd-cleanup"}},
	} {
		objs := mustRender(t, tc.values)
		fs := find(t, objs, "FlowSchema", "evictd-evictd-system")
		if got := flowSchemaSubjects(t, fs); !slices.Equal(got, tc.want) {
			t.Errorf("values %q: the FlowSchema takes in %v; want %v", tc.values, got, tc.want)
		}
		if pl := nested[string](t, fs, "spec", "priorityLevelConfiguration", "name"); pl != "evictd-evictd-system" {
			t.Errorf("values %q: the FlowSchema's priority level is %s; want the release's, evictd-evictd-system", tc.values, pl)
		}
		find(t, objs, "PriorityLevelConfiguration", "evictd-evictd-system")
	}
	if objs := mustRender(t, "flowControl: {enabled: false}"); has(objs, "FlowSchema") || has(objs, "PriorityLevelConfiguration") {
		t.Error("flowControl.enabled: false still renders the FlowSchema or its PriorityLevelConfiguration")
	}
	if _, err := render(t, "flowControl: {queuing: {queues: 4, handSize: 6}}"); err == nil ||
		!strings.Contains(err.Error(), "flowControl.queuing.handSize 6 is more than flowControl.queuing.queues 4") {
		t.Errorf("handSize 6 with 4 queues: %v; want the error naming both", err)
	}
}

// catchAll reports whether fs takes in every request of any ServiceAccount:
// a subject that is every ServiceAccount (or every authenticated user)
// with a rule on every verb, group and resource. evictd's requests fall
// into the first of these unless its own schema comes before.
func catchAll(fs *flowcontrol.FlowSchema) bool {
	for _, r := range fs.Spec.Rules {
		everyone := slices.ContainsFunc(r.Subjects, func(s flowcontrol.Subject) bool {
			return s.Kind == flowcontrol.SubjectKindGroup &&
				s.Group != nil && (s.Group.Name == serviceaccount.AllServiceAccountsGroup || s.Group.Name == user.AllAuthenticated)
		})
		everything := slices.ContainsFunc(r.ResourceRules, func(rr flowcontrol.ResourcePolicyRule) bool {
			return slices.Equal(rr.Verbs, []string{"*"}) && slices.Equal(rr.APIGroups, []string{"*"}) && slices.Equal(rr.Resources, []string{"*"})
		})
		if everyone && everything {
			return true
		}
	}
	return false
}

// TestFlowSchemaPrecedence holds the shipped FlowSchema's place among the
// API server's own (Kubernetes' bootstrap configuration, as the test API
// server installs it): it comes before every built-in schema that would
// take in all of a ServiceAccount's requests (service-accounts,
// global-default, catch-all), so that evictd's requests reach its own
// level, and after every other (exempt, probes, the system schemas that
// name their users), so that it never outranks one of them. The bounds the
// chart's schema lets matchingPrecedence take are held to the same.
func TestFlowSchemaPrecedence(t *testing.T) {
	objs, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fs := find(t, objs, "FlowSchema", "evictd")
	ours := int32(nested[float64](t, fs, "spec", "matchingPrecedence"))

	raw, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			FlowControl struct {
				Properties struct {
					MatchingPrecedence struct{ Minimum, Maximum int32 } `json:"matchingPrecedence"`
				} `json:"properties"`
			} `json:"flowControl"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	bounds := schema.Properties.FlowControl.Properties.MatchingPrecedence

	builtin := append(slices.Clone(bootstrap.MandatoryFlowSchemas), bootstrap.SuggestedFlowSchemas...)
	var before, after []string
	for _, b := range builtin {
		if catchAll(b) {
			before = append(before, b.Name)
			for what, p := range map[string]int32{"deploy/daemonset.yaml's": ours, "values.schema.json's maximum": bounds.Maximum} {
				if p >= b.Spec.MatchingPrecedence {
					t.Errorf("%s matchingPrecedence %d does not come before the built-in %s (%d), which would take in evictd's requests first",
						what, p, b.Name, b.Spec.MatchingPrecedence)
				}
			}
			continue
		}
		after = append(after, b.Name)
		for what, p := range map[string]int32{"deploy/daemonset.yaml's": ours, "values.schema.json's minimum": bounds.Minimum} {
			if p <= b.Spec.MatchingPrecedence {
				t.Errorf("%s matchingPrecedence %d does not come after the built-in %s (%d)", what, p, b.Name, b.Spec.MatchingPrecedence)
			}
		}
	}
	// The reading of the built-ins is the test's own: it must find both kinds.
	if !slices.Contains(before, "service-accounts") || !slices.Contains(before, "global-default") || !slices.Contains(after, "system-nodes") {
		t.Errorf("built-in schemas before evictd's %v, after it %v; want service-accounts and global-default before, system-nodes after", before, after)
	}
	t.Logf("evictd's FlowSchema (%d) must come after %v and before %v", ours, after, before)
}
