// SPDX-License-Identifier: Apache-2.0

// Package nodebrake puts back the scheduler's brake that evictd's acting
// before the kubelet takes away. When the kubelet evicts for memory it sets
// MemoryPressure, the node lifecycle controller taints the node
// node.kubernetes.io/memory-pressure:NoSchedule and the scheduler stops
// placing pods there; evictd evicts before the kubelet's threshold, so that
// never happens, and the evicted pod's replacement can land right back on
// the node (kubernetes#89068). During a pressure episode the Brake sets, on
// its own Node only, a condition of evictd's own type and a taint with
// evictd's own key, and lifts both when the episode ends, at a clean exit,
// and at start when a previous agent died holding them. The kubelet's own
// condition types and taint keys are never touched: the kubelet and the
// node lifecycle controller own them.
package nodebrake

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/install"
)

// Resource is what a brake is for; the agent maps its pressure episodes
// onto these, as the kubelet maps its signals onto its three conditions.
type Resource string

// The resources, each with its own condition type and taint key.
const (
	Memory Resource = "memory"
	Disk   Resource = "disk"
	PIDs   Resource = "pids"
)

// Resources lists every resource, in a fixed order.
func Resources() []Resource { return []Resource{Memory, Disk, PIDs} }

// TaintPrefix starts every taint key evictd writes; the admission policy
// shipped with evictd lets its agents write no other.
const TaintPrefix = "evictd.io/"

// ConditionType is the resource's Node condition type: evictd's own, never
// the kubelet's MemoryPressure, DiskPressure or PIDPressure.
func ConditionType(r Resource) v1.NodeConditionType {
	switch r {
	case Memory:
		return "EvictdMemoryPressure"
	case Disk:
		return "EvictdDiskPressure"
	case PIDs:
		return "EvictdPIDPressure"
	}
	return ""
}

// TaintKey is the resource's taint key.
func TaintKey(r Resource) string {
	switch r {
	case Memory:
		return TaintPrefix + "memory-pressure"
	case Disk:
		return TaintPrefix + "disk-pressure"
	case PIDs:
		return TaintPrefix + "pid-pressure"
	}
	return ""
}

// EffectNone is --node-brake-taint-effect's value for a brake that sets the
// condition only: the scheduler is not asked to keep anything away.
const EffectNone = "None"

// ParseEffect reads --node-brake-taint-effect: NoSchedule (as the kubelet's
// brake), PreferNoSchedule, or None ("" returned: no taint). NoExecute is
// refused: the brake keeps new pods away, evictions choose who leaves.
func ParseEffect(s string) (v1.TaintEffect, error) {
	switch s {
	case string(v1.TaintEffectNoSchedule), string(v1.TaintEffectPreferNoSchedule):
		return v1.TaintEffect(s), nil
	case EffectNone:
		return "", nil
	}
	return "", fmt.Errorf("node brake taint effect %q: want NoSchedule, PreferNoSchedule or None", s)
}

// The reasons of evictd's conditions.
const (
	ReasonPressure   = "EvictdPressureEpisode"
	ReasonNoPressure = "EvictdNoPressure"
)

// Want is what one resource's brake should be: On during an episode, with
// the message the condition carries.
type Want struct {
	On      bool
	Message string
}

// condition is the patch form of a NodeCondition: $patch lets one entry
// delete evictd's condition, merged by type as the API merges conditions.
type condition struct {
	Type               v1.NodeConditionType `json:"type"`
	Status             v1.ConditionStatus   `json:"status,omitempty"`
	Reason             string               `json:"reason,omitempty"`
	Message            string               `json:"message,omitempty"`
	LastHeartbeatTime  *metav1.Time         `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime *metav1.Time         `json:"lastTransitionTime,omitempty"`
	Patch              string               `json:"$patch,omitempty"`
}

// ConditionPatch is the strategic merge patch of nodes/status that brings
// evictd's conditions on node to want; nil when nothing is to be written.
// A condition is written when it changes, and while on, once its heartbeat
// is older than heartbeat. final (a clean exit) deletes evictd's conditions:
// an agent that no longer runs claims nothing. Conditions are added by the
// first episode only; after it, an Off condition stays False until exit, so
// that kubectl describe node shows when the last episode ended. Each
// message written names install (its ID, package install), so that the
// uninstall of another install leaves the condition alone.
func ConditionPatch(node *v1.Node, want map[Resource]Want, now time.Time, heartbeat time.Duration, final bool, installID string) []byte {
	var out []condition
	t := metav1.NewTime(now.Truncate(time.Second))
	for _, r := range Resources() {
		typ := ConditionType(r)
		cur := findCondition(node, typ)
		if final {
			if cur != nil {
				out = append(out, condition{Type: typ, Patch: "delete"})
			}
			continue
		}
		w := want[r]
		if !w.On && w.Message == "" {
			// A patch without a message would keep the episode's.
			w.Message = fmt.Sprintf("no %s pressure episode: evictd keeps no new pods away", r)
		}
		w.Message = install.ConditionMessage(w.Message, installID)
		status, reason := v1.ConditionFalse, ReasonNoPressure
		if w.On {
			status, reason = v1.ConditionTrue, ReasonPressure
		}
		switch {
		case cur == nil && !w.On:
			continue
		case cur != nil && cur.Status == status && cur.Reason == reason && cur.Message == w.Message &&
			(!w.On || now.Sub(cur.LastHeartbeatTime.Time) < heartbeat):
			continue
		}
		c := condition{Type: typ, Status: status, Reason: reason, Message: w.Message, LastHeartbeatTime: &t, LastTransitionTime: &t}
		if cur != nil && cur.Status == status && !cur.LastTransitionTime.IsZero() {
			kept := cur.LastTransitionTime
			c.LastTransitionTime = &kept
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": out}})
	return b
}

func findCondition(node *v1.Node, typ v1.NodeConditionType) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == typ {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// Taints is node's taint list with evictd's brought to want: the taints of
// others kept as they are and in their order, evictd's own (any key of its
// prefix, whichever install's mark it carries: only the agent that holds
// the node's lease writes the brake) dropped and the ones wanted on
// appended with effect and, as their value, mark (the install's,
// install.Mark). Equal reports whether that is the list the node has
// already.
func Taints(node *v1.Node, want map[Resource]Want, effect v1.TaintEffect, final bool, mark string) (taints []v1.Taint, equal bool) {
	taints = []v1.Taint{}
	for _, t := range node.Spec.Taints {
		if !strings.HasPrefix(t.Key, TaintPrefix) {
			taints = append(taints, t)
		}
	}
	if !final && effect != "" {
		for _, r := range Resources() {
			if want[r].On {
				taints = append(taints, v1.Taint{Key: TaintKey(r), Value: mark, Effect: effect})
			}
		}
	}
	return taints, slices.EqualFunc(taints, node.Spec.Taints, func(a, b v1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value })
}

// TaintPatch is the merge patch of nodes that sets taints, conditional on
// node's resourceVersion: spec.taints has no merge key, so the whole list
// is written, and a write between the read and this patch must fail (409)
// rather than be undone.
func TaintPatch(node *v1.Node, taints []v1.Taint) []byte {
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	return b
}

// Applied reports, per resource, whether evictd's condition is True on
// node and (unless effect is "") its taint is there with effect.
func Applied(node *v1.Node, effect v1.TaintEffect) map[Resource]bool {
	out := map[Resource]bool{}
	for _, r := range Resources() {
		c := findCondition(node, ConditionType(r))
		on := c != nil && c.Status == v1.ConditionTrue
		if on && effect != "" {
			on = slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == TaintKey(r) && t.Effect == effect })
		}
		out[r] = on
	}
	return out
}

// Install's own, for the uninstall (pkg/cleanup): of evictd's taints and
// conditions, those an install wrote, and those an evictd older than the
// install marks wrote (a taint with no value, a message naming no
// install), which no install can be told apart by and every uninstall
// takes back. Another install's are left alone.

// OwnTaint reports whether t is evictd's taint of the install of mark, or
// of none.
func OwnTaint(t v1.Taint, mark string) bool {
	return strings.HasPrefix(t.Key, TaintPrefix) && (t.Value == "" || t.Value == mark)
}

// OwnCondition reports whether c is evictd's condition of the install
// installID, or of none.
func OwnCondition(c v1.NodeCondition, installID string) bool {
	if !slices.Contains([]v1.NodeConditionType{ConditionType(Memory), ConditionType(Disk), ConditionType(PIDs)}, c.Type) {
		return false
	}
	of := install.OfConditionMessage(c.Message)
	return of == "" || of == installID
}

// LiftOwn is node's taint list without install's own evictd taints
// (OwnTaint with mark), and the strategic merge patch of nodes/status
// that deletes its own conditions (OwnCondition with installID; nil when
// there are none). removed names what goes, "KEY:EFFECT" and
// "TYPE=STATUS" each.
func LiftOwn(node *v1.Node, installID, mark string) (taints []v1.Taint, taintsEqual bool, conditions []byte, removedTaints, removedConditions []string) {
	taints = []v1.Taint{}
	for _, t := range node.Spec.Taints {
		if OwnTaint(t, mark) {
			removedTaints = append(removedTaints, t.Key+":"+string(t.Effect))
			continue
		}
		taints = append(taints, t)
	}
	var out []condition
	for _, c := range node.Status.Conditions {
		if OwnCondition(c, installID) {
			out = append(out, condition{Type: c.Type, Patch: "delete"})
			removedConditions = append(removedConditions, string(c.Type)+"="+string(c.Status))
		}
	}
	if len(out) > 0 {
		conditions, _ = json.Marshal(map[string]any{"status": map[string]any{"conditions": out}})
	}
	return taints, len(removedTaints) == 0, conditions, removedTaints, removedConditions
}
