// SPDX-License-Identifier: Apache-2.0

package pressure_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestCRIORankByWritableLayer: on a CRI-O node, a pod that wrote into its
// root filesystem ranks by what it wrote, as the kubelet ranks it. Scaled
// by 1/1024 from the issue: the writer wrote 5 MiB into its writable layer,
// web-0 holds 1 MiB in an emptyDir. On one disk the writer goes first for
// nodefs; with the graph root (images and writable layers) on a disk of its
// own, the writer's layer is on imagefs, where it goes first and web-0, with
// a few files in its layers, second, while nodefs ranks web-0 first.
func TestCRIORankByWritableLayer(t *testing.T) {
	const mi = 1 << 20
	shm, err := os.MkdirTemp("/dev/shm", "evictd-crio-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	for _, tc := range []struct {
		name       string
		ownDisk    bool // the graph root on a filesystem of its own
		layout     fslayout.Layout
		signal     thresholds.Signal
		first      string
		writerOnFs bool // the writer's layer counts on the signal's filesystem
	}{
		{"one disk, nodefs", false, fslayout.OneFs, thresholds.NodeFsAvailable, "writer", true},
		{"one disk, imagefs", false, fslayout.OneFs, thresholds.ImageFsAvailable, "writer", true},
		{"dedicated imagefs, imagefs", true, fslayout.DedicatedImageFs, thresholds.ImageFsAvailable, "writer", true},
		{"dedicated imagefs, nodefs", true, fslayout.DedicatedImageFs, thresholds.NodeFsAvailable, "web-0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := pressure.CRIOHostRoot(t)
			if tc.ownDisk {
				store := filepath.Join(root, pressure.CRIOStore)
				own, err := os.MkdirTemp(shm, "storage-")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(store, own); err != nil {
					// Another filesystem: move by copy.
					if err := os.CopyFS(own, os.DirFS(store)); err != nil {
						t.Fatal(err)
					}
					if err := os.RemoveAll(store); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Symlink(own, store); err != nil {
					t.Fatal(err)
				}
			}
			fill := func(p string, n int) {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				// Written, not sparse: usage is allocated blocks.
				if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			fill(filepath.Join(root, pressure.CRIOStore, pressure.CRIOWriterLayer, "tmp/fill"), 5*mi)
			fill(filepath.Join(root, "var/lib/kubelet/pods", pressure.CRIOWebUID, "volumes/kubernetes.io~empty-dir/cache/data.bin"), mi)

			o, err := pressure.NewObserver(pressure.Options{HostRoot: root, ImageFsPath: pressure.CRIOStore}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			obs, err := o.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if obs.Node.DiskLayout != tc.layout {
				t.Fatalf("layout %q; want %q", obs.Node.DiskLayout, tc.layout)
			}
			pods := []*v1.Pod{crioPod("web-0", pressure.CRIOWebUID), crioPod("writer", pressure.CRIOWriterUID)}
			r := rank.Rank(tc.signal, obs.Summary, pods, rank.Options{DiskParts: rank.DiskPartsOf(obs), DiskLayout: obs.Node.DiskLayout})
			var order []string
			usage := map[string]int64{}
			for _, c := range r.Candidates {
				if c.Eligible {
					order = append(order, c.Name)
				}
				usage[c.Name] = c.Usage
			}
			if len(order) != 2 || order[0] != tc.first {
				t.Errorf("%s: eligible in order %v, usage %v; want both, %s first", tc.signal, order, usage, tc.first)
			}
			if got := usage["writer"] >= 5*mi; got != tc.writerOnFs {
				t.Errorf("%s: the writer's usage %d; want its 5 MiB layer counted: %v", tc.signal, usage["writer"], tc.writerOnFs)
			}
		})
	}
}

func crioPod(name, uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
}
