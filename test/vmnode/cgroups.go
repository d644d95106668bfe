// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The guest's cgroup v2 mount; the kubelet's cgroup root is / there.
const cgroupMount = "/sys/fs/cgroup"

// kubepodsDir is the kubelet's pod cgroup root under a cgroup driver:
// kubepods (cgroupfs) or kubepods.slice (systemd), as the kubelet's
// cgroupManager names the cgroup "kubepods" (NewCgroupName, ToSystemd).
func kubepodsDir(driver string) string {
	if driver == Systemd {
		return path.Join(cgroupMount, "kubepods.slice")
	}
	return path.Join(cgroupMount, "kubepods")
}

// podCgroupDir is a pod's cgroup: kubepods/[qos/]pod<UID> under cgroupfs,
// kubepods.slice/[kubepods-<qos>.slice/]kubepods[-<qos>]-pod<UID with _>.slice
// under systemd (a '-' in a slice's name is a level of the hierarchy, so
// the kubelet's ToSystemd escapes the UID's dashes as underscores).
// Guaranteed pods sit right under kubepods.
func podCgroupDir(driver string, qos corev1.PodQOSClass, uid string) string {
	var class string
	switch qos {
	case corev1.PodQOSBestEffort:
		class = "besteffort"
	case corev1.PodQOSGuaranteed:
	default:
		class = "burstable"
	}
	if driver != Systemd {
		return path.Join(kubepodsDir(driver), class, "pod"+uid)
	}
	prefix := "kubepods"
	dir := kubepodsDir(driver)
	if class != "" {
		prefix += "-" + class
		dir = path.Join(dir, prefix+".slice")
	}
	return path.Join(dir, prefix+"-pod"+strings.ReplaceAll(uid, "-", "_")+".slice")
}

// containerCgroupName is a container's cgroup's name in its pod's: the
// container's ID under cgroupfs, the scope runc's systemd driver makes for
// containerd's CRI (cri-containerd-<ID>.scope) under systemd.
func containerCgroupName(driver, id string) string {
	if driver == Systemd {
		return "cri-containerd-" + id + ".scope"
	}
	return id
}

// podUIDOfCgroup is the pod UID a pod cgroup's directory is named for, or
// false for a directory that is not a pod's.
func podUIDOfCgroup(driver, dir string) (string, bool) {
	name := path.Base(dir)
	if driver == Systemd {
		base, ok := strings.CutSuffix(name, ".slice")
		i := strings.LastIndex(base, "-pod")
		if !ok || i < 0 || base[i+len("-pod"):] == "" {
			return "", false
		}
		return strings.ReplaceAll(base[i+len("-pod"):], "_", "-"), true
	}
	uid, ok := strings.CutPrefix(name, "pod")
	return uid, ok && uid != ""
}

// PodCgroup is a pod's cgroup directory in the guest.
func (n *Node) PodCgroup(p *corev1.Pod) string {
	return podCgroupDir(n.CgroupDriver, p.Status.QOSClass, string(p.UID))
}

// KubepodsCgroup is the kubelet's pod cgroup root in the guest.
func (n *Node) KubepodsCgroup() string { return kubepodsDir(n.CgroupDriver) }
