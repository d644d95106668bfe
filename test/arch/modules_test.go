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

// The control plane's module (hack/cluster) keeps every library it shares
// with evictd's module at evictd's version or above: a package compiles once
// for both only when the whole tree under it has the same versions, and
// golang.org/x/sys sits under nearly all of client-go. Measured from an empty
// build cache after make build: the control plane's binaries took 832 s of
// CPU with the control plane's own, older versions and 730 s with evictd's.
func TestControlPlaneSharesEvictdsLibraries(t *testing.T) {
	root := filepath.Join("..", "..")
	evictd := buildVersions(t, filepath.Join(root, "go.mod"))
	cluster := buildVersions(t, filepath.Join(root, "hack", "cluster", "go.mod"))
	shared := 0
	for _, mod := range slices.Sorted(maps.Keys(evictd)) {
		v := evictd[mod]
		cv, ok := cluster[mod]
		if !ok {
			continue
		}
		shared++
		if semver.Compare(cv, v) < 0 {
			t.Errorf("hack/cluster/go.mod has %s %s, evictd's go.mod %s: run go get %s@%s in hack/cluster", mod, cv, v, mod, v)
		}
	}
	if shared < 20 {
		t.Errorf("only %d modules in both go.mod files; the requirement lists were not read whole", shared)
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
