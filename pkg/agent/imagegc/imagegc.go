// SPDX-License-Identifier: Apache-2.0

// Package imagegc estimates what the kubelet's image garbage collection can
// free on a node: the images no pod on the node uses, less the pod sandbox
// image, which the runtime pins (see Pinned). Disk pressure that those
// images cover is the kubelet's to relieve, by deleting them, before any pod
// is evicted for it (its eviction manager does node-level reclaim first,
// and its periodic collection starts at 85 % use).
//
// The figure comes from the Node's status.images, which the kubelet fills
// from the runtime every 10 s (kept in the API when it changes): the 50
// largest images by default, each with its names and the runtime's size,
// which for containerd is the compressed size. It is therefore a lower
// bound of what the collection frees, which errs toward evicting. An image
// counts only once it has been listed for DetectPeriod + MinAge: the
// kubelet does not delete an image it first detected less than MinAge ago,
// and it detects new images only every DetectPeriod.
package imagegc

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// MinAge is the kubelet's default imageMinimumGCAge. DetectPeriod is how
// often its image manager notes new images (a fixed 5 minutes,
// realImageGCManager.Start), which is when an image's age starts.
const (
	MinAge       = 2 * time.Minute
	DetectPeriod = 5 * time.Minute
)

// GCPeriod is how often the kubelet's image collection runs (ImageGCPeriod,
// pkg/kubelet/kubelet.go). Patience is how long evictd counts unused images
// as the kubelet's reclaim while a disk threshold holds: one collection
// period and a minute more, for the Node's image list to catch up. After
// that the kubelet has had its chance (its collection may well not start
// where a threshold set for evictd sits above the 15 % available at which
// it starts; evictd's defaults sit there), and evictd evicts for what the
// images would have covered.
const (
	GCPeriod = 5 * time.Minute
	Patience = GCPeriod + time.Minute
)

// Ages remembers when each of the node's images was first listed. The
// kubelet detects it at most DetectPeriod later, so an image listed for
// DetectPeriod + MinAge is old enough for its collection; for that long
// after evictd starts no image is, which errs toward evicting.
type Ages struct {
	first map[string]time.Time // by the image's first name
	last  *v1.Node             // the object last looked at
}

// Observe notes the images of node at now, and forgets the images it no
// longer lists. The informer replaces the object on every change, so an
// unchanged pointer needs no look.
func (a *Ages) Observe(node *v1.Node, now time.Time) {
	if node == nil || node == a.last {
		return
	}
	a.last = node
	seen := make(map[string]time.Time, len(node.Status.Images))
	for _, img := range node.Status.Images {
		if len(img.Names) == 0 {
			continue
		}
		k := img.Names[0]
		if t, ok := a.first[k]; ok {
			seen[k] = t
		} else {
			seen[k] = now
		}
	}
	a.first = seen
}

// OldEnough reports whether img has been listed for DetectPeriod + MinAge
// at now.
func (a *Ages) OldEnough(img v1.ContainerImage, now time.Time) bool {
	if len(img.Names) == 0 {
		return false
	}
	t, ok := a.first[img.Names[0]]
	return ok && now.Sub(t) >= DetectPeriod+MinAge
}

// Unused returns the bytes and number of the node's images that no pod in
// pods uses: none of an image's names is a pod's container image or image
// ID (from its status, or from its spec while it has no status yet) or the
// reference of one of its image volumes, and that old says the kubelet may
// delete (nil: all). A finished pod still in the API keeps its images in
// use: the kubelet's container collection keeps its exited containers (one
// per container, MaxPerPodContainer) until the pod goes, and its image
// collection spares the images of every container that exists. Images
// without names are counted as used: nothing tells what they are. Pinned
// images (the pod sandbox image) are never counted: the collection skips
// them.
func Unused(node *v1.Node, pods []*v1.Pod, old func(v1.ContainerImage) bool) (bytes int64, images int) {
	if node == nil {
		return 0, 0
	}
	used := map[string]bool{}
	for _, p := range pods {
		if p == nil {
			continue
		}
		for i := range p.Spec.Volumes {
			if iv := p.Spec.Volumes[i].Image; iv != nil && iv.Reference != "" {
				used[Normalize(iv.Reference)] = true
			}
		}
		for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range cs {
				used[Normalize(cs[i].Image)] = true
			}
		}
		for _, ss := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
			for i := range ss {
				used[Normalize(ss[i].Image)] = true
				used[ss[i].ImageID] = true
			}
		}
		for i := range p.Spec.EphemeralContainers {
			used[Normalize(p.Spec.EphemeralContainers[i].Image)] = true
		}
	}
	for _, img := range node.Status.Images {
		inUse := len(img.Names) == 0 || Pinned(img)
		for _, n := range img.Names {
			if used[n] || used[Normalize(n)] {
				inUse = true
				break
			}
		}
		if !inUse && img.SizeBytes > 0 && (old == nil || old(img)) {
			bytes += img.SizeBytes
			images++
		}
	}
	return bytes, images
}

// Pinned reports whether img is the pod sandbox ("pause") image, which the
// runtime pins: containerd its pinned_images.sandbox (sandbox_image before
// 2.0), CRI-O its pinned_images, which hold its pause_image by default. The
// kubelet's image collection never deletes a pinned image (CRI
// Image.pinned; imagesInEvictionOrder in
// pkg/kubelet/images/image_gc_manager.go skips it), and no pod's
// containers name the sandbox image, so without this it would count as
// space the collection frees. The Node's status.images does not carry the
// pinned flag, so the image is known by its name: a repository whose last
// path element is "pause" or has it as a dash- or underscore-separated word
// (registry.k8s.io/pause, eks/pause, rancher/mirrored-pause, pause-amd64).
// A name that only looks like one errs toward evicting. Other images a
// runtime pins (the rest of CRI-O's pinned_images, containerd's
// io.cri-containerd.pinned label) are not known here.
func Pinned(img v1.ContainerImage) bool {
	for _, n := range img.Names {
		repo, _, _ := strings.Cut(n, "@")
		last := repo[strings.LastIndexByte(repo, '/')+1:]
		if i := strings.LastIndexByte(last, ':'); i >= 0 {
			last = last[:i]
		}
		for _, w := range strings.FieldsFunc(last, func(r rune) bool { return r == '-' || r == '_' }) {
			if w == "pause" {
				return true
			}
		}
	}
	return false
}

// Normalize spells an image reference the way the runtime lists it:
// "nginx" is "docker.io/library/nginx:latest", "me/app:1" is
// "docker.io/me/app:1". References with a digest keep it and get no tag.
func Normalize(ref string) string {
	if ref == "" || strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	first, _, hasSlash := strings.Cut(name, "/")
	switch {
	case !hasSlash:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	if hasDigest {
		return name + "@" + digest
	}
	if i := strings.LastIndexByte(name, ':'); i < 0 || strings.Contains(name[i:], "/") {
		name += ":latest"
	}
	return name
}
