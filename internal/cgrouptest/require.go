// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Where this project's machines mount the hierarchies the tests use. The
// observer under test finds them from the host root, so the tests create
// their cgroups at the same, standard places.
const (
	MemoryRoot  = "/sys/fs/cgroup/memory"
	PidsRoot    = "/sys/fs/cgroup/pids"
	UnifiedRoot = "/sys/fs/cgroup/unified"
)

// InCI reports whether CI=true: CI machines must have everything the tests
// need, so a missing prerequisite there is a failure, not a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Need stops the test when ok is false because the machine lacks what: it is
// skipped naming what, or under CI=true it fails.
func Need(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("this test needs %s (CI=true, so this is a failure)", what)
		return
	}
	t.Skipf("skipped: needs %s", what)
}

// Require stops the test (see Need) unless it can create cgroups on the
// cgroup v1 memory controller at MemoryRoot.
func Require(t testing.TB) {
	t.Helper()
	ok, what := memoryV1(MemoryRoot, os.Geteuid())
	Need(t, ok, what)
}

// RequireUnified stops the test (see Need) unless it can create groups in
// the cgroup2 hierarchy at UnifiedRoot.
func RequireUnified(t testing.TB) {
	t.Helper()
	ok, what := unified(UnifiedRoot, os.Geteuid())
	Need(t, ok, what)
}

// HasPids reports whether a cgroup v1 hierarchy (one with a tasks file,
// which cgroup2 lacks) is mounted at PidsRoot. Tests use it where counting
// processes is an extra check, not the point, as the observer does.
func HasPids() bool {
	return exists(filepath.Join(PidsRoot, "cgroup.procs")) && exists(filepath.Join(PidsRoot, "tasks"))
}

// memoryV1 checks for a writable v1 memory controller at root. It looks for
// cgroup.event_control, which only v1 has: the thresholds under test are
// armed through it.
func memoryV1(root string, euid int) (bool, string) {
	switch {
	case euid != 0:
		return false, "root, to create cgroups"
	case !exists(filepath.Join(root, "cgroup.event_control")) || !exists(filepath.Join(root, "memory.usage_in_bytes")):
		return false, "a cgroup v1 memory controller at " + root
	case unix.Access(root, unix.W_OK) != nil:
		return false, "write access to " + root
	}
	return true, ""
}

// unified checks for a writable cgroup2 hierarchy at root; cgroup.controllers
// exists only there.
func unified(root string, euid int) (bool, string) {
	switch {
	case euid != 0:
		return false, "root, to create cgroups"
	case !exists(filepath.Join(root, "cgroup.controllers")):
		return false, "a cgroup2 hierarchy at " + root
	case unix.Access(root, unix.W_OK) != nil:
		return false, "write access to " + root
	}
	return true, ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
