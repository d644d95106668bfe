// Package prereq decides what a test does when the host lacks something it
// needs (root, cgroups, built binaries): in CI (CI=true) that is a failure,
// anywhere else a skip, and the reason is named either way.
package prereq

import (
	"os"
	"testing"
)

// InCI reports whether CI=true.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require stops the test when err, a missing prerequisite, is not nil.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if InCI() {
		t.Fatalf("prerequisite missing (CI=true, so this fails instead of skipping): %v", err)
		return
	}
	t.Skipf("skipping: %v", err)
}
