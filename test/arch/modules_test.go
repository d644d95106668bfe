// SPDX-License-Identifier: Apache-2.0

package arch

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// The modules that compile evictd's packages or the libraries under them
// again (the control plane's, hack/cluster; the chart and rules tests',
// test/deploy, which imports evictd's packages) keep every library they share
// with evictd's module at evictd's very version: a package compiles once for
// all of them only when the whole tree under it has the same versions, and
// golang.org/x/sys sits under nearly all of client-go. Measured from an empty
// build cache after make build: the control plane's binaries took 832 s of
// CPU with the control plane's own, older versions and 730 s with evictd's.
// When one needs a newer version, evictd's module takes it too.
func TestModulesShareEvictdsLibraries(t *testing.T) {
	root := filepath.Join("..", "..")
	evictd := buildVersions(t, filepath.Join(root, "go.mod"))
	for _, dir := range []string{filepath.Join("hack", "cluster"), filepath.Join("test", "deploy")} {
		other := buildVersions(t, filepath.Join(root, dir, "go.mod"))
		shared := 0
		for _, mod := range slices.Sorted(maps.Keys(evictd)) {
			v := evictd[mod]
			ov, ok := other[mod]
			if !ok {
				continue
			}
			shared++
			switch semver.Compare(ov, v) {
			case -1:
				t.Errorf("%s/go.mod has %s %s, evictd's go.mod %s: run go get %s@%s in %s", dir, mod, ov, v, mod, v, dir)
			case 1:
				t.Errorf("%s/go.mod has %s %s, evictd's go.mod %s: run go get %s@%s in evictd's module", dir, mod, ov, v, mod, ov)
			}
		}
		if shared < 20 {
			t.Errorf("only %d modules in both evictd's go.mod and %s/go.mod; the requirement lists were not read whole", shared, dir)
		}
	}
}

// buildVersions is the version each module a go.mod requires builds at: its
// requirement, or the module version a replace directive pins it to.
func buildVersions(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range f.Require {
		out[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if _, ok := out[r.Old.Path]; ok && r.New.Version != "" { // a directory replace has no version
			out[r.Old.Path] = r.New.Version
		}
	}
	return out
}
