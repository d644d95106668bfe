// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/pkg/fslayout"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// btrfsMountinfo is the host's mount table of a node whose one disk is a
// btrfs filesystem, the root and containerd's root two subvolumes of it.
const btrfsMountinfo = `22 1 0:42 /@ / rw,relatime shared:1 - btrfs /dev/sda2 rw,ssd,space_cache=v2,subvolid=256,subvol=/@
23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
24 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw
28 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:6 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
37 22 0:42 /@containerd /var/lib/containerd rw,relatime shared:31 - btrfs /dev/sda2 rw,ssd,space_cache=v2,subvolid=258,subvol=/@containerd
`

// TestDiskLayoutByBlockDevice: the kubelet's root and
// the image store have different st_dev (here the fixture's filesystem and
// a tmpfs; on the node two btrfs subvolumes, each with an anonymous device),
// but the host's mount table has them on one block device, which is how
// cadvisor and so the kubelet tell filesystems apart: one filesystem.
func TestDiskLayoutByBlockDevice(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "evictd-imagefs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	for _, tc := range []struct {
		name      string
		mountinfo string
		want      fslayout.Layout
		warning   string
	}{
		{"two btrfs subvolumes of one disk", btrfsMountinfo, fslayout.OneFs, ""},
		{"an ext4 root and a btrfs image store", "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" + btrfsMountinfo[len("22 1 0:42 /@ / rw,relatime shared:1 - btrfs /dev/sda2 rw,ssd,space_cache=v2,subvolid=256,subvol=/@\n"):],
			fslayout.DedicatedImageFs, ""},
		{"a malformed mount table", btrfsMountinfo + "38 22 0:42 /@home /home rw\n", fslayout.DedicatedImageFs, `mountinfo line 6 "38 22 0:42 /@home /home rw"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "testdata/v2-systemd")
			removeAll(t, filepath.Join(root, "var/lib/containerd"))
			if err := os.Symlink(shm, filepath.Join(root, "var/lib/containerd")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "proc/1/mountinfo"), []byte(tc.mountinfo), 0o644); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.WarnLevel)
			o := newTestObserver(t, Options{HostRoot: root}, zap.New(core))
			for range 2 {
				obs, err := o.Observe(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if obs.Node.DiskLayout != tc.want {
					t.Errorf("DiskLayout = %q; want %q", obs.Node.DiskLayout, tc.want)
				}
			}
			warned := logs.FilterMessageSnippet("cannot read the host's mount table").All()
			switch {
			case tc.warning == "" && len(warned) != 0:
				t.Errorf("warned %v; want no warning", warned[0].ContextMap())
			case tc.warning != "" && len(warned) != 1:
				t.Errorf("%d warnings over two passes; want 1", len(warned))
			case tc.warning != "":
				if e, _ := warned[0].ContextMap()["error"].(string); !strings.Contains(e, tc.warning) {
					t.Errorf("warning's err %q; want it to name %s", e, tc.warning)
				}
			}
		})
	}
}

func TestResolveInRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"data/containerd", "var/lib"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// An absolute target is the host's, so it resolves under root; a
	// relative one from the link's directory.
	links := map[string]string{
		"var/lib/containerd": "/data/containerd",
		"var/lib/kubelet":    "../../data/kubelet-real",
		"var/lib/loop":       "loop",
		"var/lib/escape":     "../../../../data",
	}
	if err := os.MkdirAll(filepath.Join(root, "data/kubelet-real"), 0o755); err != nil {
		t.Fatal(err)
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"/var/lib/containerd", "/data/containerd"},
		{"/var/lib/kubelet", "/data/kubelet-real"},
		{"/var/lib/escape/containerd", "/data/containerd"},
		{"/var/lib", "/var/lib"},
		{"/", "/"},
	} {
		got, err := resolveInRoot(root, tc.in)
		if err != nil || got != tc.want {
			t.Errorf("resolveInRoot(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := resolveInRoot(root, "/var/lib/loop"); err == nil {
		t.Error("a symlink to itself resolved")
	}
	if _, err := resolveInRoot(root, "/var/lib/missing"); err == nil {
		t.Error("a missing path resolved")
	}
}
