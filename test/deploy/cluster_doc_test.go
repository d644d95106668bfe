// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/evictd/evictd/test/e2e/framework"
)

// rbacRow is a row of docs/cluster.md's RBAC table.
type rbacRow struct {
	line                                   string
	identity, role, group, resources, when string
	verbs                                  []string
	matched                                bool
}

var backticked = regexp.MustCompile("`([^`]+)`")

// clusterDocRBAC reads the RBAC table of docs/cluster.md.
func clusterDocRBAC(t *testing.T) []*rbacRow {
	t.Helper()
	var rows []*rbacRow
	in := false
	for _, l := range strings.Split(readFile(t, "docs/cluster.md"), "\n") {
		switch {
		case strings.HasPrefix(l, "| identity | role |"):
			in = true
			continue
		case !in || strings.HasPrefix(l, "|---"):
			continue
		case !strings.HasPrefix(l, "|"):
			if len(rows) > 0 {
				return rows
			}
			continue
		}
		c := strings.Split(strings.Trim(l, "|"), "|")
		if len(c) != 7 {
			t.Fatalf("docs/cluster.md: RBAC row with %d cells, want 7: %s", len(c), l)
		}
		for i := range c {
			c[i] = strings.TrimSpace(c[i])
		}
		r := &rbacRow{line: l, identity: c[0], role: c[1], group: c[2], resources: c[3], when: c[5]}
		for _, m := range backticked.FindAllStringSubmatch(c[4], -1) {
			r.verbs = append(r.verbs, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("docs/cluster.md has no RBAC table (a header starting | identity | role |)")
	}
	return rows
}

// docGroup is how the table names an API group.
func docGroup(g string) string {
	if g == "" {
		return "core"
	}
	return "`" + g + "`"
}

func strs(v any) []string {
	var out []string
	for _, x := range asSlice(v) {
		out = append(out, x.(string))
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestClusterDocRBAC holds docs/cluster.md's RBAC table to
// deploy/daemonset.yaml, both ways: every rule of its Roles and
// ClusterRoles, and every binding to a built-in ClusterRole, has a row
// "always" with its identity (the bound ServiceAccounts, or "bound to no
// one"), role, group, resources (and resource names) and exactly its verbs;
// every "always" row is such a rule. The opt-in rows must be granted by the
// chart's agent ClusterRole with their options on.
func TestClusterDocRBAC(t *testing.T) {
	rows := clusterDocRBAC(t)
	objs, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	roleName := func(kind, ns, name string) string {
		if ns != "" {
			name = ns + "/" + name
		}
		return kind + " `" + name + "`"
	}
	// Who each role is bound to.
	bound := map[string][]string{}
	var builtin []string
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		ref, _, _ := unstructured.NestedMap(o.Object, "roleRef")
		role := roleName(ref["kind"].(string), o.GetNamespace(), ref["name"].(string))
		if ref["kind"] == "ClusterRole" {
			role = roleName("ClusterRole", "", ref["name"].(string))
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			bound[role] = append(bound[role], "`"+s.(map[string]any)["name"].(string)+"`")
		}
		if strings.HasPrefix(ref["name"].(string), "system:") {
			builtin = append(builtin, role)
		}
	}
	identity := func(role string) string {
		if len(bound[role]) == 0 {
			return "bound to no one"
		}
		return strings.Join(bound[role], ", ")
	}
	match := func(want func(r *rbacRow) bool, what string) {
		t.Helper()
		n := 0
		for _, r := range rows {
			if r.when == "always" && want(r) {
				r.matched = true
				n++
			}
		}
		if n == 0 {
			t.Errorf("docs/cluster.md's RBAC table has no row \"always\" for %s", what)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		role := roleName(o.GetKind(), o.GetNamespace(), o.GetName())
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, x := range rules {
			rule := x.(map[string]any)
			verbs := strs(rule["verbs"])
			targets := strs(rule["nonResourceURLs"])
			groups := []string{""}
			if len(targets) == 0 {
				targets, groups = strs(rule["resources"]), strs(rule["apiGroups"])
			}
			for _, g := range groups {
				for _, res := range targets {
					group := docGroup(g)
					if rule["nonResourceURLs"] != nil {
						group = ""
					}
					match(func(r *rbacRow) bool {
						if r.identity != identity(role) || r.role != role || r.group != group ||
							!strings.Contains(r.resources, "`"+res+"`") || !sameSet(r.verbs, verbs) {
							return false
						}
						for _, n := range strs(rule["resourceNames"]) {
							if !strings.Contains(r.resources, "`"+n+"`") {
								return false
							}
						}
						return true
					}, role+" "+group+" "+res+" "+strings.Join(verbs, ","))
				}
			}
		}
	}
	for _, role := range builtin {
		match(func(r *rbacRow) bool { return r.role == role && r.identity == identity(role) }, role)
	}
	for _, r := range rows {
		if r.when == "always" && !r.matched {
			t.Errorf("docs/cluster.md's RBAC row is no rule of deploy/daemonset.yaml: %s", r.line)
		}
	}

	// The opt-in rows, against the chart with every option on.
	optIn := mustRender(t, "shadow: {enabled: true}\nevictionRequest: {enabled: true}\npdbPolicy: best-effort")
	agent := find(t, optIn, "ClusterRole", defaultRelease+"-"+defaultNamespace)
	for _, r := range rows {
		if r.when == "always" {
			continue
		}
		if r.role != "ClusterRole `evictd`" {
			t.Errorf("docs/cluster.md's opt-in RBAC row is not the agent's ClusterRole: %s", r.line)
			continue
		}
		group := strings.Trim(r.group, "`")
		if group == "core" {
			group = ""
		}
		for _, m := range backticked.FindAllStringSubmatch(r.resources, -1) {
			for _, v := range r.verbs {
				if !grants(t, agent, group, m[1], v) {
					t.Errorf("the chart with its options on does not grant %s %s %q (docs/cluster.md: %s)", v, m[1], group, r.line)
				}
			}
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
