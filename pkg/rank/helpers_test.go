// SPDX-License-Identifier: Apache-2.0

package rank

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// podOpt changes a test pod.
type podOpt func(*v1.Pod)

// newPod builds a running pod with one container and no requests; its UID is
// "uid-NS-NAME" so stats can be matched to it.
func newPod(ns, name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main"}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func priority(v int32) podOpt { return func(p *v1.Pod) { p.Spec.Priority = &v } }

func priorityClass(name string) podOpt {
	return func(p *v1.Pod) { p.Spec.Priority = nil; p.Spec.PriorityClassName = name }
}

// request sets the first container's request for one resource.
func request(name v1.ResourceName, q string) podOpt {
	return func(p *v1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		c.Resources.Requests[name] = resource.MustParse(q)
	}
}

func memRequest(q string) podOpt { return request(v1.ResourceMemory, q) }

func annotation(k, v string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func ownedBy(kind, name string, controller bool) podOpt {
	return func(p *v1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: name, Controller: &controller})
	}
}

func phase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }

func terminating() podOpt {
	return func(p *v1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
}

func u64(v uint64) *uint64 { return &v }

// statsOpt fills one pod's stats.
type statsOpt func(*statsapi.PodStats)

func workingSet(q string) statsOpt {
	return func(ps *statsapi.PodStats) {
		qty := resource.MustParse(q)
		v := uint64(qty.Value())
		ps.Memory = &statsapi.MemoryStats{WorkingSetBytes: &v}
	}
}

func processes(n uint64) statsOpt {
	return func(ps *statsapi.PodStats) { ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: &n} }
}

func ephemeral(bytes, inodes uint64) statsOpt {
	return func(ps *statsapi.PodStats) {
		ps.EphemeralStorage = &statsapi.FsStats{UsedBytes: &bytes, InodesUsed: &inodes}
	}
}

func podStats(p *v1.Pod, opts ...statsOpt) statsapi.PodStats {
	ps := statsapi.PodStats{PodRef: statsapi.PodReference{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}}
	for _, o := range opts {
		o(&ps)
	}
	return ps
}

func summaryOf(ps ...statsapi.PodStats) *statsapi.Summary {
	return &statsapi.Summary{Pods: ps}
}

func names(r Result) []string {
	out := make([]string, len(r.Candidates))
	for i, c := range r.Candidates {
		out[i] = c.Namespace + "/" + c.Name
	}
	return out
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

// mirrorOwner makes the Node the pod's controller, as the kubelet writes a
// mirror pod's owner.
func mirrorOwner(node string, uid types.UID) podOpt {
	return func(p *v1.Pod) {
		p.Spec.NodeName = node
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node, UID: uid, Controller: ptrTrue()})
	}
}

func ptrTrue() *bool { t := true; return &t }

func typesUID(s string) types.UID { return types.UID(s) }
