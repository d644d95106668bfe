// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// crashStreams are the ways a test binary ends inside a subtest, as
// testdata/crash ends for its CRASH variable: a test that started and never
// finished must fail its stage whichever way, and whether its binary ran
// through go tool test2json alone (hack/test.sh's e2e workers) or under
// go test -json (every other stage).
var crashStreams = []struct{ crash, want string }{
	{"exit", "in the phase"},         // os.Exit inside the subtest
	{"panic", "a goroutine's panic"}, // a goroutine's panic
	{"timeout", "test timed out"},    // -test.timeout
	{"kill", "in the phase"},         // SIGKILL
}

// crashBinary builds testdata/crash's test binary.
func crashBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "crash.test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, ".")
	cmd.Dir = "testdata/crash"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/crash: %v\n%s", err, out)
	}
	return bin
}

// streamOf runs cmd with CRASH=crash and returns its standard output, the
// go test -json stream; the run's own failure is what the stream reports.
func streamOf(t *testing.T, cmd *exec.Cmd, crash string) string {
	t.Helper()
	cmd.Env = append(os.Environ(), "CRASH="+crash)
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(out)
}

func TestStartedNeverFinished(t *testing.T) {
	bin := crashBinary(t)
	for _, tc := range crashStreams {
		runners := map[string]func() *exec.Cmd{
			// As hack/test.sh's e2e worker runs a test.
			"test2json": func() *exec.Cmd {
				return exec.Command("go", "tool", "test2json", "-t", "-p", "example.com/crash", bin,
					"-test.v=test2json", "-test.paniconexit0", "-test.count=1", "-test.timeout=2s", "-test.run=^(TestOK|TestCrash)$")
			},
			// As every other stage runs its packages.
			"go test": func() *exec.Cmd {
				c := exec.Command("go", "test", "-json", "-count=1", "-timeout=2s", "-run=^(TestOK|TestCrash)$", ".")
				c.Dir = "testdata/crash"
				return c
			},
		}
		for runner, cmd := range runners {
			t.Run(tc.crash+" "+runner, func(t *testing.T) {
				in := streamOf(t, cmd(), tc.crash)
				code, out, _ := runReport(t, in, nil, "--quiet", "--expect-run", "^(TestOK|TestCrash)$")
				if got, want := lastLine(out), "1 passed, 1 failed"; code != 1 || got != want {
					t.Errorf("status %d, last line %q; want 1, %q. Stream:\n%s\nReport:\n%s", code, got, want, in, out)
				}
				if !strings.Contains(out, "FAILED example.com/crash TestCrash: started, never finished") {
					t.Errorf("the report does not name TestCrash as started and never finished:\n%s", out)
				}
				if !strings.Contains(out, tc.want) {
					t.Errorf("the report lacks the test's last output %q:\n%s", tc.want, out)
				}
			})
		}
	}
	t.Run("finished", func(t *testing.T) {
		in := streamOf(t, exec.Command("go", "tool", "test2json", "-t", "-p", "example.com/crash", bin, "-test.v=test2json", "-test.count=1"), "")
		if code, out, _ := runReport(t, in, nil, "--quiet"); code != 0 || lastLine(out) != "2 passed, 0 failed" {
			t.Errorf("status %d, last line %q; want 0, \"2 passed, 0 failed\"\n%s", code, lastLine(out), out)
		}
	})
}

// The e2e stage's stream holds one run of a package for each test: a crash
// in a later run counts though an earlier run of the package failed.
func TestStartedNeverFinishedAfterAFailedRun(t *testing.T) {
	in := stream(t, join(
		test(pkgA, "TestBad", "fail"), pkgVerdict(pkgA, "fail"),
		[]event{{Action: "run", Package: pkgA, Test: "TestCrash"}, {Action: "run", Package: pkgA, Test: "TestCrash/phase"},
			{Action: "output", Package: pkgA, Test: "TestCrash/phase", Output: "panic: boom\n"},
			{Action: "fail", Package: pkgA, Test: "TestCrash/phase"}},
	)...)
	if code, out, _ := runReport(t, in, nil); code != 1 || lastLine(out) != "0 passed, 2 failed" {
		t.Errorf("status %d, last line %q; want 1, \"0 passed, 2 failed\"\n%s", code, lastLine(out), out)
	}
}

// A run whose test binary exited non-zero counts as a failure when its
// stream shows none (the worker's exit status is part of the result).
func TestExitStatus(t *testing.T) {
	in := stream(t, join(test(pkgA, "TestOK", "pass"), test(pkgA, "TestBad", "fail"))...)
	cases := []struct {
		name, exits, last string
		code              int
	}{
		{"all zero", pkgA + " TestOK 0\n", "1 passed, 1 failed", 1},
		{"a failed test's", pkgA + " TestBad 1\n", "1 passed, 1 failed", 1},
		{"a passed test's", pkgA + " TestOK 137\n", "1 passed, 2 failed", 1},
		{"a test never seen", pkgA + " TestGone 2\n", "1 passed, 2 failed", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "exits")
			if err := os.WriteFile(f, []byte(tc.exits), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, _ := runReport(t, in, nil, "--exits", f)
			if code != tc.code || lastLine(out) != tc.last {
				t.Errorf("status %d, last line %q; want %d, %q\n%s", code, lastLine(out), tc.code, tc.last, out)
			}
		})
	}
	f := filepath.Join(t.TempDir(), "exits")
	if err := os.WriteFile(f, []byte(pkgA+" TestOK zero\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runReport(t, in, nil, "--exits", f); code != 2 || !strings.Contains(errOut, `"`+pkgA+` TestOK zero"`) {
		t.Errorf("a malformed --exits line: status %d, stderr %q; want 2 naming the line", code, errOut)
	}
}
