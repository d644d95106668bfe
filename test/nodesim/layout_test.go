// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ctr(req, lim map[corev1.ResourceName]string) corev1.Container {
	c := corev1.Container{Name: "c"}
	for k, v := range req {
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[k] = resource.MustParse(v)
	}
	for k, v := range lim {
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[k] = resource.MustParse(v)
	}
	return c
}

type rl = map[corev1.ResourceName]string

const (
	cpu = corev1.ResourceCPU
	mem = corev1.ResourceMemory
)

func TestQOSAndCgroup(t *testing.T) {
	tests := []struct {
		name       string
		init       []corev1.Container
		containers []corev1.Container
		wantQOS    corev1.PodQOSClass
		wantCgroup string
		wantLimit  int64
	}{
		{name: "nothing set", containers: []corev1.Container{ctr(nil, nil)},
			wantQOS: corev1.PodQOSBestEffort, wantCgroup: "kubepods/besteffort/poduid-1", wantLimit: -1},
		{name: "zero requests count as unset", containers: []corev1.Container{ctr(rl{cpu: "0", mem: "0"}, nil)},
			wantQOS: corev1.PodQOSBestEffort, wantCgroup: "kubepods/besteffort/poduid-1", wantLimit: -1},
		{name: "limits equal requests", containers: []corev1.Container{ctr(rl{cpu: "1", mem: "1Gi"}, rl{cpu: "1", mem: "1Gi"})},
			wantQOS: corev1.PodQOSGuaranteed, wantCgroup: "kubepods/poduid-1", wantLimit: 1 << 30},
		{name: "limits only: requests default to them", containers: []corev1.Container{ctr(nil, rl{cpu: "500m", mem: "64Mi"}), ctr(nil, rl{cpu: "1", mem: "32Mi"})},
			wantQOS: corev1.PodQOSGuaranteed, wantCgroup: "kubepods/poduid-1", wantLimit: 96 << 20},
		{name: "memory limit only", containers: []corev1.Container{ctr(nil, rl{mem: "64Mi"})},
			wantQOS: corev1.PodQOSBurstable, wantCgroup: "kubepods/burstable/poduid-1", wantLimit: 64 << 20},
		{name: "request below limit", containers: []corev1.Container{ctr(rl{cpu: "1", mem: "1Gi"}, rl{cpu: "1", mem: "2Gi"})},
			wantQOS: corev1.PodQOSBurstable, wantCgroup: "kubepods/burstable/poduid-1", wantLimit: 2 << 30},
		{name: "one container without limits", containers: []corev1.Container{ctr(nil, rl{cpu: "1", mem: "1Gi"}), ctr(nil, nil)},
			wantQOS: corev1.PodQOSBurstable, wantCgroup: "kubepods/burstable/poduid-1", wantLimit: -1},
		{name: "init container breaks Guaranteed", init: []corev1.Container{ctr(rl{mem: "1Mi"}, nil)}, containers: []corev1.Container{ctr(nil, rl{cpu: "1", mem: "1Gi"})},
			wantQOS: corev1.PodQOSBurstable, wantCgroup: "kubepods/burstable/poduid-1", wantLimit: -1},
		{name: "larger init container limit wins", init: []corev1.Container{ctr(nil, rl{cpu: "1", mem: "2Gi"})}, containers: []corev1.Container{ctr(nil, rl{cpu: "1", mem: "1Gi"})},
			wantQOS: corev1.PodQOSGuaranteed, wantCgroup: "kubepods/poduid-1", wantLimit: 2 << 30},
		{name: "extended resources do not count", containers: []corev1.Container{ctr(rl{"example.com/gpu": "1"}, rl{"example.com/gpu": "1"})},
			wantQOS: corev1.PodQOSBestEffort, wantCgroup: "kubepods/besteffort/poduid-1", wantLimit: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}, Spec: corev1.PodSpec{InitContainers: tt.init, Containers: tt.containers}}
			if got := QOSClass(pod); got != tt.wantQOS {
				t.Errorf("QOSClass = %s, want %s", got, tt.wantQOS)
			}
			if got := PodCgroup(pod); got != tt.wantCgroup {
				t.Errorf("PodCgroup = %s, want %s", got, tt.wantCgroup)
			}
			if got := podMemoryLimit(pod); got != tt.wantLimit {
				t.Errorf("podMemoryLimit = %d, want %d", got, tt.wantLimit)
			}
		})
	}
}

func TestContainerMemoryLimit(t *testing.T) {
	tests := []struct {
		c    corev1.Container
		want int64
	}{
		{ctr(nil, nil), -1},
		{ctr(rl{mem: "1Gi"}, nil), -1},
		{ctr(nil, rl{mem: "100Mi"}), 100 << 20},
		{ctr(nil, rl{cpu: "1"}), -1},
	}
	for i, tt := range tests {
		if got := containerMemoryLimit(&tt.c); got != tt.want {
			t.Errorf("case %d: got %d, want %d", i, got, tt.want)
		}
	}
}
