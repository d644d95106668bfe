// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"testing"
)

// asEvictdEnv makes the test binary run as evictd itself, so a test can
// watch a real `evictd run` process from outside (its /proc files).
const asEvictdEnv = "EVICTD_TEST_AS_EVICTD"

func TestMain(m *testing.M) {
	if os.Getenv(asEvictdEnv) == "1" {
		main() // exits
	}
	os.Exit(m.Run())
}
