// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestChartCleanupHook: helm uninstall runs evictd cleanup first, in the
// chart's one hook, a pre-delete Job, which is deploy/cleanup/job.yaml's
// Job field for field but for what only a release has (Helm's labels, the
// hook's annotations); its identity and admission policy are release
// objects, not hooks (TestChartDefaultsEqualManifest holds them equal to
// deploy/daemonset.yaml's), so that they exist and are in force before the
// Job runs. cleanup.enabled false renders none of it, and the kustomize
// step's image is the one deploy/ sets.
func TestChartCleanupHook(t *testing.T) {
	rel, err := dryRunInstall(t, defaultRelease, defaultNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Hooks) != 1 {
		t.Fatalf("the chart has %d hooks; want 1, the cleanup Job", len(rel.Hooks))
	}
	hook := rel.Hooks[0]
	if got := []string{string(hook.Kind), hook.Name}; !slices.Equal(got, []string{"Job", "evictd-cleanup"}) {
		t.Fatalf("the chart's hook is %v; want Job evictd-cleanup", got)
	}
	if len(hook.Events) != 1 || hook.Events[0] != "pre-delete" {
		t.Errorf("the cleanup Job runs at %v; want pre-delete only", hook.Events)
	}
	var deletePolicies []string
	for _, p := range hook.DeletePolicies {
		deletePolicies = append(deletePolicies, string(p))
	}
	if want := []string{"before-hook-creation", "hook-succeeded"}; !slices.Equal(deletePolicies, want) {
		t.Errorf("the cleanup Job's hook-delete-policy is %v; want %v", deletePolicies, want)
	}
	objs, err := framework.ParseManifest(strings.NewReader(hook.Manifest))
	if err != nil || len(objs) != 1 {
		t.Fatalf("the hook's manifest: %v, %d objects", err, len(objs))
	}
	got := objs[0]
	withoutReleaseIdentity(t, got)
	unstructured.RemoveNestedField(got.Object, "metadata", "annotations")
	podLabels := nested[map[string]any](t, got, "spec", "template", "metadata", "labels")
	if podLabels["app.kubernetes.io/instance"] != defaultRelease {
		t.Errorf("the cleanup pod's labels %v; want app.kubernetes.io/instance %s", podLabels, defaultRelease)
	}
	unstructured.RemoveNestedField(got.Object, "spec", "template", "metadata", "labels", "app.kubernetes.io/instance")
	want, err := framework.ReadManifest(repoPath(t, "deploy", "cleanup", "job.yaml"))
	if err != nil || len(want) != 1 {
		t.Fatalf("deploy/cleanup/job.yaml: %v, %d objects", err, len(want))
	}
	if d := cmp.Diff(want[0].Object, got.Object); d != "" {
		t.Errorf("the chart's cleanup Job differs from deploy/cleanup/job.yaml (-manifest +chart):\n%s", d)
	}

	off, err := dryRunInstall(t, defaultRelease, defaultNamespace, "cleanup: {enabled: false}")
	if err != nil {
		t.Fatal(err)
	}
	if len(off.Hooks) != 0 || strings.Contains(off.Manifest, "cleanup") {
		t.Errorf("cleanup.enabled: false still renders the cleanup Job (%d hooks) or its identity", len(off.Hooks))
	}
	if _, err := render(t, "cleanup: {timeout: soon}"); err == nil || !strings.Contains(err.Error(), "/cleanup/timeout") {
		t.Errorf("cleanup.timeout: soon rendered (%v); want the schema's error naming it", err)
	}

	images := func(path ...string) any {
		raw, err := os.ReadFile(repoPath(t, path...))
		if err != nil {
			t.Fatal(err)
		}
		var k map[string]any
		if err := yaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
		return k["images"]
	}
	if a, b := images("deploy", "kustomization.yaml"), images("deploy", "cleanup", "kustomization.yaml"); a == nil || !reflect.DeepEqual(a, b) {
		t.Errorf("deploy/cleanup/kustomization.yaml sets images %v; deploy/kustomization.yaml %v: the cleanup Job must run the agents' image", b, a)
	}
}
