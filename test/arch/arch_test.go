// SPDX-License-Identifier: Apache-2.0

// Package arch holds docs/architecture.md's table of rooms to the tree.
package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	module = "github.com/evictd/evictd/"
	page   = "docs/architecture.md"
)

// roomRow is a row of the page's rooms table: | `path` | tier | owns |.
var roomRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([0-9]) \\| (.+) \\|$")

// rooms reads the page's rooms table: each room's tier, by path.
func rooms(t *testing.T, root string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "| room | tier | owns |"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			m := roomRow.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%s: a row of the rooms table is not | `path` | tier | owns |: %q", page, line)
			}
			if _, twice := out[m[1]]; twice {
				t.Fatalf("%s names %s twice", page, m[1])
			}
			out[m[1]], _ = strconv.Atoi(m[2])
		case in:
			in = false
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rooms table (| room | tier | owns |)", page)
	}
	return out
}

// packages are the tree's Go packages under cmd/, pkg/ and internal/ (a
// folder with a Go file other than a test), each with the packages of
// this module its files import.
func packages(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, top := range []string{"cmd", "pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			rel = filepath.ToSlash(rel)
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			imports := out[rel]
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if dep, ok := strings.CutPrefix(p, module); ok && !slices.Contains(imports, dep) {
					imports = append(imports, dep)
				}
			}
			out[rel] = imports
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRoomsAreTheFolders: every package has its row in the architecture
// page, every row is a package, and no package imports one of a higher
// tier (an import that runs back up: a capability that knows the loop, the
// loop that knows its wiring).
func TestRoomsAreTheFolders(t *testing.T) {
	root := filepath.Join("..", "..")
	tiers := rooms(t, root)
	pkgs := packages(t, root)
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range pkgs {
			if !yield(p) {
				return
			}
		}
	}) {
		tier, ok := tiers[p]
		if !ok {
			t.Errorf("%s has no row for the package %s: say which tier it stands on and what it owns", page, p)
			continue
		}
		for _, dep := range pkgs[p] {
			if dt, ok := tiers[dep]; ok && dt > tier {
				t.Errorf("%s (tier %d) imports %s (tier %d): an import runs back up", p, tier, dep, dt)
			}
		}
	}
	for room := range tiers {
		if _, ok := pkgs[room]; !ok {
			t.Errorf("%s has a row for %s, which is no Go package of the tree", page, room)
		}
	}
}
