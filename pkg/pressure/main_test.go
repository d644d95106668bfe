// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"os"
	"testing"

	"github.com/evictd/evictd/internal/cgrouptest"
)

func TestMain(m *testing.M) {
	// The real-cgroup test re-executes this binary as its workload.
	cgrouptest.RunChildIfRequested()
	code := m.Run()
	if benchTreeDir != "" {
		os.RemoveAll(benchTreeDir)
	}
	os.Exit(code)
}
