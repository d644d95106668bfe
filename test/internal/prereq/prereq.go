// SPDX-License-Identifier: Apache-2.0

// Package prereq decides what a test does when the host lacks something it
// needs (root, cgroups, built binaries): in CI (CI=true) that is a failure,
// anywhere else a skip, and the reason is named either way. The decision
// itself is cgrouptest.Need's; this package adapts it to an error.
package prereq

import (
	"testing"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// InCI reports whether CI=true.
func InCI() bool { return cgrouptest.InCI() }

// Require stops the test when err, a missing prerequisite, is not nil.
func Require(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		cgrouptest.Need(t, false, err.Error())
	}
}
