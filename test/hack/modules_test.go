// SPDX-License-Identifier: Apache-2.0

package hack

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildGraphs are the project's Go modules and the packages each builds in
// make test: the main module's binaries and tests, the control plane's
// commands (hack/cluster's tools.go names them: clusterCommands), and the
// chart's and the dashboard picture's tests.
var buildGraphs = []struct {
	dir  string
	pkgs func(t *testing.T, root string) []string
}{
	{".", everyPackage},
	{"hack/cluster", clusterCommands},
	{"test/deploy", everyPackage},
	{"hack/dashboard", everyPackage},
}

func everyPackage(*testing.T, string) []string { return []string{"./..."} }

// clusterCommands are the commands hack/cluster/tools.go pins, the ones
// hack/build-cluster.sh builds.
func clusterCommands(t *testing.T, root string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "hack", "cluster", "tools.go"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, m := range regexp.MustCompile(`(?m)^\s*_ "([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		cmds = append(cmds, m[1])
	}
	if len(cmds) == 0 {
		t.Fatal("hack/cluster/tools.go imports no command")
	}
	return cmds
}

// A package two modules both build compiles once only when both take it from
// the same module version: the Go build cache keys a package on its own
// source and on every package under it, so one module at another version of
// golang.org/x/net, say, compiles that package and every one above it again.
// From empty caches that was 47 s of the gate's CPU for hack/dashboard
// (Prometheus's engine, client-go) against test/deploy's. Each package two of
// these modules share comes from one version of its module.
func TestSharedPackagesShareVersions(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	type origin struct{ dir, module string }
	seen := map[string]origin{} // import path: the first module to build it, and from where
	// One line a module taken at two versions, with how many packages both build.
	type clash struct{ first, second origin }
	clashes := map[clash]int{}
	for _, g := range buildGraphs {
		pkgs := buildList(t, filepath.Join(root, g.dir), g.pkgs(t, root))
		if len(pkgs) == 0 {
			t.Fatalf("%s builds no package from another module: the listing is wrong", g.dir)
		}
		for path, module := range pkgs {
			first, ok := seen[path]
			if !ok {
				seen[path] = origin{g.dir, module}
				continue
			}
			if first.module != module {
				clashes[clash{first, origin{g.dir, module}}]++
			}
		}
	}
	for c, n := range clashes {
		t.Errorf("%s builds %s and %s builds %s: packages both build (%d) compile twice, and every package above them; require one version in both",
			c.first.dir, c.first.module, c.second.dir, c.second.module, n)
	}
}

// buildList is every package that building patterns in dir (with their
// tests) compiles from another module than dir's, with that module's version,
// or its replacement's.
func buildList(t *testing.T, dir string, patterns []string) map[string]string {
	t.Helper()
	args := []string{"list", "-deps", "-test", "-f",
		`{{with .Module}}{{if not .Main}}{{$.ImportPath}} {{if .Replace}}{{.Replace.Path}}@{{.Replace.Version}}{{else}}{{.Path}}@{{.Version}}{{end}}{{end}}{{end}}`}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list in %s: %v\n%s", dir, err, msg)
	}
	pkgs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok {
			pkgs[path] = version
		}
	}
	return pkgs
}
