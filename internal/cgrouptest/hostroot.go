// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"os"
	"path/filepath"
	"testing"
)

// HostRoot returns a host root (evictd's --host-root) whose sys and proc are
// this machine's, with var/lib/kubelet and var/lib/containerd of its own:
// the machine need not run a kubelet or a container runtime for the
// filesystem signals to have directories to measure. Cgroup directories
// under it are this machine's, reached through the sys link.
func HostRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"sys", "proc"} {
		if err := os.Symlink("/"+d, filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"var/lib/kubelet", "var/lib/containerd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
