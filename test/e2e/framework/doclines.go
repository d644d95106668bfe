// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shBlock is a fenced sh block, indented too (one inside a list item).
var shBlock = regexp.MustCompile("(?ms)^[ \t]*```sh\n(.*?)^[ \t]*```")

// DocShellLines returns the command lines of the ```sh blocks of the
// repository's file doc (a path from the repository root, such as
// docs/decide.md), continuation lines joined: what a test runs as written.
func DocShellLines(doc string) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range shBlock.FindAllStringSubmatch(string(b), -1) {
		for _, l := range strings.Split(strings.TrimSpace(strings.ReplaceAll(m[1], "\\\n", "")), "\n") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out, nil
}

// DocLines is DocShellLines for a test, which it fails when the file
// cannot be read.
func DocLines(t testing.TB, doc string) []string {
	t.Helper()
	lines, err := DocShellLines(doc)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}
