// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEphemeralAsTheKubeletCounts: a pod's ephemeral
// storage holds what the kubelet's Summary and ranking hold. Local volumes
// are those IsLocalEphemeralVolume names (emptyDir, configMap, gitRepo; not
// secret, downwardAPI or projected, which are tmpfs on a node and plain
// directories here); logs count by file of each container's directory,
// not what is nested deeper nor the directories themselves; the pod's
// etc-hosts and the files directly in its log directory count in the total
// but in no part the ranking adds up.
func TestEphemeralAsTheKubeletCounts(t *testing.T) {
	root := copyTree(t, "testdata/v1-cgroupfs")
	podDir := filepath.Join(root, "var/lib/kubelet/pods", uidB)
	logDir := filepath.Join(root, "var/log/pods", "default_web-0_"+uidB)
	files := map[string]string{
		// Counted as volumes.
		"volumes/kubernetes.io~configmap/settings/..2025_01_01_00_00_00.123456789/app.conf": strings.Repeat("c", 5000),
		"volumes/kubernetes.io~git-repo/src/README":                                         strings.Repeat("g", 3000),
		// Not counted: tmpfs-backed on a node, and not local ephemeral volumes.
		"volumes/kubernetes.io~secret/token/token":               strings.Repeat("s", 9000),
		"volumes/kubernetes.io~projected/kube-api-access/ca.crt": strings.Repeat("p", 9000),
		"volumes/kubernetes.io~downward-api/labels/labels":       strings.Repeat("d", 9000),
		"volumes/kubernetes.io~csi/pvc-1/mount/data":             strings.Repeat("v", 9000),
		"etc-hosts": "127.0.0.1\tlocalhost\n",
		"../../../../log/pods/default_web-0_" + uidB + "/stray.log": "left by hand\n",
		// Logs: the rotated file counts, a nested directory does not.
		"../../../../log/pods/default_web-0_" + uidB + "/app/0.log.20250101-000000.gz": strings.Repeat("z", 2000),
		"../../../../log/pods/default_web-0_" + uidB + "/app/nested/old.log":           strings.Repeat("n", 9000),
	}
	for rel, content := range files {
		p := filepath.Join(podDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	du := func(rel ...string) (bytes, inodes uint64) {
		for _, r := range rel {
			var st unix.Stat_t
			if err := unix.Lstat(r, &st); err != nil {
				t.Fatal(err)
			}
			bytes += uint64(st.Blocks) * 512
			inodes++
		}
		return bytes, inodes
	}
	vol := filepath.Join(podDir, "volumes")
	volBytes, volInodes := du(
		filepath.Join(vol, "kubernetes.io~empty-dir/cache"), filepath.Join(vol, "kubernetes.io~empty-dir/cache/data.bin"),
		filepath.Join(vol, "kubernetes.io~configmap/settings"), filepath.Join(vol, "kubernetes.io~configmap/settings/..2025_01_01_00_00_00.123456789"),
		filepath.Join(vol, "kubernetes.io~configmap/settings/..2025_01_01_00_00_00.123456789/app.conf"),
		filepath.Join(vol, "kubernetes.io~git-repo/src"), filepath.Join(vol, "kubernetes.io~git-repo/src/README"))
	logBytes, logInodes := du(filepath.Join(logDir, "app/0.log"), filepath.Join(logDir, "app/0.log.20250101-000000.gz"))
	podBytes, podInodes := du(filepath.Join(podDir, "etc-hosts"), filepath.Join(logDir, "stray.log"))

	o := newTestObserver(t, Options{HostRoot: root}, nil)
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range obs.Summary.Pods {
		if p.PodRef.UID != uidB {
			continue
		}
		x, e := obs.Pods[i].EphemeralParts, p.EphemeralStorage
		if x == nil || e == nil {
			t.Fatalf("no ephemeral storage: parts %v, total %v", x, e)
		}
		if x.Volumes != (DiskUsage{volBytes, volInodes}) {
			t.Errorf("volumes %+v; want %d bytes, %d inodes: the emptyDir, configMap and gitRepo, not the secret, projected, downwardAPI or CSI volumes", x.Volumes, volBytes, volInodes)
		}
		if x.Logs != (DiskUsage{logBytes, logInodes}) {
			t.Errorf("logs %+v; want %d bytes, %d inodes: the files of app/, not app/ itself or app/nested/", x.Logs, logBytes, logInodes)
		}
		sumBytes := x.WritableLayer.Bytes + x.Logs.Bytes + x.Volumes.Bytes + podBytes
		sumInodes := x.WritableLayer.Inodes + x.Logs.Inodes + x.Volumes.Inodes + podInodes
		if *e.UsedBytes != sumBytes || *e.InodesUsed != sumInodes {
			t.Errorf("total %s; want the parts and etc-hosts and stray.log: %d bytes, %d inodes", fsString(e), sumBytes, sumInodes)
		}
		return
	}
	t.Fatal("no burstable pod in the observation")
}
