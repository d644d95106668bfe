// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Annotations read by the eligibility checks.
const (
	// OptOutAnnotation set to "false" (or any value strconv.ParseBool reads
	// as false) keeps evictd from evicting the pod. Any other value, or none,
	// leaves the pod eligible.
	OptOutAnnotation = "evictd.io/evict"
	// ConfigSourceAnnotation and ConfigMirrorAnnotation are set by the
	// kubelet on pods it did not get from the API server (static pods) and
	// on their API mirrors.
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
)

// Check names, as they appear at the start of a skip reason.
const (
	CheckStatic            = "static"
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
}

// check returns a non-empty detail when the pod must not be evicted.
type check struct {
	name string
	skip func(p *v1.Pod, env *checkEnv) string
}

// checks run in this order; every failing one is reported.
var checks = []check{
	{CheckStatic, func(p *v1.Pod, _ *checkEnv) string {
		if src, ok := p.Annotations[ConfigSourceAnnotation]; ok && src != "api" {
			return "config source " + src
		}
		return ""
	}},
	{CheckMirror, func(p *v1.Pod, _ *checkEnv) string {
		if _, ok := p.Annotations[ConfigMirrorAnnotation]; ok {
			return "mirror of a static pod"
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
	{CheckOptOut, func(p *v1.Pod, _ *checkEnv) string {
		if v, ok := p.Annotations[OptOutAnnotation]; ok {
			if b, err := strconv.ParseBool(v); err == nil && !b {
				return fmt.Sprintf("annotation %s=%s", OptOutAnnotation, v)
			}
		}
		return ""
	}},
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
	env := checkEnv{own: ownPriority(p, opts.PriorityClasses), includeDaemonSetPods: opts.IncludeDaemonSetPods}
	if len(opts.ExcludedNamespaces) > 0 {
		env.excluded = make(map[string]bool, len(opts.ExcludedNamespaces))
		for _, ns := range opts.ExcludedNamespaces {
			env.excluded[ns] = true
		}
	}
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
