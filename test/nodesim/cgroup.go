package nodesim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupV1 writes the node's cgroups into the v1 memory and pids
// hierarchies. Every path handed to it is relative to the hierarchy roots, so
// the same relative path names a cgroup in both.
type cgroupV1 struct {
	memory string // e.g. /sys/fs/cgroup/memory
	pids   string // e.g. /sys/fs/cgroup/pids
}

func newCgroupV1(fsRoot string) (cgroupV1, error) {
	c := cgroupV1{memory: filepath.Join(fsRoot, "memory"), pids: filepath.Join(fsRoot, "pids")}
	for _, f := range []string{filepath.Join(c.memory, "memory.limit_in_bytes"), filepath.Join(c.memory, "memory.oom_control"), filepath.Join(c.pids, "cgroup.procs")} {
		if _, err := os.Stat(f); err != nil {
			return c, fmt.Errorf("cgroup v1 memory and pids controllers needed under %s: %w", fsRoot, err)
		}
	}
	return c, nil
}

func (c cgroupV1) dirs(rel string) []string {
	return []string{filepath.Join(c.memory, rel), filepath.Join(c.pids, rel)}
}

// create makes rel in both hierarchies.
func (c cgroupV1) create(rel string) error {
	for _, d := range c.dirs(rel) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup: %w", err)
		}
	}
	return nil
}

// setMemoryLimit sets memory.limit_in_bytes; a negative limit leaves the
// cgroup unlimited.
func (c cgroupV1) setMemoryLimit(rel string, bytes int64) error {
	if bytes < 0 {
		return nil
	}
	return writeFile(filepath.Join(c.memory, rel, "memory.limit_in_bytes"), strconv.FormatInt(bytes, 10))
}

// setPidsMax sets pids.max; zero or less leaves it at "max".
func (c cgroupV1) setPidsMax(rel string, n int64) error {
	if n <= 0 {
		return nil
	}
	return writeFile(filepath.Join(c.pids, rel, "pids.max"), strconv.FormatInt(n, 10))
}

// procsFiles are the files a process writes its pid into to join rel.
func (c cgroupV1) procsFiles(rel string) []string {
	return []string{filepath.Join(c.memory, rel, "cgroup.procs"), filepath.Join(c.pids, rel, "cgroup.procs")}
}

// oomKills reads the kernel's OOM-kill counter of one memory cgroup. On v1
// it counts the kills of processes in that very cgroup (not its children).
func (c cgroupV1) oomKills(rel string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(c.memory, rel, "memory.oom_control"))
	if err != nil {
		return 0, err
	}
	st, err := parseOOMControl(b)
	return st.kills, err
}

type oomControl struct {
	underOOM bool
	kills    uint64
}

// parseOOMControl parses a v1 memory.oom_control file:
//
//	oom_kill_disable 0
//	under_oom 0
//	oom_kill 3
//
// Kernels before 4.13 have no oom_kill line; it then reads as zero.
func parseOOMControl(b []byte) (oomControl, error) {
	var st oomControl
	var sawUnder bool
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(s.Text()), " ")
		if !ok {
			return st, fmt.Errorf("memory.oom_control: malformed line %q", s.Text())
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return st, fmt.Errorf("memory.oom_control: %s: bad value %q", key, val)
		}
		switch key {
		case "under_oom":
			st.underOOM, sawUnder = n != 0, true
		case "oom_kill":
			st.kills = n
		}
	}
	if !sawUnder {
		return st, errors.New("memory.oom_control: no under_oom line")
	}
	return st, nil
}

// remove kills every process left in rel and below, in both hierarchies,
// then removes the cgroups deepest first. Freshly killed processes linger a
// moment, so it retries until timeout.
func (c cgroupV1) remove(rel string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var errs []error
	for _, root := range c.dirs(rel) {
		if err := removeTree(root, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeTree(root string, deadline time.Time) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Deepest first: a longer path is never a parent of a shorter one.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		for {
			killAll(d)
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// killAll SIGKILLs every process listed in dir/cgroup.procs.
func killAll(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func writeFile(p, v string) error {
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	return nil
}
