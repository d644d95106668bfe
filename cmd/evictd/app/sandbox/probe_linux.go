// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const errPermission = unix.EPERM

// nameToHandle calls name_to_handle_at(2) on path.
func nameToHandle(path string) error {
	_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
	return err
}
