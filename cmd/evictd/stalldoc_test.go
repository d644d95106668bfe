// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestStallDocCommand parses docs/stall.md's `evictd run` command, as
// written, with the flag parser and checks evictd run applies: the command
// needs a cluster to run further, and what a reader copies is its flags.
// Each threshold it sets must come out as written.
func TestStallDocCommand(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "stall.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(string(doc), -1) {
		joined := strings.ReplaceAll(m[1], "\\\n", " ")
		for _, line := range strings.Split(joined, "\n") {
			if strings.HasPrefix(line, "evictd run ") {
				cmds = append(cmds, shellWords(t, line))
			}
		}
	}
	if len(cmds) != 1 {
		t.Fatalf("docs/stall.md shows %d evictd run commands in sh blocks, want 1", len(cmds))
	}
	args := cmds[0][2:]
	opts, _, _, code, ok := parseRunFlags(append(slices.Clone(args), "--node-name=node-1"), io.Discard, io.Discard)
	if !ok {
		t.Fatalf("evictd run %s: exit %d; the command docs/stall.md shows is refused", strings.Join(args, " "), code)
	}
	got, err := opts.Config.Thresholds()
	if err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, th := range got {
		set = append(set, th.String())
	}
	for _, a := range args {
		flag, value, _ := strings.Cut(a, "=")
		if flag != "--eviction-hard" && flag != "--eviction-soft" {
			continue
		}
		if !slices.ContainsFunc(set, func(s string) bool { return s == value || strings.HasPrefix(s, value+" ") }) {
			t.Errorf("%s: the thresholds evictd run applies are %v, without %s", a, set, value)
		}
	}
}

// shellWords splits line as the shell would, for the quoting the docs use
// (single quotes); anything else a doc's command writes fails the test.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	if strings.ContainsAny(line, "\"$`\\") {
		t.Fatalf("%q: the test splits only single-quoted words", line)
	}
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("%q: unbalanced quote", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
