// SPDX-License-Identifier: Apache-2.0

package actuator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/pkg/pressure"
)

// The DaemonSet's actuator.enabled mounts the whole pod cgroup tree
// writable: the mount would let evictd's process write cgroup.kill,
// cgroup.freeze, cgroup.procs or any other cgroup's files. The actuator
// narrows that to what its job needs: every write it makes goes through
// writeFile, which opens only the memory limit files below, and only in
// the pods' cgroup tree, resolved without following a symbolic link.

// writableFiles are the only files the actuator writes, by the memory
// controller's version: v2 throttles at memory.high; v1, which has none,
// limits at memory.limit_in_bytes with the OOM killer off
// (memory.oom_control).
func writableFiles(mode pressure.Mode) []string {
	if mode == pressure.ModeV2 {
		return []string{"memory.high"}
	}
	return []string{"memory.limit_in_bytes", "memory.oom_control"}
}

// ErrRefused is a write the actuator will not make: a file not among its
// memory limit files, or a path that leaves the pods' cgroup tree.
var ErrRefused = errors.New("the actuator writes the memory limits of the pods' cgroups only")

// podDir is a cgroup's directory relative to kubepods: cgroup is relative
// to the memory hierarchy's root (as pressure.PodExtras.Cgroup), and must
// name a cgroup strictly below kubepods, without "." or ".." in it.
func (a *Actuator) podDir(cgroup string) (kubepods, rel string, err error) {
	kubepods = a.kubepodsDir()
	if kubepods == "" {
		return "", "", fmt.Errorf("cgroup %q: %w", cgroup, ErrNoKubepods)
	}
	parts := strings.Split(strings.Trim(cgroup, "/"), "/")
	if slices.ContainsFunc(parts, func(p string) bool { return p == "" || p == "." || p == ".." }) {
		return "", "", fmt.Errorf("cgroup %q is not a pod's or a container's cgroup: %w", cgroup, ErrRefused)
	}
	under, err := filepath.Rel(a.memoryMount, kubepods)
	if err != nil || under == ".." || strings.HasPrefix(under, "../") {
		return "", "", fmt.Errorf("kubepods %s is not in the memory hierarchy %s: %w", kubepods, a.memoryMount, ErrRefused)
	}
	rel, ok := strings.CutPrefix(strings.Join(parts, "/"), under+"/")
	if under == "." {
		rel, ok = strings.Join(parts, "/"), true
	}
	if !ok || rel == "" {
		return "", "", fmt.Errorf("cgroup %q is not a pod's or a container's cgroup: it is not below kubepods (%s): %w", cgroup, kubepods, ErrRefused)
	}
	return kubepods, rel, nil
}

// writeFile writes value into the file name of the cgroup directory rel
// below kubepods ("" is kubepods itself, for Check): the one way the
// actuator writes. It refuses any other file than writableFiles, and any
// path that resolves through a symbolic link or outside kubepods.
func (a *Actuator) writeFile(kubepods, rel, name, value string) error {
	f, path, err := a.openFile(kubepods, rel, name, unix.O_WRONLY|unix.O_TRUNC)
	if err != nil {
		return fmt.Errorf("writing %s to %s: %w%s", value, path, err, hint(err))
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s to %s: %w", value, path, err)
	}
	return nil
}

// openFile opens a memory limit file below kubepods, as writeFile says;
// path is the file's name on the host, for errors.
func (a *Actuator) openFile(kubepods, rel, name string, flags int) (f *os.File, path string, err error) {
	// As asked, not cleaned: a refusal names what was asked for.
	path = strings.Join([]string{kubepods, rel, name}, "/")
	if rel == "" {
		path = kubepods + "/" + name
	}
	if !slices.Contains(writableFiles(a.mode), name) {
		return nil, path, fmt.Errorf("%w (%s on cgroup %s), not %q", ErrRefused, strings.Join(writableFiles(a.mode), ", "), a.mode, name)
	}
	if rel != "" {
		parts := strings.Split(rel, "/")
		if strings.HasPrefix(rel, "/") || slices.ContainsFunc(parts, func(p string) bool { return p == "" || p == "." || p == ".." }) {
			return nil, path, fmt.Errorf("%w: %q is not a cgroup below kubepods", ErrRefused, rel)
		}
	}
	fd, err := openBeneath(kubepods, filepath.Join(rel, name), flags)
	if err != nil {
		return nil, path, err
	}
	return os.NewFile(uintptr(fd), path), path, nil
}

// openat2 is unix.Openat2; tests take it away, as an old kernel or a
// seccomp profile without it would.
var openat2 = unix.Openat2

// openBeneath opens rel below the directory root, refusing to follow a
// symbolic link or to leave root: openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS (Linux 5.6), else, where the kernel or a seccomp
// profile refuses openat2, a walk of rel's components, each opened with
// O_NOFOLLOW from the one before (rel holds no "..", checked by openFile).
func openBeneath(root, rel string, flags int) (int, error) {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rootFd)
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	for range 3 {
		fd, err := openat2(rootFd, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EAGAIN):
			// A rename raced the lookup: openat2 asks to try again.
			continue
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			return walkBeneath(rootFd, rel, flags)
		}
		return -1, resolveErr(rel, err)
	}
	return -1, resolveErr(rel, unix.EAGAIN)
}

func walkBeneath(rootFd int, rel string, flags int) (int, error) {
	parts := strings.Split(rel, "/")
	dir := rootFd
	defer func() {
		if dir != rootFd {
			unix.Close(dir)
		}
	}()
	for _, p := range parts[:len(parts)-1] {
		fd, err := unix.Openat(dir, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				// A symbolic link opened with O_NOFOLLOW is no directory.
				err = unix.ELOOP
			}
			return -1, resolveErr(rel, err)
		}
		if dir != rootFd {
			unix.Close(dir)
		}
		dir = fd
	}
	fd, err := unix.Openat(dir, parts[len(parts)-1], flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, resolveErr(rel, err)
	}
	return fd, nil
}

// resolveErr names a refusal of the resolution as one; other errors (the
// cgroup gone, a read-only mount) pass as they are, for VictimSpecific and
// hint.
func resolveErr(rel string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%w: %s resolves through a symbolic link or outside the pods' cgroup tree (%w)", ErrRefused, rel, err)
	}
	return err
}
