// SPDX-License-Identifier: Apache-2.0

// Package crash is a test binary that ends as CRASH says, for testreport's
// tests: each way a test binary can end inside a subtest without a verdict
// of its top-level test.
package crash

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("CRASH") == "main-exit" {
		code = 3 // all tests passed, the binary still fails
	}
	os.Exit(code)
}

func TestOK(t *testing.T) {}

func TestCrash(t *testing.T) {
	t.Run("phase", func(t *testing.T) {
		t.Log("in the phase")
		switch os.Getenv("CRASH") {
		case "exit":
			os.Exit(1)
		case "panic":
			go func() { panic("a goroutine's panic") }()
			select {}
		case "timeout":
			select {} // -test.timeout ends it
		case "kill":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
	})
}
