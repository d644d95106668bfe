// SPDX-License-Identifier: Apache-2.0

// Package stale names the host resources the test harness creates (temporary
// directories, cgroups) after the process that owns them, so that a later run
// can remove what a killed run left behind. A test that hits `go test
// -timeout` dies without running its cleanups; its child processes die with
// it (see package proc), but directories, mounts and cgroups stay until the
// next run sweeps them.
package stale

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Name returns prefix-<this pid>-<random>, a name Sweep can attribute.
func Name(prefix string) string {
	return fmt.Sprintf("%s-%d-%08x", prefix, os.Getpid(), rand.Uint32())
}

// Owner returns the pid encoded in a name made by Name with this prefix.
func Owner(prefix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	return pid, err == nil && pid > 0
}

// Sweep calls remove for every entry of dir named by Name(prefix) whose owner
// process no longer exists. A missing dir is not an error.
func Sweep(dir, prefix string, remove func(path string) error) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		pid, ok := Owner(prefix, e.Name())
		if !ok || alive(pid) {
			continue
		}
		if err := remove(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove stale %s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// alive errs on the side of keeping things: only a process that is certainly
// gone (or a zombie waiting to be reaped) frees its resources.
func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	return procState(b) != 'Z'
}

// procState returns the state letter of a /proc/PID/stat line; the command
// name before it is in parentheses and may itself hold spaces and ')'.
func procState(stat []byte) byte {
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}
