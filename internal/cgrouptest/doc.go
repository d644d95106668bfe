// SPDX-License-Identifier: Apache-2.0

// Package cgrouptest gives tests of evictd's packages real cgroups and real
// processes to put in them, on the memory controller the host mounts: the
// cgroup v1 one (and the pids and cgroup2 hierarchies beside it) that this
// project's machines have, or the one unified hierarchy of a cgroup v2-only
// host (V2). The memory files' names follow the version (LimitFile,
// UsageFile, ...); a test of a mechanism only one version has chooses by V2
// which of its two variants runs, each asserting its version's own.
//
// A test that needs them calls Require (or RequireUnified, or Need for
// anything else): without root or the controller it is skipped with the
// reason, and under CI=true, where the machine must provide them, it fails.
// Cgroups made with NewMemoryCgroup, NewUnifiedCgroup, New and Sub are
// removed when the test ends, deepest first, after killing whatever still
// runs in them, also when the test failed.
//
// StartChild re-executes the test binary as a child workload that joins
// cgroups and touches memory or stalls on page faults when asked, answering
// over a pipe. For that the package's TestMain must call RunChildIfRequested
// before anything else:
//
//	func TestMain(m *testing.M) {
//		cgrouptest.RunChildIfRequested()
//		os.Exit(m.Run())
//	}
//
// Like the cgroups it drives, the package is Linux only.
package cgrouptest
