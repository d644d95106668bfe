// SPDX-License-Identifier: Apache-2.0

// Package golden keeps a file the code generates (a reference page of the
// docs) equal to what the code generates now: a test compares the two and,
// run with -update, rewrites the file instead.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files the tests compare, instead of comparing them")

// Update reports whether the test binary runs with -update.
func Update() bool { return *update }

// Check holds the file at path equal to want: with -update it writes want
// there, else it fails the test when the file differs, naming the first
// line that does and regenerate, the command that rewrites it.
func Check(t testing.TB, path string, want []byte, regenerate string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (generate it with: %s)", path, err, regenerate)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with the code (first difference: %s); regenerate it with:\n  %s", path, FirstDiff(got, want), regenerate)
	}
}

// FirstDiff names the first line where got (the file) and want (what the
// code generates) differ.
func FirstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, the code makes it %q", i+1, gl, wl)
		}
	}
	return "none"
}
