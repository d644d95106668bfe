// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// grantSet is every grant the objects make, one string each: a rule of a
// Role or ClusterRole as "<kind> <namespace/name>: <group>/<resource>
// <verb>" (core group "core", a non-resource URL as its path), and a
// binding as "<kind> <namespace/name> -> <roleKind> <roleName> to
// <subject>", so that a grant that appears or goes, or a role bound to
// someone new, shows as one string in a diff.
func grantSet(t *testing.T, objs []*unstructured.Unstructured) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	name := func(o *unstructured.Unstructured) string {
		if o.GetNamespace() != "" {
			return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
		}
		return o.GetKind() + " " + o.GetName()
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role", "ClusterRole":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, x := range rules {
				rule := x.(map[string]any)
				targets := strs(rule["nonResourceURLs"])
				for _, g := range strs(rule["apiGroups"]) {
					if g == "" {
						g = "core"
					}
					for _, r := range strs(rule["resources"]) {
						for _, n := range append(strs(rule["resourceNames"]), "") {
							if n != "" || len(strs(rule["resourceNames"])) == 0 {
								targets = append(targets, g+"/"+r+nameSuffix(n))
							}
						}
					}
				}
				for _, target := range targets {
					for _, v := range strs(rule["verbs"]) {
						set[fmt.Sprintf("%s: %s %s", name(o), target, v)] = true
					}
				}
			}
		case "RoleBinding", "ClusterRoleBinding":
			ref, _, _ := unstructured.NestedMap(o.Object, "roleRef")
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				m := s.(map[string]any)
				set[fmt.Sprintf("%s -> %s %s to %s %v/%v", name(o), ref["kind"], ref["name"], m["kind"], m["namespace"], m["name"])] = true
			}
		}
	}
	return set
}

func nameSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

// TestChartValuesGrants holds what values.yaml says each value grants or
// takes away to the chart: rendered with the value set, the release's
// grants (every rule of its Roles and ClusterRoles, every binding) are the
// defaults' with exactly the grants listed added and removed, nothing else.
// nodeBrake.enabled false leaves out the two Node patches ("leaves the two
// Node patches (nodes, nodes/status) out of the ClusterRole");
// pdbPolicy best-effort adds "delete pods"; evictionRequest.enabled adds
// create/get/update/list/delete on evictionrequests and get on pods;
// nodeLease.enabled false takes the Lease Role and its binding away;
// shadow mode and the actuator need no grant of their own.
func TestChartValuesGrants(t *testing.T) {
	const agent = "ClusterRole evictd-evictd-system: "
	defaults := grantSet(t, mustRender(t, ""))
	// The node lease's grants: the agent's rules on leases, and the
	// bindings of the roles that hold them.
	const agentSA = " to ServiceAccount evictd-system/evictd"
	agentRoles := map[string]bool{} // "Role name", as a binding names it
	for g := range defaults {
		if _, ref, ok := strings.Cut(g, " -> "); ok && strings.HasSuffix(ref, agentSA) {
			agentRoles[strings.TrimSuffix(ref, agentSA)] = true
		}
	}
	var lease []string
	leaseRoles := map[string]bool{}
	for g := range defaults {
		role, rule, ok := strings.Cut(g, ": ")
		kind, name, _ := strings.Cut(role, " ")
		if _, n, namespaced := strings.Cut(name, "/"); namespaced {
			name = n
		}
		if ok && agentRoles[kind+" "+name] && strings.HasPrefix(rule, "coordination.k8s.io/leases") {
			lease = append(lease, g)
			leaseRoles["-> "+kind+" "+name+" to"] = true
		}
	}
	for g := range defaults {
		for r := range leaseRoles {
			if strings.Contains(g, r) {
				lease = append(lease, g)
			}
		}
	}
	if len(leaseRoles) == 0 {
		t.Fatalf("the default values grant nothing on leases; grants: %q", slices.Sorted(maps.Keys(defaults)))
	}
	for _, tc := range []struct {
		values         string
		added, removed []string
	}{
		{values: "nodeBrake: {enabled: false}", removed: []string{agent + "core/nodes patch", agent + "core/nodes/status patch"}},
		{values: "pdbPolicy: best-effort", added: []string{agent + "core/pods delete"}},
		{values: "evictionRequest: {enabled: true}", added: []string{
			agent + "lifecycle.k8s.io/evictionrequests create", agent + "lifecycle.k8s.io/evictionrequests get",
			agent + "lifecycle.k8s.io/evictionrequests update", agent + "lifecycle.k8s.io/evictionrequests list",
			agent + "lifecycle.k8s.io/evictionrequests delete", agent + "core/pods get",
		}},
		{values: "nodeLease: {enabled: false}", removed: lease},
		{values: "shadow: {enabled: true}"},
		{values: "actuator: {enabled: true}"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			got := grantSet(t, mustRender(t, tc.values))
			var added, removed []string
			for g := range got {
				if !defaults[g] {
					added = append(added, g)
				}
			}
			for g := range defaults {
				if !got[g] {
					removed = append(removed, g)
				}
			}
			if !sameSet(added, tc.added) {
				t.Errorf("%s adds the grants %q; values.yaml says %q", tc.values, slices.Sorted(slices.Values(added)), slices.Sorted(slices.Values(tc.added)))
			}
			if !sameSet(removed, tc.removed) {
				t.Errorf("%s takes away the grants %q; values.yaml says %q", tc.values, slices.Sorted(slices.Values(removed)), slices.Sorted(slices.Values(tc.removed)))
			}
		})
	}
}
