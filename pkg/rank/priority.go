// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Built-in PriorityClass values, for pods whose spec.priority is unset and
// whose class is not in Options.PriorityClasses (e.g. `evictd rank` working
// offline on captured files).
const (
	SystemCriticalPriority        int32 = 2_000_000_000
	systemClusterCriticalPriority int32 = 2_000_000_000
	systemNodeCriticalPriority    int32 = 2_000_001_000
)

// PriorityGroup puts namespaces into a group whose pods' priorities are
// offset and, when fenced, hidden from pods outside the group.
type PriorityGroup struct {
	Name string
	// Namespaces are members by name.
	Namespaces []string
	// Selector, when not nil, makes every namespace whose labels match a
	// member (labels come from Options.NamespaceLabels).
	Selector labels.Selector
	// Offset is added to members' priorities (clamped to int32); for a
	// fenced group it is the members' priority as seen from outside.
	Offset int32
	// Fence stops members' own priorities from counting outside the group.
	Fence bool
}

// ownPriority is spec.priority, else the value of spec.priorityClassName,
// else 0 — what the API server's Priority admission would have set.
func ownPriority(p *v1.Pod, classes map[string]int32) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	name := p.Spec.PriorityClassName
	if name == "" {
		return 0
	}
	if v, ok := classes[name]; ok {
		return v
	}
	switch name {
	case "system-node-critical":
		return systemNodeCriticalPriority
	case "system-cluster-critical":
		return systemClusterCriticalPriority
	}
	return 0
}

// effectivePriority is the priority pods are compared by first.
func effectivePriority(own int32, g *PriorityGroup) int32 {
	switch {
	case g == nil:
		return own
	case g.Fence:
		return g.Offset
	default:
		return clampInt32(int64(own) + int64(g.Offset))
	}
}

func clampInt32(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < math.MinInt32 {
		return math.MinInt32
	}
	return int32(v)
}

// groupIndex finds each namespace's group. A namespace named in a group's
// list belongs to that group; otherwise to the first group, in config order,
// whose selector matches its labels. Config validation rejects a namespace
// listed by name in two groups; selectors can only be checked at run time,
// hence the first-match rule.
type groupIndex struct {
	groups   []PriorityGroup
	byName   map[string]*PriorityGroup
	nsLabels map[string]map[string]string
	cache    map[string]*PriorityGroup
}

func newGroupIndex(groups []PriorityGroup, nsLabels map[string]map[string]string) *groupIndex {
	gi := &groupIndex{groups: groups, nsLabels: nsLabels}
	if len(groups) == 0 {
		return gi
	}
	gi.byName = map[string]*PriorityGroup{}
	gi.cache = map[string]*PriorityGroup{}
	for i := range groups {
		for _, ns := range groups[i].Namespaces {
			if _, dup := gi.byName[ns]; !dup {
				gi.byName[ns] = &groups[i]
			}
		}
	}
	return gi
}

func (gi *groupIndex) lookup(ns string) *PriorityGroup {
	if len(gi.groups) == 0 {
		return nil
	}
	if g, ok := gi.byName[ns]; ok {
		return g
	}
	if g, ok := gi.cache[ns]; ok {
		return g
	}
	var found *PriorityGroup
	set := labels.Set(gi.nsLabels[ns])
	for i := range gi.groups {
		if sel := gi.groups[i].Selector; sel != nil && sel.Matches(set) {
			found = &gi.groups[i]
			break
		}
	}
	gi.cache[ns] = found
	return found
}
