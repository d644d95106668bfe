// SPDX-License-Identifier: Apache-2.0

package nodelease

import (
	"os"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/evictd/evictd/pkg/install"
)

// FallbackNamespace is the node lease's namespace for an agent outside a
// pod (no POD_NAMESPACE): the shipped install's.
const FallbackNamespace = "evictd-system"

// DefaultNamespace is the node lease's namespace when no
// --node-lease-namespace names one: the agent's own pod's (POD_NAMESPACE,
// from the downward API), where its install's Role grants the Lease and
// no kubelet keeps a heartbeat; outside a pod, FallbackNamespace.
func DefaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return FallbackNamespace
}

// IsAgentIdentity reports whether holder is an identity an agent writes
// (Identity): a pod's "namespace/name", or outside a pod "host_pid". A
// kubelet's heartbeat Lease is held by its node's name, a DNS subdomain,
// which holds neither a "/" nor a "_": an agent never takes over, renews
// or deletes a Lease whose holder is not an agent's, whatever its name.
func IsAgentIdentity(holder string) bool {
	if ns, pod, ok := strings.Cut(holder, "/"); ok {
		return len(validation.IsDNS1123Label(ns)) == 0 && len(validation.IsDNS1123Subdomain(pod)) == 0
	}
	_, _, ok := hostIdentity(holder)
	return ok
}

// IsEvictds reports whether l is a node lease an evictd agent wrote: named
// evictd-<node> and held by an agent's identity (IsAgentIdentity), not the
// kubelet's heartbeat Lease of a node that happens to be named
// evictd-something. A lease with no holder is claimed by no one and is
// left alone.
func IsEvictds(l *coordinationv1.Lease) bool {
	if !strings.HasPrefix(l.Name, NamePrefix) || l.Spec.HolderIdentity == nil {
		return false
	}
	return IsAgentIdentity(*l.Spec.HolderIdentity)
}

// Owned reports whether l is a node lease of the install installID
// (package install) to take back at its uninstall: an agent's (IsEvictds)
// that names installID, or names no install (written by an evictd older
// than the install marks). Another install's is left alone.
func Owned(l *coordinationv1.Lease, installID string) bool {
	if !IsEvictds(l) {
		return false
	}
	of := l.Annotations[install.Annotation]
	return of == "" || of == installID
}
