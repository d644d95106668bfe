// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package sandbox

import (
	"errors"
	"syscall"
)

const errPermission = syscall.EPERM

// nameToHandle has no file handles to ask for off Linux: evictd watches
// Linux nodes only, and LoadFilter has failed before Verify is called.
func nameToHandle(string) error {
	return errors.ErrUnsupported
}
