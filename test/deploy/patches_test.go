// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestKustomizePatches: each JSON patch under deploy/patches applies to
// deploy/daemonset.yaml in a kustomization as docs/install.md shows it (its
// test operations hold against the manifest as it is now) and gives the
// DaemonSet exactly the volumes, mounts and arguments the chart renders
// with the preset of the same name.
func TestKustomizePatches(t *testing.T) {
	patches, err := filepath.Glob(repoPath(t, "deploy", "patches", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(patches) == 0 {
		t.Fatal("no patches under deploy/patches")
	}
	manifest, err := os.ReadFile(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range patches {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		t.Run(name, func(t *testing.T) {
			patch, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			fs := filesys.MakeFsInMemory()
			for file, content := range map[string]string{
				"/evictd/daemonset.yaml":    string(manifest),
				"/evictd/" + name + ".yaml": string(patch),
				"/evictd/kustomization.yaml": "resources: [daemonset.yaml]\npatches:\n  - path: " + name +
					".yaml\n    target: {kind: DaemonSet, name: evictd}\n",
			} {
				if err := fs.WriteFile(file, []byte(content)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/evictd")
			if err != nil {
				t.Fatalf("kustomize build with deploy/patches/%s.yaml: %v", name, err)
			}
			out, err := res.AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			objs, err := framework.ParseManifest(strings.NewReader(string(out)))
			if err != nil {
				t.Fatal(err)
			}
			preset, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "presets", name+".yaml"))
			if err != nil {
				t.Fatalf("no chart preset for patch %s: %v", name, err)
			}
			chart := mustRender(t, string(preset))
			got := nested[map[string]any](t, find(t, objs, "DaemonSet", "evictd"), "spec", "template", "spec")
			want := nested[map[string]any](t, find(t, chart, "DaemonSet", "evictd"), "spec", "template", "spec")
			if d := cmp.Diff(want["volumes"], got["volumes"]); d != "" {
				t.Errorf("volumes (-chart preset +patched manifest):\n%s", d)
			}
			gc, wc := got["containers"].([]any)[0].(map[string]any), want["containers"].([]any)[0].(map[string]any)
			for _, f := range []string{"volumeMounts", "args"} {
				if d := cmp.Diff(wc[f], gc[f]); d != "" {
					t.Errorf("%s (-chart preset +patched manifest):\n%s", f, d)
				}
			}
		})
	}
}
