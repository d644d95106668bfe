// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The kubelet's cgroupfs-driver names under the node cgroup.
const (
	kubepodsDir   = "kubepods"
	burstableDir  = "burstable"
	besteffortDir = "besteffort"
)

// QOSClass is the pod's QoS class as the kubelet derives it: Guaranteed when
// every container (init containers included) has CPU and memory limits equal
// to its requests, BestEffort when none has any CPU or memory request or
// limit, Burstable otherwise. A request left out where a limit is set
// defaults to the limit, as the API server does.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	guaranteed, anySet := true, false
	containers := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range containers {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			lim, hasLim := nonZero(c.Resources.Limits, r)
			req, hasReq := nonZero(c.Resources.Requests, r)
			if hasLim || hasReq {
				anySet = true
			}
			if !hasReq && hasLim {
				req, hasReq = lim, true
			}
			if !hasLim || !hasReq || req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !anySet:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}

func nonZero(l corev1.ResourceList, name corev1.ResourceName) (resource.Quantity, bool) {
	q, ok := l[name]
	return q, ok && !q.IsZero()
}

// PodCgroup is the pod's cgroup relative to the node cgroup, in the kubelet's
// cgroupfs layout: kubepods/pod<uid> for Guaranteed pods,
// kubepods/burstable/pod<uid> and kubepods/besteffort/pod<uid> for the rest.
func PodCgroup(pod *corev1.Pod) string {
	name := "pod" + string(pod.UID)
	switch QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return path.Join(kubepodsDir, name)
	case corev1.PodQOSBurstable:
		return path.Join(kubepodsDir, burstableDir, name)
	default:
		return path.Join(kubepodsDir, besteffortDir, name)
	}
}

// podMemoryLimit is the limit the kubelet puts on the pod cgroup: the sum of
// the containers' memory limits (or the largest init container's, if larger)
// when every container has one; otherwise none (-1).
func podMemoryLimit(pod *corev1.Pod) int64 {
	var sum int64
	for _, c := range pod.Spec.Containers {
		lim, ok := nonZero(c.Resources.Limits, corev1.ResourceMemory)
		if !ok {
			return -1
		}
		sum += lim.Value()
	}
	for _, c := range pod.Spec.InitContainers {
		lim, ok := nonZero(c.Resources.Limits, corev1.ResourceMemory)
		if !ok {
			return -1
		}
		sum = max(sum, lim.Value())
	}
	return sum
}

// containerMemoryLimit is the container's own limit, or -1 for none.
func containerMemoryLimit(c *corev1.Container) int64 {
	if lim, ok := nonZero(c.Resources.Limits, corev1.ResourceMemory); ok {
		return lim.Value()
	}
	return -1
}
