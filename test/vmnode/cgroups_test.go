// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPodCgroupDir: the kubelet's names under both drivers (the systemd
// ones as on a kubeadm node, pkg/pressure/testdata/v2-systemd).
func TestPodCgroupDir(t *testing.T) {
	const uid = "0b6f1f3e-8d5c-4a51-9c1e-2f0d1c7e9a10"
	for _, c := range []struct {
		driver string
		qos    corev1.PodQOSClass
		want   string
	}{
		{CgroupFS, corev1.PodQOSGuaranteed, "/sys/fs/cgroup/kubepods/pod" + uid},
		{CgroupFS, corev1.PodQOSBurstable, "/sys/fs/cgroup/kubepods/burstable/pod" + uid},
		{CgroupFS, corev1.PodQOSBestEffort, "/sys/fs/cgroup/kubepods/besteffort/pod" + uid},
		{Systemd, corev1.PodQOSGuaranteed, "/sys/fs/cgroup/kubepods.slice/kubepods-pod0b6f1f3e_8d5c_4a51_9c1e_2f0d1c7e9a10.slice"},
		{Systemd, corev1.PodQOSBurstable, "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b6f1f3e_8d5c_4a51_9c1e_2f0d1c7e9a10.slice"},
		{Systemd, corev1.PodQOSBestEffort, "/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0b6f1f3e_8d5c_4a51_9c1e_2f0d1c7e9a10.slice"},
	} {
		got := podCgroupDir(c.driver, c.qos, uid)
		if got != c.want {
			t.Errorf("%s %s: %s, want %s", c.driver, c.qos, got, c.want)
		}
		back, ok := podUIDOfCgroup(c.driver, got)
		if !ok || back != uid {
			t.Errorf("podUIDOfCgroup(%s, %s) = %q %v, want %s", c.driver, got, back, ok, uid)
		}
	}
	for _, c := range []struct{ driver, dir string }{
		{CgroupFS, "/sys/fs/cgroup/kubepods/burstable"},
		{CgroupFS, "/sys/fs/cgroup/kubepods/pod"},
		{Systemd, "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice"},
		{Systemd, "/sys/fs/cgroup/kubepods.slice/kubepods-burstable-pod.slice"},
		{Systemd, "/sys/fs/cgroup/kubepods.slice/kubepods-burstable-podx.scope"},
	} {
		if uid, ok := podUIDOfCgroup(c.driver, c.dir); ok {
			t.Errorf("podUIDOfCgroup(%s, %s) = %q, want none", c.driver, c.dir, uid)
		}
	}
	if got := containerCgroupName(Systemd, "abc"); got != "cri-containerd-abc.scope" {
		t.Errorf("systemd container cgroup %s", got)
	}
	if got := containerCgroupName(CgroupFS, "abc"); got != "abc" {
		t.Errorf("cgroupfs container cgroup %s", got)
	}
}
