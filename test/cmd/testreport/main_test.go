// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	pkgA  = "example.com/m/a"
	bench = "example.com/m/test/bench"
)

// stream is go test -json: one event a line.
func stream(t *testing.T, events ...event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// test is the events of one test: run, an output line, its verdict.
func test(pkg, name, verdict string) []event {
	return []event{
		{Action: "run", Package: pkg, Test: name},
		{Action: "output", Package: pkg, Test: name, Output: "=== RUN   " + name + "\n"},
		{Action: "output", Package: pkg, Test: name, Output: "    " + name + " says hello\n"},
		{Action: "output", Package: pkg, Test: name, Output: "--- " + strings.ToUpper(verdict) + ": " + name + " (0.00s)\n"},
		{Action: verdict, Package: pkg, Test: name},
	}
}

func join(parts ...[]event) []event {
	var all []event
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func pkgVerdict(pkg, verdict string) []event {
	return []event{{Action: "output", Package: pkg, Output: strings.ToUpper(verdict) + "\t" + pkg + "\n"}, {Action: verdict, Package: pkg}}
}

// runReport runs the command on in with args and the environment env.
func runReport(t *testing.T, in string, env map[string]string, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e strings.Builder
	code = run(args, func(k string) string { return env[k] }, strings.NewReader(in), &o, &e)
	return code, o.String(), e.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestCountsPassAndFail(t *testing.T) {
	in := stream(t, join(
		test(pkgA, "TestOK", "pass"),
		test(pkgA, "TestBad", "fail"),
		[]event{{Action: "run", Package: pkgA, Test: "TestOK2"}},
		test(pkgA, "TestOK2/sub", "pass"), // subtests are not counted
		[]event{{Action: "pass", Package: pkgA, Test: "TestOK2"}},
		pkgVerdict(pkgA, "fail"), // the failing test's: not a second failure
	)...)
	code, out, _ := runReport(t, in, nil)
	if got, want := lastLine(out), "2 passed, 1 failed"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.Contains(out, "TestBad says hello") || !strings.Contains(out, "TestOK says hello") {
		t.Errorf("without --quiet every test's output is printed; got\n%s", out)
	}

	code, out, _ = runReport(t, stream(t, join(test(pkgA, "TestOK", "pass"), pkgVerdict(pkgA, "pass"))...), nil)
	if code != 0 || lastLine(out) != "1 passed, 0 failed" {
		t.Errorf("all passing: status %d, last line %q; want 0, \"1 passed, 0 failed\"", code, lastLine(out))
	}
}

// A package that fails with no failing test (a panic in init, a timeout,
// TestMain's exit) counts as one failure.
func TestPackageFailureWithoutAFailingTest(t *testing.T) {
	in := stream(t, join(test(pkgA, "TestOK", "pass"),
		[]event{{Action: "output", Package: pkgA, Output: "panic: boom\n"}}, pkgVerdict(pkgA, "fail"))...)
	code, out, _ := runReport(t, in, nil, "--quiet")
	if code != 1 || lastLine(out) != "1 passed, 1 failed" {
		t.Errorf("status %d, last line %q; want 1, \"1 passed, 1 failed\"", code, lastLine(out))
	}
	if !strings.Contains(out, "panic: boom") {
		t.Errorf("--quiet must print a failed package's own output; got\n%s", out)
	}
}

// --quiet prints what failed or skipped and the verdicts, not what passed.
func TestQuiet(t *testing.T) {
	in := stream(t, join(test(pkgA, "TestOK", "pass"), test(pkgA, "TestBad", "fail"), pkgVerdict(pkgA, "fail"))...)
	_, out, _ := runReport(t, in, nil, "--quiet")
	if strings.Contains(out, "TestOK says hello") {
		t.Errorf("--quiet printed a passing test's output:\n%s", out)
	}
	for _, want := range []string{"TestBad says hello", "FAIL\t" + pkgA + "\t"} {
		if !strings.Contains(out, want) {
			t.Errorf("--quiet output lacks %q:\n%s", want, out)
		}
	}
}

// Under CI=true a skip fails, outside the packages --allow-skip names (the
// benchmarks asked for by name); without CI=true it is a skip.
func TestSkips(t *testing.T) {
	skipped := stream(t, join(
		test(pkgA, "TestOK", "pass"),
		test(pkgA, "TestNeedsRoot", "skip"),
		pkgVerdict(pkgA, "pass"),
	)...)
	skippedSub := stream(t, join(
		[]event{{Action: "run", Package: pkgA, Test: "TestTable"}},
		test(pkgA, "TestTable/case", "skip"),
		[]event{{Action: "pass", Package: pkgA, Test: "TestTable"}},
		pkgVerdict(pkgA, "pass"),
	)...)
	benchSkipped := stream(t, join(test(bench, "TestBenchRace", "skip"), pkgVerdict(bench, "pass"))...)
	for _, tc := range []struct {
		name     string
		in       string
		env      map[string]string
		args     []string
		wantLast string
		wantCode int
		wantSkip string // the SKIP line
	}{
		{"not in CI", skipped, nil, nil, "1 passed, 0 failed, 1 skipped", 0,
			"SKIP " + pkgA + " TestNeedsRoot: skipped"},
		{"CI=false", skipped, map[string]string{"CI": "false"}, nil, "1 passed, 0 failed, 1 skipped", 0,
			"SKIP " + pkgA + " TestNeedsRoot: skipped"},
		{"CI=true", skipped, map[string]string{"CI": "true"}, nil, "1 passed, 1 failed", 1,
			"SKIP " + pkgA + " TestNeedsRoot: skipped, which fails under CI=true"},
		{"--ci", skipped, nil, []string{"--ci"}, "1 passed, 1 failed", 1,
			"SKIP " + pkgA + " TestNeedsRoot: skipped, which fails under CI=true"},
		{"CI=true, --ci=false", skipped, map[string]string{"CI": "true"}, []string{"--ci=false"}, "1 passed, 0 failed, 1 skipped", 0,
			"SKIP " + pkgA + " TestNeedsRoot: skipped"},
		{"a subtest under CI=true", skippedSub, map[string]string{"CI": "true"}, nil, "1 passed, 1 failed", 1,
			"SKIP " + pkgA + " TestTable/case: skipped, which fails under CI=true"},
		{"a benchmark under CI=true", benchSkipped, map[string]string{"CI": "true"}, []string{"--allow-skip", "example.com/x, " + bench},
			"0 passed, 0 failed, 1 skipped", 0, "SKIP " + bench + " TestBenchRace: skipped"},
		{"another package's allowance", skipped, map[string]string{"CI": "true"}, []string{"--allow-skip", bench},
			"1 passed, 1 failed", 1, "SKIP " + pkgA + " TestNeedsRoot: skipped, which fails under CI=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, _ := runReport(t, tc.in, tc.env, tc.args...)
			if got := lastLine(out); got != tc.wantLast || code != tc.wantCode {
				t.Errorf("status %d, last line %q; want %d, %q", code, got, tc.wantCode, tc.wantLast)
			}
			if !strings.Contains(out+"\n", tc.wantSkip+"\n") {
				t.Errorf("output lacks the line %q:\n%s", tc.wantSkip, out)
			}
		})
	}
}

// goBuildFailure is what go test -json ./... printed (go1.26) for a module
// with a compile error in package b (which a imports), one in d's test file
// and a vet error in c's test.
const goBuildFailure = `{"ImportPath":"example.com/x/b","Action":"build-output","Output":"# example.com/x/b\n"}
{"ImportPath":"example.com/x/b","Action":"build-output","Output":"b/b.go:3:23: cannot use \"x\" (untyped string constant) as int value in return statement\n"}
{"ImportPath":"example.com/x/b","Action":"build-fail"}
{"ImportPath":"example.com/x/d [example.com/x/d.test]","Action":"build-output","Output":"# example.com/x/d [example.com/x/d.test]\n"}
{"ImportPath":"example.com/x/d [example.com/x/d.test]","Action":"build-output","Output":"d/d_test.go:5:40: cannot use \"s\" (untyped string constant) as int value in variable declaration\n"}
{"ImportPath":"example.com/x/d [example.com/x/d.test]","Action":"build-fail"}
{"Time":"2026-11-25T05:56:03.2492785Z","Action":"start","Package":"example.com/x/a"}
{"Time":"2026-11-25T05:56:03.249376626Z","Action":"output","Package":"example.com/x/a","Output":"FAIL\texample.com/x/a [build failed]\n"}
{"Time":"2026-11-25T05:56:03.249383166Z","Action":"fail","Package":"example.com/x/a","Elapsed":0,"FailedBuild":"example.com/x/b"}
{"Time":"2026-11-25T05:56:03.2495269Z","Action":"start","Package":"example.com/x/b"}
{"Time":"2026-11-25T05:56:03.249534291Z","Action":"output","Package":"example.com/x/b","Output":"FAIL\texample.com/x/b [build failed]\n"}
{"Time":"2026-11-25T05:56:03.249539118Z","Action":"fail","Package":"example.com/x/b","Elapsed":0,"FailedBuild":"example.com/x/b"}
{"ImportPath":"example.com/x/c [example.com/x/c.test]","Action":"build-output","Output":"# example.com/x/c\n"}
{"ImportPath":"example.com/x/c [example.com/x/c.test]","Action":"build-output","Output":"# [example.com/x/c]\n"}
{"ImportPath":"example.com/x/c [example.com/x/c.test]","Action":"build-output","Output":"c/c_test.go:5:40: fmt.Printf format %d has arg \"s\" of wrong type string\n"}
{"ImportPath":"example.com/x/c [example.com/x/c.test]","Action":"build-fail"}
{"Time":"2026-11-25T05:56:03.262466228Z","Action":"start","Package":"example.com/x/c"}
{"Time":"2026-11-25T05:56:03.262481691Z","Action":"output","Package":"example.com/x/c","Output":"FAIL\texample.com/x/c [build failed]\n"}
{"Time":"2026-11-25T05:56:03.26248771Z","Action":"fail","Package":"example.com/x/c","Elapsed":0,"FailedBuild":"example.com/x/c [example.com/x/c.test]"}
{"Time":"2026-11-25T05:56:03.262515472Z","Action":"start","Package":"example.com/x/d"}
{"Time":"2026-11-25T05:56:03.262528842Z","Action":"output","Package":"example.com/x/d","Output":"FAIL\texample.com/x/d [build failed]\n"}
{"Time":"2026-11-25T05:56:03.26253448Z","Action":"fail","Package":"example.com/x/d","Elapsed":0,"FailedBuild":"example.com/x/d [example.com/x/d.test]"}
`

// The compiler's and vet's messages reach the log, --quiet or not, and each
// package that did not build counts as one failure, once.
func TestBuildFailures(t *testing.T) {
	for _, args := range [][]string{nil, {"--quiet"}} {
		code, out, _ := runReport(t, goBuildFailure, nil, args...)
		for _, want := range []string{
			"# example.com/x/b\n",
			`b/b.go:3:23: cannot use "x" (untyped string constant) as int value in return statement` + "\n",
			`d/d_test.go:5:40: cannot use "s" (untyped string constant) as int value in variable declaration` + "\n",
			`c/c_test.go:5:40: fmt.Printf format %d has arg "s" of wrong type string` + "\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks the build output %q:\n%s", args, want, out)
			}
		}
		if code != 1 || lastLine(out) != "0 passed, 4 failed" {
			t.Errorf("%v: status %d, last line %q; want 1, \"0 passed, 4 failed\" (a, b, c, d)", args, code, lastLine(out))
		}
	}
}

// A build failure that no package verdict followed (go test killed, the
// stream cut) still fails.
func TestBuildFailureWithoutAVerdict(t *testing.T) {
	in := `{"ImportPath":"example.com/x/d [example.com/x/d.test]","Action":"build-output","Output":"d/d_test.go:5:40: undefined: x\n"}
{"ImportPath":"example.com/x/d [example.com/x/d.test]","Action":"build-fail"}
`
	code, out, _ := runReport(t, in, nil, "--quiet")
	if code != 1 || lastLine(out) != "0 passed, 1 failed" {
		t.Errorf("status %d, last line %q; want 1, \"0 passed, 1 failed\"", code, lastLine(out))
	}
	for _, want := range []string{"d/d_test.go:5:40: undefined: x\n", "FAIL\texample.com/x/d [example.com/x/d.test] [build failed]\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestExpectedNames(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"TestA", []string{"TestA"}},
		{"TestA|TestB", []string{"TestA", "TestB"}},
		{"^(TestA|TestB)$", []string{"TestA", "TestB"}},
		{"^(TestNodeDedicatedImageFs|TestNodeSwapRanking|TestNodeStallThrash|TestNodeBusyNoStall)$",
			[]string{"TestNodeDedicatedImageFs", "TestNodeSwapRanking", "TestNodeStallThrash", "TestNodeBusyNoStall"}},
		{"^TestA$|^TestB$", []string{"TestA", "TestB"}},
		{"(?:TestA|TestB)", []string{"TestA", "TestB"}},
		{"^((TestA)|(TestB|TestC))$", []string{"TestA", "TestB", "TestC"}},
		{"(TestA)|(TestB)", []string{"TestA", "TestB"}},
		{"^(TestA|TestA)$", []string{"TestA"}},
	} {
		got, err := expectedNames(tc.pattern)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("expectedNames(%q) = %q, %v; want %q", tc.pattern, got, err, tc.want)
		}
	}
	for _, bad := range []string{"TestNode.*", "Test[AB]", "TestA|", "^()$", "TestA/sub", "(TestA|TestB", "Test A"} {
		if got, err := expectedNames(bad); err == nil {
			t.Errorf("expectedNames(%q) = %q, want an error: it does not list names", bad, got)
		}
	}
}

// --expect-run: a name of the stage's -run pattern that no top-level test
// ran under fails the stage, named; one that ran (and passed, failed or
// skipped) is not reported.
func TestExpectRun(t *testing.T) {
	in := stream(t, join(
		test(pkgA, "TestNodeA", "pass"),
		test(pkgA, "TestNodeC", "skip"),
		test(pkgA, "TestNodeD/sub", "pass"), // a subtest does not stand for TestNodeD
		pkgVerdict(pkgA, "pass"),
	)...)
	code, out, _ := runReport(t, in, nil, "--expect-run", "^(TestNodeA|TestNodeB|TestNodeC|TestNodeD)$")
	if code != 1 || lastLine(out) != "1 passed, 2 failed, 1 skipped" {
		t.Errorf("status %d, last line %q; want 1, \"1 passed, 2 failed, 1 skipped\"", code, lastLine(out))
	}
	for _, name := range []string{"TestNodeB", "TestNodeD"} {
		if !strings.Contains(out, "NOT RUN "+name+": ") {
			t.Errorf("output does not name %s as not run:\n%s", name, out)
		}
	}
	for _, name := range []string{"TestNodeA", "TestNodeC"} {
		if strings.Contains(out, "NOT RUN "+name) {
			t.Errorf("%s ran, yet is reported as not run:\n%s", name, out)
		}
	}

	// No test at all: the stage that passed with 0 tests.
	code, out, _ = runReport(t, stream(t, pkgVerdict(pkgA, "pass")...), nil, "--quiet", "--expect-run", "TestNodeA|TestNodeB")
	if code != 1 || lastLine(out) != "0 passed, 2 failed" || !strings.Contains(out, "NOT RUN TestNodeA: ") {
		t.Errorf("no test ran: status %d, output\n%s\nwant 1 and both names reported", code, out)
	}

	// All of them ran: nothing to say.
	code, out, _ = runReport(t, in, nil, "--expect-run", "TestNodeA|TestNodeC")
	if code != 0 || strings.Contains(out, "NOT RUN") {
		t.Errorf("all named tests ran: status %d, output\n%s", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--expect-run", "TestNode.*"},
		{"--no-such-flag"},
		{"extra"},
	} {
		code, _, errOut := runReport(t, "", nil, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: status %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
}

func TestCountsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "counts")
	in := stream(t, join(test(pkgA, "TestOK", "pass"), test(pkgA, "TestBad", "fail"), test(pkgA, "TestSkip", "skip"), pkgVerdict(pkgA, "fail"))...)
	if code, _, errOut := runReport(t, in, nil, "--counts", file); code != 1 {
		t.Fatalf("status %d (%s), want 1", code, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "1 1 1\n"; got != want {
		t.Errorf("counts file %q, want %q", got, want)
	}
}

// Plain text lines (an older go command's build errors) pass through.
func TestPlainTextPassesThrough(t *testing.T) {
	in := "# example.com/m/a\na/a.go:1:1: expected 'package'\n" + stream(t, pkgVerdict(pkgA, "fail")...)
	_, out, _ := runReport(t, in, nil, "--quiet")
	if !strings.Contains(out, "a/a.go:1:1: expected 'package'\n") {
		t.Errorf("plain text lost:\n%s", out)
	}
}

// A failed test's own messages are repeated before the last line, past the
// control plane logs it printed after them; a passing test's are not.
func TestRecapOfAFailedTestsMessages(t *testing.T) {
	var bad []event
	bad = append(bad, event{Action: "run", Package: pkgA, Test: "TestBad"})
	for i := 0; i < recapLines+2; i++ {
		bad = append(bad, event{Action: "output", Package: pkgA, Test: "TestBad", Output: fmt.Sprintf("    bad_test.go:%d: message %d\n", 10+i, i)})
	}
	bad = append(bad,
		event{Action: "output", Package: pkgA, Test: "TestBad/sub", Output: "        bad_test.go:99: from the subtest\n"},
		event{Action: "output", Package: pkgA, Test: "TestBad", Output: "    logger.go:146: control plane says\n"},
		event{Action: "output", Package: pkgA, Test: "TestBad", Output: "        I1125 16:29:07.859088 shared_informer.go:531] synced\n"},
		event{Action: "output", Package: pkgA, Test: "TestBad", Output: "--- FAIL: TestBad (1.00s)\n"},
		event{Action: "fail", Package: pkgA, Test: "TestBad"})
	good := join(test(pkgA, "TestOK", "pass"))
	good = append(good[:2], append([]event{{Action: "output", Package: pkgA, Test: "TestOK", Output: "    ok_test.go:5: fine\n"}}, good[2:]...)...)
	for _, args := range [][]string{nil, {"--quiet"}} {
		_, out, _ := runReport(t, stream(t, join(good, bad, pkgVerdict(pkgA, "fail"))...), nil, args...)
		i := strings.Index(out, "FAILED "+pkgA+" TestBad; its last messages:\n")
		if i < 0 {
			t.Fatalf("%v: no recap of TestBad in\n%s", args, out)
		}
		got := out[i:]
		if !strings.Contains(got, "bad_test.go:99: from the subtest\n") || !strings.Contains(got, fmt.Sprintf("message %d\n", recapLines+1)) {
			t.Errorf("%v: the recap lacks the last messages:\n%s", args, got)
		}
		for _, not := range []string{"message 2\n", "logger.go", "shared_informer", "ok_test.go"} {
			if strings.Contains(got, not) {
				t.Errorf("%v: the recap holds %q:\n%s", args, not, got)
			}
		}
		if lastLine(out) != "1 passed, 1 failed" {
			t.Errorf("%v: last line %q", args, lastLine(out))
		}
	}
}
