// SPDX-License-Identifier: Apache-2.0

// Command testreport reads `go test -json` on standard input and tells a CI log
// what happened: the tests' text as `go test -v` prints it (all of it, or with
// --quiet only the packages' verdicts, failures and skips), and a last line
// "N passed, N failed[, N skipped]" counting top-level tests. A package that
// fails without a failing test (a build error, a panic, a timeout) counts as
// one failed. With --ci, a skip outside the --allow-skip packages counts as a
// failure: in CI a test that cannot run has failed.
//
// --counts FILE writes "passed failed skipped" there too, for hack/test.sh.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type options struct {
	quiet      bool
	ci         bool
	allowSkip  []string
	countsFile string
}

func main() {
	var opts options
	var allow string
	flag.BoolVar(&opts.quiet, "quiet", false, "print only packages' verdicts, failures and skips, not every test's output")
	flag.BoolVar(&opts.ci, "ci", os.Getenv("CI") == "true", "count a skip as a failure (default: CI=true)")
	flag.StringVar(&allow, "allow-skip", "", "comma-separated package import paths whose skips are allowed under --ci (benchmarks asked for by name)")
	flag.StringVar(&opts.countsFile, "counts", "", "also write \"passed failed skipped\" to this file")
	flag.Parse()
	for _, p := range strings.Split(allow, ",") {
		if p = strings.TrimSpace(p); p != "" {
			opts.allowSkip = append(opts.allowSkip, p)
		}
	}
	c, err := report(os.Stdin, os.Stdout, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if opts.countsFile != "" {
		if err := os.WriteFile(opts.countsFile, []byte(fmt.Sprintf("%d %d %d\n", c.passed, c.failed, c.skipped)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
	}
	if c.failed > 0 {
		os.Exit(1)
	}
}

type counts struct{ passed, failed, skipped int }

// pkgState gathers one package's events: its tests' output is held back in
// --quiet mode until the test's verdict says whether it is worth printing.
type pkgState struct {
	testFailed bool
	output     map[string]*strings.Builder // by test name; "" is the package's own
}

func report(in io.Reader, out io.Writer, opts options) (counts, error) {
	var c counts
	pkgs := map[string]*pkgState{}
	var skips []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// go test prints build errors as plain text before any JSON.
			fmt.Fprintln(out, string(line))
			continue
		}
		ps := pkgs[e.Package]
		if ps == nil {
			ps = &pkgState{output: map[string]*strings.Builder{}}
			pkgs[e.Package] = ps
		}
		topLevel := e.Test != "" && !strings.Contains(e.Test, "/")
		switch e.Action {
		case "output":
			if !opts.quiet {
				fmt.Fprint(out, e.Output)
				continue
			}
			key := e.Test
			if i := strings.IndexByte(key, '/'); i >= 0 {
				key = key[:i]
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
				if e.Action == "fail" && !ps.testFailed {
					c.failed++ // failed without a failing test: build error, panic or timeout
				}
				if opts.quiet {
					if e.Action == "fail" && !ps.testFailed {
						printHeld(out, ps, "")
					}
					verdict := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "?   "}[e.Action]
					fmt.Fprintf(out, "%s\t%s\t%.3fs\n", verdict, e.Package, e.Elapsed)
				}
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
				delete(ps.output, e.Test)
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
	for _, s := range skips {
		pkg := s[:strings.IndexByte(s, ' ')]
		verdict := "skipped"
		if opts.ci && !allowed(opts.allowSkip, pkg) {
			verdict = "skipped, which fails under CI=true"
		}
		fmt.Fprintf(out, "SKIP %s: %s\n", s, verdict)
	}
	fmt.Fprintf(out, "%d passed, %d failed", c.passed, c.failed)
	if c.skipped > 0 {
		fmt.Fprintf(out, ", %d skipped", c.skipped)
	}
	fmt.Fprintln(out)
	return c, nil
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
