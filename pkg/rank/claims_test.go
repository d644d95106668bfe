// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/evictd/evictd/pkg/thresholds"
)

// A pod's author writes its annotations and owner references: what makes
// a pod a static pod's mirror, or lets it opt out, must be what the author
// alone cannot write.
func TestClaimsOnlyFromWhomMayGrantThem(t *testing.T) {
	here := NodeRef{Name: "node-1", UID: "uid-node-1"}
	const (
		mirrorNotTaken = "annotation kubernetes.io/config.mirror without this Node as its controller: not taken"
		sourceNotTaken = "annotation kubernetes.io/config.source=file on a pod from the API server: not taken"
		optOutNotTaken = "annotation evictd.io/evict=false not honoured: namespace team-a may not opt out (optOut in the configuration)"
	)
	withOwner := func(ref metav1.OwnerReference) podOpt {
		return func(p *v1.Pod) { p.OwnerReferences = append(p.OwnerReferences, ref) }
	}
	nodeRef := func(name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: name, UID: typesUID(uid), Controller: &controller}
	}
	mirror := annotation(ConfigMirrorAnnotation, "3f1c")
	tests := []struct {
		name     string
		pod      *v1.Pod
		opts     Options
		skip     string // "" eligible
		notTaken string
	}{
		{name: "config.source=file alone", pod: newPod("team-a", "p", annotation(ConfigSourceAnnotation, "file")), opts: Options{Node: here},
			notTaken: sourceNotTaken},
		{name: "config.mirror alone", pod: newPod("team-a", "p", mirror), opts: Options{Node: here}, notTaken: mirrorNotTaken},
		{name: "config.source and config.mirror", pod: newPod("team-a", "p", mirror, annotation(ConfigSourceAnnotation, "file")), opts: Options{Node: here},
			notTaken: mirrorNotTaken + "; " + sourceNotTaken},
		{name: "mirror owned by this Node's name with another UID", pod: newPod("team-a", "p", mirror, withOwner(nodeRef("node-1", "forged", true))),
			opts: Options{Node: here}, notTaken: mirrorNotTaken},
		{name: "mirror owned by another Node", pod: newPod("team-a", "p", mirror, withOwner(nodeRef("node-2", "uid-node-1", true))),
			opts: Options{Node: here}, notTaken: mirrorNotTaken},
		{name: "this Node as an owner but not the controller", pod: newPod("team-a", "p", mirror, withOwner(nodeRef("node-1", "uid-node-1", false))),
			opts: Options{Node: here}, notTaken: mirrorNotTaken},
		{name: "a Node of another API group", pod: newPod("team-a", "p", mirror, withOwner(metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Node",
			Name: "node-1", UID: "uid-node-1", Controller: ptrTrue()})), opts: Options{Node: here}, notTaken: mirrorNotTaken},
		{name: "this Node as the controller without the annotation", pod: newPod("team-a", "p", withOwner(nodeRef("node-1", "uid-node-1", true))),
			opts: Options{Node: here}},
		{name: "the kubelet's mirror", pod: newPod("kube-system", "etcd-node-1", mirror, annotation(ConfigSourceAnnotation, "file"), mirrorOwner("node-1", "uid-node-1")),
			opts: Options{Node: here}, skip: "mirror: mirror of a static pod, controlled by Node node-1"},
		{name: "captured files without the Node: the owner named as the pod's node", pod: newPod("kube-system", "etcd-node-1", mirror, mirrorOwner("node-1", "any")),
			skip: "mirror: mirror of a static pod, controlled by Node node-1"},
		{name: "captured files without the Node: an owner naming another node", pod: newPod("team-a", "p", mirror, withOwner(nodeRef("node-2", "any", true)),
			func(p *v1.Pod) { p.Spec.NodeName = "node-1" }), notTaken: mirrorNotTaken},
		{name: "opt-out by default", pod: newPod("team-a", "p", annotation(OptOutAnnotation, "false")), notTaken: optOutNotTaken},
		{name: "opt-out from another namespace than the one listed", pod: newPod("team-a", "p", annotation(OptOutAnnotation, "false")),
			opts: Options{OptOut: OptOut{Namespaces: []string{"platform"}}}, notTaken: optOutNotTaken},
		{name: "opt-out from a listed namespace", pod: newPod("platform", "p", annotation(OptOutAnnotation, "false")),
			opts: Options{OptOut: OptOut{Namespaces: []string{"platform"}}}, skip: "opt-out: annotation evictd.io/evict=false"},
		{name: "opt-out from a namespace the selector matches", pod: newPod("team-a", "p", annotation(OptOutAnnotation, "false")),
			opts: Options{OptOut: OptOut{Selector: labels.SelectorFromSet(labels.Set{"evictd.io/opt-out": "allowed"})},
				NamespaceLabels: map[string]map[string]string{"team-a": {"evictd.io/opt-out": "allowed"}}},
			skip: "opt-out: annotation evictd.io/evict=false"},
		{name: "opt-out from a namespace the selector does not match", pod: newPod("team-a", "p", annotation(OptOutAnnotation, "false")),
			opts: Options{OptOut: OptOut{Selector: labels.SelectorFromSet(labels.Set{"evictd.io/opt-out": "allowed"})},
				NamespaceLabels: map[string]map[string]string{"team-a": {"evictd.io/opt-out": "no"}}},
			notTaken: optOutNotTaken},
		{name: "opt-out from a namespace whose labels are unknown", pod: newPod("team-a", "p", annotation(OptOutAnnotation, "false")),
			opts:     Options{OptOut: OptOut{Selector: labels.Everything()}},
			notTaken: optOutNotTaken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Rank(thresholds.MemoryAvailable, nil, []*v1.Pod{tc.pod}, tc.opts).Candidates[0]
			if c.SkipReason != tc.skip || c.Eligible != (tc.skip == "") {
				t.Errorf("eligible %v, skip reason %q; want %q", c.Eligible, c.SkipReason, tc.skip)
			}
			if c.NotTaken != tc.notTaken {
				t.Errorf("not taken %q, want %q", c.NotTaken, tc.notTaken)
			}
			if got := SkipReason(tc.pod, tc.opts); got != tc.skip {
				t.Errorf("SkipReason = %q, want %q", got, tc.skip)
			}
		})
	}
}

// A tenant's pod claiming every exemption ranks where its usage puts it:
// first, as the largest, and the other tenants' pods after it.
func TestForgedExemptionsRankLikeAnyPod(t *testing.T) {
	forged := newPod("team-a", "forged", annotation(ConfigSourceAnnotation, "file"), annotation(ConfigMirrorAnnotation, "h"),
		annotation(OptOutAnnotation, "false"))
	other := newPod("team-b", "other")
	s := summaryOf(podStats(forged, workingSet("3Gi")), podStats(other, workingSet("1Gi")))
	res := Rank(thresholds.MemoryAvailable, s, []*v1.Pod{other, forged}, Options{Node: NodeRef{Name: "node-1", UID: "uid-node-1"}})
	if got, want := names(res), []string{"team-a/forged", "team-b/other"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if !res.Candidates[0].Eligible {
		t.Errorf("the forged pod is not eligible: %q", res.Candidates[0].SkipReason)
	}
}
