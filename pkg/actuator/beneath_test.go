// SPDX-License-Identifier: Apache-2.0

package actuator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/pkg/pressure"
)

// TestActuatorWritesMemoryFilesOnlyBelowKubepods asks the one write
// function for the files a writable pod cgroup mount would otherwise let
// evictd write, and the exported calls for cgroups outside kubepods or
// reached through a symbolic link: each is refused with ErrRefused, naming
// what was asked, and nothing is written. It runs with openat2 and again
// with the walk that stands in for it where the kernel or a seccomp
// profile refuses it.
func TestActuatorWritesMemoryFilesOnlyBelowKubepods(t *testing.T) {
	for _, resolver := range []string{"openat2", "walk"} {
		t.Run(resolver, func(t *testing.T) {
			if resolver == "walk" {
				openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
				t.Cleanup(func() { openat2 = unix.Openat2 })
			}
			root, pod, _ := v2Node(t)
			a := New(v2Layout(root))
			kubepods := filepath.Join(root, "kubepods.slice")
			podRel := strings.TrimPrefix(pod, "/kubepods.slice/")
			outside := filepath.Join(root, "system.slice", "kubelet.service")
			for path, body := range map[string]string{
				filepath.Join(root, pod, "cgroup.kill"):    "",
				filepath.Join(root, pod, "cgroup.procs"):   "",
				filepath.Join(root, pod, "cgroup.freeze"):  "0\n",
				filepath.Join(root, "kubepods.slice", "x"): "",
				filepath.Join(outside, "memory.current"):   "104857600\n",
				filepath.Join(outside, "memory.high"):      "max\n",
			} {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A symbolic link in the pods' tree to a cgroup outside it, and
			// a memory.high that is one.
			if err := os.Symlink(outside, filepath.Join(kubepods, "escape")); err != nil {
				t.Fatal(err)
			}
			linked := filepath.Join(root, "kubepods.slice", "linked")
			if err := os.MkdirAll(linked, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(linked, "memory.current"), []byte("1048576\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, "memory.high"), filepath.Join(linked, "memory.high")); err != nil {
				t.Fatal(err)
			}

			for _, tc := range []struct{ rel, name, want string }{
				{podRel, "cgroup.kill", `not "cgroup.kill"`},
				{podRel, "cgroup.procs", `not "cgroup.procs"`},
				{podRel, "cgroup.freeze", `not "cgroup.freeze"`},
				{podRel, "memory.limit_in_bytes", `not "memory.limit_in_bytes"`}, // a v1 file on v2
				{podRel, "../x", `not "../x"`},
				{"..", "memory.high", `".." is not a cgroup below kubepods`},
				{podRel + "/../..", "memory.high", `is not a cgroup below kubepods`},
				{"/" + podRel, "memory.high", `is not a cgroup below kubepods`},
				{"escape", "memory.high", "resolves through a symbolic link or outside the pods' cgroup tree"},
				{"linked", "memory.high", "resolves through a symbolic link or outside the pods' cgroup tree"},
			} {
				err := a.writeFile(kubepods, tc.rel, tc.name, "1")
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("writeFile(%q, %q) = %v; want ErrRefused saying %q", tc.rel, tc.name, err, tc.want)
				}
			}
			for _, cg := range []string{"/system.slice/kubelet.service", "/kubepods.slice", "/kubepods.slice/escape", "/kubepods.slice/linked"} {
				if c, err := a.Contain(cg); !errors.Is(err, ErrRefused) {
					t.Errorf("Contain(%q) = %+v, %v; want ErrRefused", cg, c, err)
				}
			}
			for path, want := range map[string]string{
				filepath.Join(root, pod, "cgroup.kill"):   "",
				filepath.Join(root, pod, "cgroup.procs"):  "",
				filepath.Join(root, pod, "cgroup.freeze"): "0\n",
				filepath.Join(kubepods, "x"):              "",
				filepath.Join(outside, "memory.high"):     "max\n",
			} {
				if got := readFile(t, path); got != want {
					t.Errorf("%s holds %q after the refusals; want %q untouched", path, got, want)
				}
			}
			// What it may write, it writes.
			if err := a.writeFile(kubepods, podRel, "memory.high", "1048576"); err != nil {
				t.Errorf("writeFile(%q, memory.high) = %v", podRel, err)
			}
		})
	}
}

// On cgroup v1 the actuator writes memory.limit_in_bytes and
// memory.oom_control, and still not memory.high or cgroup.procs.
func TestActuatorV1Files(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "kubepods", "pod-a")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"memory.limit_in_bytes", "memory.oom_control", "memory.high", "cgroup.procs", "tasks"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := New(pressure.Layout{Mode: pressure.ModeV1, MemoryMount: root, KubepodsMemoryDir: filepath.Join(root, "kubepods")})
	kubepods := filepath.Join(root, "kubepods")
	for name, allowed := range map[string]bool{"memory.limit_in_bytes": true, "memory.oom_control": true, "memory.high": false, "cgroup.procs": false, "tasks": false} {
		err := a.writeFile(kubepods, "pod-a", name, "1")
		if allowed != (err == nil) || !allowed && !errors.Is(err, ErrRefused) {
			t.Errorf("writeFile(pod-a, %s) = %v; want allowed %v", name, err, allowed)
		}
	}
}
