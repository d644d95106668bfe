// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file is the observer's only door to the kernel for the per-pass reads.
// It talks to the system calls directly because the os package allocates an
// *os.File and a path copy on every open, and a pass opens or reads hundreds of
// files: paths are kept NUL-terminated (cpath) so opening allocates nothing,
// and files are kept open between passes and re-read with pread, which costs
// 2-7 µs instead of 9-15 µs for open+read+close (measured on this project's
// machines, docs/kernel.md, "What reading the files costs").

// atFDCWD is AT_FDCWD (-100) as a system call argument: ^99 is -100 in
// two's complement.
const atFDCWD = ^uintptr(99)

var errTooLarge = errors.New("file larger than the read buffer")

// cpath is a path with a trailing NUL, ready for the system calls.
type cpath []byte

func newCPath(p string) cpath {
	b := make([]byte, len(p)+1)
	copy(b, p)
	return b
}

func (c cpath) String() string { return string(c[:len(c)-1]) }

// openC opens a NUL-terminated path read-only without allocating.
func openC(p cpath, flags int) (int, error) {
	for {
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT, atFDCWD,
			uintptr(unsafe.Pointer(&p[0])), uintptr(flags|unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(fd), nil
	}
}

// preadAll reads fd from offset 0 until EOF into buf. A kernfs or procfs
// file re-generates its content on a read at offset 0, so this is a fresh
// read of a kept-open file. A short read is taken as EOF, which saves a
// second system call per file: regular files read short only at EOF, and
// seq_file (cgroupfs, procfs) fills the whole request unless the content ends.
func preadAll(fd int, buf []byte) (int, error) {
	n := 0
	for {
		if n == len(buf) {
			return n, errTooLarge
		}
		m, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m < len(buf)-n {
			return n + m, nil
		}
		n += m
	}
}

// readC opens, reads and closes a file. It is the floor the benchmarks
// compare with, and the fallback once the open-file budget is spent.
func readC(p cpath, buf []byte) (int, error) {
	fd, err := openC(p, 0)
	if err != nil {
		return 0, err
	}
	n, err := preadAll(fd, buf)
	unix.Close(fd)
	return n, err
}

// existsC reports whether a path exists, without allocating.
func existsC(p cpath) bool {
	_, _, e := unix.Syscall(unix.SYS_FACCESSAT, atFDCWD, uintptr(unsafe.Pointer(&p[0])), uintptr(unix.F_OK))
	return e == 0
}

// listDirC calls fn for every entry of a directory. buf is the getdents
// buffer, reused between calls by the caller.
func listDirC(p cpath, buf []byte, fn func(name []byte, typ uint8)) error {
	fd, err := openC(p, unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		if err := parseDirents(buf[:n], fn); err != nil {
			return err
		}
	}
}

// file is one kernel file the observer reads every pass. It stays open
// between passes while the observer's open-file budget allows.
type file struct {
	path cpath
	fd   int // -1 when not open
}

func newFile(p string) file { return file{path: newCPath(p), fd: -1} }

// read returns the file's current content in buf. keep says whether the
// file may stay open after the read (the open-file budget); *open is the
// observer's count of files it holds open.
func (f *file) read(buf []byte, keep bool, open *int) ([]byte, error) {
	if f.fd < 0 {
		if !keep {
			n, err := readC(f.path, buf)
			return buf[:n], err
		}
		fd, err := openC(f.path, 0)
		if err != nil {
			return nil, err
		}
		f.fd = fd
		*open++
	}
	n, err := preadAll(f.fd, buf)
	if err != nil {
		// A removed cgroup's kept-open files fail with ENODEV; whatever the
		// cause, the next read starts from a fresh open.
		f.close(open)
		return nil, err
	}
	return buf[:n], nil
}

func (f *file) close(open *int) {
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
		*open--
	}
}
