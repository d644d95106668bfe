// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestParseRootfsMounts(t *testing.T) {
	const (
		id1   = "3b8f1c2d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"
		id2   = "e1d2c3b4a5968778695a4b3c2d1e0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2"
		snaps = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
		task  = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
	)
	in := strings.Join([]string{
		"22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro",
		"402 27 0:102 / " + task + "/" + id1 + "/rootfs rw,relatime shared:202 - overlay overlay rw,lowerdir=" + snaps + "/12/fs:" + snaps + "/11/fs,upperdir=" + snaps + "/57/fs,workdir=" + snaps + "/57/work",
		// Escaped by the kernel: a space in the mount point, a comma in the upper directory.
		`403 27 0:103 / /run/my\040state/` + id2 + `/rootfs rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/data/up\054per,workdir=/data/work`,
		// Not a container rootfs: an overlay elsewhere, an ID that is not one, a bind mount named rootfs, no upperdir.
		"404 27 0:104 / /mnt/merged rw,relatime - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c",
		"405 27 0:105 / " + task + "/not-an-id/rootfs rw,relatime - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c",
		"406 22 254:1 /srv/" + id1 + "/rootfs /mnt/" + id1 + "/rootfs rw,relatime shared:1 - ext4 /dev/vda1 rw",
		"407 27 0:106 / " + task + "/" + strings.Repeat("a", 64) + "/rootfs ro,relatime - overlay overlay ro,lowerdir=/a:/b",
		"malformed line without a separator",
		"1 2 - overlay",
	}, "\n")
	got := map[string]string{}
	parseRootfsMounts([]byte(in), got)
	want := map[string]string{id1: snaps + "/57/fs", id2: "/data/up,per"}
	if !maps.Equal(got, want) {
		t.Errorf("parseRootfsMounts = %v; want %v", got, want)
	}
}

func TestContainerIDOfCgroup(t *testing.T) {
	const id = "3b8f1c2d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"
	for name, want := range map[string]string{
		id:                                     id,
		"cri-containerd-" + id + ".scope":      id,
		"crio-" + id + ".scope":                id,
		"docker-" + id + ".scope":              id,
		"cri-containerd-" + id[:63] + ".scope": "",
		strings.ToUpper(id):                    "",
		"memory.stat":                          "",
		"":                                     "",
	} {
		if got := ContainerIDOfCgroup(name); got != want {
			t.Errorf("ContainerIDOfCgroup(%q) = %q; want %q", name, got, want)
		}
	}
}

// TestWritableLayerUnavailable: without the host's mount table, or with the
// runtime's store not in the host root, the writable layers are left out of
// the pods' ephemeral storage with one warning each, not guessed; the rest
// is still measured.
func TestWritableLayerUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name, remove, warning string
	}{
		{"no mount table", "proc/1/mountinfo", "cannot read the host's mount table"},
		{"store not mounted", "var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", "not under the host root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "testdata/v1-cgroupfs")
			removeAll(t, filepath.Join(root, tc.remove))
			core, logs := observer.New(zapcore.WarnLevel)
			// A nanosecond: every pass walks again.
			o := newTestObserver(t, Options{HostRoot: root, EphemeralRefresh: time.Nanosecond}, zap.New(core))
			for range 2 {
				obs, err := o.Observe(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range obs.Summary.Pods {
					if p.PodRef.UID != uidB {
						continue
					}
					x := obs.Pods[i].EphemeralParts
					if x == nil || x.WritableLayer != (DiskUsage{}) || x.Logs.Inodes != 1 || x.Volumes.Inodes != 2 {
						t.Errorf("burstable pod's parts %+v; want no writable layer, its logs and volumes", x)
					}
				}
			}
			if n := logs.FilterMessageSnippet(tc.warning).Len(); n != 1 || logs.Len() != 1 {
				t.Errorf("warnings %v; want one saying %q", logs.All(), tc.warning)
			}
		})
	}
}
