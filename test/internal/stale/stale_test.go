// SPDX-License-Identifier: Apache-2.0

package stale

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestOwner(t *testing.T) {
	tests := []struct {
		name    string
		wantPid int
		wantOK  bool
	}{
		{"evictd-test-123-0000abcd", 123, true},
		{"evictd-test-1-x", 1, true},
		{"evictd-test-abc-0000abcd", 0, false},
		{"evictd-test-123", 0, false},
		{"evictd-test--5-x", 0, false},
		{"other-123-0000abcd", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid, ok := Owner("evictd-test", tt.name)
			if pid != tt.wantPid || ok != tt.wantOK {
				t.Fatalf("Owner = %d, %v; want %d, %v", pid, ok, tt.wantPid, tt.wantOK)
			}
		})
	}
	if pid, ok := Owner("p", Name("p")); !ok || pid != os.Getpid() {
		t.Fatalf("Owner(Name) = %d, %v; want own pid", pid, ok)
	}
}

func TestSweep(t *testing.T) {
	// A reaped child's pid is a pid that is certainly not running (barring
	// reuse within this test, which the kernel's pid allocation makes remote).
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	dead := c.ProcessState.Pid()

	dir := t.TempDir()
	names := map[string]bool{ // name -> should be removed
		"x-" + strconv.Itoa(dead) + "-aa":        true,
		"x-" + strconv.Itoa(os.Getpid()) + "-bb": false,
		"x-1-cc":                                 false, // init is alive
		"y-" + strconv.Itoa(dead) + "-dd":        false,
		"x-notapid-ee":                           false,
	}
	for n := range names {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var removed []string
	err := Sweep(dir, "x", func(p string) error {
		removed = append(removed, filepath.Base(p))
		return os.Remove(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range names {
		if got := slices.Contains(removed, n); got != want {
			t.Errorf("%s removed = %v, want %v", n, got, want)
		}
	}
	if err := Sweep(filepath.Join(dir, "missing"), "x", nil); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestProcState(t *testing.T) {
	tests := []struct {
		stat string
		want byte
	}{
		{"123 (sleep) S 1 123 123 0 -1", 'S'},
		{"123 (a) b) Z 1 123", 'Z'},
		{"123 (x", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := procState([]byte(tt.stat)); got != tt.want {
			t.Errorf("procState(%q) = %q, want %q", tt.stat, got, tt.want)
		}
	}
}
