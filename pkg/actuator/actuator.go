// SPDX-License-Identifier: Apache-2.0

// Package actuator is evictd's one write to the node (docs/actuator.md),
// off by default and behind --actuator: the memory limits of the pod
// cgroups, nothing else. Two things need it:
//
//   - Contain stops a hard memory victim's growth once its eviction is
//     accepted, so that its graceful shutdown runs but cannot fill the node
//     first: on cgroup v2 its memory.high is set just above what it uses
//     (the kernel throttles it there, and kills nothing); on v1, which has
//     no memory.high, its limit is, with the OOM killer off for it (its
//     tasks wait at the limit rather than be killed).
//   - Relax raises a container's memory.high to its memory.max, stage 1 of
//     a container stuck at memory.high (docs/memhigh.md).
//
// Every write names the file and the value in its error, and goes through
// one function (beneath.go) that writes memory limit files only, below
// kubepods, never through a symbolic link. The package reads and writes
// files only; what to write is in value.go.
package actuator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/evictd/evictd/pkg/pressure"
)

// Actuator writes the pod cgroups' memory limits of one node.
type Actuator struct {
	mode pressure.Mode
	// memoryMount is the memory controller's hierarchy root; cgroups are
	// relative to it.
	memoryMount string
	// kubepods is kubepods' memory cgroup directory, "" while none.
	kubepods string
	// layout, when set, is the node's layout now: a kubepods cgroup made
	// after the start is the actuator's too.
	layout func() pressure.Layout
}

// New returns the actuator of a node's cgroup layout.
func New(layout pressure.Layout) *Actuator {
	return &Actuator{mode: layout.Mode, memoryMount: layout.MemoryMount, kubepods: layout.KubepodsMemoryDir}
}

// Following makes the actuator take kubepods from layout at each write
// (the observer's Layout), rather than from the layout it was made with.
func (a *Actuator) Following(layout func() pressure.Layout) *Actuator {
	a.layout = layout
	return a
}

// kubepodsDir is kubepods' memory cgroup directory now, "" while none.
func (a *Actuator) kubepodsDir() string {
	if a.layout != nil {
		return a.layout().KubepodsMemoryDir
	}
	return a.kubepods
}

// ErrNoKubepods is Check's answer while the node has no kubepods cgroup:
// there is nothing to write yet, and nothing to check.
var ErrNoKubepods = errors.New("the node has no kubepods cgroup yet")

// Check opens kubepods' limit file for writing, and writes nothing: an
// actuator on a read-only mount (the DaemonSet without actuator.enabled)
// or without the right to write must say so at start, not at its first
// victim.
func (a *Actuator) Check() error {
	kubepods := a.kubepodsDir()
	if kubepods == "" {
		return ErrNoKubepods
	}
	f, _, err := a.openFile(kubepods, "", a.limitFile(), os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("the actuator cannot write the pod cgroups: %w%s", err, hint(err))
	}
	return f.Close()
}

// hint says what an operator does about a write refused by the mount or
// the permissions.
func hint(err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return " (the pod cgroups are mounted read-only: the chart's actuator.enabled mounts them writable)"
	case errors.Is(err, os.ErrPermission):
		return " (evictd must run as root to write cgroup files; on an SELinux-enforcing node its container likely needs seLinuxOptions type spc_t)"
	}
	return ""
}

func (a *Actuator) limitFile() string {
	if a.mode == pressure.ModeV2 {
		return "memory.high"
	}
	return "memory.limit_in_bytes"
}

// Contained is what Contain did.
type Contained struct {
	// File is the limit file written, Limit the bytes written into it, and
	// Usage the cgroup's usage read just before.
	File  string
	Limit uint64
	Usage uint64
}

// containRetries bounds Contain's v1 attempts: the kernel refuses a limit
// below usage (EBUSY), and a victim still growing can pass the limit
// between the read and the write.
const containRetries = 3

// Contain stops the growth of the pod cgroup podCgroup (relative to the
// memory hierarchy's root, as pressure.PodExtras.Cgroup).
func (a *Actuator) Contain(podCgroup string) (Contained, error) {
	kubepods, rel, err := a.podDir(podCgroup)
	if err != nil {
		return Contained{}, err
	}
	dir := filepath.Join(kubepods, rel)
	if a.mode == pressure.ModeV2 {
		usage, err := readBytes(filepath.Join(dir, "memory.current"))
		if err != nil {
			return Contained{}, err
		}
		c := Contained{File: filepath.Join(dir, "memory.high"), Limit: CapAbove(usage), Usage: usage}
		return c, a.writeFile(kubepods, rel, "memory.high", fmt.Sprint(c.Limit))
	}
	// The OOM killer off first: a victim that reaches its new limit then
	// waits there for its SIGKILL instead of being killed before its
	// SIGTERM is handled.
	if err := a.writeFile(kubepods, rel, "memory.oom_control", "1"); err != nil {
		return Contained{}, err
	}
	c, err := a.limitV1(kubepods, rel)
	if err != nil {
		// Without its limit, a victim left with the OOM killer off would
		// hang at its old limit, or the node's, instead of being killed:
		// the OOM killer goes back on.
		if rerr := a.writeFile(kubepods, rel, "memory.oom_control", "0"); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("%w; and the OOM killer could not be turned back on: %w", err, rerr)
		}
	}
	return c, err
}

// limitV1 sets a v1 cgroup's limit just above its usage.
func (a *Actuator) limitV1(kubepods, rel string) (Contained, error) {
	dir := filepath.Join(kubepods, rel)
	var c Contained
	for range containRetries {
		usage, err := readBytes(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			return Contained{}, err
		}
		c = Contained{File: filepath.Join(dir, "memory.limit_in_bytes"), Limit: CapAbove(usage), Usage: usage}
		if err = a.writeFile(kubepods, rel, "memory.limit_in_bytes", fmt.Sprint(c.Limit)); !errors.Is(err, syscall.EBUSY) {
			return c, err
		}
	}
	return c, fmt.Errorf("writing %d to %s: the cgroup kept growing past it (%w)", c.Limit, c.File, syscall.EBUSY)
}

// VictimSpecific reports whether err is about the cgroup written, not the
// actuator's power to write: the cgroup is gone (the pod exited first), or
// the kernel refused a limit below a usage still growing. Readiness is for
// what stops evictd protecting the node, which neither does.
func VictimSpecific(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENODEV)
}

// Relaxed is what Relax did.
type Relaxed struct {
	File string
	// From and To are memory.high before and after, as the kernel writes
	// them ("max" for none).
	From, To string
}

// Relax sets the memory.high of a container cgroup (relative to the
// hierarchy's root) to its memory.max. cgroup v2 only.
func (a *Actuator) Relax(containerCgroup string) (Relaxed, error) {
	if a.mode != pressure.ModeV2 {
		return Relaxed{}, fmt.Errorf("relaxing memory.high needs cgroup v2; this node's memory controller is %s", a.mode)
	}
	kubepods, rel, err := a.podDir(containerCgroup)
	if err != nil {
		return Relaxed{}, err
	}
	dir := filepath.Join(kubepods, rel)
	r := Relaxed{File: filepath.Join(dir, "memory.high")}
	if r.From, err = readLimit(r.File); err != nil {
		return Relaxed{}, err
	}
	if r.To, err = readLimit(filepath.Join(dir, "memory.max")); err != nil {
		return Relaxed{}, err
	}
	return r, a.writeFile(kubepods, rel, "memory.high", r.To)
}

func readBytes(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := ParseBytes(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// readLimit reads a v2 limit file, checked, as written back ("max" or bytes).
func readLimit(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v, err := ParseLimit(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
