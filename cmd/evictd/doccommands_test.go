// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDecideDocCommands runs every evictd rank and evictd explain command
// docs/decide.md shows, as written, on the rank fixtures under the file
// names the docs use; the example output shown after the explain commands
// is what the first of them prints.
func TestDecideDocCommands(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "decide.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, from := range map[string]string{"summary.json": "summary.json", "pods.json": "pods.json", "config.yaml": "config.yaml"} {
		data, err := os.ReadFile(td(from))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), string(data))
	}
	writeFile(t, filepath.Join(dir, "namespaces.json"), `{"apiVersion":"v1","kind":"NamespaceList","items":[{"metadata":{"name":"shop","labels":{"team":"shop"}}}]}`)
	t.Chdir(dir)

	blocks := regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```").FindAllStringSubmatch(string(doc), -1)
	ran := map[string]int{}
	for i, b := range blocks {
		if b[1] != "sh" {
			continue
		}
		for _, line := range strings.Split(b[2], "\n") {
			c, _, _ := strings.Cut(line, "#")
			if strings.Contains(c, " --node ") {
				continue // a running agent's: test/e2e/agent TestExplainEndpoint runs them
			}
			if strings.HasPrefix(c, "evictd rank ") || strings.HasPrefix(c, "evictd explain ") {
				args := strings.Fields(c)
				var out, errb bytes.Buffer
				if code := dispatch(context.Background(), args[1:], &out, &errb); code != exitOK || out.Len() == 0 || errb.Len() > 0 {
					t.Errorf("%s: exit %d, stdout %d bytes, stderr %q", c, code, out.Len(), errb.String())
				}
				if args[1] == "explain" && ran["explain"] == 0 && i+1 < len(blocks) {
					shown := blocks[i+1][2]
					if !strings.HasPrefix(out.String(), shown) {
						t.Errorf("docs/decide.md shows, for %q:\n%s\nit prints:\n%s", c, shown, out.String())
					}
				}
				ran[args[1]]++
			}
		}
	}
	if ran["rank"] < 3 || ran["explain"] < 2 {
		t.Errorf("ran %v of docs/decide.md's commands; want its 3 rank and 2 explain commands", ran)
	}
}
