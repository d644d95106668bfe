// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// withProcessMode makes the library's answer mode for the test's duration
// and counts how often it is asked.
func withProcessMode(t *testing.T, mode cgroups.CGMode) *int {
	t.Helper()
	calls := new(int)
	saved := processCgroupMode
	processCgroupMode = func() cgroups.CGMode { *calls++; return mode }
	t.Cleanup(func() { processCgroupMode = saved })
	return calls
}

// The library looks at this process's /sys/fs/cgroup: asking it about a
// fixture host root would describe the machine running the test.
func TestDetectHierarchiesAsksTheLibraryOnlyForThisRoot(t *testing.T) {
	calls := withProcessMode(t, cgroups.Unavailable)
	for root, want := range map[string]Mode{"hybrid": ModeHybrid, "v1-cgroupfs": ModeV1, "v2-systemd": ModeV2} {
		h, err := detectHierarchies(filepath.Join("testdata", root))
		if err != nil || h.mode != want {
			t.Errorf("%s: mode %q, %v; want %q", root, h.mode, err, want)
		}
	}
	if *calls != 0 {
		t.Errorf("cgroups.Mode was asked %d times for fixture roots, want 0", *calls)
	}
	_, err := detectHierarchies("/")
	if *calls != 1 {
		t.Errorf("cgroups.Mode was asked %d times for /, want 1", *calls)
	}
	if !errors.Is(err, ErrHostRoot) || !strings.Contains(err.Error(), "/sys/fs/cgroup") {
		t.Errorf("with no cgroup mount, detectHierarchies(/) = %v; want ErrHostRoot naming /sys/fs/cgroup", err)
	}
}

func TestHierarchiesOfMode(t *testing.T) {
	for _, tc := range []struct {
		root    string
		mode    cgroups.CGMode
		want    Mode
		wantErr string // a part of the error, "" for success
	}{
		{root: "v2-cgroupfs", mode: cgroups.Unified, want: ModeV2},
		{root: "v1-cgroupfs", mode: cgroups.Legacy, want: ModeV1},
		{root: "hybrid", mode: cgroups.Hybrid, want: ModeHybrid},
		// The library's mode and the files disagree: the error names where
		// the memory controller was expected.
		{root: "v1-cgroupfs", mode: cgroups.Unified, wantErr: "v1-cgroupfs/sys/fs/cgroup is a cgroup2 mount without the memory controller"},
		{root: "v2-cgroupfs", mode: cgroups.Legacy, wantErr: "v2-cgroupfs/sys/fs/cgroup/memory"},
		{root: "v2-cgroupfs", mode: cgroups.Unavailable, wantErr: "no cgroup filesystem mounted"},
	} {
		h, err := hierarchiesOfMode(filepath.Join("testdata", tc.root), tc.mode)
		switch {
		case tc.wantErr == "" && (err != nil || h.mode != tc.want):
			t.Errorf("%s as mode %d: %q, %v; want %q", tc.root, tc.mode, h.mode, err, tc.want)
		case tc.wantErr != "" && (!errors.Is(err, ErrHostRoot) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s as mode %d: error %v; want ErrHostRoot containing %q", tc.root, tc.mode, err, tc.wantErr)
		}
	}
	h, err := hierarchiesOfMode(filepath.Join("testdata", "hybrid"), cgroups.Hybrid)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("testdata", "hybrid", "sys/fs/cgroup/unified"); h.unified != want {
		t.Errorf("hybrid unified = %q, want %q", h.unified, want)
	}
}

// On the real machine the library and the file rule must agree.
func TestDetectHierarchiesOfThisMachine(t *testing.T) {
	_, errStat := os.Stat("/sys/fs/cgroup/memory/memory.stat")
	_, errCtl := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	cgrouptest.Need(t, errStat == nil || errCtl == nil, "a cgroup memory controller under /sys/fs/cgroup")
	viaLibrary, err := detectHierarchies("/")
	if err != nil {
		t.Fatal(err)
	}
	viaFiles, err := hierarchiesFromFiles("/")
	if err != nil {
		t.Fatal(err)
	}
	if viaLibrary != viaFiles {
		t.Errorf("cgroups.Mode() = %d gives %+v, the files give %+v", cgroups.Mode(), viaLibrary, viaFiles)
	}
	if want := map[cgroups.CGMode]Mode{cgroups.Legacy: ModeV1, cgroups.Hybrid: ModeHybrid, cgroups.Unified: ModeV2}[cgroups.Mode()]; viaLibrary.mode != want {
		t.Errorf("mode %q, want %q for cgroups.Mode() %d", viaLibrary.mode, want, cgroups.Mode())
	}
}
