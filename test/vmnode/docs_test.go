// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	buildLineRE = regexp.MustCompile(`(?m)^//go:build (.*)$`)
	testFuncRE  = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	docTestRE   = regexp.MustCompile("`(Test(?:Node|VM)\\w*)`")
)

// nodeSuiteTests are the tests of the node tiers: those of the files built
// with the vmnode tag, not the benchmarks' (vmnodebench), whose figures
// docs/performance.md has.
func nodeSuiteTests(t *testing.T) []string {
	t.Helper()
	return testsIn(t, "*_test.go", func(build string) bool {
		return strings.Contains(build, "vmnode") && !strings.Contains(build, "vmnodebench")
	})
}

// benchTests are the node benchmarks' tests, which docs/node.md may name.
func benchTests(t *testing.T) []string {
	t.Helper()
	return testsIn(t, "*_bench_test.go", func(string) bool { return true })
}

// testsIn lists the test functions of the files matching glob whose
// //go:build line (empty when there is none) keep accepts.
func testsIn(t *testing.T, glob string, keep func(build string) bool) []string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		build := ""
		if m := buildLineRE.FindSubmatch(b); m != nil {
			build = string(m[1])
		}
		if !keep(build) {
			continue
		}
		for _, f := range testFuncRE.FindAllSubmatch(b, -1) {
			tests = append(tests, string(f[1]))
		}
	}
	return tests
}

// TestNodeDocNamesEveryTest: docs/node.md says what each test of the node
// tiers proves, so it names each one, and every test it names exists (a
// rename or a removal updates the page).
func TestNodeDocNamesEveryTest(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "node.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests := nodeSuiteTests(t)
	if len(tests) < 20 {
		t.Fatalf("found %d node tests in test/vmnode (%v): the file scan no longer finds them", len(tests), tests)
	}
	named := map[string]bool{}
	for _, m := range docTestRE.FindAllSubmatch(doc, -1) {
		named[string(m[1])] = true
	}
	for _, name := range tests {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/node.md does not name %s: say what it proves", name)
		}
	}
	all := append(slices.Clone(tests), benchTests(t)...)
	for name := range named {
		if !slices.Contains(all, name) {
			t.Errorf("docs/node.md names %s, which is no test of test/vmnode", name)
		}
	}
}
