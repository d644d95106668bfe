// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Options describe a simulated node. Client, Name, MemoryBytes and
// WorkloadBin are required.
type Options struct {
	// Client is used to register the Node and drive its pods; an admin
	// identity (it patches pod status and deletes pods).
	Client kubernetes.Interface
	// Name of the Node object; a DNS label.
	Name string
	// MemoryBytes is the node's memory: the node cgroup's memory limit
	// (v1 memory.limit_in_bytes, v2 memory.max) and the Node's memory
	// capacity.
	MemoryBytes int64
	// ReservedMemoryBytes is kept out of allocatable (system and kube
	// reserved): the kubepods cgroup limit and the Node's allocatable memory
	// are MemoryBytes minus this.
	ReservedMemoryBytes int64
	// DiskBytes, when positive, gives the node its own tmpfs of that size at
	// HostRoot/var, so var/lib/kubelet, var/log/pods and the image store sit
	// on a small real filesystem. Pages written to tmpfs are charged to the
	// writer's memory cgroup as shmem, so a pod filling its emptyDir there
	// also uses that much memory.
	DiskBytes int64
	// DiskInodes, when positive, is that tmpfs's inode count (nr_inodes),
	// so that a pod's files can take nodefs.inodesFree low; it needs
	// DiskBytes. Zero: tmpfs's default, half the host's pages.
	DiskInodes int64
	// MaxPIDs, when positive, is pids.max of the node cgroup.
	MaxPIDs int64
	// CPU is the Node's CPU capacity (not enforced); default 2.
	CPU string
	// Pods is the Node's pod capacity; default 110.
	Pods int64
	// WorkloadBin is the workload binary containers run (see argv).
	WorkloadBin string
	// CgroupFS is where the cgroup hierarchies are mounted: the v1
	// hierarchies' parent directory, or the v2 unified hierarchy itself
	// (which has cgroup.controllers); default /sys/fs/cgroup.
	CgroupFS string
	// TempDir receives the host root; default os.TempDir().
	TempDir string
	// OOMPollInterval is how often pod cgroups' OOM-kill counters are read;
	// default 100ms.
	OOMPollInterval time.Duration
	// Logger; default no logging.
	Logger *zap.Logger
	// Clock stamps the timelines; default the real clock.
	Clock clock.WithTicker
}

const (
	defaultCPU             = "2"
	defaultPods            = 110
	defaultCgroupFS        = "/sys/fs/cgroup"
	defaultOOMPollInterval = 100 * time.Millisecond
)

func (o *Options) defaultAndValidate() error {
	if o.CPU == "" {
		o.CPU = defaultCPU
	}
	if o.Pods == 0 {
		o.Pods = defaultPods
	}
	if o.CgroupFS == "" {
		o.CgroupFS = defaultCgroupFS
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.OOMPollInterval == 0 {
		o.OOMPollInterval = defaultOOMPollInterval
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	switch {
	case o.Client == nil:
		return errors.New("nodesim: Options.Client is required")
	case o.Name == "" || len(o.Name) > 63:
		return fmt.Errorf("nodesim: node name %q: want 1 to 63 characters", o.Name)
	case o.MemoryBytes < 16<<20:
		return fmt.Errorf("nodesim: MemoryBytes=%d: want at least 16 MiB", o.MemoryBytes)
	case o.ReservedMemoryBytes < 0 || o.ReservedMemoryBytes >= o.MemoryBytes:
		return fmt.Errorf("nodesim: ReservedMemoryBytes=%d: want 0 up to below MemoryBytes=%d", o.ReservedMemoryBytes, o.MemoryBytes)
	case o.DiskBytes < 0:
		return fmt.Errorf("nodesim: DiskBytes=%d: must not be negative", o.DiskBytes)
	case o.DiskInodes < 0 || (o.DiskInodes > 0 && o.DiskBytes == 0):
		return fmt.Errorf("nodesim: DiskInodes=%d: want 0, or a positive count with DiskBytes", o.DiskInodes)
	case o.Pods < 0:
		return fmt.Errorf("nodesim: Pods=%d: must not be negative", o.Pods)
	case o.OOMPollInterval < 0:
		return fmt.Errorf("nodesim: OOMPollInterval=%s: must not be negative", o.OOMPollInterval)
	}
	for _, r := range o.Name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return fmt.Errorf("nodesim: node name %q: want lower-case letters, digits and '-'", o.Name)
		}
	}
	st, err := os.Stat(o.WorkloadBin)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("nodesim: WorkloadBin %q is not an executable file (run make build)", o.WorkloadBin)
	}
	return nil
}

// Supported says why this host cannot run a simulated node, or nil: it
// needs root and the memory and pids controllers under cgroupFS ("" means
// /sys/fs/cgroup), on cgroup v1 or v2.
func Supported(cgroupFS string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("nodesim needs root for cgroups and mounts (euid %d)", os.Geteuid())
	}
	if cgroupFS == "" {
		cgroupFS = defaultCgroupFS
	}
	_, err := newCgroups(cgroupFS)
	return err
}
