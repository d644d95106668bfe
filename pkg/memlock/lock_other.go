// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package memlock

import "errors"

// LockAll does nothing off Linux: evictd watches Linux nodes only.
func LockAll() error {
	return errors.ErrUnsupported
}

// UnlockAll does nothing off Linux.
func UnlockAll() error {
	return nil
}
