// SPDX-License-Identifier: Apache-2.0

package kubeletwatch

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// TestWatcherPassesOverAnImpostor: real processes, all named kubelet. The
// first started (the lowest PID) runs in a real cgroup named as a pod's
// under the kubelet's pods tree (TEST/kubepods/besteffort/podX on the v1
// memory controller): the impostor a pod's author starts with `exec -a
// kubelet`. The watcher takes the one outside the tree and, when that
// kubelet is replaced, the new one, never the impostor
// (kubeletcfg.TestFindProcessTellsOfImpostors: the impostor is told).
func TestWatcherPassesOverAnImpostor(t *testing.T) {
	cgrouptest.Require(t)
	impostor, _ := startProc(t, "kubelet")
	pods := cgrouptest.NewMemoryCgroup(t, "kubeletwatch").Sub(t, "kubepods").Sub(t, "besteffort").Sub(t, "pod5b0e4c7a")
	if err := pods.Add(impostor); err != nil {
		t.Fatal(err)
	}
	first, stopFirst := startProc(t, "kubelet")
	proc := procOf(t, filepath.Join(t.TempDir(), "proc"), impostor, first)

	// A watcher that has seen no kubelet yet scans at its first check.
	w := New(proc, Process{})
	if _, p, err := w.Check(); err != nil || p.PID != first {
		t.Fatalf("the first check found %v, %v; want the kubelet outside the pods' tree, pid %d (impostor %d)", p, err, first, impostor)
	}
	stopFirst()
	second, _ := startProc(t, "kubelet")
	if err := os.Symlink("/proc/"+strconv.Itoa(second), filepath.Join(proc, strconv.Itoa(second))); err != nil {
		t.Fatal(err)
	}
	ch, now, err := w.Check()
	if !ch || now.PID != second || err != nil {
		t.Errorf("the kubelet restarted: changed %v, now %v, err %v; want pid %d, not the impostor %d", ch, now, err, second, impostor)
	}
}
