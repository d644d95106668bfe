// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/test/e2e/framework"
)

// renderParent renders a parent chart ("platform") that depends on evictd
// under the condition evictd.enabled, as an umbrella chart does, with the
// parent's values vals.
func renderParent(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	sub, err := loader.Load(repoPath(t, "deploy", "helm", "evictd"))
	if err != nil {
		t.Fatal(err)
	}
	parent := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "platform", Version: "1.0.0", Type: "application",
			Dependencies: []*chart.Dependency{{Name: "evictd", Version: sub.Metadata.Version, Condition: "evictd.enabled"}}},
		Values: map[string]any{"evictd": map[string]any{"enabled": false}},
	}
	parent.AddDependency(sub)
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly, install.DryRun, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "platform", defaultNamespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	rel, err := install.Run(parent, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// TestChartAsSubchart: a parent chart's `evictd.enabled: true` condition
// arrives in evictd's values as a top-level enabled key; the schema (whose
// top level admits no unknown key) must take it, and the switch must still
// work both ways.
func TestChartAsSubchart(t *testing.T) {
	man, err := renderParent(t, map[string]any{"evictd": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatalf("parent chart with evictd.enabled: true: %v", err)
	}
	objs, err := framework.ParseManifest(strings.NewReader(man))
	if err != nil {
		t.Fatal(err)
	}
	find(t, objs, "DaemonSet", "platform-evictd")

	man, err = renderParent(t, map[string]any{"evictd": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatalf("parent chart with evictd.enabled: false: %v", err)
	}
	if strings.Contains(man, "kind: DaemonSet") {
		t.Error("evictd.enabled: false still renders the DaemonSet")
	}

	// The key alone, as `helm install -f parent-values.yaml` of the chart
	// itself passes it.
	mustRender(t, "enabled: true")
	if _, err := render(t, `enabled: "yes"`); err == nil || !strings.Contains(err.Error(), "enabled") {
		t.Errorf(`enabled: "yes": %v; want a schema error naming enabled`, err)
	}
}

// TestChartRefusesOutOfRange: each window and wait the chart passes to
// evictd renders at evictd's bounds (pkg/config's constants, so the test
// fails when they move) and is refused just outside them, naming the value;
// and evictd refuses those outside values too, so the chart's bound is
// evictd's and not a stricter one of its own.
func TestChartRefusesOutOfRange(t *testing.T) {
	type bound struct {
		name     string // the chart value the refusal names
		values   func(v string) string
		min, max time.Duration
		evictd   func(v string) string // an EvictdConfiguration with v, "" when not a config field
	}
	cfg := func(field string) func(string) string {
		return func(v string) string {
			return fmt.Sprintf("apiVersion: %s\nkind: %s\nmemoryHighEviction: true\n%s: %q\n", config.APIVersion, config.Kind, field, v)
		}
	}
	stallCfg := func(v string) string {
		return fmt.Sprintf("apiVersion: %s\nkind: %s\nevictionStallWindow: %q\n", config.APIVersion, config.Kind, v)
	}
	for _, b := range []bound{
		{"thresholds.stallWindow", func(v string) string { return `thresholds: {stallWindow: "` + v + `"}` },
			config.MinStallWindow, config.MaxStallWindow, stallCfg},
		{"memoryHigh.window", func(v string) string { return `memoryHigh: {enabled: true, window: "` + v + `"}` },
			config.MinStallWindow, config.MaxStallWindow, cfg("memoryHighWindow")},
		{"evictionRequest.responderWait", func(v string) string { return `evictionRequest: {enabled: true, responderWait: "` + v + `"}` },
			config.MinEvictionRequestResponderWait, config.MaxEvictionRequestResponderWait, cfg("evictionRequestResponderWait")},
	} {
		for _, d := range []time.Duration{b.min, b.max} {
			v := d.String() // as Go prints it ("5m0s"): the schema and evictd both read it
			if _, err := render(t, b.values(v)); err != nil {
				t.Errorf("%s %s (evictd's bound): %v", b.name, v, err)
			}
		}
		// 1ms past each bound: the schema's duration spelling takes it.
		for _, d := range []time.Duration{b.min - time.Millisecond, b.max + time.Millisecond} {
			v := d.String() // as Go prints it ("5m0s"): the schema and evictd both read it
			_, err := render(t, b.values(v))
			if err == nil || !strings.Contains(err.Error(), b.name) || !strings.Contains(err.Error(), v) {
				t.Errorf("%s %s: %v; want a refusal naming %s and %s", b.name, v, err, b.name, v)
			}
			if _, err := config.Decode([]byte(b.evictd(v))); err == nil {
				t.Errorf("%s %s: the chart refuses it but evictd takes it", b.name, v)
			}
		}
	}

	// The same bounds spelled otherwise: units add up as Go's do.
	for v, ok := range map[string]bool{"1000ms": true, "999999us": false, "4m60s": true, "4m60.001s": false, "0.5s": false} {
		_, err := render(t, `thresholds: {stallWindow: "`+v+`"}`)
		if (err == nil) != ok {
			t.Errorf("stallWindow %s: %v; want accepted %v", v, err, ok)
		}
		d, _ := time.ParseDuration(v)
		if inside := d >= config.MinStallWindow && d <= config.MaxStallWindow; inside != ok {
			t.Errorf("stallWindow %s: the test's own expectation disagrees with evictd's bounds", v)
		}
	}

	// evictionMaxPodGracePeriod is an int32.
	objs := mustRender(t, `thresholds: {maxPodGracePeriod: 2147483647}`)
	file := nested[string](t, find(t, objs, "ConfigMap", "evictd-config"), "data", "config.yaml")
	if _, err := config.Decode([]byte(file)); err != nil {
		t.Errorf("maxPodGracePeriod 2147483647: evictd refuses it: %v", err)
	}
	if _, err := render(t, `thresholds: {maxPodGracePeriod: 2147483648}`); err == nil || !strings.Contains(err.Error(), "maxPodGracePeriod") {
		t.Errorf("maxPodGracePeriod 2147483648: %v; want a schema error naming it", err)
	}

	// memory.high with every signal 0 has nothing to act on.
	if _, err := render(t, `memoryHigh: {enabled: true, eventRate: 0, maxEventRate: 0, pressureSome: "0%"}`); err == nil ||
		!strings.Contains(err.Error(), "memoryHigh.eventRate") {
		t.Errorf("memoryHigh with every signal 0: %v; want a refusal naming the values", err)
	}
	objs = mustRender(t, `memoryHigh: {enabled: true, eventRate: 0, maxEventRate: 0, pressureSome: "0.5%"}`)
	file = nested[string](t, find(t, objs, "ConfigMap", "evictd-config"), "data", "config.yaml")
	if _, err := config.Decode([]byte(file)); err != nil {
		t.Errorf("memoryHigh with one signal left: evictd refuses it: %v", err)
	}
	if _, err := config.Decode([]byte(fmt.Sprintf("apiVersion: %s\nkind: %s\nmemoryHighEviction: true\nmemoryHighEventRate: 0\nmemoryHighMaxEventRate: 0\nmemoryHighPressureSome: 0%%\n",
		config.APIVersion, config.Kind))); err == nil {
		t.Error("evictd takes memoryHigh with every signal 0: the chart's refusal is stricter than evictd")
	}
}

// TestChartSchemaStatesEvictdBounds: the x-evictd-range each bounded value
// of values.schema.json states (for whoever reads the schema: an editor, a
// values linter) is evictd's own.
func TestChartSchemaStatesEvictdBounds(t *testing.T) {
	raw, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]time.Duration{
		"thresholds.stallWindow":        {config.MinStallWindow, config.MaxStallWindow},
		"memoryHigh.window":             {config.MinStallWindow, config.MaxStallWindow},
		"evictionRequest.responderWait": {config.MinEvictionRequestResponderWait, config.MaxEvictionRequestResponderWait},
	}
	found := 0
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		if r, ok := node["x-evictd-range"]; ok {
			found++
			w, known := want[path]
			if !known {
				t.Errorf("%s states x-evictd-range %v, which this test does not check", path, r)
				return
			}
			rr, _ := r.([]any)
			if len(rr) != 2 {
				t.Fatalf("%s: x-evictd-range %v: want [min, max]", path, r)
			}
			for i, v := range rr {
				d, err := time.ParseDuration(fmt.Sprint(v))
				if err != nil || d != w[i] {
					t.Errorf("%s: x-evictd-range[%d] %v; evictd's is %s", path, i, v, w[i])
				}
			}
		}
		props, _ := node["properties"].(map[string]any)
		for k, v := range props {
			if sub, ok := v.(map[string]any); ok {
				walk(strings.TrimPrefix(path+"."+k, "."), sub)
			}
		}
	}
	walk("", schema)
	if found != len(want) {
		t.Errorf("the schema states %d ranges; want %d (%v)", found, len(want), keys(want))
	}
	if max := schema["properties"].(map[string]any)["thresholds"].(map[string]any)["properties"].(map[string]any)["maxPodGracePeriod"].(map[string]any)["maximum"]; max != float64(1<<31-1) {
		t.Errorf("thresholds.maxPodGracePeriod maximum %v; evictionMaxPodGracePeriod is an int32", max)
	}
}

// TestChartRefusesSharedMounts: two host paths that would be mounted at one
// place are refused at render, naming both, instead of by the API server
// (a pod's mount paths must be unique) once the DaemonSet exists.
func TestChartRefusesSharedMounts(t *testing.T) {
	for _, tc := range []struct{ values, naming, other string }{
		{`hostPaths: {imageStore: /var/lib/containers/storage, containerStore: /var/lib/containers/storage}`, "hostPaths.containerStore", "hostPaths.imageStore"},
		{`hostPaths: {runtimeState: /var/lib/containerd}`, "hostPaths.runtimeState", "hostPaths.imageStore"},
		{`hostPaths: {imageStore: /var/lib/kubelet}`, "hostPaths.imageStore", "hostPaths.kubeletRoot"},
		{`hostPaths: {containerStore: /var/log/pods}`, "hostPaths.containerStore", "hostPaths.podLogs"},
		{`hostPaths: {imageStore: /proc}`, "hostPaths.imageStore", "/proc"},
	} {
		_, err := render(t, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.naming) || !strings.Contains(err.Error(), tc.other) {
			t.Errorf("%s: %v; want a refusal naming %s and %s", tc.values, err, tc.naming, tc.other)
		}
	}
	// The CRI-O split store, two distinct paths, renders.
	c, _ := agentPod(t, `hostPaths: {imageStore: /var/lib/containers/storage, containerStore: /var/lib/containers/overlay, runtimeState: /run/containers}`)
	for _, m := range []string{"image-store", "container-store", "runtime-state"} {
		if mountNamed(c, m) == nil {
			t.Errorf("no %s mount for three distinct paths", m)
		}
	}
}

// TestChartLabelsMerge: commonLabels and podLabels are one map on the pod
// template (podLabels win), each key once; the selector labels cannot be
// set by either.
func TestChartLabelsMerge(t *testing.T) {
	vals := `{commonLabels: {team: platform, tier: node, app.kubernetes.io/version: pinned}, podLabels: {team: evictd-oncall}}`
	man := renderManifest(t, vals)
	var ds map[string]any
	for _, doc := range strings.Split(man, "\n---") {
		if strings.Contains(doc, "\nkind: DaemonSet") {
			// Strict: a key given twice is an error, as kubectl apply makes it.
			if err := yaml.UnmarshalStrict([]byte(doc), &ds); err != nil {
				t.Fatalf("DaemonSet: %v\n%s", err, doc)
			}
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet rendered")
	}
	objs, err := framework.ParseManifest(strings.NewReader(man))
	if err != nil {
		t.Fatal(err)
	}
	d := find(t, objs, "DaemonSet", "evictd")
	meta := nested[map[string]any](t, d, "metadata", "labels")
	pod := nested[map[string]any](t, d, "spec", "template", "metadata", "labels")
	for k, want := range map[string]string{"team": "platform", "tier": "node", "app.kubernetes.io/version": "pinned", "app.kubernetes.io/name": "evictd"} {
		if meta[k] != want {
			t.Errorf("DaemonSet label %s = %v; want %s", k, meta[k], want)
		}
	}
	for k, want := range map[string]string{"team": "evictd-oncall", "tier": "node", "app.kubernetes.io/instance": "evictd", "app.kubernetes.io/managed-by": "Helm"} {
		if pod[k] != want {
			t.Errorf("pod label %s = %v; want %s", k, pod[k], want)
		}
	}
	if !selects(nested[map[string]any](t, d, "spec", "selector", "matchLabels"), pod) {
		t.Error("the pod template's labels do not match the selector")
	}
	for _, tc := range []struct{ values, what, key string }{
		{`commonLabels: {app.kubernetes.io/name: other}`, "commonLabels", "app.kubernetes.io/name"},
		{`podLabels: {app.kubernetes.io/instance: other}`, "podLabels", "app.kubernetes.io/instance"},
	} {
		_, err := render(t, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.what) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v; want a refusal naming %s and %s", tc.values, err, tc.what, tc.key)
		}
	}
}

// renderManifest renders the chart and returns the manifest text itself,
// for what parsing would hide (a key given twice).
func renderManifest(t *testing.T, valuesYAML string) string {
	t.Helper()
	rel, err := dryRunInstall(t, defaultRelease, defaultNamespace, valuesYAML)
	if err != nil {
		t.Fatalf("render %s: %v", valuesYAML, err)
	}
	return rel.Manifest
}
