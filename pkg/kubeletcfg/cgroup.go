// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// CgroupPlace is where /proc/PID/cgroup puts a process, as far as telling
// the kubelet from a pod's process goes.
type CgroupPlace struct {
	// Path is the process's cgroup: the cgroup v2 line's ("0::"), else the
	// first v1 line's.
	Path string
	// InPods: some line puts the process under the kubelet's pods tree;
	// PodsLine is that line.
	InPods   bool
	PodsLine string
	// Unit: some line names kubelet.service, the unit systemd runs the
	// kubelet as.
	Unit bool
}

// KubeletUnit is the systemd unit the kubelet runs as on most nodes.
const KubeletUnit = "kubelet.service"

// ParseCgroup reads /proc/PID/cgroup (cgroups(7): one line
// "hierarchy-ID:controllers:path" a hierarchy, "0::path" for cgroup v2)
// and says whether the process lies under the kubelet's pods tree: a path
// with a component "kubepods" (cgroupfs driver), "kubepods.slice" or
// "kubepods-*.slice" (systemd driver), under whatever --cgroup-root. Every
// line counts: a pod's process is under kubepods in each hierarchy, and
// one line is enough to tell. Paths seen from another cgroup namespace
// (those starting with "/..") keep their names, so the rule holds there
// too. An empty file or a line out of shape is an error: a process whose
// place cannot be told is no kubelet.
func ParseCgroup(data []byte) (CgroupPlace, error) {
	var c CgroupPlace
	first, v2 := "", ""
	lines := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return CgroupPlace{}, fmt.Errorf("cgroup line %q: want hierarchy-ID:controllers:/path", line)
		}
		lines++
		p := parts[2]
		if first == "" {
			first = p
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = p
		}
		for _, name := range strings.Split(p, "/") {
			switch {
			case IsPodsCgroupName(name):
				if !c.InPods {
					c.InPods, c.PodsLine = true, line
				}
			case name == KubeletUnit:
				c.Unit = true
			}
		}
	}
	if lines == 0 {
		return CgroupPlace{}, fmt.Errorf("cgroup file is empty")
	}
	c.Path = first
	if v2 != "" {
		c.Path = v2
	}
	c.Path = path.Clean(c.Path)
	return c, nil
}

// IsPodsCgroupName reports whether one component of a cgroup path is the
// kubelet's pods cgroup, or one of its QoS or pod cgroups under the
// systemd driver: "kubepods", "kubepods.slice", "kubepods-*.slice". Under a
// --cgroup-root that is itself a slice the systemd driver prefixes every
// name with the root's ("kubelet-kubepods.slice",
// "kubelet-kubepods-besteffort-pod1.slice" under kind's /kubelet), as
// pkg/pressure's findKubepods accepts: a slice whose dash-separated name
// holds the word kubepods.
func IsPodsCgroupName(name string) bool {
	if name == "kubepods" {
		return true
	}
	slice, ok := strings.CutSuffix(name, ".slice")
	return ok && slices.Contains(strings.Split(slice, "-"), "kubepods")
}
