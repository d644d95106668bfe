// SPDX-License-Identifier: Apache-2.0

package nodebrake

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func nodeWith(taints []v1.Taint, conds ...v1.NodeCondition) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "42"},
		Spec:       v1.NodeSpec{Taints: taints},
		Status:     v1.NodeStatus{Conditions: conds},
	}
}

func cond(typ v1.NodeConditionType, status v1.ConditionStatus, reason, msg string, beat, trans time.Time) v1.NodeCondition {
	return v1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg,
		LastHeartbeatTime: metav1.NewTime(beat), LastTransitionTime: metav1.NewTime(trans)}
}

// decoded is a condition patch as the API server reads it.
func decoded(t *testing.T, p []byte) []map[string]any {
	t.Helper()
	if p == nil {
		return nil
	}
	var out struct {
		Status struct {
			Conditions []map[string]any `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(p, &out); err != nil {
		t.Fatalf("patch %s: %v", p, err)
	}
	return out.Status.Conditions
}

func TestConditionPatch(t *testing.T) {
	ready := cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "", t0, t0)
	on := map[Resource]Want{Memory: {On: true, Message: "m"}}
	cases := []struct {
		name  string
		node  *v1.Node
		want  map[Resource]Want
		now   time.Time
		final bool
		// expect lists the patch's entries as type/status/$patch and the
		// transition time kept or new.
		expect []map[string]any
	}{
		{name: "no episode, no condition: nothing (the first episode adds it)", node: nodeWith(nil, ready), now: t0},
		{name: "episode starts", node: nodeWith(nil, ready), want: on, now: t0, expect: []map[string]any{
			{"type": "EvictdMemoryPressure", "status": "True", "reason": ReasonPressure, "message": "m",
				"lastHeartbeatTime": "2026-11-25T12:00:00Z", "lastTransitionTime": "2026-11-25T12:00:00Z"}}},
		{name: "on, heartbeat fresh: nothing",
			node: nodeWith(nil, cond("EvictdMemoryPressure", v1.ConditionTrue, ReasonPressure, "m", t0, t0)),
			want: on, now: t0.Add(59 * time.Second)},
		{name: "on, heartbeat due: new heartbeat, transition kept",
			node: nodeWith(nil, cond("EvictdMemoryPressure", v1.ConditionTrue, ReasonPressure, "m", t0, t0)),
			want: on, now: t0.Add(time.Minute), expect: []map[string]any{
				{"type": "EvictdMemoryPressure", "status": "True", "reason": ReasonPressure, "message": "m",
					"lastHeartbeatTime": "2026-11-25T12:01:00Z", "lastTransitionTime": "2026-11-25T12:00:00Z"}}},
		{name: "episode ends: False with its own message (a patch without one would keep the episode's)",
			node: nodeWith(nil, cond("EvictdMemoryPressure", v1.ConditionTrue, ReasonPressure, "m", t0, t0)),
			now:  t0.Add(time.Second), expect: []map[string]any{
				{"type": "EvictdMemoryPressure", "status": "False", "reason": ReasonNoPressure,
					"message":           "no memory pressure episode: evictd keeps no new pods away",
					"lastHeartbeatTime": "2026-11-25T12:00:01Z", "lastTransitionTime": "2026-11-25T12:00:01Z"}}},
		{name: "off and False already: nothing, no heartbeat",
			node: nodeWith(nil, cond("EvictdMemoryPressure", v1.ConditionFalse, ReasonNoPressure, "no memory pressure episode: evictd keeps no new pods away", t0, t0)),
			now:  t0.Add(time.Hour)},
		{name: "a dead agent's True condition is lifted at the first pass",
			node: nodeWith(nil, cond("EvictdDiskPressure", v1.ConditionTrue, ReasonPressure, "old", t0, t0)),
			want: on, now: t0.Add(time.Hour), expect: []map[string]any{
				{"type": "EvictdMemoryPressure", "status": "True"},
				{"type": "EvictdDiskPressure", "status": "False"}}},
		{name: "exit deletes evictd's conditions, nothing else",
			node: nodeWith(nil, ready, cond("EvictdPIDPressure", v1.ConditionFalse, ReasonNoPressure, "", t0, t0)),
			want: on, now: t0, final: true, expect: []map[string]any{{"type": "EvictdPIDPressure", "$patch": "delete"}}},
		{name: "exit with none: nothing", node: nodeWith(nil, ready), now: t0, final: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decoded(t, ConditionPatch(tc.node, tc.want, tc.now, time.Minute, tc.final, ""))
			if len(got) != len(tc.expect) {
				t.Fatalf("patch entries %v, want %v", got, tc.expect)
			}
			for i, e := range tc.expect {
				for k, v := range e {
					if got[i][k] != v {
						t.Errorf("entry %d %s = %v, want %v (patch %v)", i, k, got[i][k], v, got)
					}
				}
			}
		})
	}
}

func TestTaints(t *testing.T) {
	theirs := v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}
	kubelets := v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
	mine := v1.Taint{Key: "evictd.io/memory-pressure", Effect: v1.TaintEffectNoSchedule}
	on := map[Resource]Want{Memory: {On: true}, PIDs: {On: true}}
	cases := []struct {
		name   string
		have   []v1.Taint
		want   map[Resource]Want
		effect v1.TaintEffect
		final  bool
		expect []v1.Taint
		equal  bool
	}{
		{name: "on: appended after the others, which stay as they are", have: []v1.Taint{theirs, kubelets}, want: on,
			effect: v1.TaintEffectNoSchedule,
			expect: []v1.Taint{theirs, kubelets, mine, {Key: "evictd.io/pid-pressure", Effect: v1.TaintEffectNoSchedule}}},
		{name: "already there: equal", have: []v1.Taint{theirs, mine}, want: map[Resource]Want{Memory: {On: true}},
			effect: v1.TaintEffectNoSchedule, expect: []v1.Taint{theirs, mine}, equal: true},
		{name: "effect changed: the old one replaced", have: []v1.Taint{mine}, want: map[Resource]Want{Memory: {On: true}},
			effect: v1.TaintEffectPreferNoSchedule,
			expect: []v1.Taint{{Key: "evictd.io/memory-pressure", Effect: v1.TaintEffectPreferNoSchedule}}},
		{name: "off: evictd's removed, the kubelet's kept", have: []v1.Taint{kubelets, mine}, effect: v1.TaintEffectNoSchedule,
			expect: []v1.Taint{kubelets}},
		{name: "condition only (effect None): a leftover taint removed", have: []v1.Taint{mine}, want: on,
			expect: []v1.Taint{}},
		{name: "exit: all of evictd's removed", have: []v1.Taint{mine, theirs}, want: on, effect: v1.TaintEffectNoSchedule,
			final: true, expect: []v1.Taint{theirs}},
		{name: "nothing to do on an untainted node", effect: v1.TaintEffectNoSchedule, expect: []v1.Taint{}, equal: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, equal := Taints(nodeWith(tc.have), tc.want, tc.effect, tc.final, "")
			if !reflect.DeepEqual(got, tc.expect) || equal != tc.equal {
				t.Errorf("Taints = %v, equal %v; want %v, equal %v", got, equal, tc.expect, tc.equal)
			}
		})
	}
}

func TestTaintPatchIsConditional(t *testing.T) {
	p := TaintPatch(nodeWith(nil), []v1.Taint{})
	if string(p) != `{"metadata":{"resourceVersion":"42"},"spec":{"taints":[]}}` {
		t.Errorf("TaintPatch = %s; want the resourceVersion read and an empty list (null would not clear it the same way)", p)
	}
}

func TestParseEffect(t *testing.T) {
	for in, want := range map[string]v1.TaintEffect{"NoSchedule": v1.TaintEffectNoSchedule, "PreferNoSchedule": v1.TaintEffectPreferNoSchedule, "None": ""} {
		if got, err := ParseEffect(in); err != nil || got != want {
			t.Errorf("ParseEffect(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"NoExecute", "noschedule", ""} {
		if _, err := ParseEffect(bad); err == nil {
			t.Errorf("ParseEffect(%q) accepted", bad)
		}
	}
}

func TestApplied(t *testing.T) {
	n := nodeWith([]v1.Taint{{Key: "evictd.io/memory-pressure", Effect: v1.TaintEffectNoSchedule}},
		cond("EvictdMemoryPressure", v1.ConditionTrue, ReasonPressure, "", t0, t0),
		cond("EvictdDiskPressure", v1.ConditionTrue, ReasonPressure, "", t0, t0))
	got := Applied(n, v1.TaintEffectNoSchedule)
	if !got[Memory] || got[Disk] || got[PIDs] {
		t.Errorf("Applied = %v; want memory only (disk has its condition but not its taint)", got)
	}
	if got := Applied(n, ""); !got[Disk] {
		t.Errorf("Applied with no taint effect = %v; want disk on by its condition alone", got)
	}
}

// TestInstallMarks: the brake's taints carry the install's mark and its
// conditions' messages name the install; an unmarked taint of an older
// evictd is written again with the mark.
func TestInstallMarks(t *testing.T) {
	const id, mark = "evictd-system/evictd", "evictd-system.evictd"
	on := map[Resource]Want{Memory: {On: true, Message: "m"}}
	old := v1.Taint{Key: "evictd.io/memory-pressure", Effect: v1.TaintEffectNoSchedule}
	got, equal := Taints(nodeWith([]v1.Taint{old}), on, v1.TaintEffectNoSchedule, false, mark)
	if want := []v1.Taint{{Key: old.Key, Value: mark, Effect: old.Effect}}; equal || !reflect.DeepEqual(got, want) {
		t.Errorf("Taints = %v, equal %v; want %v, not equal (the unmarked taint is written again with the mark)", got, equal, want)
	}
	p := decoded(t, ConditionPatch(nodeWith(nil), on, t0, time.Minute, false, id))
	if len(p) != 1 || p[0]["message"] != "m (evictd install evictd-system/evictd)" {
		t.Errorf("ConditionPatch = %v; want one condition whose message names the install", p)
	}
	// Written once: the same message read back is no change.
	n := nodeWith(nil, cond("EvictdMemoryPressure", v1.ConditionTrue, ReasonPressure, "m (evictd install evictd-system/evictd)", t0, t0))
	if p := ConditionPatch(n, on, t0.Add(time.Second), time.Minute, false, id); p != nil {
		t.Errorf("ConditionPatch on the install's own condition = %s; want nothing to write", p)
	}
}

// TestLiftOwn: the uninstall of one install takes its own taints and
// conditions and those of an evictd older than the marks (no value, no
// install in the message), never another install's nor anyone else's.
func TestLiftOwn(t *testing.T) {
	const id, mark = "evictd-system/evictd", "evictd-system.evictd"
	theirs := v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}
	own := v1.Taint{Key: "evictd.io/memory-pressure", Value: mark, Effect: v1.TaintEffectNoSchedule}
	unmarked := v1.Taint{Key: "evictd.io/disk-pressure", Effect: v1.TaintEffectNoSchedule}
	other := v1.Taint{Key: "evictd.io/pid-pressure", Value: "evictd-system.second-evictd", Effect: v1.TaintEffectNoSchedule}
	n := nodeWith([]v1.Taint{theirs, own, unmarked, other},
		cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "", t0, t0),
		cond("EvictdMemoryPressure", v1.ConditionTrue, ReasonPressure, "m (evictd install "+id+")", t0, t0),
		cond("EvictdDiskPressure", v1.ConditionFalse, ReasonNoPressure, "no disk pressure episode", t0, t0),
		cond("EvictdPIDPressure", v1.ConditionTrue, ReasonPressure, "p (evictd install evictd-system/second-evictd)", t0, t0))
	taints, equal, conds, rt, rc := LiftOwn(n, id, mark)
	if want := []v1.Taint{theirs, other}; equal || !reflect.DeepEqual(taints, want) {
		t.Errorf("taints = %v, equal %v; want %v", taints, equal, want)
	}
	if want := []string{"evictd.io/memory-pressure:NoSchedule", "evictd.io/disk-pressure:NoSchedule"}; !reflect.DeepEqual(rt, want) {
		t.Errorf("removed taints %v; want %v", rt, want)
	}
	if want := []string{"EvictdMemoryPressure=True", "EvictdDiskPressure=False"}; !reflect.DeepEqual(rc, want) {
		t.Errorf("removed conditions %v; want %v", rc, want)
	}
	p := decoded(t, conds)
	if len(p) != 2 || p[0]["type"] != "EvictdMemoryPressure" || p[1]["type"] != "EvictdDiskPressure" || p[0]["$patch"] != "delete" {
		t.Errorf("condition patch %v; want the deletion of EvictdMemoryPressure and EvictdDiskPressure", p)
	}
	if _, equal, conds, _, _ := LiftOwn(nodeWith([]v1.Taint{theirs, other}), id, mark); !equal || conds != nil {
		t.Errorf("LiftOwn of a node with another install's brake only: equal %v, patch %s; want nothing to write", equal, conds)
	}
}
