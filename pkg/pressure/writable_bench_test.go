// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/benchcpu"
)

// What re-reading the host's mount table costs (writableDirs reads it at
// most once per EphemeralRefresh, on a container it does not know). Compare
// with one observation pass at the same pod count:
//
//	go test -run '^$' -bench 'ParseRootfsMounts|Observe/mode=v./pods=110/kind=observe$' ./pkg/pressure/
//
// (a top-level | gives each alternative its own /-levels, so the 110-pod
// Observe baseline runs beside every pods=N here).

// mountinfoHostLines is a systemd host's own mounts, before any pod: what
// every node's table carries whatever it runs.
const mountinfoHostLines = `22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
24 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw
25 22 0:5 / /dev rw,nosuid,relatime shared:3 - devtmpfs udev rw,size=4010632k,nr_inodes=1002658,mode=755,inode64
26 25 0:23 / /dev/pts rw,nosuid,noexec,relatime shared:4 - devpts devpts rw,gid=5,mode=620,ptmxmode=000
27 22 0:24 / /run rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,size=805408k,mode=755,inode64
28 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:6 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
29 23 0:6 / /sys/kernel/security rw,nosuid,nodev,noexec,relatime shared:7 - securityfs securityfs rw
30 25 0:25 / /dev/shm rw,nosuid,nodev shared:8 - tmpfs tmpfs rw,inode64
31 22 254:16 / /var/lib/kubelet rw,relatime shared:15 - ext4 /dev/vdb rw
32 27 0:27 / /run/lock rw,nosuid,nodev,noexec,relatime shared:9 - tmpfs tmpfs rw,size=5120k,inode64
33 23 0:28 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore rw
34 23 0:29 / /sys/firmware/efi/efivars rw,nosuid,nodev,noexec,relatime shared:11 - efivarfs efivarfs rw
35 23 0:30 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:12 - bpf bpf rw,mode=700
36 24 0:31 / /proc/sys/fs/binfmt_misc rw,relatime shared:14 - autofs systemd-1 rw,fd=29,pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=17263
37 25 0:32 / /dev/hugepages rw,relatime shared:16 - hugetlbfs hugetlbfs rw,pagesize=2M
38 25 0:20 / /dev/mqueue rw,nosuid,nodev,noexec,relatime shared:17 - mqueue mqueue rw
39 23 0:7 / /sys/kernel/debug rw,nosuid,nodev,noexec,relatime shared:18 - debugfs debugfs rw
40 23 0:12 / /sys/kernel/tracing rw,nosuid,nodev,noexec,relatime shared:19 - tracefs tracefs rw
41 23 0:33 / /sys/fs/fuse/connections rw,nosuid,nodev,noexec,relatime shared:20 - fusectl fusectl rw
42 23 0:34 / /sys/kernel/config rw,nosuid,nodev,noexec,relatime shared:21 - configfs configfs rw
43 27 0:35 / /run/credentials/systemd-sysusers.service ro,nosuid,nodev,noexec,relatime shared:22 - ramfs none rw,mode=700
44 22 7:0 / /snap/core20/2318 ro,nodev,relatime shared:23 - squashfs /dev/loop0 ro,errors=continue,threads=single
45 22 7:1 / /snap/lxd/28373 ro,nodev,relatime shared:24 - squashfs /dev/loop1 ro,errors=continue,threads=single
46 22 7:2 / /snap/snapd/21759 ro,nodev,relatime shared:25 - squashfs /dev/loop2 ro,errors=continue,threads=single
47 22 7:3 / /snap/core22/1586 ro,nodev,relatime shared:26 - squashfs /dev/loop3 ro,errors=continue,threads=single
48 22 254:15 / /boot rw,relatime shared:27 - ext4 /dev/vda16 rw
49 48 254:14 / /boot/efi rw,relatime shared:28 - vfat /dev/vda15 rw,fmask=0077,dmask=0077,codepage=437,iocharset=iso8859-1,shortname=mixed,errors=remount-ro
50 36 0:36 / /proc/sys/fs/binfmt_misc rw,nosuid,nodev,noexec,relatime shared:29 - binfmt_misc binfmt_misc rw
51 22 254:32 / /var/lib/containerd rw,relatime shared:30 - ext4 /dev/vdc rw
52 27 0:37 / /run/user/1000 rw,nosuid,nodev,relatime shared:31 - tmpfs tmpfs rw,size=805404k,nr_inodes=201351,mode=700,uid=1000,gid=1000,inode64
53 27 0:38 / /run/snapd/ns rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=805408k,mode=755,inode64
54 53 0:4 mnt:[4026532312] /run/snapd/ns/lxd.mnt rw - nsfs nsfs rw
55 22 0:39 / /var/lib/lxcfs rw,nosuid,nodev,relatime shared:32 - fuse.lxcfs lxcfs rw,user_id=0,group_id=0,allow_other
56 27 0:40 / /run/rpc_pipefs rw,relatime shared:33 - rpc_pipefs sunrpc rw
57 27 0:24 /netns /run/netns rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,size=805408k,mode=755,inode64
58 35 0:41 / /run/cilium/cgroupv2 rw,relatime shared:34 - cgroup2 none rw
59 23 0:42 / /sys/fs/selinux rw,relatime shared:35 - selinuxfs selinuxfs rw
60 22 254:1 /var/log /var/log rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
61 31 254:16 /plugins /var/lib/kubelet/plugins rw,relatime shared:15 - ext4 /dev/vdb rw
`

// genMountinfo renders the mount table of a containerd node running pods,
// each with a sandbox (pause) and two app containers, and returns it with
// what parseRootfsMounts must find in it. Per pod, in the order they are
// made: the kubelet's projected token and a secret (tmpfs), the sandbox's
// network namespace, its /dev/shm, and three rootfs overlays. The app
// images have five layers from a shared pool, so lowerdir lists are long,
// as on a real node.
func genMountinfo(pods []genPod) (content []byte, want map[string]string) {
	const (
		snaps = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
		task  = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
		cri   = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes"
		pause = 41 // the pause image's one layer
	)
	ctrID := func(uid, name string) string {
		s := sha256.Sum256([]byte(uid + "/" + name))
		return hex.EncodeToString(s[:])
	}
	var b strings.Builder
	b.WriteString(mountinfoHostLines)
	want = map[string]string{}
	mnt, dev, peer, snap := 1200, 120, 300, 1000
	line := func(parent int, root, mp, opts, fs, src, super string) {
		fmt.Fprintf(&b, "%d %d 0:%d %s %s %s shared:%d - %s %s %s\n", mnt, parent, dev, root, mp, opts, peer, fs, src, super)
		mnt++
		dev++
		peer++
	}
	rootfs := func(id string, layers []int) {
		lower := make([]string, len(layers))
		for i, l := range layers {
			lower[i] = fmt.Sprintf("%s/%d/fs", snaps, l)
		}
		up := fmt.Sprintf("%s/%d", snaps, snap)
		snap++
		line(27, "/", task+"/"+id+"/rootfs", "rw,relatime", "overlay", "overlay",
			"rw,lowerdir="+strings.Join(lower, ":")+",upperdir="+up+"/fs,workdir="+up+"/work")
		want[id] = up + "/fs"
	}
	// appLayers: image k's five layers, top first; images share base layers
	// as on a real node (k%3 picks one of three bases).
	appLayers := func(k int) []int {
		top := 100 + 4*k
		return []int{top + 3, top + 2, top + 1, top, 50 + k%3}
	}
	vols := "/var/lib/kubelet/pods/%s/volumes/"
	for i, p := range pods {
		sandbox := ctrID(p.uid, "sandbox")
		line(31, "/", fmt.Sprintf(vols+"kubernetes.io~projected/kube-api-access-%05x", p.uid, i*7919%0xfffff),
			"rw,relatime", "tmpfs", "tmpfs", "rw,size=7881752k,inode64")
		line(31, "/", fmt.Sprintf(vols+"kubernetes.io~secret/app-config-%d", p.uid, i%7),
			"rw,relatime", "tmpfs", "tmpfs", "rw,size=7881752k,inode64")
		line(57, fmt.Sprintf("net:[%d]", 4026533000+i), "/run/netns/cni-"+p.uid, "rw", "nsfs", "nsfs", "rw")
		line(27, "/", cri+"/"+sandbox+"/shm", "rw,nosuid,nodev,noexec,relatime", "tmpfs", "shm", "rw,size=65536k,inode64")
		rootfs(sandbox, []int{pause})
		rootfs(ctrID(p.uid, "app"), appLayers(i%12))
		rootfs(ctrID(p.uid, "sidecar"), appLayers(12+i%4))
	}
	return []byte(b.String()), want
}

// mountinfoFixture builds the table for n pods, checks that it parses to
// exactly what was generated, and sets the bytes per op.
func mountinfoFixture(b *testing.B, n int) (content []byte, want map[string]string) {
	b.Helper()
	content, want = genMountinfo(genPods(n))
	if len(want) != 3*n {
		b.Fatalf("generated %d containers; want %d", len(want), 3*n)
	}
	got := map[string]string{}
	parseRootfsMounts(content, got)
	if !maps.Equal(got, want) {
		b.Fatalf("parseRootfsMounts found %d containers, not those generated (%d)", len(got), len(want))
	}
	b.SetBytes(int64(len(content)))
	return content, want
}

// reportLines must follow the loop: ResetTimer drops earlier metrics.
func reportLines(b *testing.B, content []byte) {
	b.ReportMetric(float64(bytes.Count(content, []byte("\n"))), "lines/op")
}

// BenchmarkParseRootfsMounts parses a generated table as writableDirs does:
// into its map, cleared (clear keeps the buckets, as the observer's does).
// from=file adds the read, with os.ReadFile as writableDirs does; a regular
// file is a floor: the kernel renders /proc/1/mountinfo on every read, which
// a page-cache copy does not show.
func BenchmarkParseRootfsMounts(b *testing.B) {
	for _, n := range []int{10, 110, 250} {
		for _, fromFile := range []bool{false, true} {
			b.Run(fmt.Sprintf("pods=%d/from=%s", n, map[bool]string{false: "memory", true: "file"}[fromFile]), func(b *testing.B) {
				content, want := mountinfoFixture(b, n)
				path := filepath.Join(b.TempDir(), "mountinfo")
				if err := os.WriteFile(path, content, 0o644); err != nil {
					b.Fatal(err)
				}
				upper := map[string]string{}
				b.ReportAllocs()
				cpu := benchcpu.Start(b)
				for i := 0; i < b.N; i++ {
					c := content
					if fromFile {
						var err error
						if c, err = os.ReadFile(path); err != nil {
							b.Fatal(err)
						}
					}
					clear(upper)
					parseRootfsMounts(c, upper)
					if len(upper) != len(want) {
						b.Fatalf("%d containers; want %d", len(upper), len(want))
					}
				}
				cpu.Report(b)
				reportLines(b, content)
			})
		}
	}
}
