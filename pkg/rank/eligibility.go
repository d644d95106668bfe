// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations read by the eligibility checks.
const (
	// OptOutAnnotation set to "false" (or any value strconv.ParseBool reads
	// as false) keeps evictd from evicting the pod, in a namespace the
	// configuration lets opt out (Options.OptOut). Any other value, or none,
	// leaves the pod eligible.
	OptOutAnnotation = "evictd.io/evict"
	// ConfigMirrorAnnotation is on the API's copy of a static pod, the
	// mirror the kubelet creates with its Node as the controller owner.
	// Any pod's author can write it too: only the owner proves it.
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
	// ConfigSourceAnnotation is the source the kubelet read a pod from.
	// The kubelet sets it on its own copy of each pod; on a pod from the
	// API server it is whatever the author wrote, so evictd does not read
	// it, only says that it did not.
	ConfigSourceAnnotation = "kubernetes.io/config.source"
)

// NodeRef names the node whose pods are ranked.
type NodeRef struct {
	Name string
	// UID is the Node object's; "" when it is not known (evictd rank on
	// captured files without the Node, or an agent whose informer does
	// not hold its Node), and then a mirror's owner is matched by name.
	UID types.UID
}

// OptOut says whose pods may keep evictd away with OptOutAnnotation: the
// namespaces listed, and those whose labels Selector matches. The zero
// value lets no pod opt out.
type OptOut struct {
	Namespaces []string
	// Selector, when not nil, matches namespace labels
	// (Options.NamespaceLabels).
	Selector labels.Selector
}

// Check names, as they appear at the start of a skip reason.
const (
	CheckMirror            = "mirror"
	CheckCritical          = "critical"
	CheckDaemonSet         = "daemonset"
	CheckTerminating       = "terminating"
	CheckFinished          = "finished"
	CheckExcludedNamespace = "excluded-namespace"
	CheckOptOut            = "opt-out"
	// CheckFreesNothing is not one of the pod checks: a disk signal's
	// ranking marks a pod with no usage on the short filesystem.
	CheckFreesNothing = "frees-nothing"
	// CheckNotStalling is not a protection either: under a stall signal
	// the ranking marks a pod whose own memory.pressure shows no stall
	// (docs/stall.md): evicting it would not end the stall.
	CheckNotStalling = "not-stalling"
	// CheckNotStuck is not a protection either: under the memory.high
	// signal only a pod with a container stuck at its memory.high for
	// the grace period is a target (docs/memhigh.md).
	CheckNotStuck = "not-stuck-at-memory-high"
)

// checkEnv is what the checks may look at besides the pod.
type checkEnv struct {
	own                  int32
	excluded             map[string]bool
	includeDaemonSetPods bool
	node                 NodeRef
	optOut               optOutIndex
}

// newCheckEnv is the checks' view of opts, but for the pod's own priority.
func newCheckEnv(opts *Options) checkEnv {
	env := checkEnv{includeDaemonSetPods: opts.IncludeDaemonSetPods, node: opts.Node,
		optOut: optOutIndex{selector: opts.OptOut.Selector, nsLabels: opts.NamespaceLabels}}
	if len(opts.ExcludedNamespaces) > 0 {
		env.excluded = make(map[string]bool, len(opts.ExcludedNamespaces))
		for _, ns := range opts.ExcludedNamespaces {
			env.excluded[ns] = true
		}
	}
	if len(opts.OptOut.Namespaces) > 0 {
		env.optOut.named = make(map[string]bool, len(opts.OptOut.Namespaces))
		for _, ns := range opts.OptOut.Namespaces {
			env.optOut.named[ns] = true
		}
	}
	return env
}

// optOutIndex answers whether a namespace may opt out.
type optOutIndex struct {
	named    map[string]bool
	selector labels.Selector
	nsLabels map[string]map[string]string
}

func (o *optOutIndex) allows(ns string) bool {
	if o.named[ns] {
		return true
	}
	if o.selector == nil {
		return false
	}
	l, known := o.nsLabels[ns]
	return known && o.selector.Matches(labels.Set(l))
}

// mirroredHere reports whether p is a static pod's mirror on this node as
// the kubelet writes one (pkg/kubelet/pod/mirror_client.go): the
// config.mirror annotation and one controller owner reference to this Node
// (apiVersion v1, its name and UID). The API server lets any pod author
// write the annotation; the NodeRestriction admission plugin makes a
// kubelet write the owner, and the Node's UID is not a tenant's to read.
func mirroredHere(p *v1.Pod, node NodeRef) bool {
	if _, ok := p.Annotations[ConfigMirrorAnnotation]; !ok {
		return false
	}
	o := controllerOf(p)
	return o != nil && o.APIVersion == "v1" && o.Kind == "Node" && o.Name != "" &&
		(o.Name == node.Name || node.Name == "" && o.Name == p.Spec.NodeName) &&
		(node.UID == "" || o.UID == node.UID)
}

func controllerOf(p *v1.Pod) *metav1.OwnerReference {
	for i := range p.OwnerReferences {
		if o := &p.OwnerReferences[i]; o.Controller != nil && *o.Controller {
			return o
		}
	}
	return nil
}

// optedOut reports whether p's author asked not to be evicted, and the
// annotation's value.
func optedOut(p *v1.Pod) (string, bool) {
	v, ok := p.Annotations[OptOutAnnotation]
	if !ok {
		return "", false
	}
	b, err := strconv.ParseBool(v)
	return v, err == nil && !b
}

// check returns a non-empty detail when the pod must not be evicted.
type check struct {
	name string
	skip func(p *v1.Pod, env *checkEnv) string
}

// checks run in this order; every failing one is reported.
var checks = []check{
	// A static pod is in the API server only as its mirror; evicting the
	// mirror deletes the copy, not the pod the kubelet runs from its file.
	{CheckMirror, func(p *v1.Pod, env *checkEnv) string {
		if mirroredHere(p, env.node) {
			return "mirror of a static pod, controlled by Node " + controllerOf(p).Name
		}
		return ""
	}},
	// Critical protection looks at the pod's own priority only: a priority
	// group's offset must not make a pod critical or uncritical.
	{CheckCritical, func(_ *v1.Pod, env *checkEnv) string {
		if env.own >= SystemCriticalPriority {
			return "priority " + strconv.FormatInt(int64(env.own), 10)
		}
		return ""
	}},
	// The DaemonSet controller recreates an evicted pod on the same node at
	// once, so evicting it frees nothing and loops (kubernetes#65240).
	{CheckDaemonSet, func(p *v1.Pod, env *checkEnv) string {
		if env.includeDaemonSetPods {
			return ""
		}
		for i := range p.OwnerReferences {
			o := &p.OwnerReferences[i]
			if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
				return "owned by DaemonSet " + o.Name
			}
		}
		return ""
	}},
	{CheckTerminating, func(p *v1.Pod, _ *checkEnv) string {
		if p.DeletionTimestamp != nil {
			return terminatingDetail
		}
		return ""
	}},
	{CheckFinished, func(p *v1.Pod, _ *checkEnv) string {
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			return "phase " + string(p.Status.Phase)
		}
		return ""
	}},
	{CheckExcludedNamespace, func(p *v1.Pod, env *checkEnv) string {
		if env.excluded[p.Namespace] {
			return "namespace " + p.Namespace
		}
		return ""
	}},
	{CheckOptOut, func(p *v1.Pod, env *checkEnv) string {
		if v, ok := optedOut(p); ok && env.optOut.allows(p.Namespace) {
			return fmt.Sprintf("annotation %s=%s", OptOutAnnotation, v)
		}
		return ""
	}},
}

// claims are what a pod's author may write to be spared that evictd does
// not take from that author; each returns a non-empty detail for a claim
// made and not taken.
var claims = []func(p *v1.Pod, env *checkEnv) string{
	func(p *v1.Pod, env *checkEnv) string {
		if _, ok := p.Annotations[ConfigMirrorAnnotation]; ok && !mirroredHere(p, env.node) {
			return "annotation " + ConfigMirrorAnnotation + " without this Node as its controller: not taken"
		}
		return ""
	},
	// The kubelet sets config.source on its own copy of a pod; on the
	// API's copy it is the author's word (a real static pod's mirror has
	// it, and is known by its owner instead).
	func(p *v1.Pod, env *checkEnv) string {
		if src, ok := p.Annotations[ConfigSourceAnnotation]; ok && src != "api" && !mirroredHere(p, env.node) {
			return fmt.Sprintf("annotation %s=%s on a pod from the API server: not taken", ConfigSourceAnnotation, src)
		}
		return ""
	},
	func(p *v1.Pod, env *checkEnv) string {
		if v, ok := optedOut(p); ok && !env.optOut.allows(p.Namespace) {
			return fmt.Sprintf("annotation %s=%s not honoured: namespace %s may not opt out (optOut in the configuration)", OptOutAnnotation, v, p.Namespace)
		}
		return ""
	},
}

// claimsNotTaken is every claim p makes that env does not take, joined
// with "; "; "" for none.
func claimsNotTaken(p *v1.Pod, env *checkEnv) string {
	if len(p.Annotations) == 0 {
		return ""
	}
	var out []string
	for _, c := range claims {
		if d := c(p, env); d != "" {
			out = append(out, d)
		}
	}
	return strings.Join(out, "; ")
}

// OnlyTerminating reports whether the one check that makes c ineligible is
// that its deletion was requested: a pod evictd may still evict again with
// a shorter grace period (the Eviction API takes an eviction of a
// terminating pod and applies the shorter grace), as the kubelet kills a
// terminating pod with its own hard grace under a hard threshold.
func (c Candidate) OnlyTerminating() bool {
	return !c.Eligible && c.SkipReason == CheckTerminating+": "+terminatingDetail
}

// terminatingDetail is CheckTerminating's detail.
const terminatingDetail = "deletion requested"

// CheckNames lists the eligibility checks in the order they run.
func CheckNames() []string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.name
	}
	return out
}

// SkipReason is why p is never evicted under opts ("" when it may be): the
// reason Rank gives it, for a caller that acts on pods outside a ranking
// (the memory.high family's stage 1 writes only to pods evictd may evict).
func SkipReason(p *v1.Pod, opts Options) string {
	env := newCheckEnv(&opts)
	env.own = ownPriority(p, opts.PriorityClasses)
	return skipReason(p, &env)
}

// skipReason runs every check; "" means the pod is eligible. Otherwise it is
// "name: detail" per failed check, joined with "; ".
func skipReason(p *v1.Pod, env *checkEnv) string {
	var b strings.Builder
	for _, c := range checks {
		d := c.skip(p, env)
		if d == "" {
			continue
		}
		if b.Len() == 0 {
			b.Grow(96) // one allocation for the usual one or two reasons
		} else {
			b.WriteString("; ")
		}
		b.WriteString(c.name)
		b.WriteString(": ")
		b.WriteString(d)
	}
	return b.String()
}
