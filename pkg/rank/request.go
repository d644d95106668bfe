// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"math"
	"strings"

	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
)

// podRequest is the pod's request for one resource, as the kubelet's
// eviction ranking counts it (GetResourceRequestQuantity in
// pkg/api/v1/resource/helpers.go):
//
//	max(sum of containers + sidecars, max over init containers of
//	    (its request + the sidecars started before it)) + overhead
//
// Sidecars are init containers with restartPolicy Always (KEP-753); they run
// alongside everything that starts after them. When pod-level resources are
// set (spec.resources with cpu, memory or hugepages-*, KEP-2837), no container's request
// counts, for any resource: the pod-level cpu and memory requests stand in,
// and other resources (ephemeral-storage) have none. The pod's overhead is
// added only to a non-zero request. A container (or pod) with a limit but
// no request counts its limit, as API defaulting would have set.
func podRequest(p *v1.Pod, name v1.ResourceName) int64 {
	var total int64
	if podLevelSet(p) {
		total = podLevelRequest(p, name)
	} else {
		var sidecars, initMax, regular int64
		for i := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[i]
			req := containerRequest(c, name)
			if isSidecar(c) {
				sidecars = addSat(sidecars, req)
				continue
			}
			initMax = max(initMax, addSat(req, sidecars))
		}
		for i := range p.Spec.Containers {
			regular = addSat(regular, containerRequest(&p.Spec.Containers[i], name))
		}
		total = max(addSat(regular, sidecars), initMax)
	}
	if total == 0 {
		return 0
	}
	return addSat(total, quantity(p.Spec.Overhead, name))
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// isPodLevelResource: cpu, memory and hugepages-<size> may be set at pod
// level (component-helpers' IsSupportedPodLevelResource).
func isPodLevelResource(n v1.ResourceName) bool {
	return n == v1.ResourceCPU || n == v1.ResourceMemory || strings.HasPrefix(string(n), v1.ResourceHugePagesPrefix)
}

// podLevelSet: spec.resources sets a request or limit for a pod-level
// resource (component-helpers' IsPodLevelResourcesSet); a pod-level
// hugepages limit alone is enough, and then no container's request counts.
func podLevelSet(p *v1.Pod) bool {
	r := p.Spec.Resources
	if r == nil {
		return false
	}
	for _, l := range []v1.ResourceList{r.Requests, r.Limits} {
		for n := range l {
			if isPodLevelResource(n) {
				return true
			}
		}
	}
	return false
}

func podLevelRequest(p *v1.Pod, name v1.ResourceName) int64 {
	if name != v1.ResourceCPU && name != v1.ResourceMemory {
		return 0
	}
	if v, ok := lookup(p.Spec.Resources.Requests, name); ok {
		return v
	}
	v, _ := lookup(p.Spec.Resources.Limits, name)
	return v
}

func containerRequest(c *v1.Container, name v1.ResourceName) int64 {
	if v, ok := lookup(c.Resources.Requests, name); ok {
		return v
	}
	v, _ := lookup(c.Resources.Limits, name)
	return v
}

func quantity(l v1.ResourceList, name v1.ResourceName) int64 {
	v, _ := lookup(l, name)
	return v
}

// lookup reads one amount, negative ones (invalid in the API) as 0.
func lookup(l v1.ResourceList, name v1.ResourceName) (int64, bool) {
	if len(l) == 0 {
		return 0, false
	}
	q, ok := l[name]
	if !ok {
		return 0, false
	}
	return max(thresholds.SaturatedValue(&q), 0), true
}

// addSat adds two non-negative amounts without wrapping.
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
