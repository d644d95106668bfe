// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Where the hierarchies the tests use are mounted. The observer under test
// finds them from the host root, so the tests create their cgroups at the
// same, standard places, which depend on the host's cgroup version:
//
//   - cgroup v1 (this project's machines, hybrid or not): the memory
//     controller is the v1 hierarchy at /sys/fs/cgroup/memory, pids the one
//     at /sys/fs/cgroup/pids, and the unified hierarchy, when mounted, is
//     /sys/fs/cgroup/unified, without the memory controller;
//   - cgroup v2 only (today's distributions, most CI runners): one
//     hierarchy at /sys/fs/cgroup holds every controller, so MemoryRoot and
//     UnifiedRoot are both that, and there is no v1 pids hierarchy.
var (
	MemoryRoot  = pick(FSRoot, "/sys/fs/cgroup/memory")
	PidsRoot    = "/sys/fs/cgroup/pids"
	UnifiedRoot = pick(FSRoot, "/sys/fs/cgroup/unified")
)

// FSRoot is where the host mounts its cgroups: the unified hierarchy itself
// on a v2-only host, a tmpfs of v1 hierarchies otherwise.
const FSRoot = "/sys/fs/cgroup"

// V2 reports whether the host is cgroup v2-only: FSRoot is the unified
// hierarchy (only its root has cgroup.controllers), so the memory
// controller, when there is one, is v2's. Tests of a mechanism only one
// version has (v1's memcg threshold eventfd and memsw files; v2's
// memory.events and memory.swap.* files) choose by it which of their two
// variants runs: neither is ever skipped for the host's version.
func V2() bool { return v2 }

var v2 = exists(FSRoot + "/cgroup.controllers")

func pick(onV2, onV1 string) string {
	if v2 {
		return onV2
	}
	return onV1
}

// Version is "v1" or "v2" (see V2), for test names and messages.
func Version() string { return pick("v2", "v1") }

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
// memory controller at MemoryRoot: the v1 hierarchy, or on a v2-only host
// the unified one with memory among its controllers.
func Require(t testing.TB) {
	t.Helper()
	ok, what := memoryV1(MemoryRoot, os.Geteuid())
	if v2 {
		ok, what = memoryV2(MemoryRoot, os.Geteuid())
	}
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

// memoryV2 checks for a writable cgroup2 hierarchy at root whose
// controllers include memory.
func memoryV2(root string, euid int) (bool, string) {
	if ok, what := unified(root, euid); !ok {
		return ok, what
	}
	if !hasController(root, "memory") {
		return false, "the memory controller in " + filepath.Join(root, "cgroup.controllers")
	}
	return true, ""
}

// hasController reports whether the cgroup2 directory dir lists the
// controller name in its cgroup.controllers: at the hierarchy's root, a
// controller the kernel binds to v2 (on a v1 host memory is v1's).
func hasController(dir, name string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	return err == nil && slices.Contains(strings.Fields(string(b)), name)
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
