// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/test/internal/stale"
)

// HangTerminationAnnotation, set to "true" on a pod, makes the stand-in hang
// the pod's termination the way a hung container runtime or an unkillable
// process does: on the deletionTimestamp it sends SIGTERM and then nothing
// more. No SIGKILL, no cleanup, no status update and no deletion with grace
// 0 follow, so the pod stays in the API with phase Running and its
// processes keep what they hold (a workload with a long --term-delay keeps
// its memory). Timeline.Hung records when the hang began. Stopping the node,
// or removing the pod from the API (a forced delete), ends its processes.
const HangTerminationAnnotation = "nodesim.evictd.test/hang-termination"

// VolumeRemovalRateAnnotation, set to a number of files per second on a
// pod, makes the stand-in take the pod down the way a kubelet on a slow
// disk does: once its processes have exited it reports the pod terminated
// (phase Failed, its containers' states terminated), then removes the files
// of its emptyDir volumes at that rate, its cgroups still there, and only
// then removes the cgroups and directories and deletes the pod (the
// kubelet's order: SyncTerminatedPod writes the final status, waits for the
// volumes to be torn down, then destroys the pod's cgroup). Timeline's
// VolumesRemoved records when the last file went.
const VolumeRemovalRateAnnotation = "nodesim.evictd.test/volume-removal-rate"

// volumeRemovalRate is the pod's VolumeRemovalRateAnnotation in files per
// second; 0 without one, and an error naming a value that is not a positive
// number.
func volumeRemovalRate(pod *corev1.Pod) (float64, error) {
	v, ok := pod.Annotations[VolumeRemovalRateAnnotation]
	if !ok {
		return 0, nil
	}
	rate, err := strconv.ParseFloat(v, 64)
	if err != nil || !(rate > 0) || math.IsInf(rate, 0) {
		return 0, fmt.Errorf("%s=%q: want a positive number of files per second", VolumeRemovalRateAnnotation, v)
	}
	return rate, nil
}

// removeVolumesSlowly removes the files under the pod's volumes directory
// at rate files a second, in batches every 100 ms, and returns when they
// are gone, or early when ctx ends or the pod leaves the API. Directories
// are left for removeDirs.
func (r *podRunner) removeVolumesSlowly(ctx context.Context, rate float64) {
	root := filepath.Join(r.n.disk.podDir(r.uid), "volumes")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		r.log.Warn("could not list the pod's volumes", zap.String("dir", root), zap.Error(err))
	}
	r.log.Info("removing the pod's volumes slowly", zap.Int("files", len(files)), zap.Float64("perSecond", rate))
	const tick = 100 * time.Millisecond
	t := r.n.opts.Clock.NewTicker(tick)
	defer t.Stop()
	start, done := r.now(), 0
	for done < len(files) {
		select {
		case <-ctx.Done():
			return
		case <-r.gone:
			return
		case <-t.C():
		}
		// Paced on the time since the start, so a late tick catches up.
		due := min(int(rate*r.now().Sub(start).Seconds()), len(files))
		for ; done < due; done++ {
			if err := os.Remove(files[done]); err != nil && !os.IsNotExist(err) {
				r.log.Warn("could not remove a volume file", zap.String("file", files[done]), zap.Error(err))
			}
		}
	}
	at := r.now()
	r.record(func(t *Timeline) { t.VolumesRemoved = at })
	r.log.Info("pod's volumes removed", zap.Int("files", len(files)))
}

// CreateCgroup creates a cgroup at name below the node cgroup in the memory
// and pids hierarchies (on v2, the unified one) and returns its path relative to the hierarchy roots
// (a value for evictd's --cgroup-root). It holds no kubepods cgroup and no
// processes; Stop removes it with the node's cgroups.
func (n *Node) CreateCgroup(name string) (string, error) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return "", fmt.Errorf("nodesim: cgroup name %q: want one path element", name)
	}
	if name == kubepodsDir {
		return "", fmt.Errorf("nodesim: cgroup name %q is the node's kubepods cgroup", name)
	}
	rel := path.Join(n.CgroupRoot, name)
	if _, err := n.createCgroup(rel); err != nil {
		return "", err
	}
	return rel, nil
}

// faultRootPrefix names fault roots under the temp dir (see package stale).
const faultRootPrefix = "evictd-faultroot"

// FaultRoot is a second host root for the node (evictd's --host-root) in
// which the node cgroup's own memory files can be made unusable on demand,
// while the node, its pods and their cgroups stay real. On cgroup v1:
//
//	proc -> /proc, var -> <HostRoot>/var
//	sys/fs/cgroup/<controller> -> the real hierarchy, for every controller but memory
//	sys/fs/cgroup/memory        a private bind mount of the real memory hierarchy
//	  <CgroupRoot>/<file>       a regular file bind-mounted over the real one
//
// On cgroup v2 sys/fs/cgroup is itself a private bind mount of the unified
// hierarchy, with the files of <CgroupRoot> shadowed the same way.
//
// Each shadowed file starts as a copy of the real file taken when the root is
// made (for memory.limit_in_bytes that is exact; memory.stat's counters, such
// as total_inactive_file, then stay at that moment's values). Break and
// Restore change a shadow file's content in place, so a reader that keeps
// the file open sees the change as well as one that opens it afresh. Only
// this root is affected: the real cgroup files, the node's HostRoot and the
// kubelet stand-in's own readings are untouched.
type FaultRoot struct {
	// Root is the directory to pass as evictd's --host-root.
	Root string

	mu      sync.Mutex
	shadows map[string]shadowFile // by file name
	closed  bool
}

type shadowFile struct {
	copy   string // the regular file mounted over target
	target string // the path under Root it shadows
	orig   []byte
}

// NewFaultRoot makes a fault root shadowing the given files of the node
// cgroup's memory directory, e.g. "memory.stat". Close removes it; so does
// Stop, and the next Start when a killed test left one behind.
func (n *Node) NewFaultRoot(files ...string) (_ *FaultRoot, err error) {
	if len(files) == 0 {
		return nil, errors.New("nodesim: NewFaultRoot needs at least one file to shadow")
	}
	// The real hierarchy that holds the node's memory files, and where the
	// root shows it: v1's memory hierarchy at sys/fs/cgroup/memory, the
	// other controllers linked beside it; v2's one hierarchy at
	// sys/fs/cgroup itself.
	var hier string
	switch c := n.cg.(type) {
	case cgroupV1:
		hier = c.memory
	case cgroupV2:
		hier = c.fsRoot
	default:
		return nil, fmt.Errorf("nodesim: NewFaultRoot: node %s runs on cgroup %s, which it does not know", n.Name, n.cg.version())
	}
	f := &FaultRoot{Root: filepath.Join(n.opts.TempDir, stale.Name(faultRootPrefix)), shadows: map[string]shadowFile{}}
	defer func() {
		if err != nil {
			err = fmt.Errorf("nodesim: fault root for node %s: %w", n.Name, err)
			if rerr := removeFaultRoot(f.Root); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	cgDir := filepath.Join(f.Root, "sys", "fs", "cgroup")
	shadowDir := filepath.Join(f.Root, "shadow")
	for _, d := range []string{cgDir, shadowDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink("/proc", filepath.Join(f.Root, "proc")); err != nil {
		return nil, err
	}
	if err := os.Symlink(filepath.Join(n.HostRoot, "var"), filepath.Join(f.Root, "var")); err != nil {
		return nil, err
	}
	mem := cgDir
	if _, v1 := n.cg.(cgroupV1); v1 {
		realCg := filepath.Dir(hier)
		entries, err := os.ReadDir(realCg)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Name() == filepath.Base(hier) {
				continue
			}
			if err := os.Symlink(filepath.Join(realCg, e.Name()), filepath.Join(cgDir, e.Name())); err != nil {
				return nil, err
			}
		}
		mem = filepath.Join(cgDir, filepath.Base(hier))
		if err := os.Mkdir(mem, 0o755); err != nil {
			return nil, err
		}
	}
	if err := syscall.Mount(hier, mem, "", syscall.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("bind %s at %s: %w", hier, mem, err)
	}
	// Private, so that the mounts over single files below stay in this
	// root and never show at the real path.
	if err := syscall.Mount("", mem, "", syscall.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make %s private: %w", mem, err)
	}
	for _, name := range files {
		if name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("file name %q: want one path element", name)
		}
		if _, dup := f.shadows[name]; dup {
			return nil, fmt.Errorf("file %q given twice", name)
		}
		target := filepath.Join(mem, n.CgroupRoot, name)
		orig, err := os.ReadFile(target)
		if err != nil {
			return nil, err
		}
		s := shadowFile{copy: filepath.Join(shadowDir, name), target: target, orig: orig}
		if err := os.WriteFile(s.copy, orig, 0o644); err != nil {
			return nil, err
		}
		if err := syscall.Mount(s.copy, target, "", syscall.MS_BIND, ""); err != nil {
			return nil, fmt.Errorf("bind %s over %s: %w", s.copy, target, err)
		}
		f.shadows[name] = s
	}
	n.mu.Lock()
	n.faultRoots = append(n.faultRoots, f)
	n.mu.Unlock()
	return f, nil
}

// NodeMemoryFile is the path of a shadowed file as a reader of this root
// sees it.
func (f *FaultRoot) NodeMemoryFile(name string) string { return f.shadows[name].target }

// garbage is what a broken file holds: not the format of any cgroup file,
// and larger than a page, so a reader that sizes its buffer for the real
// file cannot read it whole either.
var garbage = bytes.Repeat([]byte("?? this cgroup file cannot be read ??\n"), 2048)

// Break makes the shadowed file unusable: its content becomes garbage of
// 76 KiB in place.
func (f *FaultRoot) Break(name string) error { return f.set(name, garbage) }

// Restore puts the shadowed file's original content back in place.
func (f *FaultRoot) Restore(name string) error {
	s, ok := f.shadows[name]
	if !ok {
		return fmt.Errorf("nodesim: %q is not shadowed in %s", name, f.Root)
	}
	return f.set(name, s.orig)
}

func (f *FaultRoot) set(name string, content []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.shadows[name]
	switch {
	case !ok:
		return fmt.Errorf("nodesim: %q is not shadowed in %s", name, f.Root)
	case f.closed:
		return fmt.Errorf("nodesim: fault root %s is closed", f.Root)
	}
	// O_TRUNC keeps the inode, so readers that hold the file open see the
	// new content on their next read from offset 0.
	return os.WriteFile(s.copy, content, 0o644)
}

// Close unmounts and removes the fault root. It is safe to call more than
// once.
func (f *FaultRoot) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return removeFaultRoot(f.Root)
}

// removeFaultRoot unmounts everything under root, deepest first, and
// removes the tree only once no mount is left under it: removing into the
// bind-mounted memory hierarchy would remove real cgroups.
func removeFaultRoot(root string) error {
	if err := unmountUnder(root); err != nil {
		return err
	}
	if left, err := mountsUnder(root); err != nil || len(left) > 0 {
		return fmt.Errorf("not removing %s: still mounted under it: %v (%v)", root, left, err)
	}
	return os.RemoveAll(root)
}

// closeFaultRoots closes the node's fault roots.
func (n *Node) closeFaultRoots() error {
	n.mu.Lock()
	roots := n.faultRoots
	n.faultRoots = nil
	n.mu.Unlock()
	var errs []error
	for _, f := range roots {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
