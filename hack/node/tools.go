// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the container runtime of the VM node (test/vmnode):
// containerd 2, its ctr client and its runc shim. Debian packages only
// containerd 1.x, and Kubernetes 1.36 and later want containerd 2.0 or later,
// so they are built here from Go modules; runc and the CNI plugins stay
// Debian's (hack/vm/prepare.sh).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
