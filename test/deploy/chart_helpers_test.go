// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/test/e2e/framework"
)

// repoPath is a path inside the repository.
func repoPath(t *testing.T, rel ...string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, rel...)...)
}

// The release the tests render by default: the name and namespace
// deploy/daemonset.yaml uses.
const (
	defaultRelease   = "evictd"
	defaultNamespace = "evictd-system"
)

// render renders the chart as `helm template evictd deploy/helm/evictd -n
// evictd-system -f values` would, with Helm's own library: values are
// coalesced with the chart's and checked against its values.schema.json.
func render(t *testing.T, valuesYAML string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderRelease(t, defaultRelease, defaultNamespace, valuesYAML)
}

// renderRelease renders the chart as release name in namespace ns.
func renderRelease(t *testing.T, name, ns, valuesYAML string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	rel, err := dryRunInstall(t, name, ns, valuesYAML)
	if err != nil {
		return nil, err
	}
	objs, err := framework.ParseManifest(strings.NewReader(rel.Manifest))
	if err != nil {
		t.Fatalf("rendered manifest: %v\n%s", err, rel.Manifest)
	}
	return objs, nil
}

// dryRunInstall is `helm install name -n ns --dry-run` with valuesYAML, on
// the client alone: the release with its manifest and NOTES.
func dryRunInstall(t *testing.T, name, ns, valuesYAML string) (*release.Release, error) {
	t.Helper()
	return dryRunInstallOn(t, name, ns, valuesYAML)
}

// dryRunInstallOn is dryRunInstall on a cluster that serves apiVersions
// (`--api-versions V ...`): the chart sees each in
// .Capabilities.APIVersions, as it sees the cluster's APIs at install.
func dryRunInstallOn(t *testing.T, name, ns, valuesYAML string, apiVersions ...string) (*release.Release, error) {
	t.Helper()
	chrt, err := loader.Load(repoPath(t, "deploy", "helm", "evictd"))
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(valuesYAML), &vals); err != nil {
		t.Fatalf("test values: %v", err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly = true
	install.DryRun = true
	install.Replace = true
	install.ReleaseName = name
	install.Namespace = ns
	// The API server the dry-run test starts is this version.
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	install.APIVersions = chartutil.VersionSet(apiVersions)
	return install.Run(chrt, vals)
}

// mustRender renders and fails the test on an error.
func mustRender(t *testing.T, valuesYAML string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(t, valuesYAML)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return objs
}

// key names an object: Kind namespace/name.
func key(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// byKey indexes objects by key, failing on a duplicate.
func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if _, dup := m[key(o)]; dup {
			t.Fatalf("two objects %s", key(o))
		}
		m[key(o)] = o
	}
	return m
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// find returns the one object of kind named name, or fails.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %v", kind, name, keys(byKey(t, objs)))
	return nil
}

// has reports whether objs hold an object of kind.
func has(objs []*unstructured.Unstructured, kind string) bool {
	for _, o := range objs {
		if o.GetKind() == kind {
			return true
		}
	}
	return false
}
