// SPDX-License-Identifier: Apache-2.0

package imagegc

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                            "docker.io/library/nginx:latest",
		"nginx:1.25":                       "docker.io/library/nginx:1.25",
		"me/app:1":                         "docker.io/me/app:1",
		"registry.k8s.io/pause:3.10":       "registry.k8s.io/pause:3.10",
		"localhost:5000/app":               "localhost:5000/app:latest",
		"localhost/app:v2":                 "localhost/app:v2",
		"nginx@sha256:abc":                 "docker.io/library/nginx@sha256:abc",
		"quay.io/x/y@sha256:abc":           "quay.io/x/y@sha256:abc",
		"sha256:0123":                      "sha256:0123",
		"docker.io/library/busybox:1.36.1": "docker.io/library/busybox:1.36.1",
		"evictd-workload:e2e-node":         "docker.io/library/evictd-workload:e2e-node",
		"":                                 "",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestUnused(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{
		{Names: []string{"docker.io/library/nginx@sha256:aaa", "docker.io/library/nginx:1.25"}, SizeBytes: 70 << 20},
		{Names: []string{"docker.io/library/redis@sha256:bbb", "docker.io/library/redis:7"}, SizeBytes: 40 << 20},
		{Names: []string{"quay.io/big/model:v1"}, SizeBytes: 900 << 20},
		{Names: []string{"docker.io/library/busybox:1.36"}, SizeBytes: 2 << 20},
		{Names: []string{"sha256:cccc"}, SizeBytes: 5 << 20},
		{SizeBytes: 1 << 30}, // no names: counted as used
	}}}
	pods := []*v1.Pod{
		// Running: matched by its status's image ID.
		{Spec: v1.PodSpec{Containers: []v1.Container{{Image: "nginx:1.25"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Image: "docker.io/library/nginx:1.25", ImageID: "docker.io/library/nginx@sha256:aaa"}}}},
		// Pending: matched by its spec's short name.
		{Spec: v1.PodSpec{InitContainers: []v1.Container{{Image: "busybox:1.36"}}}, Status: v1.PodStatus{Phase: v1.PodPending}},
		// Locally imported image, known by its ID only.
		{Spec: v1.PodSpec{Containers: []v1.Container{{Image: "local:1"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Image: "docker.io/library/local:1", ImageID: "sha256:cccc"}}}},
		// Finished but still there: its exited container keeps redis in
		// use until the pod goes.
		{Spec: v1.PodSpec{Containers: []v1.Container{{Image: "redis:7"}}}, Status: v1.PodStatus{Phase: v1.PodSucceeded}},
		nil,
	}
	bytes, n := Unused(node, pods, nil)
	if want := int64(900 << 20); bytes != want || n != 1 {
		t.Errorf("Unused = %d bytes in %d images; want %d in 1 (the model)", bytes, n, want)
	}
	// An image volume (KEP-4639) uses its image as a container does.
	pods = append(pods, &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "model",
		VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "quay.io/big/model:v1"}}}}}})
	if bytes, n := Unused(node, pods, nil); bytes != 0 || n != 0 {
		t.Errorf("with the model as an image volume: Unused = %d bytes in %d images; want none", bytes, n)
	}
	if b, n := Unused(nil, pods, nil); b != 0 || n != 0 {
		t.Errorf("Unused(nil node) = %d, %d; want 0, 0", b, n)
	}
}

// TestUnusedSkipsPinned: the kubelet's image collection never deletes an
// image its runtime pins (imagesInEvictionOrder skips record.pinned), and
// every runtime pins the pod sandbox image, which no pod's containers name:
// it is not space the collection frees.
func TestUnusedSkipsPinned(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{
		{Names: []string{"registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a", "registry.k8s.io/pause:3.10"}, SizeBytes: 320 << 10},
		{Names: []string{"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5"}, SizeBytes: 300 << 10},
		{Names: []string{"docker.io/rancher/mirrored-pause:3.6"}, SizeBytes: 300 << 10},
		{Names: []string{"k8s.gcr.io/pause-amd64:3.1"}, SizeBytes: 740 << 10},
		{Names: []string{"docker.io/library/evictd-pause:e2e-node"}, SizeBytes: 2 << 20}, // the VM node's
		{Names: []string{"localhost:5000/pause"}, SizeBytes: 1 << 20},
		{Names: []string{"quay.io/big/model:v1"}, SizeBytes: 900 << 20},
		{Names: []string{"docker.io/library/paused-jobs:1"}, SizeBytes: 50 << 20}, // not a sandbox image
	}}}
	bytes, n := Unused(node, nil, nil)
	if want := int64(950 << 20); bytes != want || n != 2 {
		t.Errorf("Unused = %d bytes in %d images; want %d in 2 (the model and paused-jobs; no sandbox image)", bytes, n, want)
	}
	for _, img := range node.Status.Images[:6] {
		if !Pinned(img) {
			t.Errorf("Pinned(%v) = false, want true", img.Names)
		}
	}
	for _, img := range node.Status.Images[6:] {
		if Pinned(img) {
			t.Errorf("Pinned(%v) = true, want false", img.Names)
		}
	}
}

// TestAges: an image counts once listed for DetectPeriod + MinAge; one listed again after
// it left starts anew; a changed object is looked at, the same one is not.
func TestAges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := v1.ContainerImage{Names: []string{"docker.io/library/old:1"}, SizeBytes: 10}
	young := v1.ContainerImage{Names: []string{"docker.io/library/young:1"}, SizeBytes: 20}
	var a Ages
	a.Observe(&v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{old}}}, t0)
	n2 := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{old, young}}}
	a.Observe(n2, t0.Add(time.Minute))
	now := t0.Add(DetectPeriod + MinAge + 30*time.Second)
	bytes, n := Unused(n2, nil, func(img v1.ContainerImage) bool { return a.OldEnough(img, now) })
	if bytes != 10 || n != 1 {
		t.Errorf("Unused with ages = %d bytes in %d images; want only the old one's 10", bytes, n)
	}
	if !a.OldEnough(young, t0.Add(time.Minute+DetectPeriod+MinAge)) {
		t.Errorf("young not old enough DetectPeriod + MinAge after it was listed")
	}
	// It leaves, then comes back: its age starts again.
	a.Observe(&v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{old}}}, now)
	n4 := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{old, young}}}
	a.Observe(n4, now)
	if a.OldEnough(young, now.Add(DetectPeriod+MinAge-time.Second)) {
		t.Errorf("young counted as old after it was listed again")
	}
	// The same object is not looked at again: nothing changes.
	a.Observe(n4, now.Add(time.Hour))
	if !a.OldEnough(old, now.Add(time.Hour)) || a.OldEnough(v1.ContainerImage{}, now) {
		t.Errorf("ages changed on the same object, or a nameless image counted")
	}
}
