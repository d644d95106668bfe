// SPDX-License-Identifier: Apache-2.0

//go:build linux

package memlock

import "golang.org/x/sys/unix"

// LockAll locks every page this process maps now or later as it is first
// touched (MCL_ONFAULT). Without MCL_ONFAULT the kernel would fault in
// every readable mapping at once: the Go runtime's reservations, tens of
// MiB that evictd never uses, against its container's memory limit.
func LockAll() error {
	return unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT)
}

// UnlockAll undoes LockAll.
func UnlockAll() error {
	return unix.Munlockall()
}
