// SPDX-License-Identifier: Apache-2.0

package nodelease

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// IsEvictds reports whether l is a node lease an evictd agent wrote, not
// the kubelet's heartbeat Lease of a node that happens to be named
// evictd-something (both live in kube-node-lease under such a name). The
// kubelet's holder identity is its node's name, a DNS subdomain; an
// agent's (Identity) is "namespace/pod" or "host_pid", and a node name
// never holds a "/" or a "_". A lease with no holder is claimed by no one
// and is left alone.
func IsEvictds(l *coordinationv1.Lease) bool {
	if !strings.HasPrefix(l.Name, NamePrefix) || l.Spec.HolderIdentity == nil {
		return false
	}
	return strings.ContainsAny(*l.Spec.HolderIdentity, "/_")
}
