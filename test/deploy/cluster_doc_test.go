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

// grantVerb is a grant as docs/cluster.md's stolen-token table writes it:
// "verb resource" (core), "verb group/resource" or "verb /path".
var grantVerb = regexp.MustCompile(`^(get|list|watch|create|update|patch|delete) (\S+)$`)

// rulesGrant reports whether one of rules grants verb on target: a
// non-resource path, a core resource (a subresource too, "pods/eviction"),
// or group/resource.
func rulesGrant(rules []map[string]any, verb, target string) bool {
	type want struct{ group, resource string }
	var wants []want
	if !strings.HasPrefix(target, "/") {
		wants = append(wants, want{"", target})
		if g, r, ok := strings.Cut(target, "/"); ok {
			wants = append(wants, want{g, r})
		}
	}
	for _, rule := range rules {
		if !slices.Contains(strs(rule["verbs"]), verb) {
			continue
		}
		if strings.HasPrefix(target, "/") {
			if slices.Contains(strs(rule["nonResourceURLs"]), target) {
				return true
			}
			continue
		}
		for _, w := range wants {
			if slices.Contains(strs(rule["apiGroups"]), w.group) && slices.Contains(strs(rule["resources"]), w.resource) {
				return true
			}
		}
	}
	return false
}

// boundRules are the rules of every Role and ClusterRole of objs bound to
// the ServiceAccount sa, and of the roles named in also.
func boundRules(objs []*unstructured.Unstructured, sa string, also ...string) []map[string]any {
	roles := map[string]bool{}
	for _, n := range also {
		roles["ClusterRole/"+n] = true
	}
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		ref, _, _ := unstructured.NestedMap(o.Object, "roleRef")
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			if m := s.(map[string]any); m["kind"] == "ServiceAccount" && m["name"] == sa {
				key := ref["kind"].(string) + "/" + ref["name"].(string)
				if ref["kind"] == "Role" {
					key = "Role/" + o.GetNamespace() + "/" + ref["name"].(string)
				}
				roles[key] = true
			}
		}
	}
	var rules []map[string]any
	if roles["ClusterRole/system:auth-delegator"] {
		// The built-in role's two rules (the API server's bootstrap policy).
		rules = append(rules,
			map[string]any{"apiGroups": []any{"authentication.k8s.io"}, "resources": []any{"tokenreviews"}, "verbs": []any{"create"}},
			map[string]any{"apiGroups": []any{"authorization.k8s.io"}, "resources": []any{"subjectaccessreviews"}, "verbs": []any{"create"}})
	}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetName()
		if o.GetKind() == "Role" {
			key = "Role/" + o.GetNamespace() + "/" + o.GetName()
		}
		if (o.GetKind() == "Role" || o.GetKind() == "ClusterRole") && roles[key] {
			rs, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rs {
				rules = append(rules, r.(map[string]any))
			}
		}
	}
	return rules
}

// TestClusterDocStolenTokens holds docs/cluster.md's table "What a stolen
// token can do" to the manifests: it has a row for each identity (the
// agent's token bound to its pod and not, the cleanup's, each reader
// role); every grant its "can" column names ("verb resource") is granted
// to that identity by deploy/daemonset.yaml, or for the agent, when the
// row marks it opt-in, by the chart with its options on (pdbPolicy
// best-effort, evictionRequest.enabled); and every admission policy the
// table names exists, in deploy/daemonset.yaml or the opt-in
// deploy/own-node-evictions.yaml.
func TestClusterDocStolenTokens(t *testing.T) {
	_, section, ok := strings.Cut(readFile(t, "docs/cluster.md"), "\n## What a stolen token can do\n")
	if !ok {
		t.Fatal("docs/cluster.md has no section \"What a stolen token can do\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	objs, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ownNode, err := framework.ReadManifest(repoPath(t, "deploy", "own-node-evictions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policies := map[string]bool{}
	for _, o := range append(slices.Clone(objs), ownNode...) {
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			policies[o.GetName()] = true
		}
	}
	optIn := find(t, mustRender(t, "pdbPolicy: best-effort\nevictionRequest: {enabled: true}"), "ClusterRole", defaultRelease+"-"+defaultNamespace)
	var optInRules []map[string]any
	for _, r := range nested[[]any](t, optIn, "rules") {
		optInRules = append(optInRules, r.(map[string]any))
	}

	rows := map[string]bool{}
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| token |") {
			continue
		}
		c := strings.Split(strings.Trim(l, "|"), " | ")
		if len(c) != 3 {
			t.Fatalf("docs/cluster.md: stolen-token row with %d cells, want 3: %s", len(c), l)
		}
		who := strings.TrimSpace(c[0])
		var rules []map[string]any
		opt := false // the agent's opt-in grants count
		switch {
		case strings.HasPrefix(who, "agent, bound to its pod"):
			rules, opt = boundRules(objs, "evictd"), true
			rows["agent bound"] = true
		case strings.HasPrefix(who, "agent, not bound to a pod"):
			rules, opt = boundRules(objs, "evictd"), true
			rows["agent unbound"] = true
		case strings.HasPrefix(who, "cleanup"):
			rules = boundRules(objs, "evictd-cleanup")
			rows["cleanup"] = true
		case strings.HasPrefix(who, "a reader bound to `"):
			role := backticked.FindStringSubmatch(who)[1]
			rules = boundRules(objs, "", role)
			if len(rules) == 0 {
				t.Errorf("docs/cluster.md names a reader role %s that deploy/daemonset.yaml does not have", role)
			}
			rows[role] = true
		default:
			t.Errorf("docs/cluster.md: a stolen-token row of no known identity: %s", who)
			continue
		}
		can := c[1]
		optStart := strings.Index(can, "opt-in")
		for _, m := range backticked.FindAllStringSubmatchIndex(can, -1) {
			g := grantVerb.FindStringSubmatch(can[m[2]:m[3]])
			if g == nil {
				continue
			}
			granted := rulesGrant(rules, g[1], g[2])
			if !granted && opt && optStart >= 0 && m[0] > optStart {
				granted = rulesGrant(optInRules, g[1], g[2])
			}
			if !granted {
				t.Errorf("docs/cluster.md says %s can %q, which the manifests do not grant it", who, g[0])
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(l, -1) {
			if n := m[1]; strings.HasPrefix(n, "evictd-") && !strings.Contains(n, "/") && !strings.HasSuffix(n, "-reader") && !policies[n] {
				t.Errorf("docs/cluster.md's stolen-token table names the policy %s, which no manifest has", n)
			}
		}
	}
	for _, want := range []string{"agent bound", "agent unbound", "cleanup", "evictd-explain-reader", "evictd-metrics-reader"} {
		if !rows[want] {
			t.Errorf("docs/cluster.md's stolen-token table has no row for %s", want)
		}
	}
}
