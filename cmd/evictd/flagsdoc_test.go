// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/golden"
)

var flagsDocPath = filepath.Join("..", "..", "docs", "flags.md")

// guides names the page of the user guide that says what each command is for.
var guides = map[string]string{
	"observe": "[decide.md](decide.md)",
	"rank":    "[decide.md](decide.md)",
	"explain": "[decide.md](decide.md)",
	"trace":   "[decide.md](decide.md)",
	"replay":  "[decide.md](decide.md)",
	"run":     "[run.md](run.md)",
	"cleanup": "[install.md](install.md)",
	"version": "",
}

// TestFlagsDoc keeps docs/flags.md equal to what the commands' flag sets
// hold. Run `go test ./cmd/evictd -run TestFlagsDoc -update` after changing
// a command or a flag.
func TestFlagsDoc(t *testing.T) {
	golden.Check(t, flagsDocPath, renderFlagsDoc(t), "go test ./cmd/evictd -run TestFlagsDoc -update")
}

func renderFlagsDoc(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# evictd commands and flags\n\n")
	b.WriteString("<!-- Generated from the commands' flag sets by `go test ./cmd/evictd -run TestFlagsDoc -update`; a test fails when this file and the code differ. -->\n\n")
	b.WriteString("Every command of `evictd` and its flags, as `evictd COMMAND --help` prints them: the\n" +
		"type (`bool` is a switch: `--flag` turns it on, `--flag=false` off), the default where it is\n" +
		"not the type's zero value, and the help. Flags are written `--flag=value` or `--flag value`;\n" +
		"one dash is for the one-letter shorthands. Exit codes: 0 success; 2 bad usage, flags or\n" +
		"configuration (one line on stderr names the bad value); 1 failure at run time. The file\n" +
		"`--config` reads is described in [config.md](config.md).\n\n")
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = fmt.Sprintf("[%s](#evictd-%s)", c.name, c.name)
	}
	b.WriteString("Commands: " + strings.Join(names, ", ") + ".\n")
	for _, c := range commands {
		guide, ok := guides[c.name]
		if !ok {
			t.Errorf("command %s has no entry in guides", c.name)
		}
		fmt.Fprintf(&b, "\n## evictd %s\n\n```text\n%s\n```\n", c.name, c.synopsis)
		if guide != "" {
			fmt.Fprintf(&b, "\nWhat it is for: %s.\n", guide)
		}
		if c.flags == nil {
			b.WriteString("\nNo flags.\n")
			continue
		}
		for _, s := range c.flags() {
			if s.title != "" {
				fmt.Fprintf(&b, "\n### %s\n", s.title)
			}
			b.WriteString("\n| Flag | Type | Default | Help |\n|---|---|---|---|\n")
			s.fs.VisitAll(func(fl *pflag.Flag) {
				if fl.Hidden {
					return // --help does not print it either
				}
				typ, def, help := flagColumns(t, fl)
				name := "`--" + fl.Name + "`"
				if fl.Shorthand != "" {
					name = "`-" + fl.Shorthand + "`, " + name
				}
				if def != "" {
					def = "`" + def + "`"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, typ, def, cell(help))
			})
		}
	}
	return b.Bytes()
}

// flagColumns is a flag's type, default and help as --help prints them:
// pflag's own line for the flag alone, taken apart, so that the type name,
// which defaults it leaves out and how it quotes them are the binary's.
func flagColumns(t *testing.T, fl *pflag.Flag) (typ, def, help string) {
	t.Helper()
	one := pflag.NewFlagSet("", pflag.ContinueOnError)
	one.AddFlag(fl)
	line := strings.TrimSuffix(one.FlagUsagesWrapped(0), "\n")
	// The line is "  -s, --name type" then three spaces, then the help and
	// " (default ...)".
	left, rest, ok := strings.Cut(strings.TrimLeft(line, " "), "   ")
	_, usage := pflag.UnquoteUsage(fl)
	tail, found := strings.CutPrefix(strings.TrimLeft(rest, " "), usage)
	if !ok || !found {
		t.Fatalf("--%s: cannot read its help line %q", fl.Name, line)
	}
	typ = strings.TrimSpace(strings.TrimPrefix(left[strings.Index(left, "--"+fl.Name):], "--"+fl.Name))
	if typ == "" {
		typ = fl.Value.Type()
	}
	if tail != "" {
		d, ok := strings.CutPrefix(tail, " (default ")
		if !ok || !strings.HasSuffix(d, ")") {
			t.Fatalf("--%s: help line %q ends in %q, not a default", fl.Name, line, tail)
		}
		def = strings.TrimSuffix(d, ")")
	}
	return typ, def, usage
}

// cell escapes text for a markdown table cell: "|" would end the cell, "<"
// open an HTML tag (SIGNAL<none ... >), "*" and "~" start emphasis.
var cell = strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", `\<`, "*", `\*`, "~", `\~`, "`", "\\`").Replace
