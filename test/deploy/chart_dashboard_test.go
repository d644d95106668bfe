// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestChartDashboardCopy: the chart's files/dashboard.json is
// deploy/monitoring/dashboard.json byte for byte (Helm reads no file
// outside the chart, so it holds a copy).
func TestChartDashboardCopy(t *testing.T) {
	want, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("deploy/helm/evictd/files/dashboard.json differs from deploy/monitoring/dashboard.json; copy it: " +
			"cp deploy/monitoring/dashboard.json deploy/helm/evictd/files/dashboard.json")
	}
}

// dashboardConfigMap is the rendered ConfigMap holding the dashboard, or
// nil.
func dashboardConfigMap(objs []*unstructured.Unstructured) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard") {
			return o
		}
	}
	return nil
}

// TestChartDashboard: no dashboard by default; with dashboard.enabled, one
// ConfigMap labelled for Grafana's dashboard sidecar whose one key is
// deploy/monitoring/dashboard.json exactly, each key once in the YAML;
// the label, its value, the namespace, more labels and annotations as
// given, the sidecar's label winning over dashboard.labels; malformed
// values refused by name.
func TestChartDashboard(t *testing.T) {
	if cm := dashboardConfigMap(mustRender(t, "")); cm != nil {
		t.Errorf("a default render has the dashboard's ConfigMap %s", key(cm))
	}
	want, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		values, name, ns    string
		labels, annotations map[string]string
	}{
		{"dashboard: {enabled: true}", "evictd-dashboard", defaultNamespace,
			map[string]string{"grafana_dashboard": "1", "app.kubernetes.io/name": "evictd", "app.kubernetes.io/instance": "evictd"}, nil},
		{`{fullnameOverride: node-guard, commonLabels: {team: platform}, dashboard: {enabled: true, label: example.com/dashboard, labelValue: evictd,
		   namespace: monitoring, labels: {release: grafana, example.com/dashboard: "0"}, annotations: {grafana_folder: Nodes}}}`,
			"node-guard-dashboard", "monitoring",
			map[string]string{"example.com/dashboard": "evictd", "release": "grafana", "team": "platform", "app.kubernetes.io/managed-by": "Helm"},
			map[string]string{"grafana_folder": "Nodes"}},
	} {
		man := renderManifest(t, tc.values)
		objs := mustRender(t, tc.values)
		cm := dashboardConfigMap(objs)
		if cm == nil {
			t.Errorf("%s: no dashboard ConfigMap rendered", tc.values)
			continue
		}
		if cm.GetName() != tc.name || cm.GetNamespace() != tc.ns {
			t.Errorf("%s: ConfigMap %s; want %s/%s", tc.values, key(cm), tc.ns, tc.name)
		}
		for k, v := range tc.labels {
			if got, ok := cm.GetLabels()[k]; !ok || got != v {
				t.Errorf("%s: label %s = %q; want %q (labels %v)", tc.values, k, got, v, cm.GetLabels())
			}
		}
		for k, v := range tc.annotations {
			if got := cm.GetAnnotations()[k]; got != v {
				t.Errorf("%s: annotation %s = %q; want %q", tc.values, k, got, v)
			}
		}
		data := nested[map[string]any](t, cm, "data")
		if len(data) != 1 {
			t.Errorf("%s: data keys %v; want evictd.json alone", tc.values, keys(data))
		}
		got, _ := data["evictd.json"].(string)
		if got != string(want) {
			t.Errorf("%s: data evictd.json (%d bytes) is not deploy/monitoring/dashboard.json (%d bytes)", tc.values, len(got), len(want))
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: data evictd.json is not JSON", tc.values)
		}
		// Strict: a label given twice is an error, as kubectl apply makes it.
		for _, doc := range strings.Split(man, "\n---") {
			if strings.Contains(doc, "\nkind: ConfigMap") && strings.Contains(doc, "-dashboard\n") {
				var m map[string]any
				if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
					t.Errorf("%s: the ConfigMap's YAML: %v", tc.values, err)
				}
			}
		}
	}
	for _, tc := range []struct{ values, want string }{
		{"dashboard: {enabled: true, labelValue: 1}", "labelValue"},
		{"dashboard: {enabled: true, label: 'grafana dashboard'}", "label"},
		{"dashboard: {enabled: true, namespace: Monitoring}", "namespace"},
		{"dashboard: {enabled: true, folder: evictd}", "folder"},
	} {
		if _, err := render(t, tc.values); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s", tc.values, err, tc.want)
		}
	}
}
