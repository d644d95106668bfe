// SPDX-License-Identifier: Apache-2.0

package fslayout

import "testing"

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		nodefs, imagefs, containerfs uint64
		want                         Layout
	}{
		{"one disk", 1, 1, 1, OneFs},
		{"containerd's root on a disk of its own", 1, 2, 2, DedicatedImageFs},
		{"CRI-O's image store apart", 1, 2, 1, SplitImageFs},
		{"writable layers on a third disk", 1, 2, 3, Unknown},
		{"writable layers apart, images on nodefs", 1, 1, 2, Unknown},
	} {
		if got := Of(tc.nodefs, tc.imagefs, tc.containerfs); got != tc.want {
			t.Errorf("%s: Of(%d, %d, %d) = %q; want %q", tc.name, tc.nodefs, tc.imagefs, tc.containerfs, got, tc.want)
		}
	}
}

func TestContainerFsThresholdsFrom(t *testing.T) {
	for l, want := range map[Layout]string{OneFs: "nodefs", SplitImageFs: "nodefs", DedicatedImageFs: "imagefs", Unknown: ""} {
		if got := ContainerFsThresholdsFrom(l); got != want {
			t.Errorf("ContainerFsThresholdsFrom(%q) = %q; want %q", l, got, want)
		}
	}
}

func TestPartsOn(t *testing.T) {
	all := Parts{true, true, true}
	for _, tc := range []struct {
		layout Layout
		fs     string
		want   Parts
	}{
		{OneFs, "nodefs", all},
		{OneFs, "imagefs", all},
		{Unknown, "imagefs", all},
		{DedicatedImageFs, "nodefs", Parts{Logs: true, Volumes: true}},
		{DedicatedImageFs, "imagefs", Parts{WritableLayers: true}},
		{SplitImageFs, "nodefs", all},
		{SplitImageFs, "imagefs", Parts{}},
	} {
		if got := PartsOn(tc.layout, tc.fs); got != tc.want {
			t.Errorf("PartsOn(%q, %s) = %+v; want %+v", tc.layout, tc.fs, got, tc.want)
		}
	}
}

func TestImagesOn(t *testing.T) {
	for _, tc := range []struct {
		layout Layout
		fs     string
		want   bool
	}{
		{OneFs, "nodefs", true},
		{OneFs, "imagefs", true},
		{DedicatedImageFs, "nodefs", false},
		{DedicatedImageFs, "imagefs", true},
		{SplitImageFs, "nodefs", false},
		{SplitImageFs, "imagefs", true},
		{Unknown, "nodefs", false},
		{Unknown, "imagefs", true},
	} {
		if got := ImagesOn(tc.layout, tc.fs); got != tc.want {
			t.Errorf("ImagesOn(%q, %s) = %v; want %v", tc.layout, tc.fs, got, tc.want)
		}
	}
}
