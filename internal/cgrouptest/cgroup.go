// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Cgroup is a cgroup directory a test created; it is removed when the test
// ends.
type Cgroup struct {
	dir string
	// deleteSelf removes the directory through containerd/cgroups, which
	// made it; nil for a Cgroup built by hand around an existing directory.
	deleteSelf func() error
}

// removeTimeout bounds how long Remove waits for killed processes to leave:
// a cgroup whose last task just exited stays busy for a moment.
const removeTimeout = 10 * time.Second

// UniqueName returns prefix followed by this process's id and a random
// number, so that parallel test binaries and reruns after a crash never
// collide.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), rand.Int64())
}

// NewMemoryCgroup checks Require and creates a uniquely named cgroup (see
// UniqueName) directly under MemoryRoot: on the v1 memory controller, or on
// a v2-only host in the unified hierarchy with memory and pids enabled.
func NewMemoryCgroup(t testing.TB, prefix string) *Cgroup {
	t.Helper()
	Require(t)
	return New(t, MemoryRoot, UniqueName(prefix))
}

// NewUnifiedCgroup checks RequireUnified and creates a uniquely named group
// directly under UnifiedRoot.
func NewUnifiedCgroup(t testing.TB, prefix string) *Cgroup {
	t.Helper()
	RequireUnified(t)
	return New(t, UnifiedRoot, UniqueName(prefix))
}

// New creates the cgroup parent/name, failing the test if it cannot, and
// removes it with everything below it when the test ends (see Remove). Use
// it where the name must be exact, such as the same relative path in two
// hierarchies. parent must lie in one of the hierarchies at MemoryRoot,
// PidsRoot or UnifiedRoot: the cgroup is made by containerd/cgroups, with
// cgroup1.New on a v1 hierarchy and cgroup2.NewManager on the unified one
// (see unifiedResources).
func New(t testing.TB, parent, name string) *Cgroup {
	t.Helper()
	dir, err := childDir(parent, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := create(dir)
	if err != nil {
		t.Fatalf("creating cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Errorf("cleaning up cgroup: %v", err)
		}
	})
	return c
}

// create makes the cgroup dir through the library. The library's creators
// accept a directory that already exists (they MkdirAll); a test must never
// adopt, and then remove, a cgroup it did not make, so that is refused here.
func create(dir string) (*Cgroup, error) {
	root, rel, err := hierarchyOf(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cgroup %s already exists (or cannot be checked: %v)", dir, err)
	}
	if root == UnifiedRoot {
		m, err := cgroup2.NewManager(root, rel, unifiedResources(root))
		if err != nil {
			return nil, fmt.Errorf("cgroup2.NewManager(%s, %s): %w", root, rel, err)
		}
		return &Cgroup{dir: dir, deleteSelf: m.Delete}, nil
	}
	// A v1 hierarchy of one controller: the library joins the controller's
	// name to the directory it is given, so it gets the mounts' parent.
	var sub cgroup1.Subsystem = cgroup1.NewMemory(filepath.Dir(root))
	if root == PidsRoot {
		sub = cgroup1.NewPids(filepath.Dir(root))
	}
	cg, err := cgroup1.New(cgroup1.StaticPath(rel), &specs.LinuxResources{},
		cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return []cgroup1.Subsystem{sub}, nil }))
	if err != nil {
		return nil, fmt.Errorf("cgroup1.New(%s) in %s: %w", rel, root, err)
	}
	return &Cgroup{dir: dir, deleteSelf: cg.Delete}, nil
}

// unifiedResources are what cgroup2.NewManager is asked for in the unified
// hierarchy at root: no limit, but on a v2-only host the memory and pids
// controllers, which the library then enables in every ancestor's
// cgroup.subtree_control, as the kubelet and systemd do, so the group has
// its memory.* files. A hybrid host's unified hierarchy has neither
// controller (they are v1's): its groups get only the core files and PSI.
func unifiedResources(root string) *cgroup2.Resources {
	r := &cgroup2.Resources{}
	if hasController(root, "memory") {
		r.Memory = &cgroup2.Memory{}
	}
	if hasController(root, "pids") {
		r.Pids = &cgroup2.Pids{}
	}
	return r
}

// hierarchyOf tells which of the tests' hierarchies dir is in, and its path
// there ("/a/b").
func hierarchyOf(dir string) (root, rel string, err error) {
	for _, root := range []string{MemoryRoot, PidsRoot, UnifiedRoot} {
		if r, err := filepath.Rel(root, dir); err == nil && r != "." && !strings.HasPrefix(r, "..") {
			return root, "/" + r, nil
		}
	}
	return "", "", fmt.Errorf("cgroup %s is in none of the hierarchies %s, %s, %s", dir, MemoryRoot, PidsRoot, UnifiedRoot)
}

// childDir joins parent and name, refusing a name that would land anywhere
// but directly below parent.
func childDir(parent, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return "", fmt.Errorf("cgroup name %q is not a single path element", name)
	}
	return filepath.Join(parent, name), nil
}

// Sub creates the child cgroup name inside c. Cleanups run last in, first
// out, so it goes before its parent.
func (c *Cgroup) Sub(t testing.TB, name string) *Cgroup {
	t.Helper()
	return New(t, c.dir, name)
}

// Dir is the cgroup's directory.
func (c *Cgroup) Dir() string { return c.dir }

// Name is the last element of Dir.
func (c *Cgroup) Name() string { return filepath.Base(c.dir) }

// Path is the path of one of the cgroup's interface files.
func (c *Cgroup) Path(file string) string { return filepath.Join(c.dir, file) }

// Write writes value to one of the cgroup's interface files.
func (c *Cgroup) Write(file, value string) error {
	if err := os.WriteFile(c.Path(file), []byte(value), 0); err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, c.Path(file), err)
	}
	return nil
}

// The memory files a test reads and writes, by the host's cgroup version:
// LimitFile holds the limit (v1 memory.limit_in_bytes, v2 memory.max, which
// reads "max" when unlimited), UsageFile the usage (v1
// memory.usage_in_bytes, v2 memory.current). In memory.stat the inactive
// file pages of a cgroup and its descendants are StatInactiveFile (v1
// total_inactive_file, v2 inactive_file), its locked pages StatUnevictable.
// PeakFile holds the highest usage seen (v1 memory.max_usage_in_bytes, v2
// memory.peak, kernel 5.19 and later).
// OOMKillFile has the kernel's count of OOM kills in the cgroup on a line
// "oom_kill N" (v1 memory.oom_control, v2 memory.events).
var (
	OOMKillFile      = pick("memory.events", "memory.oom_control")
	PeakFile         = pick("memory.peak", "memory.max_usage_in_bytes")
	LimitFile        = pick("memory.max", "memory.limit_in_bytes")
	UsageFile        = pick("memory.current", "memory.usage_in_bytes")
	StatInactiveFile = pick("inactive_file", "total_inactive_file")
	StatUnevictable  = pick("unevictable", "total_unevictable")
)

// SetMemoryLimit sets the memory limit (v1 memory.limit_in_bytes, v2
// memory.max), failing the test if the kernel refuses it.
func (c *Cgroup) SetMemoryLimit(t testing.TB, bytes int64) {
	t.Helper()
	if err := c.Write(LimitFile, strconv.FormatInt(bytes, 10)); err != nil {
		t.Fatal(err)
	}
}

// UsagePath is the file of the cgroup's memory usage: v1
// memory.usage_in_bytes, v2 memory.current.
func (c *Cgroup) UsagePath() string { return c.Path(UsageFile) }

// MemoryUsage reads the memory usage (see UsagePath).
func (c *Cgroup) MemoryUsage() (int64, error) {
	return ReadInt(c.UsagePath())
}

// LimitHits is how often the cgroup's usage hit its limit: v1's
// memory.failcnt, v2's max in memory.events.
func (c *Cgroup) LimitHits() (int64, error) {
	if !v2 {
		return ReadInt(c.Path("memory.failcnt"))
	}
	b, err := os.ReadFile(c.Path("memory.events"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "max "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %w", c.Path("memory.events"), l, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no max line in %s: %q", c.Path("memory.events"), b)
}

// Add moves the process pid into the cgroup.
func (c *Cgroup) Add(pid int) error {
	return c.Write("cgroup.procs", strconv.Itoa(pid))
}

// Remove removes the cgroup and every cgroup below it, deepest first,
// killing the processes still in them (see RemoveTree).
func (c *Cgroup) Remove() error {
	return RemoveTree([]string{c.dir}, c.deleteSelf, removeTimeout)
}

// RemoveTree removes one cgroup, present as the directories dirs (the same
// path in one or several v1 hierarchies, or one unified group), and every
// cgroup below it. It kills the processes still in them, except this
// process, which it moves to the parent; removes the cgroups below, deepest
// first; and then the cgroup itself with deleteSelf, the library's Delete
// for a cgroup the library made, or rmdir when deleteSelf is nil. It
// retries until timeout while the kernel still counts exiting processes,
// and succeeds at once when every directory is already gone. It takes no
// testing.TB: the kubelet stand-in (test/nodesim) removes its node and pod
// cgroups with it too.
//
// The cgroup itself goes through the library's Delete. Killing, moving this
// process out and removing the cgroups below stay here: Delete does none of
// them (it refuses a cgroup with processes anywhere below it, and its
// RemoveAll cannot remove child cgroups, whose interface files cannot be
// unlinked), and its own retries last 150 ms, less than killed processes
// take to leave a loaded machine.
func RemoveTree(dirs []string, deleteSelf func() error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := removeTreeOnce(dirs, deleteSelf)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func removeTreeOnce(dirs []string, deleteSelf func() error) error {
	var present []string
	for _, d := range dirs {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			present = append(present, d)
		}
	}
	if len(present) == 0 {
		return nil
	}
	var procs []string
	for _, d := range present {
		if err := removeBelow(d); err != nil {
			return err
		}
		if p := evacuate(d); p != "" {
			procs = append(procs, p)
		}
	}
	if deleteSelf == nil {
		for _, d := range present {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("removing cgroup %s: %w (processes in it: %q)", d, err, strings.Join(procs, " "))
			}
		}
		return nil
	}
	if err := deleteSelf(); err != nil {
		return fmt.Errorf("removing cgroup %s: %w (processes in it: %q)", strings.Join(present, ", "), err, strings.Join(procs, " "))
	}
	return nil
}

// removeBelow makes one pass over the cgroups below dir, children before
// parents.
func removeBelow(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() && p != dir {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing cgroup %s: %w", dir, err)
	}
	// WalkDir visits parents before children: backwards, children go first.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		procs := evacuate(d)
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing cgroup %s: %w (processes in it: %q)", d, err, procs)
		}
	}
	return nil
}

// evacuate kills every process in the cgroup dir except this one, which it
// moves to the parent cgroup, and returns the pids it found.
func evacuate(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if pid == os.Getpid() {
			parent := &Cgroup{dir: filepath.Dir(dir)}
			_ = parent.Add(pid)
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// ReadInt reads a file holding one decimal integer, as most cgroup
// interface files do.
func ReadInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
