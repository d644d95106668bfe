// SPDX-License-Identifier: Apache-2.0

// Package fslayout names how a node's disk is laid out in the kubelet's
// terms (KEP-4191): which of the kubelet's root (nodefs), the runtime's image
// store (imagefs) and the containers' writable layers (containerfs) share a
// filesystem. The layout decides which of a pod's parts of ephemeral storage
// an eviction frees on which filesystem, and which thresholds the kubelet
// applies to containerfs.
package fslayout

// Layout is one of the kubelet's disk layouts.
type Layout string

const (
	// Unknown: a filesystem could not be measured, or the three are laid
	// out in a way the kubelet does not support.
	Unknown Layout = ""
	// OneFs: one filesystem holds all three, the layout of most nodes.
	OneFs Layout = "one-filesystem"
	// DedicatedImageFs: the image store and the writable layers have a
	// filesystem of their own (containerd with its root on another disk).
	DedicatedImageFs Layout = "dedicated-imagefs"
	// SplitImageFs: the images have a filesystem of their own and the
	// writable layers stay on the kubelet's (CRI-O's split image store).
	SplitImageFs Layout = "split-imagefs"
)

// Of tells the layout from the identities of the three filesystems (an
// FsID, or anything equal exactly when the filesystems are one). A
// containerfs on a filesystem of its own, apart from both others, is a
// layout the kubelet does not have: Unknown.
func Of[ID comparable](nodefs, imagefs, containerfs ID) Layout {
	switch {
	case nodefs == imagefs && imagefs == containerfs:
		return OneFs
	case imagefs == containerfs:
		return DedicatedImageFs
	case containerfs == nodefs:
		return SplitImageFs
	}
	return Unknown
}

// ContainerFsThresholdsFrom names the filesystem signal whose thresholds the
// kubelet applies to containerfs in the layout (UpdateContainerFsThresholds):
// the thresholds of the filesystem that holds the writable layers. Users'
// own containerfs thresholds the kubelet ignores. "" when unknown.
func ContainerFsThresholdsFrom(l Layout) string {
	switch l {
	case OneFs, SplitImageFs:
		return "nodefs"
	case DedicatedImageFs:
		return "imagefs"
	}
	return ""
}

// Parts says which parts of a pod's ephemeral storage are on one filesystem.
type Parts struct{ WritableLayers, Logs, Volumes bool }

// All is every part.
func (p Parts) All() bool { return p.WritableLayers && p.Logs && p.Volumes }

// PartsOn is what of a pod's ephemeral storage lives on the filesystem
// ("nodefs" or "imagefs") in the layout, as the kubelet ranks pods for it
// (buildSignalToRankFunc): everything on one filesystem; with a dedicated
// imagefs, the logs and local volumes on nodefs and the writable layers on
// imagefs; in the split layout everything on nodefs and nothing of a pod's on
// imagefs, which holds only images. Unknown counts everything, as on one
// filesystem.
func PartsOn(l Layout, fs string) Parts {
	switch {
	case l == DedicatedImageFs && fs == "imagefs":
		return Parts{WritableLayers: true}
	case l == DedicatedImageFs:
		return Parts{Logs: true, Volumes: true}
	case l == SplitImageFs && fs == "imagefs":
		return Parts{}
	}
	return Parts{true, true, true}
}

// ImagesOn says whether the node's images are on the filesystem ("nodefs" or
// "imagefs") in the layout, so that the kubelet's image collection frees
// space there. Unknown says imagefs only: the image store is there by
// definition, and counting images toward nodefs on a guess could withhold
// an eviction.
func ImagesOn(l Layout, fs string) bool {
	return fs == "imagefs" || l == OneFs
}
