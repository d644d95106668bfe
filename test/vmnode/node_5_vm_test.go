// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

// The tests that boot a VM of their own. They build only with -tags vmnode:
// make e2e-node (part of make test, so of CI) runs them after preparing the
// VM's pieces; plain go test ./... leaves them out. The file's name runs
// them on the one-disk node's stage just before TestNodeDiskImageGC, whose
// seven minutes of evictd's their boots help cover (node_1_soft_test.go on
// the order).

package vmnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// TestVMCgroupV2Observe boots a guest with a real cgroup v2 memory
// controller, makes a kubelet-like pod there holding 64 MiB, and checks that
// evictd observe, run in the guest on the guest's own /proc and /sys, finds
// the pod with its working set and the node's memory signal.
func TestVMCgroupV2Observe(t *testing.T) {
	Need(t)
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "bin")
	for _, b := range []string{"evictd", "workload"} {
		cgrouptest.Need(t, isFile(filepath.Join(bin, b)), filepath.Join(bin, b)+" (make build)")
	}

	const holdMiB = 64
	p := newGuestPod(holdMiB)
	out := t.TempDir()
	start := time.Now()
	res, err := Boot(context.Background(), Options{
		MemoryMiB: 512,
		Script:    observeScript("/host"+bin, p),
		OutDir:    out,
		Timeout:   4 * time.Minute,
	})
	if res != nil {
		t.Logf("guest console:\n%s", res.Console)
		t.Logf("boot (QEMU start to /init ready) %s, guest run %s, test total %s",
			res.BootTime.Round(time.Millisecond), res.Duration.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("the guest's script exited %d", res.ExitCode)
	}

	rc, _ := os.ReadFile(filepath.Join(out, "observe.rc"))
	stderr, _ := os.ReadFile(filepath.Join(out, "observe.err"))
	if strings.TrimSpace(string(rc)) != "0" {
		t.Errorf("evictd observe exited %q in the guest; stderr:\n%s", strings.TrimSpace(string(rc)), stderr)
	} else if len(stderr) > 0 {
		t.Logf("evictd observe's stderr:\n%s", stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "observe.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, probs := checkSummary(data, p, 60<<20)
	for _, pr := range probs {
		t.Error(pr)
	}
	if t.Failed() {
		t.Logf("evictd observe -o json:\n%s", data)
		return
	}
	// Pressure stall information exists only on cgroup v2: with it, evictd
	// read the real v2 memory controller.
	for _, pod := range s.Pods {
		if pod.PodRef.UID == p.UID {
			m := pod.Memory
			t.Logf("pod %s: working set %d MiB, usage %d MiB", p.UID, *m.WorkingSetBytes>>20, valueOf(m.UsageBytes)>>20)
			if m.PSI == nil {
				t.Error("the pod has no memory PSI, which cgroup v2 gives every cgroup")
			}
		}
	}
	m := s.Node.Memory
	t.Logf("node: memory available %d MiB, working set %d MiB", *m.AvailableBytes>>20, *m.WorkingSetBytes>>20)
	if m.PSI == nil {
		t.Error("the node has no memory PSI")
	}
}

// TestVMBootTimeout checks Boot's other ends: a script's exit status comes
// back, and a guest that runs past the timeout is killed and says so.
func TestVMBootTimeout(t *testing.T) {
	Need(t)
	res, err := Boot(context.Background(), Options{
		Script:  "grep -q memory /sys/fs/cgroup/cgroup.controllers || exit 9\nexit 3\n",
		OutDir:  t.TempDir(),
		Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.PoweredOff || res.ExitCode != 3 {
		t.Fatalf("got powered off %v, exit code %d; want true, 3\n%s", res.PoweredOff, res.ExitCode, res.Console)
	}
	t.Logf("boot %s, whole run %s", res.BootTime.Round(time.Millisecond), res.Duration.Round(time.Millisecond))

	res, err = Boot(context.Background(), Options{
		Script: "sleep 600\n",
		OutDir: t.TempDir(),
		// Well past the boot (3.5 s in CI's runs), so the guest is up
		// when it is killed; every second of it is on CI's path.
		Timeout: 12 * time.Second,
	})
	if err == nil || res == nil || res.PoweredOff || res.ExitCode != -1 {
		t.Fatalf("a guest past its timeout: got %+v, %v; want an error and no poweroff", res, err)
	}
	if res.BootTime == 0 {
		t.Errorf("no boot time though the guest booted:\n%s", res.Console)
	}
	t.Logf("killed after %s: %v", res.Duration.Round(time.Millisecond), err)
}

func valueOf(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
