// SPDX-License-Identifier: Apache-2.0

// Package hostfile reads a host file evictd trusts for what it says (the
// kubelet's configuration, its flags files, a process's cmdline or cgroup)
// as a regular file of bounded size, without blocking. The host's
// filesystem is not evictd's to trust: a path a pod can name (a forged
// kubelet's --config) may be a FIFO, whose open or read waits for a writer
// forever, a device that never ends, or a file too large to hold.
//
// Read opens with O_NONBLOCK (a FIFO's open returns at once), refuses
// anything fstat does not call a regular file, and reads at most the bound
// it is given plus one byte: /proc files report a size of 0, so the bound
// holds by reading, not by st_size alone.
package hostfile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The bounds evictd reads its host files with.
const (
	// ConfigLimit bounds a configuration file: the kubelet's config and
	// drop-ins, kubeadm-flags.env, a distribution's arg files. A real
	// KubeletConfiguration is a few KiB.
	ConfigLimit = 1 << 20
	// ProcLimit bounds a /proc/PID file (cmdline, cgroup, stat). The
	// kernel gives a cmdline up to the arguments' size, which a kubelet
	// keeps to a few KiB; a process with more is not read.
	ProcLimit = 256 << 10
)

// NotRegularError is a path that is no regular file: a FIFO, a socket, a
// device or a directory.
type NotRegularError struct {
	Path, Type string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: refused", e.Path, e.Type)
}

// TooLargeError is a regular file larger than the bound it was read with.
type TooLargeError struct {
	Path string
	// Size is st_size when that told; when only the read did (a /proc
	// file), AtLeast is set and the file is larger than Size.
	Size, Limit int64
	// AtLeast: the file is more than Size bytes.
	AtLeast bool
}

func (e *TooLargeError) Error() string {
	more := ""
	if e.AtLeast {
		more = "more than "
	}
	return fmt.Sprintf("%s is %s%d bytes, over the bound of %d bytes: refused", e.Path, more, e.Size, e.Limit)
}

// Read returns the contents of the regular file at path, at most limit
// bytes: a file that is no regular file gives a *NotRegularError naming
// its type, a larger one a *TooLargeError naming size and bound. Symbolic
// links are followed (the caller resolves them within the host root). An
// error from the system wraps it, so errors.Is(err, fs.ErrNotExist) holds
// for a missing file.
func Read(path string, limit int64) ([]byte, error) {
	// A stat first keeps evictd from even opening a device (an open can
	// have effects: a tape rewinds, a terminal becomes the controlling
	// one); the fstat after the open is what counts, for the path may
	// change in between.
	var st unix.Stat_t
	if err := retry(func() error { return unix.Stat(path, &st) }); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := regular(path, st.Mode); err != nil {
		return nil, err
	}
	var fd int
	err := retry(func() (err error) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		return err
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := retry(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if err := regular(path, st.Mode); err != nil {
		return nil, err
	}
	if st.Size > limit {
		return nil, &TooLargeError{Path: path, Size: st.Size, Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Size: limit, Limit: limit, AtLeast: true}
	}
	return data, nil
}

// retry runs call again while it is interrupted by a signal (EINTR), as
// package os does for its own calls: the runtime's signals can interrupt a
// system call on a file system that does not restart it.
func retry(call func() error) error {
	for {
		if err := call(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// regular is nil for a regular file's mode, else the error naming its type.
func regular(path string, mode uint32) error {
	typ := ""
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFIFO:
		typ = "a FIFO"
	case unix.S_IFSOCK:
		typ = "a socket"
	case unix.S_IFCHR:
		typ = "a character device"
	case unix.S_IFBLK:
		typ = "a block device"
	case unix.S_IFDIR:
		typ = "a directory"
	case unix.S_IFLNK:
		typ = "a symbolic link"
	default:
		typ = fmt.Sprintf("of file type %#o", mode&unix.S_IFMT)
	}
	return &NotRegularError{Path: path, Type: typ}
}

// IsRefused reports whether err is Read's refusal of a file (its type or
// size), as opposed to the system's error.
func IsRefused(err error) bool {
	var nr *NotRegularError
	var tl *TooLargeError
	return errors.As(err, &nr) || errors.As(err, &tl)
}
