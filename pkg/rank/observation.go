// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Linux only, like pkg/pressure (getdents, Linux stat fields): the rest of
// this package, and pkg/config which imports it, still build and test
// elsewhere; the callers of DiskPartsOf (the agent, evictd rank) are Linux
// programs anyway.

package rank

import "github.com/evictd/evictd/pkg/pressure"

// DiskPartsOf converts an observation's per-pod ephemeral storage parts into
// Options.DiskParts, keyed by pod UID. Both the agent and `evictd rank` feed
// the ranking this way, so they count the same parts. A pod without parts
// (not measured yet) is left out, and the ranking measures it from the
// Summary instead.
func DiskPartsOf(obs *pressure.Observation) map[string]DiskParts {
	out := make(map[string]DiskParts, len(obs.Pods))
	for i := range obs.Pods {
		p := obs.Pods[i].EphemeralParts
		// A hand-edited observation may lack a uid: kept under "", its parts
		// would go to every Summary pod that has no UID either.
		if p == nil || obs.Pods[i].UID == "" {
			continue
		}
		out[obs.Pods[i].UID] = DiskParts{
			WritableLayer: DiskUse(p.WritableLayer),
			Logs:          DiskUse(p.Logs),
			Volumes:       DiskUse(p.Volumes),
		}
	}
	return out
}
