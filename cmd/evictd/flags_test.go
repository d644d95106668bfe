// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/options"
)

// TestRunHelpReadsLikeAKubeComponent checks `evictd run --help` against the
// flag set itself: the sections in order, and every flag of each section
// under its title on a "--name type" line, with a type name and never
// pflag's "value" for a Value that names no type.
func TestRunHelpReadsLikeAKubeComponent(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runCmd(context.Background(), []string{"--help"}, &out, &errb); code != exitOK || errb.Len() > 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	help := out.String()
	f := newRunFlags()
	wantOrder := []string{options.SectionGeneric, options.SectionThresholds, options.SectionEviction, options.SectionObservation,
		options.SectionServing, options.SectionLogging, options.SectionGlobal}
	if got := f.sections.Names(); strings.Join(got, ",") != strings.Join(wantOrder, ",") {
		t.Fatalf("sections %v, want %v", got, wantOrder)
	}
	pos := -1
	for _, name := range wantOrder {
		title := "\n" + strings.ToUpper(name[:1]) + name[1:] + " flags:\n"
		at := strings.Index(help, title)
		if at < 0 || at < pos {
			t.Fatalf("help lacks %q after the previous section:\n%s", title, help)
		}
		pos = at
		end := len(help)
		if next := strings.Index(help[at+len(title):], " flags:\n"); next >= 0 {
			end = at + len(title) + next
		}
		body := help[at:end]
		n := 0
		f.sections.Section(name).VisitAll(func(fl *pflag.Flag) {
			n++
			typ := fl.Value.Type()
			if typ == "value" || typ == "" {
				t.Errorf("--%s has type %q", fl.Name, typ)
			}
			want := "--" + fl.Name + " " + helpTypeName(typ)
			if typ == "bool" {
				want = "--" + fl.Name + " "
			}
			if !strings.Contains(body, want) {
				t.Errorf("section %s lacks %q", name, want)
			}
		})
		if n == 0 {
			t.Errorf("section %s has no flags", name)
		}
	}
	if regexp.MustCompile(`--[a-z-]+ value\b`).MatchString(help) {
		t.Errorf("help names a flag's type \"value\":\n%s", help)
	}
	for _, want := range []string{"--eviction-hard mapStringString", "--eviction-max-pod-grace-period int32", "--housekeeping-interval duration", "-h, --help"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// helpTypeName is the name pflag prints for a type in help.
func helpTypeName(typ string) string {
	switch typ {
	case "int64":
		return "int"
	case "float64":
		return "float"
	}
	return typ
}

// The soft grace cap is defined once, in the eviction section, and documents
// the default the code has: the pod's own grace period.
func TestRunMaxPodGracePeriodIsOneFlag(t *testing.T) {
	f := newRunFlags()
	owners := 0
	for _, name := range f.sections.Names() {
		if fl := f.sections.Section(name).Lookup("eviction-max-pod-grace-period"); fl != nil {
			owners++
			if name != options.SectionEviction || fl.DefValue != "0" || !strings.Contains(fl.Usage, "its own terminationGracePeriodSeconds") {
				t.Errorf("in section %s, default %q, usage %q", name, fl.DefValue, fl.Usage)
			}
		}
	}
	if owners != 1 {
		t.Errorf("defined in %d sections, want 1", owners)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"run", "--version"}, {"run", "--node-name=n1", "--version"}} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), args, &out, &errb)
		if code != exitOK || !strings.HasPrefix(out.String(), "version:  "+version+"\n") || errb.Len() > 0 {
			t.Errorf("evictd %s: exit %d, stdout %q, stderr %q; want 0 and the version first", strings.Join(args, " "), code, out.String(), errb.String())
		}
		for _, line := range []string{"revision: ", "date:     ", "go:       go"} {
			if !strings.Contains(out.String(), "\n"+line) {
				t.Errorf("evictd %s: no %q line in %q", strings.Join(args, " "), line, out.String())
			}
		}
	}
}

func TestUnknownFlag(t *testing.T) {
	for _, cmd := range []string{"run", "observe", "rank", "explain", "cleanup"} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), []string{cmd, "--evction-hard=memory.available<1Gi"}, &out, &errb)
		want := "evictd " + cmd + ": unknown flag: --evction-hard (see \"evictd " + cmd + " --help\")\n"
		if code != exitUsage || errb.String() != want || out.Len() > 0 {
			t.Errorf("evictd %s --evction-hard: exit %d, stderr %q, stdout %q; want %d and %q", cmd, code, errb.String(), out.String(), exitUsage, want)
		}
	}
}

// Each subcommand's usage line, and the top-level usage, names every flag
// the subcommand has, found by walking its flag set; run's names
// --node-name and points to its help, whose sections list all the others.
func TestUsageLinesNameEveryFlag(t *testing.T) {
	for _, c := range commands {
		if !strings.Contains(usage, "\n  "+c.synopsis+"\n") {
			t.Errorf("top-level usage lacks %q", c.synopsis)
		}
		if c.name == "run" || c.flags == nil {
			continue
		}
		for _, s := range c.flags() {
			s.fs.VisitAll(func(fl *pflag.Flag) {
				if fl.Name == flagHelp {
					return
				}
				names := "--" + regexp.QuoteMeta(fl.Name)
				if fl.Shorthand != "" {
					names += "|-" + regexp.QuoteMeta(fl.Shorthand)
				}
				if !regexp.MustCompile(`[ \[](` + names + `)[ \]=]`).MatchString(c.synopsis + " ") {
					t.Errorf("%q does not name --%s", c.synopsis, fl.Name)
				}
			})
		}
	}
	if runSynopsis != "evictd run --node-name NODE [flags]" || !strings.HasPrefix(runUsage, "Usage: "+runSynopsis+"\n") {
		t.Errorf("run's usage line is missing")
	}
}

// dispatch runs every command of the table by its name, and no other.
func TestDispatchRunsEveryCommand(t *testing.T) {
	for _, c := range commands {
		args := []string{c.name, "--help"}
		if c.name == "version" {
			args = args[:1]
		}
		var out, errb bytes.Buffer
		if code := dispatch(context.Background(), args, &out, &errb); code != exitOK || out.Len() == 0 || errb.Len() > 0 {
			t.Errorf("evictd %s: exit %d, stdout %d bytes, stderr %q", strings.Join(args, " "), code, out.Len(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"obsreve"}, &out, &errb); code != exitUsage || !strings.HasPrefix(errb.String(), "evictd: unknown command \"obsreve\"\n") {
		t.Errorf("evictd obsreve: exit %d, stderr %q", code, errb.String())
	}
}
