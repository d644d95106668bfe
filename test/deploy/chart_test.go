package deploy

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/test/e2e/framework"
)

// TestChartDefaultsEqualManifest: with default values the chart renders
// exactly the objects of deploy/daemonset.yaml, field for field. The check
// is strict because the chart adds no label of Helm's own
// (app.kubernetes.io/managed-by, helm.sh/chart, the release name) unless
// commonLabels asks for it, and Helm adds none when it renders: nothing is
// removed from either side before comparing.
func TestChartDefaultsEqualManifest(t *testing.T) {
	want, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := mustRender(t, "")
	// The kustomization sets the tag; the file itself says evictd:dev, as
	// does the chart's appVersion.
	wantBy, gotBy := byKey(t, want), byKey(t, got)
	if !slices.Equal(keys(wantBy), keys(gotBy)) {
		t.Fatalf("the chart renders %v; deploy/daemonset.yaml has %v", keys(gotBy), keys(wantBy))
	}
	for k, w := range wantBy {
		if d := cmp.Diff(w.Object, gotBy[k].Object); d != "" {
			t.Errorf("%s differs from deploy/daemonset.yaml (-manifest +chart):\n%s", k, d)
		}
	}
}

// fullValues sets every value the chart has to something other than its
// default.
const fullValues = `
namespace: {name: evictd-chart, create: true}
image: {repository: registry.example/evictd, tag: v9.9.9, pullPolicy: Always}
commonLabels: {team: platform}
thresholds:
  hard: {memory.available: "500Mi", nodefs.available: "10%", imagefs.inodesFree: "none", pid.available: "1000"}
  soft: {memory.available: "1Gi", nodefs.available: "20%"}
  softGracePeriod: {memory.available: "1m30s", nodefs.available: "2m"}
  minimumReclaim: {memory.available: "200Mi", nodefs.available: "1Gi"}
  maxPodGracePeriod: 60
  pressureTransitionPeriod: 2m
priorityGroups:
  - {name: batch, namespaces: [batch, ci], offset: -1000}
  - name: tenants
    namespaceSelector: {matchLabels: {evictd.io/tenant: "true"}}
    offset: 100
    fence: true
excludedNamespaces: [kube-system]
includeDaemonSetPods: true
dryRun: true
extraArgs: [--pdb-policy=best-effort, --log-level=debug]
resources:
  requests: {cpu: 50m, memory: 48Mi}
  limits: {cpu: 200m, memory: 128Mi}
tolerations:
  - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}
nodeSelector: {kubernetes.io/os: linux, node-role.example/worker: "true"}
metrics:
  port: 9800
  serviceMonitor: {enabled: true, interval: 15s, labels: {release: prometheus}}
  prometheusRule: {enabled: true, labels: {release: prometheus}}
`

// TestChartValues: each value lands where evictd and Kubernetes read it.
func TestChartValues(t *testing.T) {
	objs := mustRender(t, fullValues)
	for _, o := range objs {
		if o.GetKind() != "Namespace" && o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" && o.GetNamespace() != "evictd-chart" {
			t.Errorf("%s is not in namespace evictd-chart", key(o))
		}
		if o.GetLabels()["team"] != "platform" || o.GetLabels()["app.kubernetes.io/name"] != "evictd" {
			t.Errorf("%s has labels %v; want commonLabels added to app.kubernetes.io/name", key(o), o.GetLabels())
		}
	}
	find(t, objs, "Namespace", "evictd-chart")
	crb := find(t, objs, "ClusterRoleBinding", "evictd")
	subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != "evictd-chart" {
		t.Errorf("ClusterRoleBinding subjects %v; want the ServiceAccount in evictd-chart", subjects)
	}

	ds := find(t, objs, "DaemonSet", "evictd")
	pod := nested[map[string]any](t, ds, "spec", "template", "spec")
	c := nested[[]any](t, ds, "spec", "template", "spec", "containers")[0].(map[string]any)
	if c["image"] != "registry.example/evictd:v9.9.9" || c["imagePullPolicy"] != "Always" {
		t.Errorf("image %v pull policy %v", c["image"], c["imagePullPolicy"])
	}
	wantArgs := []any{"run", "--host-root=/host", "--node-name=$(NODE_NAME)", "--metrics-bind-address=:9800",
		"--config=/etc/evictd/config.yaml", "--dry-run", "--pdb-policy=best-effort", "--log-level=debug"}
	if !reflect.DeepEqual(c["args"], wantArgs) {
		t.Errorf("args %v; want %v", c["args"], wantArgs)
	}
	if port := c["ports"].([]any)[0].(map[string]any)["containerPort"]; port != int64(9800) && port != float64(9800) {
		t.Errorf("containerPort %v (%T); want 9800", port, port)
	}
	assertYAMLEqual(t, "resources", c["resources"], `{requests: {cpu: 50m, memory: 48Mi}, limits: {cpu: 200m, memory: 128Mi}}`)
	assertYAMLEqual(t, "tolerations", pod["tolerations"], `[{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]`)
	assertYAMLEqual(t, "nodeSelector", pod["nodeSelector"], `{kubernetes.io/os: linux, node-role.example/worker: "true"}`)

	// The file in the ConfigMap is what --config names, mounted there, and
	// evictd's own parser accepts it with every value as given.
	cm := find(t, objs, "ConfigMap", "evictd-config")
	file := nested[string](t, cm, "data", "config.yaml")
	cfg, err := config.Decode([]byte(file))
	if err != nil {
		t.Fatalf("evictd's config parser rejects the chart's file: %v\n%s", err, file)
	}
	for sig, want := range map[string]string{"memory.available": "500Mi", "nodefs.available": "10%", "imagefs.inodesFree": "none", "pid.available": "1000"} {
		if cfg.EvictionHard[sig] != want {
			t.Errorf("evictionHard[%s] = %q; want %q", sig, cfg.EvictionHard[sig], want)
		}
	}
	if cfg.EvictionSoft["memory.available"] != "1Gi" || cfg.EvictionSoftGracePeriod["memory.available"] != "1m30s" ||
		cfg.EvictionMinimumReclaim["nodefs.available"] != "1Gi" {
		t.Errorf("soft %v grace %v reclaim %v", cfg.EvictionSoft, cfg.EvictionSoftGracePeriod, cfg.EvictionMinimumReclaim)
	}
	if cfg.EvictionMaxPodGracePeriod != 60 || cfg.EvictionPressureTransitionPeriod.Duration.String() != "2m0s" {
		t.Errorf("max pod grace %d, transition %v", cfg.EvictionMaxPodGracePeriod, cfg.EvictionPressureTransitionPeriod)
	}
	if len(cfg.PriorityGroups) != 2 || cfg.PriorityGroups[0].Name != "batch" || cfg.PriorityGroups[0].Offset != -1000 ||
		!cfg.PriorityGroups[1].Fence || cfg.PriorityGroups[1].NamespaceSelector.MatchLabels["evictd.io/tenant"] != "true" {
		t.Errorf("priority groups %+v", cfg.PriorityGroups)
	}
	if !slices.Equal(cfg.ExcludedNamespaces, []string{"kube-system"}) || !cfg.IncludeDaemonSetPods {
		t.Errorf("excluded %v, include DaemonSet pods %v", cfg.ExcludedNamespaces, cfg.IncludeDaemonSetPods)
	}
	assertYAMLEqual(t, "config volume", lastOf(t, pod["volumes"]), `{name: config, configMap: {name: evictd-config}}`)
	assertYAMLEqual(t, "config mount", lastOf(t, c["volumeMounts"]), `{name: config, mountPath: /etc/evictd, readOnly: true}`)
	if nested[string](t, ds, "spec", "template", "metadata", "annotations", "checksum/config") == "" {
		t.Error("no checksum/config annotation: a changed configuration would not roll the pods")
	}

	// The ServiceMonitor scrapes the pods' metrics port through the Service.
	svc := find(t, objs, "Service", "evictd-metrics")
	sm := find(t, objs, "ServiceMonitor", "evictd")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor %s labels %v", sm.GetAPIVersion(), sm.GetLabels())
	}
	podLabels := nested[map[string]any](t, ds, "spec", "template", "metadata", "labels")
	for _, sel := range []map[string]any{nested[map[string]any](t, svc, "spec", "selector"), nested[map[string]any](t, sm, "spec", "selector", "matchLabels")} {
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("selector %v does not select the pods (labels %v)", sel, podLabels)
			}
		}
	}
	if sm.GetLabels()["app.kubernetes.io/name"] != svc.GetLabels()["app.kubernetes.io/name"] {
		t.Errorf("the ServiceMonitor's selector misses the Service's labels %v", svc.GetLabels())
	}
	ep := nested[[]any](t, sm, "spec", "endpoints")[0].(map[string]any)
	svcPort := nested[[]any](t, svc, "spec", "ports")[0].(map[string]any)
	if ep["port"] != svcPort["name"] || svcPort["targetPort"] != "metrics" || ep["interval"] != "15s" {
		t.Errorf("endpoint %v, Service port %v", ep, svcPort)
	}
	if ns := nested[[]any](t, sm, "spec", "namespaceSelector", "matchNames"); len(ns) != 1 || ns[0] != "evictd-chart" {
		t.Errorf("namespaceSelector %v", ns)
	}

	// The PrometheusRule carries the rules file as it is, which Prometheus
	// parses.
	pr := find(t, objs, "PrometheusRule", "evictd")
	spec, err := yaml.Marshal(nested[map[string]any](t, pr, "spec"))
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := rulefmt.Parse(spec, false, model.UTF8Validation); len(errs) > 0 {
		t.Errorf("the PrometheusRule's spec does not parse as rules: %v", errs)
	}
	wantRules := map[string]any{}
	src, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(src, &wantRules); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantRules, nested[map[string]any](t, pr, "spec")); d != "" {
		t.Errorf("the PrometheusRule differs from deploy/monitoring/alerts.yaml (-file +chart):\n%s", d)
	}
}

// TestChartOptionalObjects: the ConfigMap, ServiceMonitor, Service and
// PrometheusRule appear only when asked for, and namespace.create: false
// leaves the Namespace to whoever made it.
func TestChartOptionalObjects(t *testing.T) {
	def := mustRender(t, "")
	for _, kind := range []string{"ConfigMap", "ServiceMonitor", "Service", "PrometheusRule"} {
		if has(def, kind) {
			t.Errorf("a default render has a %s", kind)
		}
	}
	for _, tc := range []struct {
		values string
		kinds  []string
	}{
		{"dryRun: true", nil},
		{"thresholds: {hard: {memory.available: 1Gi}}", []string{"ConfigMap"}},
		{"priorityGroups: [{name: batch, namespaces: [batch]}]", []string{"ConfigMap"}},
		{"metrics: {serviceMonitor: {enabled: true}}", []string{"Service", "ServiceMonitor"}},
		{"metrics: {prometheusRule: {enabled: true}}", []string{"PrometheusRule"}},
	} {
		objs := mustRender(t, tc.values)
		for _, kind := range []string{"ConfigMap", "ServiceMonitor", "Service", "PrometheusRule"} {
			if want := slices.Contains(tc.kinds, kind); has(objs, kind) != want {
				t.Errorf("values %q: %s rendered %v; want %v", tc.values, kind, has(objs, kind), want)
			}
		}
	}
	if objs := mustRender(t, "namespace: {create: false}"); has(objs, "Namespace") {
		t.Error("namespace.create: false still renders a Namespace")
	}
	// The checksum follows the configuration.
	a := find(t, mustRender(t, "thresholds: {hard: {memory.available: 1Gi}}"), "DaemonSet", "evictd")
	b := find(t, mustRender(t, "thresholds: {hard: {memory.available: 2Gi}}"), "DaemonSet", "evictd")
	ca := nested[string](t, a, "spec", "template", "metadata", "annotations", "checksum/config")
	cb := nested[string](t, b, "spec", "template", "metadata", "annotations", "checksum/config")
	if ca == cb {
		t.Errorf("checksum/config %s is the same for two configurations", ca)
	}
}

// TestChartRejectsBadValues: values.schema.json stops a value evictd would
// refuse at start (or Kubernetes at apply) before anything is installed,
// with an error naming it.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		values string
		naming string // what the error must mention
	}{
		{`thresholds: {hard: {memory.available: 500MB}}`, "memory.available"},
		{`thresholds: {hard: {memory.available: "-1Gi"}}`, "memory.available"},
		{`thresholds: {soft: {memory.avialable: 1Gi}}`, "memory.avialable"},
		{`thresholds: {softGracePeriod: {memory.available: "90"}}`, "softGracePeriod"},
		{`thresholds: {minimumReclaim: {nodefs.available: lots}}`, "minimumReclaim"},
		{`thresholds: {minimumReclaim: {nodefs.available: none}}`, "minimumReclaim"},
		{`thresholds: {maxPodGracePeriod: -1}`, "maxPodGracePeriod"},
		{`thresholds: {pressureTransitionPeriod: soon}`, "pressureTransitionPeriod"},
		{`thresholds: {hard: {pid.available: 1000}}`, "pid.available"}, // a number, not a string
		{`image: {pullPolicy: Sometimes}`, "pullPolicy"},
		{`metrics: {port: 70000}`, "port"},
		{`extraArgs: [dry-run]`, "extraArgs"},
		{`priorityGroups: [{namespaces: [batch]}]`, "name"},
		{`priorityGroups: [{name: batch, ofset: 10}]`, "ofset"},
		{`namespace: {name: Evictd_System}`, "name"},
		{`dryRun: "yes"`, "dryRun"},
	} {
		_, err := render(t, tc.values)
		if err == nil {
			t.Errorf("values %q rendered; want a schema error", tc.values)
			continue
		}
		if !strings.Contains(err.Error(), tc.naming) {
			t.Errorf("values %q: error does not name %q:\n%v", tc.values, tc.naming, err)
		}
	}
}

// TestChartSchemaAgreesWithEvictd: every threshold spelling the schema lets
// through, evictd's config parser accepts too, so a chart that installs is
// one whose pods start.
func TestChartSchemaAgreesWithEvictd(t *testing.T) {
	for _, tc := range []struct{ field, value string }{
		{"hard", "500Mi"}, {"hard", "1Gi"}, {"hard", "2G"}, {"hard", "1000"}, {"hard", "10%"}, {"hard", "12.5%"},
		{"hard", "none"}, {"hard", "1.5Gi"}, {"soft", "3Gi"},
		{"minimumReclaim", "500Mi"}, {"minimumReclaim", "5%"}, {"minimumReclaim", "0"},
	} {
		v := tc.value
		vals := `thresholds: {` + tc.field + `: {nodefs.available: "` + v + `"}}`
		if tc.field == "soft" {
			vals = `thresholds: {soft: {nodefs.available: "` + v + `"}, softGracePeriod: {nodefs.available: 1m}}`
		}
		objs, err := render(t, vals)
		if err != nil {
			t.Errorf("%s %q: the schema rejects it: %v", tc.field, v, err)
			continue
		}
		file := nested[string](t, find(t, objs, "ConfigMap", "evictd-config"), "data", "config.yaml")
		if _, err := config.Decode([]byte(file)); err != nil {
			t.Errorf("%s %q: the schema accepts it, evictd does not: %v", tc.field, v, err)
		}
	}
}

// TestChartAlertsCopy: the chart's files/alerts.yaml is
// deploy/monitoring/alerts.yaml byte for byte (Helm reads no file outside
// the chart, so it holds a copy).
func TestChartAlertsCopy(t *testing.T) {
	want, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("deploy/helm/evictd/files/alerts.yaml differs from deploy/monitoring/alerts.yaml; copy it: " +
			"cp deploy/monitoring/alerts.yaml deploy/helm/evictd/files/alerts.yaml")
	}
}

// nested returns the field at path, of type T, or fails.
func nested[T any](t *testing.T, o *unstructured.Unstructured, path ...string) T {
	t.Helper()
	var cur any = o.Object
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not a map", key(o), strings.Join(path, "."))
		}
		cur = m[p]
	}
	v, ok := cur.(T)
	if !ok {
		var zero T
		t.Fatalf("%s: %s is %T (%v); want %T", key(o), strings.Join(path, "."), cur, cur, zero)
	}
	return v
}

func lastOf(t *testing.T, list any) any {
	t.Helper()
	l, ok := list.([]any)
	if !ok || len(l) == 0 {
		t.Fatalf("%v is not a non-empty list", list)
	}
	return l[len(l)-1]
}

// assertYAMLEqual compares a rendered field with YAML written in the test,
// parsed by the same library.
func assertYAMLEqual(t *testing.T, what string, got any, wantYAML string) {
	t.Helper()
	var want any
	if err := yaml.Unmarshal([]byte(wantYAML), &want); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}
