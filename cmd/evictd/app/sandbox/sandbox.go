// SPDX-License-Identifier: Apache-2.0

// Package sandbox takes from evictd's own process the system calls its
// capabilities would lend an attacker who ran code in it. The container
// keeps CAP_DAC_READ_SEARCH to walk pods' emptyDirs and logs of any owner;
// the kernel also lets that capability open any inode of a mounted
// filesystem by its file handle (open_by_handle_at, the "shocker"
// technique), so a read-only mount of one host directory would reach every
// file of the filesystem it is on: the CA and etcd keys on a control-plane
// node. evictd reads by path only, so the seccomp sandbox refuses both
// file-handle calls (EPERM) and allows everything else. The filter stacks
// on the container runtime's profile: the stricter answer wins.
package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"go.uber.org/zap"
)

// Kind names a sandbox evictd can put its process in (--sandbox).
type Kind string

const (
	// Seccomp is a seccomp filter installed by the process itself, on
	// every thread, refusing Refused with EPERM.
	Seccomp Kind = "seccomp"
	// None leaves the process as the container runtime started it.
	None Kind = "none"
)

// Kinds are the sandboxes ParseKind accepts, the default first.
var Kinds = []Kind{Seccomp, None}

// ParseKind checks a --sandbox value.
func ParseKind(s string) (Kind, error) {
	if k := Kind(s); slices.Contains(Kinds, k) {
		return k, nil
	}
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return "", fmt.Errorf("sandbox %q: want %s", s, strings.Join(names, " or "))
}

// Refused are the system calls the seccomp sandbox refuses: together they
// turn a file's inode number into an open file descriptor without a path,
// past every mount boundary of the filesystem. name_to_handle_at needs no
// capability, but it tells the attacker the handle format to forge.
var Refused = []string{"open_by_handle_at", "name_to_handle_at"}

// Filter is the seccomp filter of the Seccomp sandbox: Refused answer
// EPERM, everything else is allowed. TSYNC puts it on every thread of the
// process at once (the Go runtime's included; threads started later
// inherit it), and no_new_privs, which the kernel requires of a process
// without CAP_SYS_ADMIN, is set first (the pod spec's
// allowPrivilegeEscalation: false has set it already).
func Filter() seccomp.Filter {
	return seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno, // EPERM
				Names:  slices.Clone(Refused),
			}},
		},
	}
}

// Result is the sandbox in force.
type Result struct {
	// Kind is the sandbox asked for.
	Kind Kind
	// Active is whether it is in force, verified.
	Active bool
}

// ErrNotRefused is Verify's answer when a refused call still went
// through.
var ErrNotRefused = errors.New("name_to_handle_at still succeeds")

// Enter puts the process in the sandbox kind and verifies it. An error
// means the sandbox asked for is not in force; it names the cause.
func Enter(kind Kind) (Result, error) {
	switch kind {
	case None:
		return Result{Kind: None}, nil
	case Seccomp:
		if err := seccomp.LoadFilter(Filter()); err != nil {
			return Result{Kind: Seccomp}, fmt.Errorf("cannot install the seccomp filter: %w", err)
		}
		if err := Verify(); err != nil {
			return Result{Kind: Seccomp}, err
		}
		return Result{Kind: Seccomp, Active: true}, nil
	}
	_, err := ParseKind(string(kind))
	return Result{Kind: kind}, err
}

// Verify asks the kernel whether the file-handle calls are refused in
// this process: name_to_handle_at must fail with EPERM (seccomp answers
// before the call looks at its path).
func Verify() error {
	return verdict(nameToHandle("/"))
}

// verdict reads the probe's answer: only EPERM means refused.
func verdict(err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("seccomp filter installed, yet %w", ErrNotRefused)
	case errors.Is(err, errPermission):
		return nil
	}
	return fmt.Errorf("seccomp filter installed, yet name_to_handle_at answers %w, not EPERM", err)
}

// Gauge is where the sandbox's state is published
// (evictd_sandbox_active{kind}).
type Gauge interface {
	SetSandboxActive(kind string, active bool)
}

// Report publishes the result: the gauge, and one log line naming the
// sandbox in force, a warning when there is none.
func (r Result) Report(log *zap.Logger, g Gauge) {
	g.SetSandboxActive(string(Seccomp), r.Kind == Seccomp && r.Active)
	if r.Active {
		log.Info(fmt.Sprintf("sandbox: %s filter in force: %s refused", r.Kind, strings.Join(Refused, ", ")),
			zap.String("sandbox", string(r.Kind)))
		return
	}
	log.Warn(fmt.Sprintf("sandbox: none, turned off: %s allowed, so CAP_DAC_READ_SEARCH can open any file of a mounted host filesystem by its handle", strings.Join(Refused, ", ")),
		zap.String("sandbox", string(None)))
}
