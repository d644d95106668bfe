// SPDX-License-Identifier: Apache-2.0

package fslayout

import (
	"strings"
	"testing"
)

// btrfsNode is the mount table of a node whose one disk is a btrfs
// filesystem with a subvolume each for /, /home and containerd's root,
// and a second ext4 disk for the kubelet's pods on another node layout.
const btrfsNode = `22 1 0:42 /@ / rw,relatime shared:1 - btrfs /dev/sda2 rw,ssd,space_cache=v2,subvolid=256,subvol=/@
23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
24 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw
36 22 0:42 /@home /home rw,relatime shared:30 - btrfs /dev/sda2 rw,ssd,space_cache=v2,subvolid=257,subvol=/@home
37 22 0:42 /@containerd /var/lib/containerd rw,relatime shared:31 - btrfs /dev/sda2 rw,ssd,space_cache=v2,subvolid=258,subvol=/@containerd
38 22 8:17 / /var/lib/containers rw,relatime shared:32 - ext4 /dev/sdb1 rw
39 22 0:50 / /mnt/my\040data rw,relatime shared:33 - btrfs /dev/sdc rw,subvolid=5,subvol=/
`

func TestParseMountInfo(t *testing.T) {
	mounts, err := ParseMountInfo([]byte(btrfsNode))
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 7 {
		t.Fatalf("%d mounts; want 7", len(mounts))
	}
	want := Mount{MountPoint: "/var/lib/containerd", FSType: "btrfs", Source: "/dev/sda2", Major: 0, Minor: 42}
	if mounts[4] != want {
		t.Errorf("line 5 = %+v; want %+v", mounts[4], want)
	}
	if mounts[6].MountPoint != "/mnt/my data" {
		t.Errorf("escaped mount point read as %q; want %q", mounts[6].MountPoint, "/mnt/my data")
	}
	// No optional fields at all, as on a kernel without shared subtrees.
	m, err := ParseMountInfo([]byte("15 1 8:1 / / rw - ext4 /dev/sda1 rw\n"))
	if err != nil || len(m) != 1 || m[0].Source != "/dev/sda1" || m[0].Major != 8 || m[0].Minor != 1 {
		t.Errorf("line without optional fields: %+v, %v", m, err)
	}
}

func TestParseMountInfoMalformed(t *testing.T) {
	good := "22 1 0:42 /@ / rw,relatime shared:1 - btrfs /dev/sda2 rw\n"
	for _, tc := range []struct{ line, want string }{
		{"22 1 0:42 /@ / rw,relatime shared:1 btrfs /dev/sda2 rw", "separator"},
		{"22 1 0:42 /@ / rw - btrfs /dev/sda2", "have 2 fields"},
		{"22 1 0-42 /@ / rw - btrfs /dev/sda2 rw", `device "0-42"`},
		{"22 1 x:42 /@ / rw - btrfs /dev/sda2 rw", `device "x:42"`},
		{"22 1 0:42 /@ home rw - btrfs /dev/sda2 rw", `mount point "home"`},
		{"22 1 0:42", "separator"},
		{"- - - - - - -", "have 0 fields"},
	} {
		_, err := ParseMountInfo([]byte(good + tc.line + "\n"))
		if err == nil {
			t.Errorf("%q: no error", tc.line)
			continue
		}
		if !strings.Contains(err.Error(), "line 2 ") || !strings.Contains(err.Error(), tc.line) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q; want it to name line 2, quote it and say %q", tc.line, err, tc.want)
		}
	}
}

func TestMountOf(t *testing.T) {
	mounts, err := ParseMountInfo([]byte(btrfsNode + "40 37 0:60 / /var/lib/containerd rw,relatime - tmpfs tmpfs rw\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/var/lib/kubelet", "/"},
		{"/home/user", "/home"},
		{"/homework", "/"},
		{"/var/lib/containers/storage", "/var/lib/containers"},
		{"/var/lib/containerd", "/var/lib/containerd"},
		{"/mnt/my data/x", "/mnt/my data"},
	} {
		m, ok := MountOf(mounts, tc.path)
		if !ok || m.MountPoint != tc.want {
			t.Errorf("MountOf(%s) = %q, %v; want %q", tc.path, m.MountPoint, ok, tc.want)
		}
	}
	// The last mount at a mount point is the one in use.
	if m, _ := MountOf(mounts, "/var/lib/containerd/x"); m.FSType != "tmpfs" {
		t.Errorf("MountOf(/var/lib/containerd/x) = %+v; want the tmpfs mounted over the subvolume", m)
	}
	if _, ok := MountOf(nil, "/var"); ok {
		t.Error("MountOf found a mount in an empty table")
	}
}

// TestLayoutOfBtrfsSubvolumes: the kubelet's root and
// containerd's root are two subvolumes of one btrfs disk, so st_dev differs
// (each subvolume has an anonymous device of its own) while cadvisor, and so
// the kubelet, sees one device: one filesystem, not a dedicated imagefs.
func TestLayoutOfBtrfsSubvolumes(t *testing.T) {
	mounts, err := ParseMountInfo([]byte(btrfsNode))
	if err != nil {
		t.Fatal(err)
	}
	const subvolRoot, subvolContainerd = 0x2d, 0x2e // st_dev 0:45 and 0:46
	nodefs := Identify(mounts, "/var/lib/kubelet", subvolRoot)
	imagefs := Identify(mounts, "/var/lib/containerd", subvolContainerd)
	if got := Of(nodefs, imagefs, imagefs); got != OneFs {
		t.Errorf("two subvolumes of /dev/sda2: layout %q (nodefs %+v, imagefs %+v); want %q", got, nodefs, imagefs, OneFs)
	}
	// By st_dev alone, as before, the same node looked like two disks.
	if got := Of[uint64](subvolRoot, subvolContainerd, subvolContainerd); got != DedicatedImageFs {
		t.Errorf("by st_dev: %q; want %q", got, DedicatedImageFs)
	}
	// CRI-O's storage on a disk of its own stays apart.
	crio := Identify(mounts, "/var/lib/containers/storage", 8<<8|17)
	if got := Of(nodefs, crio, nodefs); got != SplitImageFs {
		t.Errorf("ext4 image store beside a btrfs root: %q; want %q", got, SplitImageFs)
	}
	// Another btrfs disk is another filesystem.
	other := Identify(mounts, "/mnt/my data", 0x32)
	if other == nodefs || other.Device != "/dev/sdc" {
		t.Errorf("second btrfs disk identified as %+v (nodefs %+v); want /dev/sdc", other, nodefs)
	}
	// Without a mount table entry, st_dev is the identity.
	if id := Identify(nil, "/var/lib/kubelet", 7); id != (FsID{Dev: 7}) {
		t.Errorf("no table: %+v; want st_dev 7", id)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`: "/plain", `/a\040b`: "/a b", `/a\134b`: `/a\b`, `/a\054b\011c`: "/a,b\tc",
		`/trailing\04`: `/trailing\04`, `/not\999octal`: `/not\999octal`,
	} {
		if got := UnescapeMountinfo(in); got != want {
			t.Errorf("UnescapeMountinfo(%q) = %q; want %q", in, got, want)
		}
	}
}
