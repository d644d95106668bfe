// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// ColdFile writes a file of size bytes in a temporary directory of the test
// and drops it from the page cache, so that the pages a child reads from it
// are charged to the child's memory cgroup, not to this process's.
func ColdFile(t testing.TB, size int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cold")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for written := 0; written < size; written += len(chunk) {
		n := min(len(chunk), size-written)
		if _, err := f.Write(chunk[:n]); err != nil {
			t.Fatal(err)
		}
	}
	// Dirty pages cannot be dropped: write them back first.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	return path
}
