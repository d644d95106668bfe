// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"slices"
	"testing"

	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// mem is a memory-only resource list.
func mem(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resourceMust(q)} }

// allocated reports a container's allocated requests in the pod's status,
// as the kubelet does once it has created the container.
func allocated(name string, l v1.ResourceList) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, AllocatedResources: l}
}

// resizePending is the condition a deferred (or infeasible) resize leaves.
func resizePending(reason string) v1.PodCondition {
	return v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: reason}
}

// Under in-place resize the kubelet's eviction manager ranks the allocated
// pod (kubelet getAllocatedPods → allocation manager UpdatePodFromAllocation),
// not the desired spec; the API shows that allocation in the pod's status.
func TestPodRequestAllocated(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	c := func(name, q string) v1.Container {
		ct := v1.Container{Name: name}
		if q != "" {
			ct.Resources.Requests = mem(q)
		}
		return ct
	}
	sidecar := func(name, q string) v1.Container {
		ct := c(name, q)
		ct.RestartPolicy = &always
		return ct
	}
	tests := []struct {
		name   string
		res    v1.ResourceName // memory when empty
		spec   v1.PodSpec
		status v1.PodStatus
		want   int64
	}{
		{
			// The node is short, so raising the request is deferred: the
			// kubelet still counts the 512Mi it allocated.
			name: "deferred increase: the allocated request counts, not the spec's",
			spec: v1.PodSpec{Containers: []v1.Container{c("main", "2Gi")}},
			status: v1.PodStatus{
				Conditions:        []v1.PodCondition{resizePending(v1.PodReasonDeferred)},
				ContainerStatuses: []v1.ContainerStatus{allocated("main", mem("512Mi"))},
			},
			want: 512 << 20,
		},
		{
			name: "infeasible increase: the allocated request counts",
			spec: v1.PodSpec{Containers: []v1.Container{c("main", "64Gi")}},
			status: v1.PodStatus{
				Conditions:        []v1.PodCondition{resizePending(v1.PodReasonInfeasible)},
				ContainerStatuses: []v1.ContainerStatus{allocated("main", mem("1Gi"))},
			},
			want: 1 << 30,
		},
		{
			// A decrease not yet allocated: the kubelet still counts the
			// larger allocation.
			name:   "decrease not yet allocated: the allocated request counts",
			spec:   v1.PodSpec{Containers: []v1.Container{c("main", "256Mi")}},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{allocated("main", mem("1Gi"))}},
			want:   1 << 30,
		},
		{
			name: "a container without a status yet counts its spec",
			spec: v1.PodSpec{Containers: []v1.Container{c("a", "200Mi"), c("b", "50Mi")}},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				allocated("a", mem("100Mi")),
			}},
			want: 150 << 20,
		},
		{
			// A kubelet without in-place resize reports no allocation.
			name:   "a status without allocatedResources counts the spec",
			spec:   v1.PodSpec{Containers: []v1.Container{c("main", "300Mi")}},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "main"}}},
			want:   300 << 20,
		},
		{
			name:   "a pod without any status counts the spec",
			spec:   v1.PodSpec{Containers: []v1.Container{c("main", "300Mi")}},
			status: v1.PodStatus{},
			want:   300 << 20,
		},
		{
			name: "statuses match containers by name, not position",
			spec: v1.PodSpec{Containers: []v1.Container{c("a", "1Gi"), c("b", "1Gi")}},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				allocated("b", mem("20Mi")), allocated("a", mem("10Mi")),
			}},
			want: 30 << 20,
		},
		{
			// The kubelet reports the allocated container's requests as
			// they are: one it does not list is not requested.
			name: "an allocation without the resource requests none of it",
			spec: v1.PodSpec{Containers: []v1.Container{c("main", "1Gi")}},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				allocated("main", v1.ResourceList{v1.ResourceCPU: resourceMust("1")}),
			}},
			want: 0,
		},
		{
			name: "a sidecar's allocation counts with the containers",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{sidecar("proxy", "100Mi")},
				Containers:     []v1.Container{c("main", "100Mi")},
			},
			status: v1.PodStatus{
				InitContainerStatuses: []v1.ContainerStatus{allocated("proxy", mem("300Mi"))},
				ContainerStatuses:     []v1.ContainerStatus{allocated("main", mem("100Mi"))},
			},
			want: 400 << 20,
		},
		{
			name: "an init container's allocation is its peak",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{c("setup", "2Gi")},
				Containers:     []v1.Container{c("main", "100Mi")},
			},
			status: v1.PodStatus{
				InitContainerStatuses: []v1.ContainerStatus{allocated("setup", mem("1Gi"))},
			},
			want: 1 << 30,
		},
		{
			name: "overhead is added to the allocated request",
			spec: v1.PodSpec{Containers: []v1.Container{c("main", "1Gi")}, Overhead: mem("20Mi")},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				allocated("main", mem("100Mi")),
			}},
			want: 120 << 20,
		},
		{
			name: "no overhead on a zero allocated request",
			spec: v1.PodSpec{Containers: []v1.Container{c("main", "1Gi")}, Overhead: mem("20Mi")},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				allocated("main", v1.ResourceList{v1.ResourceCPU: resourceMust("1")}),
			}},
			want: 0,
		},
		{
			// status.allocatedResources (InPlacePodLevelResourcesVerticalScaling)
			// is the allocated pod's requests, overhead included.
			name: "pod-level resources: status.allocatedResources stands in for the spec",
			spec: v1.PodSpec{
				Resources:  &v1.ResourceRequirements{Requests: mem("2Gi")},
				Containers: []v1.Container{c("main", "")},
				Overhead:   mem("10Mi"),
			},
			status: v1.PodStatus{AllocatedResources: mem("1034Mi")},
			want:   1034 << 20,
		},
		{
			// The pod-level figure covers containers the kubelet has not
			// created yet.
			name:   "without pod-level resources status.allocatedResources is the containers' total",
			spec:   v1.PodSpec{Containers: []v1.Container{c("a", "1Gi"), c("b", "1Gi")}},
			status: v1.PodStatus{AllocatedResources: mem("768Mi")},
			want:   768 << 20,
		},
		{
			name: "status.allocatedResources wins over the containers' statuses",
			spec: v1.PodSpec{Containers: []v1.Container{c("a", "1Gi"), c("b", "1Gi")}},
			status: v1.PodStatus{
				AllocatedResources: mem("768Mi"),
				ContainerStatuses:  []v1.ContainerStatus{allocated("a", mem("512Mi"))},
			},
			want: 768 << 20,
		},
		{
			// The pod-level figure holds the overhead even when nothing
			// else is requested; the kubelet adds it only to a non-zero
			// request.
			name:   "status.allocatedResources that is only overhead is no request",
			spec:   v1.PodSpec{Containers: []v1.Container{c("main", "")}, Overhead: mem("20Mi")},
			status: v1.PodStatus{AllocatedResources: mem("20Mi")},
			want:   0,
		},
		{
			// The allocated pod still sets no pod-level memory, so the
			// kubelet counts none, whatever the containers' total is.
			name: "pod-level resources without memory: none, whatever status.allocatedResources says",
			spec: v1.PodSpec{
				Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resourceMust("1")}},
				Containers: []v1.Container{c("main", "100Mi")},
			},
			status: v1.PodStatus{AllocatedResources: v1.ResourceList{v1.ResourceCPU: resourceMust("1"), v1.ResourceMemory: resourceMust("100Mi")}},
			want:   0,
		},
		{
			name: "pod-level resources: no ephemeral-storage request, whatever status.allocatedResources says",
			res:  v1.ResourceEphemeralStorage,
			spec: v1.PodSpec{
				Resources: &v1.ResourceRequirements{Requests: mem("1Gi")},
				Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resourceMust("1Gi")},
				}}},
			},
			status: v1.PodStatus{AllocatedResources: v1.ResourceList{
				v1.ResourceMemory: resourceMust("1Gi"), v1.ResourceEphemeralStorage: resourceMust("1Gi"),
			}},
			want: 0,
		},
		{
			name: "ephemeral-storage follows the allocation too",
			res:  v1.ResourceEphemeralStorage,
			spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resourceMust("2Gi")},
			}}}},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				allocated("main", v1.ResourceList{v1.ResourceEphemeralStorage: resourceMust("1Gi")}),
			}},
			want: 1 << 30,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.res
			if res == "" {
				res = v1.ResourceMemory
			}
			p := &v1.Pod{Spec: tc.spec, Status: tc.status}
			if got := podRequest(p, res); got != tc.want {
				t.Errorf("%s request = %d (%dMi), want %d (%dMi)", res, got, got>>20, tc.want, tc.want>>20)
			}
		})
	}
}

// withAllocated sets the first container's allocated memory in the status,
// as the kubelet reports it.
func withAllocated(q string) podOpt {
	return func(p *v1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, allocated(p.Spec.Containers[0].Name, mem(q)))
	}
}

func withCondition(c v1.PodCondition) podOpt {
	return func(p *v1.Pod) { p.Status.Conditions = append(p.Status.Conditions, c) }
}

// The order follows the kubelet's: a pod whose raise was deferred is over its
// allocated request (and first), one whose cut is not yet allocated is under
// it (and last); today's spec-based count had it the other way round.
func TestRankFollowsAllocatedRequests(t *testing.T) {
	tc := rankCase{
		pods: []*v1.Pod{
			// Spec raised to 2Gi, deferred: allocated 512Mi, 512Mi over.
			newPod("ns", "raised", memRequest("2Gi"), withAllocated("512Mi"), withCondition(resizePending(v1.PodReasonDeferred))),
			// No resize: 144Mi over.
			newPod("ns", "steady", memRequest("256Mi"), withAllocated("256Mi")),
			// Spec cut to 128Mi, not yet allocated: 1Gi allocated, under it.
			newPod("ns", "cut", memRequest("128Mi"), withAllocated("1Gi")),
		},
		stats: func(p map[string]*v1.Pod) []statsapi.PodStats {
			return []statsapi.PodStats{
				podStats(p["raised"], workingSet("1Gi")),
				podStats(p["steady"], workingSet("400Mi")),
				podStats(p["cut"], workingSet("600Mi")),
			}
		},
		want: []string{"ns/raised", "ns/steady", "ns/cut"},
	}
	res := tc.run(t)
	want := map[string]struct {
		request int64
		exceeds bool
	}{
		"raised": {512 << 20, true},
		"steady": {256 << 20, true},
		"cut":    {1 << 30, false},
	}
	for _, c := range res.Candidates {
		w := want[c.Name]
		if c.Request != w.request || c.ExceedsRequest != w.exceeds {
			t.Errorf("%s: request %d exceeds %v, want request %d exceeds %v", c.Name, c.Request, c.ExceedsRequest, w.request, w.exceeds)
		}
	}
	// The input pods are not changed.
	if q := tc.pods[0].Spec.Containers[0].Resources.Requests[v1.ResourceMemory]; q.Cmp(resourceMust("2Gi")) != 0 {
		t.Errorf("raised's spec request changed to %s", q.String())
	}
}

// The same on the disk signals: an ephemeral-storage request follows the
// allocation the pod's status reports.
func TestRankDiskFollowsAllocatedRequests(t *testing.T) {
	es := v1.ResourceEphemeralStorage
	p := newPod("ns", "p", request(es, "4Gi"))
	p.Status.ContainerStatuses = []v1.ContainerStatus{allocated("main", v1.ResourceList{es: resourceMust("1Gi")})}
	q := newPod("ns", "q", request(es, "1Gi"))
	res := Rank(thresholds.NodeFsAvailable, summaryOf(podStats(p, ephemeral(2<<30, 10)), podStats(q, ephemeral(1<<30+1, 10))), []*v1.Pod{q, p}, Options{})
	if got, want := names(res), []string{"ns/p", "ns/q"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if res.Candidates[0].Request != 1<<30 {
		t.Errorf("p's request = %d, want 1Gi", res.Candidates[0].Request)
	}
}
