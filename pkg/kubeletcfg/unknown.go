// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// Reason is why the kubelet's settings are unknown, in one word: the
// metric's label and the /readyz detail carry it, and docs/run.md says
// what to mount or grant for each. Read never guesses in their place.
type Reason string

// The reasons, from ReasonOf.
const (
	// ReasonNotFound: no kubelet process, and no kubeadm files.
	ReasonNotFound Reason = "not-found"
	// ReasonEmbedded: the kubelet runs inside k3s or MicroK8s, whose
	// arguments evictd does not read.
	ReasonEmbedded Reason = "embedded"
	// ReasonNotMounted: a file's directory is not visible under the host
	// root (NotVisibleError).
	ReasonNotMounted Reason = "not-mounted"
	// ReasonMissing: the file is not in its directory, which is visible
	// (NotVisibleError): nothing to mount.
	ReasonMissing Reason = "missing"
	// ReasonRelativePath: a relative --config or --config-dir, and the
	// kubelet's working directory, which it is relative to, cannot be read
	// (RelativePathError).
	ReasonRelativePath Reason = "relative-path"
	// ReasonProcHidden: the host's /proc hides the kubelet process
	// (HiddenError).
	ReasonProcHidden Reason = "proc-hidden"
	// ReasonInvalid: a file or flag the kubelet itself would refuse.
	ReasonInvalid Reason = "invalid"
	// ReasonUnreadable: a file could not be read (not a regular file,
	// too large, permission, I/O).
	ReasonUnreadable Reason = "unreadable"
)

// Reasons lists every Reason ReasonOf gives, for the docs and the metric's
// help.
var Reasons = []Reason{ReasonNotFound, ReasonEmbedded, ReasonNotMounted, ReasonMissing,
	ReasonRelativePath, ReasonProcHidden, ReasonInvalid, ReasonUnreadable}

// ReasonOf says why Read failed with err.
func ReasonOf(err error) Reason {
	var (
		hidden *HiddenError
		rel    *RelativePathError
		nv     *NotVisibleError
		inv    *InvalidError
	)
	switch {
	case errors.As(err, &hidden):
		return ReasonProcHidden
	case errors.As(err, &rel):
		return ReasonRelativePath
	case errors.Is(err, ErrEmbedded):
		return ReasonEmbedded
	case errors.Is(err, ErrNotFound):
		return ReasonNotFound
	case errors.As(err, &nv) && nv.DirVisible:
		return ReasonMissing
	case errors.As(err, &nv):
		return ReasonNotMounted
	case errors.As(err, &inv):
		return ReasonInvalid
	}
	return ReasonUnreadable
}

// ErrEmbedded: the kubelet runs inside another process (k3s, MicroK8s);
// Read's error wraps it with ErrNotFound.
var ErrEmbedded = errors.New("the kubelet is embedded")

// NotVisibleError is a file or directory the kubelet reads that does not
// exist under the host root. When its directory is not visible either, it
// is usually not mounted into evictd's pod; when the directory is, the file
// is not on the host (a config being rewritten, a kubelet that will not
// start), and there is nothing to mount.
type NotVisibleError struct {
	// Path is the host path; Via says who named it.
	Path, Via, HostRoot string
	// Dir is the host directory that holds it once the symbolic links on
	// the way are followed; DirVisible says it exists under the host root.
	Dir        string
	DirVisible bool
}

func (e *NotVisibleError) Error() string {
	dir, via := e.Dir, e.Via
	if dir == "" {
		dir = path.Dir(e.Path)
	}
	if dir != path.Dir(e.Path) {
		via += ", through links into " + dir
	}
	if e.DirVisible {
		return fmt.Sprintf("kubelet config %s (%s) does not exist: its directory %s is visible under host root %s and the file is not in it",
			e.Path, via, dir, e.HostRoot)
	}
	return fmt.Sprintf("kubelet config %s (%s) is not visible under host root %s: mount %s read-only at %s (the chart's preset for the platform, or its kubeletConfig.hostPath, or kubeletConfig.hostFiles for the file alone; the manifest's commented kubelet-config volume), or give --kubelet-config",
		e.Path, via, e.HostRoot, dir, filepath.Join(e.HostRoot, dir))
}

// notVisible is the NotVisibleError of the host path p, missing under
// hostRoot: its directory resolved as the host resolves it, and whether
// that directory is there.
func notVisible(hostRoot, p, via string) *NotVisibleError {
	e := &NotVisibleError{Path: p, Via: via, HostRoot: hostRoot, Dir: path.Dir(p)}
	if r, err := resolveHost(hostRoot, p); err == nil {
		d := path.Dir(r)
		e.Dir = d
		if fi, err := os.Stat(filepath.Join(hostRoot, d)); err == nil && fi.IsDir() {
			e.DirVisible = true
		}
	}
	return e
}

// RelativePathError is a relative --config or --config-dir: the kubelet
// reads it from its working directory, which evictd could not read. Read
// does not take / in its place: that would be a guess.
type RelativePathError struct {
	// Flag is the kubelet's flag, Path its value.
	Flag, Path string
	// PID is the kubelet process; 0 when none is visible (the flag came
	// from kubeadm's flags file).
	PID int
	// Err is why /proc/PID/cwd could not be read.
	Err error
}

func (e *RelativePathError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("the kubelet's %s %s (%s) is a relative path, read from the kubelet's working directory, and no kubelet process is visible to read that from",
			e.Flag, e.Path, KubeadmFlagsEnv)
	}
	return fmt.Sprintf("kubelet pid %d's %s %s is a relative path, read from its working directory, which evictd cannot read: %v",
		e.PID, e.Flag, e.Path, e.Err)
}

func (e *RelativePathError) Unwrap() error { return e.Err }

// HiddenError is a /proc that hides processes from evictd (mounted with
// hidepid, or refusing their command lines): no kubelet process is seen,
// and kubeadm's files in its place would be a guess.
type HiddenError struct {
	// Proc is the /proc directory; Why what shows it hides processes.
	Proc, Why string
}

func (e *HiddenError) Error() string {
	return fmt.Sprintf("no kubelet process is visible in %s, which hides other processes from evictd (%s)", e.Proc, e.Why)
}

// InvalidError is a file, flag or value the kubelet would refuse too.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// invalid marks err, if any, as an InvalidError.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return &InvalidError{Err: err}
}

// isPermission: the read was refused (EACCES, EPERM).
func isPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }
