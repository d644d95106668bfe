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
//
// The kubelet ranks the allocated pod, not the desired one: its eviction
// manager lists pods through getAllocatedPods, which swaps in the resources
// the allocation manager admitted (UpdatePodFromAllocation). Under in-place
// resize the two differ exactly when a resize is pending, Deferred when the
// node is short. The API shows that allocation in the pod's status, which
// this reads in place of the spec, as the kubelet writes it:
//
//   - status.allocatedResources (InPlacePodLevelResourcesVerticalScaling) is
//     PodRequests of the allocated pod, the whole sum above with the overhead
//     already in it: it stands in for the sum, less the overhead. With
//     pod-level resources set it stands in only for a pod-level cpu or
//     memory request the spec sets (the kubelet counts nothing else);
//   - otherwise each container's status.containerStatuses[] (or
//     initContainerStatuses[]) allocatedResources, matched by name, is that
//     container's allocated requests; a container the kubelet has not
//     created yet has none and counts its spec.
//
// Neither status.containerStatuses[].resources nor status.resources (what
// the runtime has applied) is read: the eviction ranking uses neither, nor
// component-helpers' max(spec, actuated, allocated) under UseStatusResources,
// which is what the scheduler counts.
func podRequest(p *v1.Pod, name v1.ResourceName) int64 {
	var total int64
	allocTotal, allocated := allocatedTotal(p, name)
	switch {
	case podLevelSet(p):
		var set bool
		total, set = podLevelRequest(p, name)
		if set && allocated {
			total = allocTotal
		}
	case allocated:
		total = allocTotal
	default:
		var sidecars, initMax, regular int64
		for i := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[i]
			req := containerRequest(p, c, name)
			if isSidecar(c) {
				sidecars = addSat(sidecars, req)
				continue
			}
			initMax = max(initMax, addSat(req, sidecars))
		}
		for i := range p.Spec.Containers {
			regular = addSat(regular, containerRequest(p, &p.Spec.Containers[i], name))
		}
		total = max(addSat(regular, sidecars), initMax)
	}
	if total == 0 {
		return 0
	}
	return addSat(total, quantity(p.Spec.Overhead, name))
}

// allocatedTotal reads status.allocatedResources, less the overhead the
// kubelet put in it (floored at 0, as component-helpers subtracts it), and
// whether the status has it at all. A resource it does not list is not
// requested.
func allocatedTotal(p *v1.Pod, name v1.ResourceName) (int64, bool) {
	if p.Status.AllocatedResources == nil {
		return 0, false
	}
	return max(quantity(p.Status.AllocatedResources, name)-quantity(p.Spec.Overhead, name), 0), true
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

// podLevelRequest is the pod-level request for cpu or memory, and whether
// spec.resources sets one (or a limit standing in for it).
func podLevelRequest(p *v1.Pod, name v1.ResourceName) (int64, bool) {
	if name != v1.ResourceCPU && name != v1.ResourceMemory {
		return 0, false
	}
	if v, ok := lookup(p.Spec.Resources.Requests, name); ok {
		return v, true
	}
	return lookup(p.Spec.Resources.Limits, name)
}

// containerRequest is one container's request: its allocated one when the
// pod's status shows it, else its spec's.
func containerRequest(p *v1.Pod, c *v1.Container, name v1.ResourceName) int64 {
	if cs := containerStatus(p, c.Name); cs != nil && cs.AllocatedResources != nil {
		// The allocated requests as they are: one not listed is not
		// requested (API defaulting had already copied limits in).
		return quantity(cs.AllocatedResources, name)
	}
	if v, ok := lookup(c.Resources.Requests, name); ok {
		return v
	}
	v, _ := lookup(c.Resources.Limits, name)
	return v
}

// containerStatus finds a container's status by name, among the containers'
// and then the init containers' (names are unique across both).
func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, l := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
	}
	return nil
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
