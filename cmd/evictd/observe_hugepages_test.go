// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/fixture"
)

// hugepageRoot is the v2-systemd fixture with pkg/pressure's
// testdata/hugepages laid over it: pools of 512 × 2 MiB and 2 × 1 GiB.
func hugepageRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, src := range []string{filepath.Join(fixtureRoot, "v2-systemd"), filepath.Join(fixtureRoot, "hugepages")} {
		fixture.CopyInto(t, root, src)
	}
	return root
}

// TestObserveHugepages: observe takes the node's 3 GiB hugepage pool off
// memory.available and its capacity, as a 1.37 kubelet does; with
// --hugepage-aware-eviction=false it prints the figures of a kubelet with
// the gate off: 6 GiB of 8 GiB.
func TestObserveHugepages(t *testing.T) {
	root := hugepageRoot(t)
	for _, tc := range []struct {
		args             []string
		avail, capacity  uint64
		availRow, capRow string
		detail           string
	}{
		{nil, 3 << 30, 5 << 30, "3.0Gi", "5.0Gi", "hugepages 3.0Gi taken off"},
		{[]string{"--hugepage-aware-eviction=true"}, 3 << 30, 5 << 30, "3.0Gi", "5.0Gi", "hugepages 3.0Gi taken off"},
		{[]string{"--hugepage-aware-eviction=false"}, 6 << 30, 8 << 30, "6.0Gi", "8.0Gi", ""},
	} {
		t.Run(strings.Join(append([]string{"default"}, tc.args...), " "), func(t *testing.T) {
			code, out, errOut := runObserve(t, append([]string{"--host-root", root, "-o", "json"}, tc.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			var s statsv1alpha1.Summary
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatal(err)
			}
			m := s.Node.Memory
			if m == nil || m.AvailableBytes == nil || *m.AvailableBytes != tc.avail || *m.AvailableBytes+*m.WorkingSetBytes != tc.capacity {
				t.Errorf("node memory %+v; want %d available of %d", m, tc.avail, tc.capacity)
			}
			code, out, errOut = runObserve(t, append([]string{"--host-root", root, "-o", "table"}, tc.args...)...)
			if code != exitOK {
				t.Fatalf("table: exit %d, stderr %q", code, errOut)
			}
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 2 && f[0] == "memory.available" {
					if f[1] != tc.availRow || f[2] != tc.capRow || strings.Contains(l, "hugepages") != (tc.detail != "") || !strings.Contains(l, tc.detail) {
						t.Errorf("memory.available row %q; want %s of %s, %q", l, tc.availRow, tc.capRow, tc.detail)
					}
					return
				}
			}
			t.Fatalf("no memory.available row in\n%s", out)
		})
	}
}

// A broken pool file fails observe (exit 1) naming the file and the value,
// with the rest printed; with the switch off the file is not read.
func TestObserveHugepagesBroken(t *testing.T) {
	root := hugepageRoot(t)
	const file = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	if err := os.WriteFile(filepath.Join(root, file), []byte("51x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runObserve(t, "--host-root", root, "-o", "table")
	want := `evictd observe: signal memory.available unknown: ` + file + `: value "51x\n": not a decimal number (left out of the output)`
	if code != exitFailure || !strings.Contains(errOut, want) || !strings.Contains(out, "\nmemory.available ") ||
		!strings.Contains(strings.Join(strings.Fields(out), " "), "memory.available - - unreadable") {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d, memory.available left out, %q", code, out, errOut, exitFailure, want)
	}
	if code, _, errOut := runObserve(t, "--host-root", root, "--hugepage-aware-eviction=false"); code != exitOK {
		t.Errorf("switched off: exit %d, stderr %q; want 0 (the pool is not read)", code, errOut)
	}
}
