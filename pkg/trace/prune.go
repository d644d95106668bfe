// SPDX-License-Identifier: Apache-2.0

package trace

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/rank"
)

// readAnnotations are the pod annotations a decision reads (pkg/rank's
// eligibility checks, mirror and opt-out, and the claims it says it did not
// take): the only ones a trace keeps.
var readAnnotations = []string{rank.ConfigSourceAnnotation, rank.ConfigMirrorAnnotation, rank.OptOutAnnotation}

// PrunePod is p as a trace keeps it: the fields the loop's decisions read
// and nothing else. The trace is served to a reader role (/trace) that may
// see what evictd decides on and why, not the workloads' configuration: so
// no env, args, commands, probes, image pull secrets, volume sources'
// names or paths, labels, unread annotations (last-applied-configuration
// among them) or managedFields. A replay of the pruned pods makes the
// calls the whole pods make (TestPrunedPodsDecideAsWhole, pkg/agent's
// TestReplayOfPrunedPodsMakesTheWholePodsCalls). What each kept field is
// read by:
//
//   - name, namespace, uid: identity, the Summary's match, the calls;
//     resourceVersion: the recorder's test of an unchanged pod list;
//   - deletionTimestamp, deletionGracePeriodSeconds, status.phase: the
//     terminating and finished checks, pods in flight (pkg/agent/inflight);
//   - the read annotations, the owner references and spec.nodeName: the
//     mirror, opt-out and DaemonSet checks, and the claims not taken;
//   - spec.priority, spec.priorityClassName: priority and the critical check;
//   - containers' and init containers' names, requests, limits and
//     restartPolicy, spec.resources, spec.overhead, and the allocated
//     resources of the pod's and its containers' statuses: the requests
//     the ranking compares usage with (pkg/rank request.go);
//   - the images of containers, init and ephemeral containers and their
//     statuses, and image volumes' references: the node's unused images
//     (pkg/agent/imagegc);
//   - the names and kinds of the volumes of the kinds read (hostPath,
//     gitRepo, configMap, emptyDir and its medium): which volumes' usage
//     counts on the node's disk;
//   - spec.terminationGracePeriodSeconds: the grace period a call asks for;
//   - whether each container status is running, waiting or terminated
//     (not its reason, message or times): a victim's teardown moving
//     (pkg/agent/inflight).
func PrunePod(p *v1.Pod) *v1.Pod {
	out := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		DeletionTimestamp: p.DeletionTimestamp, DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds,
	}}
	for _, k := range readAnnotations {
		if v, ok := p.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	for _, o := range p.OwnerReferences {
		out.OwnerReferences = append(out.OwnerReferences, metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, Controller: o.Controller})
	}
	s := &out.Spec
	s.NodeName = p.Spec.NodeName
	s.Priority, s.PriorityClassName = p.Spec.Priority, p.Spec.PriorityClassName
	s.TerminationGracePeriodSeconds = p.Spec.TerminationGracePeriodSeconds
	s.Overhead = p.Spec.Overhead
	if r := p.Spec.Resources; r != nil {
		s.Resources = &v1.ResourceRequirements{Requests: r.Requests, Limits: r.Limits}
	}
	s.InitContainers = pruneContainers(p.Spec.InitContainers)
	s.Containers = pruneContainers(p.Spec.Containers)
	for _, c := range p.Spec.EphemeralContainers {
		s.EphemeralContainers = append(s.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: c.Name, Image: c.Image}})
	}
	for _, v := range p.Spec.Volumes {
		if pv, read := pruneVolume(v); read {
			s.Volumes = append(s.Volumes, pv)
		}
	}
	st := &out.Status
	st.Phase, st.AllocatedResources = p.Status.Phase, p.Status.AllocatedResources
	st.InitContainerStatuses = pruneStatuses(p.Status.InitContainerStatuses)
	st.ContainerStatuses = pruneStatuses(p.Status.ContainerStatuses)
	st.EphemeralContainerStatuses = pruneStatuses(p.Status.EphemeralContainerStatuses)
	return out
}

func pruneContainers(cs []v1.Container) []v1.Container {
	if cs == nil {
		return nil
	}
	out := make([]v1.Container, len(cs))
	for i, c := range cs {
		out[i] = v1.Container{Name: c.Name, Image: c.Image, RestartPolicy: c.RestartPolicy,
			Resources: v1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}}
	}
	return out
}

func pruneStatuses(ss []v1.ContainerStatus) []v1.ContainerStatus {
	if ss == nil {
		return nil
	}
	out := make([]v1.ContainerStatus, len(ss))
	for i, s := range ss {
		out[i] = v1.ContainerStatus{Name: s.Name, Image: s.Image, ImageID: s.ImageID, AllocatedResources: s.AllocatedResources,
			State: stateKind(s.State)}
	}
	return out
}

// stateKind is which of running, waiting or terminated a container state
// is, and nothing of it.
func stateKind(st v1.ContainerState) v1.ContainerState {
	switch {
	case st.Terminated != nil:
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}
	case st.Running != nil:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	case st.Waiting != nil:
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}
	}
	return v1.ContainerState{}
}

// pruneVolume keeps a volume's name and, of its source, the kind and what
// is read of it: an emptyDir's medium, an image volume's reference. A
// hostPath's path, a configMap's name or a gitRepo's repository (which
// may carry credentials) are not read; nor is any other kind of volume
// (secret, projected, persistentVolumeClaim, ...): read is false for one.
func pruneVolume(v v1.Volume) (out v1.Volume, read bool) {
	out = v1.Volume{Name: v.Name}
	src, in := &out.VolumeSource, &v.VolumeSource
	switch {
	case in.HostPath != nil:
		src.HostPath = &v1.HostPathVolumeSource{}
	case in.GitRepo != nil:
		src.GitRepo = &v1.GitRepoVolumeSource{}
	case in.ConfigMap != nil:
		src.ConfigMap = &v1.ConfigMapVolumeSource{}
	case in.EmptyDir != nil:
		src.EmptyDir = &v1.EmptyDirVolumeSource{Medium: in.EmptyDir.Medium}
	case in.Image != nil:
		src.Image = &v1.ImageVolumeSource{Reference: in.Image.Reference}
	default:
		return out, false
	}
	return out, true
}
