// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// ErrHostRoot is returned (wrapped) by NewObserver when the host root lacks
// what evictd needs: /proc/meminfo or a cgroup memory controller.
var ErrHostRoot = errors.New("host root is not usable")

// ErrInvalidOptions is returned (wrapped) by NewObserver for options that
// cannot be right whatever the host holds, such as a relative cgroup root.
var ErrInvalidOptions = errors.New("invalid observer options")

// Defaults of the options.
const (
	DefaultHostRoot         = "/"
	DefaultCgroupRoot       = "/"
	DefaultNodeCgroup       = "/"
	DefaultImageFsPath      = "/var/lib/containerd"
	DefaultEphemeralRefresh = 10 * time.Second
	DefaultEphemeralBudget  = 20000
)

// Options configure an Observer. The zero value of every field means its default.
type Options struct {
	// HostRoot is the directory under which every host path is read: /proc,
	// /sys/fs/cgroup, /var/lib/kubelet, /var/log/pods and ImageFsPath. "/" by
	// default; "/host" when the agent runs in a container with the host
	// mounted there. Parts below it may be symlinks.
	HostRoot string
	// CgroupRoot is the cgroup (as the kubelet's --cgroup-root) under which
	// kubepods lives, "/" by default. It places kubepods only: node memory
	// comes from NodeCgroup, as the kubelet's does from "/" whatever its
	// --cgroup-root.
	CgroupRoot string
	// NodeCgroup is the cgroup whose working set is the node's, for
	// memory.available: "/" by default, the root of the memory hierarchy (v1)
	// or the unified root (v2), as the kubelet reads it. Node memory capacity
	// is the smaller of MemTotal and this cgroup's memory limit, so a test
	// can make a cgroup stand for a node by naming it here.
	NodeCgroup string
	// ImageFsPath is the container runtime's image store, whose filesystem is
	// the imagefs. "/var/lib/containerd" by default.
	ImageFsPath string
	// ContainerFsPath is where the runtime keeps the containers' writable
	// layers, whose filesystem is the containerfs; ImageFsPath by default,
	// as containerd keeps both under its root. CRI-O's split image store
	// (KEP-4191) puts them apart.
	ContainerFsPath string

	// EphemeralRefresh is how old a pod's ephemeral-storage figure may get
	// before its directories are walked again (10s by default; the kubelet
	// refreshes volume stats every minute).
	EphemeralRefresh time.Duration
	// EphemeralBudget bounds the directory entries one Observe visits while
	// measuring ephemeral storage (20000 by default). Pods whose figure is
	// stale are walked oldest first until the budget is spent; the others keep
	// their previous figure until a later pass. One pod's walk stops at the
	// budget too, and its figure is then a lower bound (PodExtras.EphemeralPartial).
	EphemeralBudget int
	// MaxOpenFiles bounds the kernel files kept open between passes (they are
	// re-read with pread, several times cheaper than opening them). 0 means
	// half the process's RLIMIT_NOFILE; a negative value keeps none open.
	MaxOpenFiles int
	// NoNodePSI stops the observer reading /proc/pressure/* and the kubepods
	// cgroup's memory.pressure. Set it when an unprivileged PSI trigger is armed
	// on those files: frequent reads of a group's pressure file keep such a
	// trigger from firing (docs/kernel.md, "PSI triggers and reads of the same group").
	NoNodePSI bool
	// NoHugepageAwareEviction leaves the node's hugepage pool in
	// memory.available and its capacity, as a kubelet with its
	// HugepageAwareEviction feature gate off computes them. By default (the
	// gate is beta and on from Kubernetes 1.37) the pool, the sum over page
	// sizes of /sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages ×
	// the size, is taken off memory.available, floored at 0 (see
	// hugepages.go). The pool is never taken off a node cgroup other than
	// "/": a cgroup standing for a node holds none of the host's hugepages.
	NoHugepageAwareEviction bool

	// Clock stamps observations and ages the ephemeral-storage cache; the
	// real clock by default.
	Clock clock.PassiveClock
}

// withDefaults returns a copy of o with defaults filled in and paths cleaned,
// or an error naming the bad value.
func (o Options) withDefaults() (Options, error) {
	if o.HostRoot == "" {
		o.HostRoot = DefaultHostRoot
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = DefaultCgroupRoot
	}
	if o.NodeCgroup == "" {
		o.NodeCgroup = DefaultNodeCgroup
	}
	if o.ImageFsPath == "" {
		o.ImageFsPath = DefaultImageFsPath
	}
	if o.ContainerFsPath == "" {
		o.ContainerFsPath = o.ImageFsPath
	}
	if o.EphemeralRefresh == 0 {
		o.EphemeralRefresh = DefaultEphemeralRefresh
	}
	if o.EphemeralBudget == 0 {
		o.EphemeralBudget = DefaultEphemeralBudget
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	for _, p := range []struct{ name, val string }{
		{"cgroup root", o.CgroupRoot}, {"node cgroup", o.NodeCgroup}, {"image fs path", o.ImageFsPath}, {"container fs path", o.ContainerFsPath},
	} {
		if err := CheckAbsPath(p.val); err != nil {
			return o, fmt.Errorf("%w: %s %q %v", ErrInvalidOptions, p.name, p.val, err)
		}
	}
	if strings.Contains(o.HostRoot, "\x00") {
		return o, fmt.Errorf("%w: host root %q", ErrInvalidOptions, o.HostRoot)
	}
	if o.EphemeralRefresh < 0 {
		return o, fmt.Errorf("%w: ephemeral refresh %v is negative", ErrInvalidOptions, o.EphemeralRefresh)
	}
	if o.EphemeralBudget < 0 {
		return o, fmt.Errorf("%w: ephemeral budget %d is negative", ErrInvalidOptions, o.EphemeralBudget)
	}
	o.CgroupRoot = path.Clean(o.CgroupRoot)
	o.NodeCgroup = path.Clean(o.NodeCgroup)
	o.ImageFsPath = path.Clean(o.ImageFsPath)
	o.ContainerFsPath = path.Clean(o.ContainerFsPath)
	return o, nil
}

// CheckAbsPath tells whether p can name a cgroup or a host directory: an
// absolute path without ".." (which could leave the hierarchy or the host
// root) or NUL. Its error reads after the value, as in `"x" must be ...`.
func CheckAbsPath(p string) error {
	if !path.IsAbs(p) || strings.Contains(p, "\x00") || hasDotDot(p) {
		return errors.New(`must be an absolute path without ".."`)
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
