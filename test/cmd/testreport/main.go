// SPDX-License-Identifier: Apache-2.0

// Command testreport reads `go test -json` on standard input and tells a CI log
// what happened: the tests' text as `go test -v` prints it (all of it, or with
// --quiet only the packages' verdicts, failures and skips), the compiler's and
// vet's output of a package that did not build, and a last line
// "N passed, N failed[, N skipped]" counting top-level tests. A package that
// fails without a failing test (a build error, a panic, a timeout) counts as
// one failed, and so does a build failure no package's verdict reported. With
// --ci, a skip outside the --allow-skip packages counts as a failure: in CI a
// test that cannot run has failed.
//
// --expect-run PATTERN takes a stage's go test -run pattern when it lists
// test names (TestA|TestB, ^(TestA|TestB)$): each name that no top-level test
// ran under counts as one failure and is named, so a test renamed or moved
// away fails its stage instead of leaving it to pass with fewer tests.
//
// A top-level test that started and got no verdict (its test binary exited,
// panicked, timed out or was killed while it, or one of its subtests, ran)
// counts as failed: "started, never finished", with its last output lines.
// go tool test2json run on a test binary, as hack/test.sh's e2e workers run
// it, reports such a crash as a failure of the innermost subtest only, and
// no package verdict at all.
//
// --exits FILE takes the exit status of each test binary run a stream holds,
// one "PACKAGE TEST STATUS" a line (hack/test.sh's e2e workers write it): a
// run that exited non-zero without a failure of its test in the stream
// counts as one failure, so how a run ended is part of the result.
//
// --counts FILE writes "passed failed skipped" there too, for hack/test.sh.
//
// Before the last line comes a recap of each failed top-level test: the last
// recapLines messages its test files printed (lines that start with
// "name_test.go:N:"). A failing e2e test prints its control plane's logs
// after its own messages, and a CI log shown only around its "--- FAIL" line
// would otherwise show those and not why the test failed.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, and the
// go command's build events: build-output and build-fail, which carry
// ImportPath instead of Package).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	ImportPath  string
	FailedBuild string
}

type options struct {
	quiet      bool
	ci         bool
	allowSkip  []string
	countsFile string
	exitsFile  string
	// expect lists the top-level tests that must each have run.
	expect []string
	// exits are the test binary runs' exit statuses (--exits).
	exits []exitStatus
}

// exitStatus is how one test binary run ended: the package and the test
// it ran, and its exit status.
type exitStatus struct {
	pkg, test string
	status    int
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run is the command: its flags, environment and streams as arguments, its
// exit status as the result (0 all passed, 1 a failure, 2 a usage or I/O
// error).
func run(args []string, getenv func(string) string, in io.Reader, out, errOut io.Writer) int {
	opts, err := parseFlags(args, getenv, errOut)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(errOut, "testreport:", err)
		}
		return 2
	}
	if opts.exitsFile != "" {
		b, err := os.ReadFile(opts.exitsFile)
		if err != nil {
			fmt.Fprintln(errOut, "testreport:", err)
			return 2
		}
		if opts.exits, err = parseExits(opts.exitsFile, string(b)); err != nil {
			fmt.Fprintln(errOut, "testreport:", err)
			return 2
		}
	}
	c, err := report(in, out, opts)
	if err != nil {
		fmt.Fprintln(errOut, "testreport:", err)
		return 2
	}
	if opts.countsFile != "" {
		if err := os.WriteFile(opts.countsFile, []byte(fmt.Sprintf("%d %d %d\n", c.passed, c.failed, c.skipped)), 0o644); err != nil {
			fmt.Fprintln(errOut, "testreport:", err)
			return 2
		}
	}
	if c.failed > 0 {
		return 1
	}
	return 0
}

func parseFlags(args []string, getenv func(string) string, errOut io.Writer) (options, error) {
	var opts options
	var allow, expect string
	fs := flag.NewFlagSet("testreport", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.BoolVar(&opts.quiet, "quiet", false, "print only packages' verdicts, failures and skips, not every test's output")
	fs.BoolVar(&opts.ci, "ci", getenv("CI") == "true", "count a skip as a failure (default: CI=true)")
	fs.StringVar(&allow, "allow-skip", "", "comma-separated package import paths whose skips are allowed under --ci (benchmarks asked for by name)")
	fs.StringVar(&opts.countsFile, "counts", "", "also write \"passed failed skipped\" to this file")
	fs.StringVar(&opts.exitsFile, "exits", "", "a file of \"PACKAGE TEST STATUS\" lines, the exit status of each test binary run in the stream: a non-zero status without a failure of that test counts as one")
	fs.StringVar(&expect, "expect-run", "", "the stage's go test -run pattern, when it lists test names (TestA|TestB or ^(TestA|TestB)$): each name no top-level test ran under counts as a failure")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected arguments %q: go test -json comes on standard input", fs.Args())
	}
	for _, p := range strings.Split(allow, ",") {
		if p = strings.TrimSpace(p); p != "" {
			opts.allowSkip = append(opts.allowSkip, p)
		}
	}
	if expect != "" {
		names, err := expectedNames(expect)
		if err != nil {
			return opts, err
		}
		opts.expect = names
	}
	return opts, nil
}

// parseExits reads --exits: "PACKAGE TEST STATUS" a line, blank lines
// ignored.
func parseExits(file, text string) ([]exitStatus, error) {
	var exits []exitStatus
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		st, err := strconv.Atoi(f[len(f)-1])
		if len(f) != 3 || err != nil {
			return nil, fmt.Errorf("--exits %s line %d: %q: want \"PACKAGE TEST STATUS\"", file, i+1, line)
		}
		exits = append(exits, exitStatus{pkg: f[0], test: f[1], status: st})
	}
	return exits, nil
}

var testName = regexp.MustCompile(`^[\pL_][\pL\pN_]*$`)

// expectedNames lists the test names of a -run pattern that is an
// alternation of names: TestA|TestB, ^(TestA|TestB)$, ^TestA$|^TestB$,
// (?:TestA|TestB), each alternative anchored or not, in parentheses or not.
// Anything else (a wildcard, a class, a subtest's /) is an error: the
// pattern does not name its tests, so what ran cannot be checked by name.
func expectedNames(pattern string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	var walk func(s string) error
	walk = func(s string) error {
		s = strings.TrimSuffix(strings.TrimPrefix(s, "^"), "$")
		if inner, ok := enclosed(s); ok {
			return walk(inner)
		}
		alts := splitTop(s)
		if len(alts) > 1 {
			for _, a := range alts {
				if err := walk(a); err != nil {
					return err
				}
			}
			return nil
		}
		if !testName.MatchString(s) {
			return fmt.Errorf("--expect-run %q: %q is not a test name; the pattern must list names, as TestA|TestB or ^(TestA|TestB)$", pattern, s)
		}
		if !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
		return nil
	}
	if err := walk(pattern); err != nil {
		return nil, err
	}
	return names, nil
}

// enclosed is s without the parentheses around all of it ("(a|b)", "(?:a|b)").
func enclosed(s string) (string, bool) {
	if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
		return "", false
	}
	depth := 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 && i != len(s)-1 {
				return "", false // "(a)|(b)": the first group ends early
			}
		}
	}
	return strings.TrimPrefix(s[1:len(s)-1], "?:"), true
}

// splitTop splits s at the | outside parentheses.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

type counts struct{ passed, failed, skipped int }

// pkgState gathers one package's events: its tests' output is held back in
// --quiet mode until the test's verdict says whether it is worth printing.
type pkgState struct {
	// testFailed: a test of the package's current run failed, so a failing
	// package verdict is that test's and no failure of its own. A package
	// verdict ends the run: the e2e stage's stream holds many runs of one
	// package, one for each test.
	testFailed bool
	// running are the top-level tests of the current run that started and
	// have no verdict yet; tail holds each one's last recapLines output
	// lines, its subtests' included, for the recap of one that never
	// finishes.
	running map[string]bool
	tail    map[string][]string
	output  map[string]*strings.Builder // by test name; "" is the package's own
	// messages holds each running top-level test's last recapLines
	// messages, for the recap of the failed ones.
	messages map[string][]string
}

// recapLines is how many of a failed test's own messages the recap repeats.
const recapLines = 12

// testMessage matches the first line of a message a test file printed
// (t.Log, t.Error, t.Fatal), as go test -v indents it.
var testMessage = regexp.MustCompile(`^\s+[\w.-]+_test\.go:\d+: `)

// recap is one failed test's messages, for the recap.
type recap struct {
	test     string
	messages []string
	// unfinished: the test started and got no verdict; messages are then
	// its last output lines.
	unfinished bool
}

// keepTail keeps line among test's last recapLines output lines.
func (ps *pkgState) keepTail(test, line string) {
	m := append(ps.tail[test], strings.TrimRight(line, "\n"))
	if len(m) > recapLines {
		m = m[len(m)-recapLines:]
	}
	ps.tail[test] = m
}

// unfinished counts each test of the package's current run that started
// and got no verdict as failed, and ends the run. In --quiet mode their
// held output is printed, as a failed test's is.
func (ps *pkgState) unfinished(pkg string, out io.Writer, quiet bool, c *counts, recaps *[]recap, outcome map[string]string) {
	names := make([]string, 0, len(ps.running))
	for name := range ps.running {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if quiet {
			printHeld(out, ps, name)
			delete(ps.output, name)
		}
		c.failed++
		ps.testFailed = true
		outcome[pkg+" "+name] = "unfinished"
		*recaps = append(*recaps, recap{test: pkg + " " + name, messages: ps.tail[name], unfinished: true})
		delete(ps.running, name)
		delete(ps.tail, name)
	}
}

// remember keeps line among test's last recapLines messages when it is one.
func (ps *pkgState) remember(test, line string) {
	if !testMessage.MatchString(line) {
		return
	}
	m := append(ps.messages[test], strings.TrimRight(line, "\n"))
	if len(m) > recapLines {
		m = m[len(m)-recapLines:]
	}
	ps.messages[test] = m
}

// report reads go test -json from in, prints it to out as it goes and
// returns the counts; it touches nothing else.
func report(in io.Reader, out io.Writer, opts options) (counts, error) {
	var c counts
	pkgs := map[string]*pkgState{}
	var skips []string
	var recaps []recap
	ran := map[string]bool{}       // top-level tests that got a run event
	outcome := map[string]string{} // "PACKAGE TEST": pass, fail, skip or unfinished
	var buildFailed []string       // import paths, in order
	reported := map[string]bool{}  // build failures a package's verdict named
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Older go commands print build errors as plain text.
			fmt.Fprintln(out, string(line))
			continue
		}
		switch e.Action {
		case "build-output":
			// The compiler's and vet's messages: a failure's reason, so
			// printed in --quiet mode too.
			fmt.Fprint(out, e.Output)
			continue
		case "build-fail":
			buildFailed = append(buildFailed, e.ImportPath)
			continue
		}
		ps := pkgs[e.Package]
		if ps == nil {
			ps = &pkgState{output: map[string]*strings.Builder{}, messages: map[string][]string{},
				running: map[string]bool{}, tail: map[string][]string{}}
			pkgs[e.Package] = ps
		}
		topLevel := e.Test != "" && !strings.Contains(e.Test, "/")
		switch e.Action {
		case "run":
			if topLevel {
				ran[e.Test] = true
				ps.running[e.Test] = true
			}
		case "output":
			key := e.Test
			if i := strings.IndexByte(key, '/'); i >= 0 {
				key = key[:i]
			}
			if key != "" {
				ps.remember(key, e.Output)
				if ps.running[key] {
					ps.keepTail(key, e.Output)
				}
			}
			if !opts.quiet {
				fmt.Fprint(out, e.Output)
				continue
			}
			b := ps.output[key]
			if b == nil {
				b = &strings.Builder{}
				ps.output[key] = b
			}
			b.WriteString(e.Output)
		case "pass", "fail", "skip":
			if e.Action == "skip" && e.Test != "" {
				skips = append(skips, e.Package+" "+e.Test)
			}
			if e.Test == "" {
				// The package's verdict.
				if e.FailedBuild != "" {
					reported[e.FailedBuild] = true
				}
				ps.unfinished(e.Package, out, opts.quiet, &c, &recaps, outcome)
				if e.Action == "fail" && !ps.testFailed {
					c.failed++ // failed without a failing test: build error, panic in init, TestMain
				}
				if opts.quiet {
					if e.Action == "fail" && !ps.testFailed {
						printHeld(out, ps, "")
					}
					verdict := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "?   "}[e.Action]
					fmt.Fprintf(out, "%s\t%s\t%.3fs\n", verdict, e.Package, e.Elapsed)
				}
				ps.testFailed = false
				continue
			}
			if e.Action == "fail" {
				ps.testFailed = true
			}
			if opts.quiet && (e.Action != "pass") && topLevel {
				printHeld(out, ps, e.Test)
			}
			if !topLevel && e.Action == "skip" && opts.ci && !allowed(opts.allowSkip, e.Package) {
				c.failed++ // a skipped subtest fails CI as a skipped test does
			}
			if topLevel {
				delete(ps.running, e.Test)
				delete(ps.tail, e.Test)
				outcome[e.Package+" "+e.Test] = e.Action
				delete(ps.output, e.Test)
				if e.Action == "fail" {
					recaps = append(recaps, recap{test: e.Package + " " + e.Test, messages: ps.messages[e.Test]})
				}
				delete(ps.messages, e.Test)
				switch {
				case e.Action == "pass":
					c.passed++
				case e.Action == "fail":
					c.failed++
				case opts.ci && !allowed(opts.allowSkip, e.Package):
					c.failed++
				default:
					c.skipped++
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reading go test -json: %w", err)
	}
	// The stream ended with tests running and no package verdict after
	// them: a test binary run through test2json alone that exited or was
	// killed inside a test.
	pkgNames := make([]string, 0, len(pkgs))
	for p := range pkgs {
		pkgNames = append(pkgNames, p)
	}
	sort.Strings(pkgNames)
	for _, p := range pkgNames {
		pkgs[p].unfinished(p, out, opts.quiet, &c, &recaps, outcome)
	}
	expected := map[string]bool{}
	for _, name := range opts.expect {
		expected[name] = true
	}
	for _, x := range opts.exits {
		if x.status == 0 {
			continue
		}
		switch o, seen := outcome[x.pkg+" "+x.test]; {
		case o == "fail" || o == "unfinished":
			// counted with the test
		case !seen && expected[x.test] && !ran[x.test]:
			// counted below as not run
		default:
			c.failed++
			fmt.Fprintf(out, "EXITED %s %s: its test binary exited with status %d, yet the test's verdict is %q\n", x.pkg, x.test, x.status, orNone(o))
		}
	}
	// A build failure no package's verdict followed (the stream cut short):
	// still one failure.
	for _, p := range buildFailed {
		if !reported[p] {
			reported[p] = true
			c.failed++
			fmt.Fprintf(out, "FAIL\t%s [build failed]\n", p)
		}
	}
	for _, s := range skips {
		pkg := s[:strings.IndexByte(s, ' ')]
		verdict := "skipped"
		if opts.ci && !allowed(opts.allowSkip, pkg) {
			verdict = "skipped, which fails under CI=true"
		}
		fmt.Fprintf(out, "SKIP %s: %s\n", s, verdict)
	}
	for _, name := range opts.expect {
		if !ran[name] {
			c.failed++
			fmt.Fprintf(out, "NOT RUN %s: the stage's -run pattern names it, but no test of that name ran (renamed, removed, or behind another build tag?)\n", name)
		}
	}
	for _, r := range recaps {
		if r.unfinished {
			fmt.Fprintf(out, "FAILED %s: started, never finished (its test binary exited, panicked, timed out or was killed inside it); its last output lines:\n", r.test)
			for _, m := range r.messages {
				fmt.Fprintln(out, m)
			}
			continue
		}
		fmt.Fprintf(out, "FAILED %s; its last messages:\n", r.test)
		for _, m := range r.messages {
			fmt.Fprintln(out, m)
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed", c.passed, c.failed)
	if c.skipped > 0 {
		fmt.Fprintf(out, ", %d skipped", c.skipped)
	}
	fmt.Fprintln(out)
	return c, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func printHeld(out io.Writer, ps *pkgState, test string) {
	if b := ps.output[test]; b != nil {
		fmt.Fprint(out, b.String())
	}
}

func allowed(pkgs []string, pkg string) bool {
	for _, p := range pkgs {
		if p == pkg {
			return true
		}
	}
	return false
}
