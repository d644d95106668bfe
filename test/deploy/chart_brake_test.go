// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/test/e2e/framework"
)

// isMutatingPolicy reports whether o is a MutatingAdmissionPolicy or its
// binding: nodeBrake.keepAway's objects, the chart's only mutating ones.
func isMutatingPolicy(o *unstructured.Unstructured) bool {
	gk := o.GroupVersionKind().GroupKind()
	return gk.Group == "admissionregistration.k8s.io" && (gk.Kind == "MutatingAdmissionPolicy" || gk.Kind == "MutatingAdmissionPolicyBinding")
}

// TestChartBrakeKeepAway: nodeBrake.keepAway all (the default) renders no
// MutatingAdmissionPolicy; besteffort renders exactly the two objects of
// deploy/brake-besteffort-only.yaml, field for field once the release's
// labels and names are taken out, named after the release and namespace
// with the binding naming its policy. besteffort is refused, each time
// with a message naming nodeBrake.keepAway, on Kubernetes 1.35 (no
// MutatingAdmissionPolicy v1; 1.36 installs), with the brake off and with
// taint effect None (no taint to tolerate); the schema refuses any other
// value.
func TestChartBrakeKeepAway(t *testing.T) {
	if objs := slices.DeleteFunc(mustRender(t, ""), func(o *unstructured.Unstructured) bool { return !isMutatingPolicy(o) }); len(objs) != 0 {
		t.Errorf("the default values render %v; want no mutating admission policy", keys(byKey(t, objs)))
	}

	want, err := framework.ReadManifest(repoPath(t, "deploy", "brake-besteffort-only.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 || !isMutatingPolicy(want[0]) || !isMutatingPolicy(want[1]) {
		t.Fatalf("deploy/brake-besteffort-only.yaml has %v; want a MutatingAdmissionPolicy and its binding", keys(byKey(t, want)))
	}
	got := slices.DeleteFunc(mustRender(t, "nodeBrake: {keepAway: besteffort}"), func(o *unstructured.Unstructured) bool { return !isMutatingPolicy(o) })
	for _, o := range got {
		withoutReleaseIdentity(t, o)
	}
	wantBy, gotBy := byKey(t, want), byKey(t, got)
	if !slices.Equal(keys(wantBy), keys(gotBy)) {
		t.Fatalf("nodeBrake.keepAway besteffort renders %v; deploy/brake-besteffort-only.yaml has %v", keys(gotBy), keys(wantBy))
	}
	for k, w := range wantBy {
		if d := cmp.Diff(w.Object, gotBy[k].Object); d != "" {
			t.Errorf("%s differs from deploy/brake-besteffort-only.yaml (-manifest +chart):\n%s", k, d)
		}
	}

	// Another release in another namespace: its own names, so that two
	// releases never collide.
	objs, err := renderRelease(t, "agents", "evictd-chart", "nodeBrake: {keepAway: besteffort}")
	if err != nil {
		t.Fatal(err)
	}
	const name = "agents-evictd-evictd-chart-brake-besteffort-only"
	find(t, objs, "MutatingAdmissionPolicy", name)
	if p := nested[string](t, find(t, objs, "MutatingAdmissionPolicyBinding", name), "spec", "policyName"); p != name {
		t.Errorf("the binding's policyName is %q; want %q", p, name)
	}

	for _, tc := range []struct {
		values string
		minor  int
		want   string // "" for installable
	}{
		{"nodeBrake: {keepAway: besteffort}", 35, "nodeBrake.keepAway besteffort needs Kubernetes 1.36"},
		{"nodeBrake: {keepAway: besteffort}", 36, ""},
		{"nodeBrake: {keepAway: besteffort, enabled: false}", 37, "nodeBrake.keepAway besteffort tolerates"},
		{"nodeBrake: {keepAway: besteffort, taintEffect: None}", 37, "nodeBrake.keepAway besteffort tolerates"},
		{"nodeBrake: {keepAway: besteffort, taintEffect: PreferNoSchedule}", 37, ""},
		{"nodeBrake: {keepAway: BestEffort}", 37, "keepAway"},
		{"nodeBrake: {keepAway: none}", 37, "keepAway"},
	} {
		err := installOn(t, tc.minor, tc.values)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s on 1.%d: %v; want it installable", tc.values, tc.minor, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s on 1.%d: %v; want an error containing %q", tc.values, tc.minor, err, tc.want)
		}
	}
}

// installOn is a client-only dry-run install of the chart with valuesYAML
// on Kubernetes 1.minor.
func installOn(t *testing.T, minor int, valuesYAML string) error {
	t.Helper()
	chrt, err := loader.Load(repoPath(t, "deploy", "helm", "evictd"))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(valuesYAML), &vals); err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly, install.DryRun, install.ReleaseName, install.Namespace = true, true, defaultRelease, defaultNamespace
	install.KubeVersion = &chartutil.KubeVersion{Version: fmt.Sprintf("v1.%d.0", minor), Major: "1", Minor: strconv.Itoa(minor)}
	_, err = install.Run(chrt, vals)
	return err
}

// TestChartBrakeTaintEffectDefault: the brake's default taint effect is
// PreferNoSchedule in values.yaml and in the schema, as in evictd itself
// (pkg/agent TestNodeBrakeTaintEffectDefault): a leftover taint can then
// never make a node unschedulable, and the autoscaler's simulation treats
// it as soft. The default values pass no --node-brake-taint-effect, so the
// chart and deploy/daemonset.yaml (TestChartDefaultsEqualManifest) both run
// with evictd's default; NoSchedule and None, chosen, are passed as the flag.
func TestChartBrakeTaintEffectDefault(t *testing.T) {
	const want = "PreferNoSchedule"
	chrt, err := loader.Load(repoPath(t, "deploy", "helm", "evictd"))
	if err != nil {
		t.Fatal(err)
	}
	if got := chrt.Values["nodeBrake"].(map[string]any)["taintEffect"]; got != want {
		t.Errorf("values.yaml nodeBrake.taintEffect is %v; want %q", got, want)
	}
	var schema struct {
		Properties struct {
			NodeBrake struct {
				Properties struct {
					TaintEffect struct {
						Default string `json:"default"`
					} `json:"taintEffect"`
				} `json:"properties"`
			} `json:"nodeBrake"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(chrt.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema.Properties.NodeBrake.Properties.TaintEffect.Default; got != want {
		t.Errorf("values.schema.json nodeBrake.taintEffect default is %q; want %q", got, want)
	}

	const flag = "--node-brake-taint-effect"
	for _, tc := range []struct{ values, arg string }{
		{"", ""},
		{"nodeBrake: {taintEffect: PreferNoSchedule}", ""},
		{"nodeBrake: {taintEffect: NoSchedule}", flag + "=NoSchedule"},
		{"nodeBrake: {taintEffect: None}", flag + "=None"},
	} {
		c, _ := agentPod(t, tc.values)
		var got []string
		for _, a := range c["args"].([]any) {
			if strings.HasPrefix(a.(string), flag) {
				got = append(got, a.(string))
			}
		}
		if want := slices.DeleteFunc([]string{tc.arg}, func(s string) bool { return s == "" }); !slices.Equal(got, want) {
			t.Errorf("values %q pass %q; want %q", tc.values, got, want)
		}
	}
}
